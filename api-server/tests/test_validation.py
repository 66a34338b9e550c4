"""Validation of the native API under hostile input: what can never work is refused.

Each case asserts the status, the `field` the client must fix, that the message names the
object in the way, and that nothing was written (a row count or a GET). Conflicts with
another object are 409; values that can never be valid are 400. The Neutron side of the
same checks is in test_neutron_validation.py.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from loom_api.service import types
from loom_api.store import ReadView, Store
from loom_schemas import OPENAPI_DOCUMENT, schema_path

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
SWITCHES = f"{API}/logical-switches"
ROUTERS = f"{API}/logical-routers"
ZONES = f"{API}/transport-zones"
NODES = f"{API}/transport-nodes"
GATEWAYS = f"{API}/gateway-services"
PROFILES = f"{API}/security-profiles"


def error(response: Any, status: int, field: str | None) -> str:
    """Assert `response` is an error `status` naming `field`; return its message."""
    body = response.get_json()
    assert response.status_code == status, body
    assert body["field"] == field, body
    message: str = body["message"]
    assert message
    return message


def count(store: Store, table: str) -> int:
    def read(view: ReadView) -> int:
        return view.count(table)

    return store.read(read)


# ---- the fixtures: a gateway node and L3 services ----------------------------------------


@pytest.fixture
def gateway_node(admin: ApiClient) -> dict[str, Any]:
    return admin.create(NODES, {"name": "gw1", "node_type": "gateway", "system_id": "gw1"})


@pytest.fixture
def l3_service(admin: ApiClient, gateway_node: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """Make an L3 gateway service on `gateway_node` with an uplink."""

    def make(name: str, uplink_ip: str, next_hop: str, vlan: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": name,
            "type": "l3",
            "gateway_node_ids": [gateway_node["id"]],
            "uplink_ip": uplink_ip,
            "uplink_next_hop": next_hop,
        }
        if vlan is not None:
            body["uplink_vlan"] = vlan
        return admin.create(GATEWAYS, body)

    return make


@pytest.fixture
def uplink(l3_service: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """One L3 service on 172.16.0.0/24 (next hop .1), which both tenants' routers use."""
    return l3_service("uplink", "172.16.0.2/24", "172.16.0.1")


def router(client: ApiClient, name: str, service: dict[str, Any] | None) -> dict[str, Any]:
    body = {"name": name, "gateway_service_id": service["id"] if service else None}
    return client.create(ROUTERS, body)


def nat(kind: str, external: str, internal: str) -> dict[str, Any]:
    return {"type": kind, "external_ip": external, "internal_ip": internal}


# ---- public addresses: one owner per uplink network --------------------------------------


def test_a_floating_ip_of_two_tenants_on_one_gateway_service_is_409(
    admin: ApiClient,
    tenant_a: ApiClient,
    tenant_b: ApiClient,
    uplink: dict[str, Any],
    store: Store,
) -> None:
    """Tenant b is told the address is taken, not whose; the admin is told which rule."""
    red = router(tenant_a, "red", uplink)
    blue = router(tenant_b, "blue", uplink)
    taken = tenant_a.create(
        f"{ROUTERS}/{red['id']}/nat-rules", nat("floating-ip", "172.16.0.10", "10.0.0.5")
    )
    for kind, internal in (
        ("floating-ip", "10.0.0.5"),
        ("dnat", "10.0.0.6"),
        ("snat", "10.0.0.0/24"),
    ):
        url = f"{ROUTERS}/{blue['id']}/nat-rules"
        message = error(tenant_b.post(url, nat(kind, "172.16.0.10", internal)), 409, "external_ip")
        assert "172.16.0.10 is taken" in message
        assert taken["id"] not in message
        assert red["id"] not in message
        message = error(admin.post(url, nat(kind, "172.16.0.10", internal)), 409, "external_ip")
        assert taken["id"] in message
        assert red["id"] in message
        assert "same gateway service" in message
    assert count(store, "NAT_Rule") == 1
    assert tenant_b.get(f"{ROUTERS}/{blue['id']}/nat-rules").get_json()["items"] == []


