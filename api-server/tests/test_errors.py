"""Error answers of the native API: each a JSON {error, message, field} with the right 4xx.

Every case asserts the status and the `field` the client must fix, and that nothing was
written (the list is unchanged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
SWITCHES = f"{API}/logical-switches"
ZONES = f"{API}/transport-zones"
NODES = f"{API}/transport-nodes"
GATEWAYS = f"{API}/gateway-services"
QUEUES = f"{API}/qos-queues"
PROFILES = f"{API}/security-profiles"
MISSING = "00000000-0000-0000-0000-00000000dead"


def error(response: Any, status: int, field: str | None, code: str | None = None) -> str:
    """Assert `response` is the error `status` naming `field`; return its message."""
    body = response.get_json()
    assert response.status_code == status, body
    assert set(body) == {"error", "message", "field"}
    assert body["field"] == field, body
    if code is not None:
        assert body["error"] == code, body
    assert isinstance(body["message"], str)
    assert body["message"]
    message: str = body["message"]
    return message


def node_body(name: str, system_id: str, node_type: str = "hypervisor") -> dict[str, Any]:
    return {
        "name": name,
        "node_type": node_type,
        "system_id": system_id,
        "tunnel_endpoints": [{"encap": "geneve", "ip": "192.0.2.1"}],
    }


@pytest.fixture
def switch(admin: ApiClient) -> dict[str, Any]:
    created: dict[str, Any] = admin.create(SWITCHES, {"name": "sw"})
    return created


@pytest.fixture
def ports(switch: dict[str, Any]) -> str:
    return f"{SWITCHES}/{switch['id']}/ports"


@pytest.fixture
def gateway_node(admin: ApiClient) -> dict[str, Any]:
    created: dict[str, Any] = admin.create(NODES, node_body("gw1", "gw-sys-1", "gateway"))
    return created


# ---- malformed requests ---------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"{bad json", b"[1, 2]", b'"text"', b"", b"\xff\xfe"])
def test_malformed_json_is_400(admin: ApiClient, raw: bytes) -> None:
    response = admin.post(SWITCHES, data=raw, content_type="application/json")
    error(response, 400, None, "malformed_json")
    assert admin.get(SWITCHES).get_json()["items"] == []


def test_malformed_json_on_update(admin: ApiClient, switch: dict[str, Any]) -> None:
    url = f"{SWITCHES}/{switch['id']}"
    for method in (admin.put, admin.patch):
        error(method(url, data=b"{", content_type="application/json"), 400, None, "malformed_json")


def test_other_media_type_is_415(admin: ApiClient) -> None:
    response = admin.post(
        SWITCHES, data=b"name=x", content_type="application/x-www-form-urlencoded"
    )
    error(response, 415, None, "unsupported_media_type")


def test_nul_character_is_400(admin: ApiClient) -> None:
    error(admin.post(QUEUES, {"name": "a\u0000b"}), 400, "name", "invalid_value")
    error(admin.post(QUEUES, {"tags": ["ok", "\u0000"]}), 400, "tags.1", "invalid_value")
    assert admin.get("/api/v1/health").status_code == 200


def test_unknown_route_and_method_are_json(admin: ApiClient) -> None:
    error(admin.get(f"{API}/no-such-thing"), 404, None)
    error(admin.client.open(SWITCHES, method="DELETE", headers=admin._headers(None)), 405, None)


# ---- field validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"colour": "red"}, "colour", "unknown_field"),
        ({"name": 5}, "name", "invalid_value"),
        ({"admin_state_up": "yes"}, "admin_state_up", "invalid_value"),
        ({"tags": "blue"}, "tags", "invalid_value"),
        ({"tags": [""]}, "tags.0", "invalid_value"),
        ({"replication_mode": "flood"}, "replication_mode", "invalid_value"),
        ({"tenant": "no spaces"}, "tenant", "invalid_value"),
        ({"transport_zone_id": "zone-1"}, "transport_zone_id", "invalid_value"),
        ({"transport_zone_id": MISSING}, "transport_zone_id", "missing_reference"),
    ],
)
def test_switch_body_errors(admin: ApiClient, body: dict[str, Any], field: str, code: str) -> None:
    error(admin.post(SWITCHES, body), 400, field, code)
    assert admin.get(SWITCHES).get_json()["items"] == []


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"mac": "zz:00:00:00:00:01"}, "mac", "invalid_value"),
        ({"mac": "02:00:00:00:01"}, "mac", "invalid_value"),
        ({"mac": "01:00:5e:00:00:01"}, "mac", "invalid_value"),  # multicast
        ({"mac": 17}, "mac", "invalid_value"),
        ({"ips": ["10.0.0.1", "300.1.1.1"]}, "ips.1", "invalid_value"),
        ({"ips": ["10.0.0.0/24"]}, "ips.0", "invalid_value"),
        ({"ips": "10.0.0.1"}, "ips", "invalid_value"),
        ({"qos_queue_id": MISSING}, "qos_queue_id", "missing_reference"),
        ({"security_profile_ids": [MISSING]}, "security_profile_ids", "missing_reference"),
        ({"attachment": {"type": "bogus"}}, "attachment", "invalid_value"),
        ({"attachment": {"type": "vif"}}, "attachment.vif_id", "invalid_value"),
        ({"attachment": {"type": "vif", "vif_id": "v", "x": 1}}, "attachment.x", "unknown_field"),
        (
            {"attachment": {"type": "l2-gateway", "gateway_service_id": MISSING, "vlan": 4096}},
            "attachment.vlan",
            "invalid_value",
        ),
        (
            {"attachment": {"type": "l2-gateway", "gateway_service_id": MISSING, "vlan": -1}},
            "attachment.vlan",
            "invalid_value",
        ),
        (
            {"attachment": {"type": "l2-gateway", "gateway_service_id": MISSING, "vlan": 10}},
            "attachment.gateway_service_id",
            "missing_reference",
        ),
        (
            {"attachment": {"type": "router", "router_port_id": MISSING}},
            "attachment.type",
            "invalid_value",
        ),
    ],
)
def test_port_body_errors(
    admin: ApiClient, ports: str, body: dict[str, Any], field: str, code: str
) -> None:
    error(admin.post(ports, body), 400, field, code)
    assert admin.get(ports).get_json()["items"] == []


def test_vlan_bounds_are_inclusive(
    admin: ApiClient, ports: str, gateway_node: dict[str, Any]
) -> None:
    service = admin.create(
        GATEWAYS, {"name": "l2", "type": "l2", "gateway_node_ids": [gateway_node["id"]]}
    )
    for vlan in (0, 4095):
        attachment = {"type": "l2-gateway", "gateway_service_id": service["id"], "vlan": vlan}
        created = admin.create(ports, {"attachment": attachment})
        assert created["attachment"] == attachment
    error(admin.post(GATEWAYS, {**_l3(gateway_node), "uplink_vlan": 4096}), 400, "uplink_vlan")


def _l3(node: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "uplink",
        "type": "l3",
        "gateway_node_ids": [node["id"]],
        "uplink_ip": "198.51.100.2/24",
        "uplink_next_hop": "198.51.100.1",
    }


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"uplink_ip": "198.51.100.2"}, "uplink_ip"),  # no prefix length
        ({"uplink_ip": "198.51.100.300/24"}, "uplink_ip"),
        ({"uplink_next_hop": "203.0.113.1"}, "uplink_next_hop"),  # not on the uplink network
        ({"uplink_next_hop": None}, "uplink_next_hop"),
        ({"gateway_node_ids": []}, "gateway_node_ids"),
        ({"gateway_node_ids": [MISSING]}, "gateway_node_ids"),
        ({"type": "l4"}, "type"),
    ],
)
def test_gateway_service_errors(
    admin: ApiClient, gateway_node: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    error(admin.post(GATEWAYS, {**_l3(gateway_node), **change}), 400, field)


def test_gateway_service_needs_gateway_nodes(admin: ApiClient) -> None:
    hypervisor = admin.create(NODES, node_body("hv1", "hv-sys-1"))
    error(admin.post(GATEWAYS, _l3(hypervisor)), 400, "gateway_node_ids", "invalid_value")


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"direction": "ingress", "remote_prefix": "10.0.0.1/24"}, "rules.0.remote_prefix"),
        ({"direction": "ingress", "remote_prefix": "10.0.0.0/33"}, "rules.0.remote_prefix"),
        ({"direction": "ingress", "remote_prefix": "2001:db8::/64"}, "rules.0.remote_prefix"),
        ({"direction": "sideways"}, "rules.0.direction"),
        ({"direction": "egress", "protocol": "gre", "port_range_min": 1}, "rules.0.protocol"),
        (
            {"direction": "egress", "protocol": "icmp", "port_range_min": 1},
            "rules.0.port_range_min",
        ),
        (
            {"direction": "egress", "protocol": "tcp", "port_range_min": 90, "port_range_max": 80},
            "rules.0.port_range_min",
        ),
        ({"direction": "egress", "remote_profile_id": MISSING}, "rules.0.remote_profile_id"),
    ],
)
def test_security_rule_errors(admin: ApiClient, rule: dict[str, Any], field: str) -> None:
    ok = {"direction": "ingress", "protocol": "tcp", "port_range_min": 22, "port_range_max": 22}
    error(admin.post(PROFILES, {"name": "p", "rules": [rule, ok]}), 400, field)
    assert admin.get(PROFILES).get_json()["items"] == []


def test_transport_node_errors(admin: ApiClient) -> None:
    bad_ip = {**node_body("n", "s"), "tunnel_endpoints": [{"encap": "geneve", "ip": "1.2.3"}]}
    error(admin.post(NODES, bad_ip), 400, "tunnel_endpoints.0.ip")
    error(admin.post(NODES, {**node_body("n", "s"), "node_type": "router"}), 400, "node_type")
    error(admin.post(NODES, {"name": "n", "node_type": "hypervisor"}), 400, "system_id")
    error(admin.post(NODES, {**node_body("n", "s"), "transport_zone_ids": [MISSING]}), 400,
          "transport_zone_ids", "missing_reference")  # fmt: skip


def test_qos_rates(admin: ApiClient) -> None:
    error(admin.post(QUEUES, {"min_rate": 100, "max_rate": 10}), 400, "min_rate")
    error(admin.post(QUEUES, {"min_rate": -1}), 400, "min_rate")
    error(admin.post(QUEUES, {"dscp": 64}), 400, "dscp")
    queue = admin.create(QUEUES, {"min_rate": 10, "max_rate": 10})
    url = f"{QUEUES}/{queue['id']}"
    error(admin.patch(url, {"max_rate": 5}), 400, "min_rate")
    assert admin.get(url).get_json()["max_rate"] == 10


def test_bad_wait_header_writes_nothing(admin: ApiClient) -> None:
    before = admin.get(f"{API}/status").get_json()["config_generation"]
    for value in ("soon", "-1", "301", "nan"):
        response = admin.post(SWITCHES, {}, headers={"X-Loom-Wait-For-Realization": value})
        error(response, 400, "X-Loom-Wait-For-Realization")
    assert admin.get(SWITCHES).get_json()["items"] == []
    assert admin.get(f"{API}/status").get_json()["config_generation"] == before


def test_bad_realization_query(admin: ApiClient) -> None:
    for value in ("x", "-1"):
        response = admin.get(f"{API}/realization", query_string={"generation": value})
        error(response, 400, "generation")


# ---- duplicates --------------------------------------------------------------------------------


def test_duplicate_transport_zone_name(admin: ApiClient) -> None:
    zone = admin.create(ZONES, {"name": "tz"})
    error(admin.post(ZONES, {"name": "tz"}), 409, "name", "conflict")
    other = admin.create(ZONES, {"name": "tz2"})
    error(admin.put(f"{ZONES}/{other['id']}", {"name": "tz"}), 409, "name")
    assert admin.put(f"{ZONES}/{zone['id']}", {"name": "tz", "encap": "stt"}).status_code == 200


def test_duplicate_transport_node_name_and_system_id(admin: ApiClient) -> None:
    admin.create(NODES, node_body("hv1", "sys-1"))
    error(admin.post(NODES, node_body("hv1", "sys-2")), 409, "name", "conflict")
    message = error(admin.post(NODES, node_body("hv2", "sys-1")), 409, "system_id", "conflict")
    assert "sys-1" in message
    assert len(admin.get(NODES).get_json()["items"]) == 1


def test_duplicate_gateway_service_name(admin: ApiClient, gateway_node: dict[str, Any]) -> None:
    body = {"name": "gw", "type": "l2", "gateway_node_ids": [gateway_node["id"]]}
    admin.create(GATEWAYS, body)
    error(admin.post(GATEWAYS, body), 409, "name", "conflict")


def test_qos_queue_names_unique_per_tenant(admin: ApiClient) -> None:
    admin.create(QUEUES, {"tenant": "tenant-a", "name": "gold"})
    error(admin.post(QUEUES, {"tenant": "tenant-a", "name": "gold"}), 409, "name", "conflict")
    assert admin.post(QUEUES, {"tenant": "tenant-b", "name": "gold"}).status_code == 201
    assert admin.post(QUEUES, {"tenant": "tenant-a", "name": ""}).status_code == 201
    assert admin.post(QUEUES, {"tenant": "tenant-a", "name": ""}).status_code == 201


# ---- deleting what is in use -------------------------------------------------------------------


def test_delete_zone_used_by_switch_names_it(admin: ApiClient) -> None:
    zone = admin.create(ZONES, {"name": "tz"})
    switch = admin.create(SWITCHES, {"transport_zone_id": zone["id"]})
    node = admin.create(NODES, {**node_body("hv", "s"), "transport_zone_ids": [zone["id"]]})
    message = error(admin.delete(f"{ZONES}/{zone['id']}"), 409, None, "in_use")
    assert f"logical switch {switch['id']}" in message
    assert f"transport node {node['id']}" in message
    assert admin.get(f"{ZONES}/{zone['id']}").status_code == 200


def test_delete_queue_used_by_port_names_it(admin: ApiClient, ports: str) -> None:
    queue = admin.create(QUEUES, {"name": "q"})
    port = admin.create(ports, {"qos_queue_id": queue["id"]})
    message = error(admin.delete(f"{QUEUES}/{queue['id']}"), 409, None, "in_use")
    assert f"logical switch port {port['id']}" in message
    assert admin.delete(f"{ports}/{port['id']}").status_code == 204
    assert admin.delete(f"{QUEUES}/{queue['id']}").status_code == 204


def test_delete_profile_used_by_port_or_rule(admin: ApiClient, ports: str) -> None:
    web = admin.create(PROFILES, {"name": "web"})
    db = admin.create(
        PROFILES,
        {"name": "db", "rules": [{"direction": "ingress", "remote_profile_id": web["id"]}]},
    )
    port = admin.create(ports, {"security_profile_ids": [web["id"]]})
    message = error(admin.delete(f"{PROFILES}/{web['id']}"), 409, None, "in_use")
    assert f"logical switch port {port['id']}" in message
    assert f"security profile {db['id']}" in message


def test_delete_gateway_node_and_service_in_use(
    admin: ApiClient, ports: str, gateway_node: dict[str, Any]
) -> None:
    service = admin.create(
        GATEWAYS, {"name": "l2", "type": "l2", "gateway_node_ids": [gateway_node["id"]]}
    )
    message = error(admin.delete(f"{NODES}/{gateway_node['id']}"), 409, None, "in_use")
    assert f"gateway service {service['id']}" in message
    attachment = {"type": "l2-gateway", "gateway_service_id": service["id"], "vlan": 100}
    port = admin.create(ports, {"attachment": attachment})
    message = error(admin.delete(f"{GATEWAYS}/{service['id']}"), 409, None, "in_use")
    assert f"logical switch port {port['id']}" in message


def test_gateway_service_type_is_fixed(admin: ApiClient, gateway_node: dict[str, Any]) -> None:
    service = admin.create(
        GATEWAYS, {"name": "l2", "type": "l2", "gateway_node_ids": [gateway_node["id"]]}
    )
    error(admin.put(f"{GATEWAYS}/{service['id']}", _l3(gateway_node)), 400, "type")