def test_snat_addresses_are_shared_within_a_router_only(
    admin: ApiClient, uplink: dict[str, Any], store: Store
) -> None:
    red = router(admin, "red", uplink)
    blue = router(admin, "blue", uplink)
    rules = f"{ROUTERS}/{red['id']}/nat-rules"
    admin.create(rules, nat("snat", "172.16.0.20", "10.0.0.0/24"))
    admin.create(rules, nat("snat", "172.16.0.20", "10.0.1.0/24"))  # one router: fine
    response = admin.post(
        f"{ROUTERS}/{blue['id']}/nat-rules", nat("snat", "172.16.0.20", "10.0.0.0/24")
    )
    error(response, 409, "external_ip")
    assert count(store, "NAT_Rule") == 2


def test_two_services_on_one_uplink_network_share_its_addresses(
    admin: ApiClient, l3_service: Callable[..., dict[str, Any]], store: Store
) -> None:
    first = l3_service("a", "172.16.0.2/24", "172.16.0.1")
    same_network = l3_service("b", "172.16.0.3/25", "172.16.0.1")
    other_vlan = l3_service("c", "172.16.0.4/24", "172.16.0.1", vlan=20)
    red = router(admin, "red", first)
    taken = admin.create(f"{ROUTERS}/{red['id']}/nat-rules", nat("dnat", "172.16.0.10", "10.0.0.5"))
    blue = router(admin, "blue", same_network)
    message = error(
        admin.post(f"{ROUTERS}/{blue['id']}/nat-rules", nat("dnat", "172.16.0.10", "10.0.0.5")),
        409,
        "external_ip",
    )
    assert taken["id"] in message
    assert first["id"] in message
    # Another VLAN is another network: the same address is someone else's there.
    green = router(admin, "green", other_vlan)
    admin.create(f"{ROUTERS}/{green['id']}/nat-rules", nat("dnat", "172.16.0.10", "10.0.0.5"))
    assert count(store, "NAT_Rule") == 2


def test_an_external_address_that_is_the_next_hop_is_409(
    admin: ApiClient, uplink: dict[str, Any], store: Store
) -> None:
    red = router(admin, "red", uplink)
    message = error(
        admin.post(f"{ROUTERS}/{red['id']}/nat-rules", nat("dnat", "172.16.0.1", "10.0.0.5")),
        409,
        "external_ip",
    )
    assert uplink["id"] in message
    assert count(store, "NAT_Rule") == 0


def test_replacing_a_rule_keeps_its_own_address(admin: ApiClient, uplink: dict[str, Any]) -> None:
    red = router(admin, "red", uplink)
    rule = admin.create(
        f"{ROUTERS}/{red['id']}/nat-rules", nat("floating-ip", "172.16.0.10", "10.0.0.5")
    )
    url = f"{ROUTERS}/{red['id']}/nat-rules/{rule['id']}"
    response = admin.patch(url, {"internal_ip": "10.0.0.6"})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["internal_ip"] == "10.0.0.6"


def test_moving_a_router_onto_a_taken_address_is_409(
    admin: ApiClient, l3_service: Callable[..., dict[str, Any]]
) -> None:
    first = l3_service("a", "172.16.0.2/24", "172.16.0.1")
    second = l3_service("b", "172.16.1.2/24", "172.16.1.1")
    red = router(admin, "red", first)
    blue = router(admin, "blue", second)
    taken = admin.create(
        f"{ROUTERS}/{red['id']}/nat-rules", nat("floating-ip", "172.16.0.10", "10.0.0.5")
    )
    admin.create(f"{ROUTERS}/{blue['id']}/nat-rules", nat("floating-ip", "172.16.0.10", "10.0.0.5"))
    message = error(
        admin.patch(f"{ROUTERS}/{blue['id']}", {"gateway_service_id": first["id"]}),
        409,
        "gateway_service_id",
    )
    assert taken["id"] in message
    assert admin.get(f"{ROUTERS}/{blue['id']}").get_json()["gateway_service_id"] == second["id"]


def test_changing_an_uplink_onto_taken_addresses_is_409(
    admin: ApiClient, l3_service: Callable[..., dict[str, Any]]
) -> None:
    first = l3_service("a", "172.16.0.2/24", "172.16.0.1")
    second = l3_service("b", "172.16.1.2/24", "172.16.1.1")
    red = router(admin, "red", first)
    blue = router(admin, "blue", second)
    admin.create(f"{ROUTERS}/{red['id']}/nat-rules", nat("dnat", "172.16.0.10", "10.0.0.5"))
    admin.create(f"{ROUTERS}/{blue['id']}/nat-rules", nat("dnat", "172.16.0.10", "10.0.0.5"))
    url = f"{GATEWAYS}/{second['id']}"
    # Onto the first service's network: its two routers would both own 172.16.0.10.
    message = error(
        admin.patch(url, {"uplink_ip": "172.16.0.3/24", "uplink_next_hop": "172.16.0.1"}),
        409,
        "uplink_ip",
    )
    assert red["id"] in message
    # A next hop that is one of its routers' external addresses.
    error(admin.patch(url, {"uplink_next_hop": "172.16.0.10", "uplink_ip": "172.16.0.3/16"}),
          409, "uplink_next_hop")  # fmt: skip
    assert admin.get(url).get_json()["uplink_ip"] == "172.16.1.2/24"
    # The same network on another VLAN is fine.
    response = admin.patch(url, {"uplink_ip": "172.16.0.3/24", "uplink_vlan": 7,
                                 "uplink_next_hop": "172.16.0.1"})  # fmt: skip
    assert response.status_code == 200, response.get_json()


# ---- tunnel endpoints: one address per node within a transport zone --------------------


def node_body(name: str, ip: str, zones: list[str], encap: str = "geneve") -> dict[str, Any]:
    return {
        "name": name,
        "node_type": "hypervisor",
        "system_id": name,
        "transport_zone_ids": zones,
        "tunnel_endpoints": [{"encap": encap, "ip": ip}],
    }


def test_duplicate_tunnel_endpoints_in_a_zone_are_409(admin: ApiClient, store: Store) -> None:
    zone = admin.create(ZONES, {"name": "tz"})
    other_zone = admin.create(ZONES, {"name": "tz2"})
    hv1 = admin.create(NODES, node_body("hv1", "192.0.2.1", [zone["id"]]))
    for encap in ("geneve", "vxlan"):  # one address is one host, whatever the encapsulation
        message = error(
            admin.post(NODES, node_body("hv2", "192.0.2.1", [zone["id"]], encap)),
            409,
            "tunnel_endpoints.0.ip",
        )
        assert hv1["id"] in message
        assert zone["id"] in message
    assert count(store, "Transport_Node") == 1
    assert count(store, "Tunnel_Endpoint") == 1
    # Nodes that share no zone never tunnel to each other.
    hv2 = admin.create(NODES, node_body("hv2", "192.0.2.1", [other_zone["id"]]))
    admin.create(NODES, node_body("hv3", "192.0.2.1", []))
    # Joining hv1's zone later is refused the same way.
    response = admin.patch(f"{NODES}/{hv2['id']}", {"transport_zone_ids": [zone["id"]]})
    error(response, 409, "tunnel_endpoints.0.ip")
    assert admin.get(f"{NODES}/{hv2['id']}").get_json()["transport_zone_ids"] == [other_zone["id"]]
    # A node keeps its own address on replace.
    response = admin.patch(f"{NODES}/{hv1['id']}", {"description": "rack 1"})
    assert response.status_code == 200, response.get_json()


@pytest.mark.parametrize("ip", ["0.0.0.0", "127.0.0.1", "224.0.0.1", "255.255.255.255", "::"])
def test_a_tunnel_endpoint_no_host_can_have_is_400(admin: ApiClient, store: Store, ip: str) -> None:
    message = error(admin.post(NODES, node_body("hv1", ip, [])), 400, "tunnel_endpoints.0.ip")
    assert ip in message
    assert count(store, "Transport_Node") == 0


# ---- port addresses and the switch's subnets ---------------------------------------------


@pytest.fixture
def switch(admin: ApiClient) -> dict[str, Any]:
    return admin.create(SWITCHES, {"name": "sw"})


@pytest.fixture
def ports(switch: dict[str, Any]) -> str:
    return f"{SWITCHES}/{switch['id']}/ports"


@pytest.fixture
def subnet(admin: ApiClient, switch: dict[str, Any]) -> dict[str, Any]:
    return admin.create(f"{SWITCHES}/{switch['id']}/subnets", {"cidr": "10.0.0.0/24"})


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("10.1.0.5", "in no IPv4 subnet"),
        ("10.0.0.0", "network address"),
        ("10.0.0.255", "broadcast address"),
    ],
)
def test_a_port_address_outside_the_subnets_is_400(
    admin: ApiClient,
    ports: str,
    subnet: dict[str, Any],
    store: Store,
    address: str,
    words: str,
) -> None:
    message = error(admin.post(ports, {"ips": [address]}), 400, "ips")
    assert words in message
    assert address in message
    assert count(store, "Logical_Switch_Port") == 0


def test_subnets_constrain_their_own_ip_version(
    admin: ApiClient, ports: str, subnet: dict[str, Any], switch: dict[str, Any]
) -> None:
    admin.create(ports, {"ips": ["10.0.0.5", "2001:db8:1::5"]})  # no IPv6 subnet: IPv6 is L2
    admin.create(f"{SWITCHES}/{switch['id']}/subnets", {"cidr": "2001:db8:1::/64"})
    error(admin.post(ports, {"ips": ["2001:db8:2::5"]}), 400, "ips")
    error(admin.post(ports, {"ips": ["2001:db8:1::"]}), 400, "ips")  # subnet-router anycast
    admin.create(ports, {"ips": ["2001:db8:1::6", "fe80::6"]})  # link-local: in no subnet


def test_a_switch_without_subnets_takes_any_address(admin: ApiClient, ports: str) -> None:
    admin.create(ports, {"ips": ["10.1.0.5", "192.0.2.0", "2001:db8::5"]})


def test_replacing_a_port_with_an_address_outside_is_400(
    admin: ApiClient, ports: str, subnet: dict[str, Any]
) -> None:
    port = admin.create(ports, {"ips": ["10.0.0.5"], "name": "p"})
    url = f"{ports}/{port['id']}"
    error(admin.patch(url, {"ips": ["10.1.0.5"]}), 400, "ips")
    body = {k: v for k, v in port.items() if k not in {"id", "revision", "status", "port_key"}}
    error(admin.put(url, {**body, "ips": ["10.0.0.255"]}), 400, "ips")
    assert admin.get(url).get_json()["ips"] == ["10.0.0.5"]


def test_a_subnet_that_leaves_ports_outside_is_409(
    admin: ApiClient, ports: str, switch: dict[str, Any], store: Store
) -> None:
    inside = admin.create(ports, {"ips": ["10.0.0.5"]})
    outside = admin.create(ports, {"ips": ["10.1.0.5", "2001:db8::5"]})
    at_network = admin.create(ports, {"ips": ["10.0.0.0"]})
    subnets = f"{SWITCHES}/{switch['id']}/subnets"
    message = error(admin.post(subnets, {"cidr": "10.0.0.0/24"}), 409, "cidr")
    assert f"port {outside['id']} (10.1.0.5)" in message
    assert f"port {at_network['id']} (10.0.0.0)" in message
    assert inside["id"] not in message
    assert count(store, "Subnet") == 0
    # Once those ports move, the subnet is accepted; IPv6 addresses are not its concern.
    moved = admin.patch(f"{ports}/{outside['id']}", {"ips": ["10.0.0.6", "2001:db8::5"]})
    assert moved.status_code == 200, moved.get_json()
    assert admin.delete(f"{ports}/{at_network['id']}").status_code == 204
    admin.create(subnets, {"cidr": "10.0.0.0/24"})


def test_a_router_port_outside_the_switch_subnets_is_400(
    admin: ApiClient, switch: dict[str, Any], subnet: dict[str, Any], store: Store
) -> None:
    red = router(admin, "red", None)
    body = {"ip_prefix": "10.1.0.1/24", "logical_switch_id": switch["id"]}
    message = error(admin.post(f"{ROUTERS}/{red['id']}/ports", body), 400, "ip_prefix")
    assert "10.1.0.1" in message
    assert count(store, "Logical_Router_Port") == 0
    assert count(store, "Logical_Switch_Port") == 0  # no peer either
    admin.create(f"{ROUTERS}/{red['id']}/ports", {**body, "ip_prefix": "10.0.0.1/24"})


@pytest.mark.parametrize("cidr", ["224.0.0.0/24", "127.0.0.0/8", "0.0.0.0/0", "ff02::/16"])
def test_a_subnet_no_host_can_be_on_is_400(
    admin: ApiClient, switch: dict[str, Any], store: Store, cidr: str
) -> None:
    error(admin.post(f"{SWITCHES}/{switch['id']}/subnets", {"cidr": cidr}), 400, "cidr")
    assert count(store, "Subnet") == 0


# ---- addresses and MACs no port can have -------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "0.0.0.0",
        "::",
        "127.0.0.1",
        "::1",
        "224.0.0.5",
        "ff02::1",
        "255.255.255.255",
        "fe80::1%eth0",
        "fe80::1%1",
    ],
)
def test_a_port_address_no_host_can_have_is_400(
    admin: ApiClient, ports: str, store: Store, address: str
) -> None:
    error(admin.post(ports, {"ips": ["10.0.0.5", address]}), 400, "ips.1")
    assert count(store, "Logical_Switch_Port") == 0


def test_zone_indexes_are_refused_in_every_address_field(
    admin: ApiClient, switch: dict[str, Any], uplink: dict[str, Any], store: Store
) -> None:
    subnets = f"{SWITCHES}/{switch['id']}/subnets"
    message = error(admin.post(subnets, {"cidr": "fe80::%eth0/64"}), 400, "cidr")
    assert "zone index" in message
    red = router(admin, "red", uplink)
    body = {"ip_prefix": "fe80::1%eth0/64", "logical_switch_id": switch["id"]}
    error(admin.post(f"{ROUTERS}/{red['id']}/ports", body), 400, "ip_prefix")
    route = {"prefix": "10.9.0.0/16", "next_hop": "fe80::1%eth0"}
    error(admin.post(f"{ROUTERS}/{red['id']}/routes", route), 400, "next_hop")
    rule = nat("floating-ip", "172.16.0.10", "fe80::5%eth0")
    error(admin.post(f"{ROUTERS}/{red['id']}/nat-rules", rule), 400, "internal_ip")
    rule = nat("dnat", "172.16.0.10", "127.0.0.1")
    error(admin.post(f"{ROUTERS}/{red['id']}/nat-rules", rule), 400, "internal_ip")
    for table in ("Subnet", "Logical_Router_Port", "Static_Route", "NAT_Rule"):
        assert count(store, table) == 0


@pytest.mark.parametrize(
    "mac", ["00:00:00:00:00:00", "01:00:5e:00:00:01", "ff:ff:ff:ff:ff:ff", "33:33:00:00:00:01"]
)
def test_the_zero_mac_and_multicast_macs_are_400(
    admin: ApiClient, ports: str, switch: dict[str, Any], store: Store, mac: str
) -> None:
    error(admin.post(ports, {"mac": mac}), 400, "mac")
    red = router(admin, "red", None)
    body = {"mac": mac, "ip_prefix": "10.0.0.1/24", "logical_switch_id": switch["id"]}
    error(admin.post(f"{ROUTERS}/{red['id']}/ports", body), 400, "mac")
    assert count(store, "Logical_Switch_Port") == 0
    assert count(store, "Logical_Router_Port") == 0


# ---- control characters -------------------------------------------------------------------

BAD_TEXT = [
    "red\x1b[31m",  # ESC: an ANSI colour sequence
    "csi\x9b31m",  # C1 CSI, ESC [ in one character
    "bell\x07",
    "del\x7f",
    "nel\x85",
]


@pytest.mark.parametrize("text", BAD_TEXT)
@pytest.mark.parametrize(
    ("path", "body"),
    [
        (SWITCHES, {}),
        (ROUTERS, {}),
        (PROFILES, {}),
        (ZONES, {"name": "tz"}),
    ],
)
def test_control_characters_in_names_descriptions_and_tags_are_400(
    admin: ApiClient, store: Store, path: str, body: dict[str, Any], text: str
) -> None:
    bad = next(c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F)
    for field, value in (("name", text), ("description", text), ("tags", ["ok", text])):
        where = "tags.1" if field == "tags" else field
        message = error(admin.post(path, {**body, field: value}), 400, where)
        assert f"control character U+{ord(bad):04X}" in message
    assert admin.get(path).get_json()["items"] == []


#: Unicode's explicit bidirectional formatting characters: embeddings, overrides, isolates.
BIDI_FORMATTING = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
#: The invisible direction marks (LRM, RLM, ALM).
BIDI_MARKS = ["\u200e", "\u200f", "\u061c"]


def send(base: str, method: str, path: str, body: Any) -> tuple[int, Any]:
    """Send one JSON request to the live server as the admin; return (status, JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]), timeout=30)
    try:
        headers = {"Authorization": "Bearer admin-secret", "Content-Type": "application/json"}
        conn.request(method, path, json.dumps(body), headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_bidi_formatting_characters_are_400_over_http(live_api: str, store: Store) -> None:
    for char in BIDI_FORMATTING:
        name = f"invoice{char}fdp.exe"  # shows as "invoiceexe.pdf" with U+202E
        for field, body in (
            ("name", {"name": name}),
            ("description", {"description": name}),
            ("tags.1", {"tags": ["ok", name]}),
        ):
            status, answer = send(live_api, "POST", SWITCHES, body)
            assert (status, answer["field"]) == (400, field), answer
            assert f"bidirectional formatting character U+{ord(char):04X}" in answer["message"]
    node = {"name": "hv1", "node_type": "hypervisor", "system_id": "hv\u202e1"}
    status, answer = send(live_api, "POST", NODES, node)
    assert (status, answer["field"]) == (400, "system_id"), answer
    assert count(store, "Logical_Switch") == 0
    assert count(store, "Transport_Node") == 0


def test_direction_marks_are_refused_in_names_and_kept_in_descriptions(
    live_api: str, store: Store
) -> None:
    for char in BIDI_MARKS:
        status, answer = send(live_api, "POST", SWITCHES, {"name": f"web{char}"})
        assert (status, answer["field"]) == (400, "name"), answer
        assert f"U+{ord(char):04X}" in answer["message"]
        status, answer = send(live_api, "POST", SWITCHES, {"tags": [f"t{char}"]})
        assert (status, answer["field"]) == (400, "tags.0"), answer
    text = "\u05e9\u05dc\u05d5\u05dd 42\u200f!"  # Hebrew prose placing its punctuation
    status, answer = send(live_api, "POST", SWITCHES, {"name": "web", "description": text})
    assert status == 201, answer
    assert answer["description"] == text
    assert count(store, "Logical_Switch") == 1


def test_line_breaks_are_text_in_descriptions_only(admin: ApiClient) -> None:
    created = admin.create(SWITCHES, {"name": "sw", "description": "line one\n\tline two\r\n"})
    assert created["description"] == "line one\n\tline two\r\n"
    error(admin.post(SWITCHES, {"name": "two\nlines"}), 400, "name")
    error(admin.post(SWITCHES, {"name": "x", "tags": ["a\tb"]}), 400, "tags.0")


def test_control_characters_in_ids_are_400(admin: ApiClient, ports: str, store: Store) -> None:
    body = {"attachment": {"type": "vif", "vif_id": "vm1\x1b[2J"}}
    error(admin.post(ports, body), 400, "attachment.vif_id")
    node = {"name": "hv1", "node_type": "hypervisor", "system_id": "hv\x1b1"}
    error(admin.post(NODES, node), 400, "system_id")
    assert count(store, "Logical_Switch_Port") == 0
    assert count(store, "Transport_Node") == 0


# ---- size limits ---------------------------------------------------------------------------


def test_string_limits(admin: ApiClient, store: Store) -> None:
    admin.create(SWITCHES, {"name": "n" * types.NAME_MAX, "description": "d" * 1024})
    admin.create(SWITCHES, {"tags": ["t" * types.TAG_MAX]})
    error(admin.post(SWITCHES, {"name": "n" * 256}), 400, "name")
    error(admin.post(SWITCHES, {"description": "d" * 1025}), 400, "description")
    error(admin.post(SWITCHES, {"tags": ["t" * 256]}), 400, "tags.0")
    # A megabyte of description is refused at validation, not written (it took seconds).
    message = error(admin.post(SWITCHES, {"description": "d" * 1_000_000}), 400, "description")
    assert len(message) < 200
    assert count(store, "Logical_Switch") == 2


def test_list_limits(
    admin: ApiClient, ports: str, switch: dict[str, Any], gateway_node: dict[str, Any],
    store: Store,
) -> None:  # fmt: skip
    admin.create(SWITCHES, {"tags": [f"t{i}" for i in range(types.TAGS_MAX)]})
    error(admin.post(SWITCHES, {"tags": [f"t{i}" for i in range(65)]}), 400, "tags")
    ips = [f"10.0.0.{i}" for i in range(1, 18)]
    error(admin.post(ports, {"ips": ips}), 400, "ips")
    admin.create(ports, {"ips": ips[:16]})
    profiles = [f"00000000-0000-0000-0000-{i:012d}" for i in range(33)]
    error(admin.post(ports, {"security_profile_ids": profiles}), 400, "security_profile_ids")
    endpoints = [{"encap": e, "ip": f"192.0.2.{i}"} for i, e in enumerate(
        ["geneve", "vxlan", "stt", "geneve"], start=1)]  # fmt: skip
    node = {"name": "hv", "node_type": "hypervisor", "system_id": "hv"}
    error(admin.post(NODES, {**node, "tunnel_endpoints": endpoints}), 400, "tunnel_endpoints")
    zones = [f"00000000-0000-0000-0000-{i:012d}" for i in range(65)]
    error(admin.post(NODES, {**node, "transport_zone_ids": zones}), 400, "transport_zone_ids")
    gateway = {"name": "g", "type": "l2", "gateway_node_ids": [gateway_node["id"]] * 33}
    error(admin.post(GATEWAYS, gateway), 400, "gateway_node_ids")
    subnets = f"{SWITCHES}/{switch['id']}/subnets"
    dns = [f"192.0.2.{i}" for i in range(1, 7)]
    error(admin.post(subnets, {"cidr": "10.0.0.0/24", "dns_nameservers": dns}), 400,
          "dns_nameservers")  # fmt: skip
    pools = [{"start": f"10.0.{i}.1", "end": f"10.0.{i}.2"} for i in range(65)]
    error(admin.post(subnets, {"cidr": "10.0.0.0/16", "allocation_pools": pools}), 400,
          "allocation_pools")  # fmt: skip
    rules = [{"direction": "ingress"}] * 1001
    error(admin.post(PROFILES, {"rules": rules}), 400, "rules")
    error(admin.post(PROFILES, {"rules": [{"direction": "ingress", "protocol": "x" * 17}]}),
          400, "rules.0.protocol")  # fmt: skip
    assert count(store, "Logical_Switch") == 2
    assert count(store, "Logical_Switch_Port") == 1
    assert count(store, "Subnet") == 0
    assert count(store, "Security_Profile") == 0
    assert count(store, "Transport_Node") == 1


def _request_schemas(document: dict[str, Any]) -> set[str]:
    """The component schemas a request body may use (referred to from an operation's
    `requestBody`, directly or through other components)."""
    found: set[str] = set()

    def refs(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[1]
                if name not in found:
                    found.add(name)
                    refs(document["components"]["schemas"][name])
            for value in node.values():
                refs(value)
        elif isinstance(node, list):
            for value in node:
                refs(value)

    for operations in document["paths"].values():
        for operation in operations.values():
            if isinstance(operation, dict):
                refs(operation.get("requestBody"))
    return found


def test_the_limits_are_in_the_openapi_document() -> None:
    document = json.loads(schema_path(OPENAPI_DOCUMENT).read_text())
    schemas = document["components"]["schemas"]
    switch = schemas["LogicalSwitchBody"]["properties"]
    assert switch["name"]["maxLength"] == 255
    assert switch["description"]["maxLength"] == 1024
    assert switch["tags"]["maxItems"] == 64
    assert switch["tags"]["items"]["maxLength"] == 255
    assert switch["name"]["pattern"] == types.PRINTABLE_PATTERN
    # Every list a request may send is bounded (responses' paged lists are not bodies).
    unbounded = []

    def walk(name: str, node: Any, path: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "array" and "maxItems" not in node:
                unbounded.append(f"{name}{path}")
            for key, value in node.items():
                walk(name, value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(name, value, f"{path}.{i}")

    requests = _request_schemas(document)
    assert "LogicalSwitchBody" in requests
    for name in requests:
        walk(name, schemas[name], "")
    assert unbounded == []
