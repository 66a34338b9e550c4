"""Logical routers, router ports (and their switch-side peers), static routes and NAT rules."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from werkzeug.test import TestResponse

from loom_api.service.routers import ROUTER_KEYS
from loom_api.store import ReadView, Store

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
ROUTERS = f"{API}/logical-routers"
SWITCHES = f"{API}/logical-switches"


def ports_url(router: dict[str, Any]) -> str:
    return f"{ROUTERS}/{router['id']}/ports"


def routes_url(router: dict[str, Any]) -> str:
    return f"{ROUTERS}/{router['id']}/routes"


def nat_url(router: dict[str, Any]) -> str:
    return f"{ROUTERS}/{router['id']}/nat-rules"


def error(response: TestResponse, status: int, field: str | None) -> dict[str, Any]:
    """Assert `response` is the JSON error `status` naming `field`; return its body."""
    body: dict[str, Any] = response.get_json()
    assert response.status_code == status, body
    assert body["field"] == field, body
    return body


@pytest.fixture
def gateway_node(admin: ApiClient) -> dict[str, Any]:
    return admin.create(
        f"{API}/transport-nodes",
        {"name": "gw-1", "node_type": "gateway", "system_id": "gw-1"},
    )


@pytest.fixture
def l3_gateway(admin: ApiClient, gateway_node: dict[str, Any]) -> dict[str, Any]:
    return admin.create(
        f"{API}/gateway-services",
        {
            "name": "uplink",
            "type": "l3",
            "gateway_node_ids": [gateway_node["id"]],
            "uplink_ip": "198.51.100.2/24",
            "uplink_next_hop": "198.51.100.1",
        },
    )


@pytest.fixture
def l2_gateway(admin: ApiClient, gateway_node: dict[str, Any]) -> dict[str, Any]:
    return admin.create(
        f"{API}/gateway-services",
        {"name": "bridge", "type": "l2", "gateway_node_ids": [gateway_node["id"]]},
    )


@pytest.fixture
def router(tenant_a: ApiClient) -> dict[str, Any]:
    return tenant_a.create(ROUTERS, {"name": "r1"})


@pytest.fixture
def nat_router(tenant_a: ApiClient, l3_gateway: dict[str, Any]) -> dict[str, Any]:
    return tenant_a.create(ROUTERS, {"name": "edge", "gateway_service_id": l3_gateway["id"]})


@pytest.fixture
def switch(tenant_a: ApiClient) -> dict[str, Any]:
    return tenant_a.create(SWITCHES, {"name": "web"})


@pytest.fixture
def switch2(tenant_a: ApiClient) -> dict[str, Any]:
    return tenant_a.create(SWITCHES, {"name": "db"})


def attach(
    client: ApiClient, router: dict[str, Any], switch: dict[str, Any], prefix: str, **kw: Any
) -> dict[str, Any]:
    return client.create(
        ports_url(router), {"ip_prefix": prefix, "logical_switch_id": switch["id"], **kw}
    )


def switch_ports(client: ApiClient, switch: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.get(f"{SWITCHES}/{switch['id']}/ports")
    assert response.status_code == 200
    items: list[dict[str, Any]] = response.get_json()["items"]
    return items


# ---- logical routers -----------------------------------------------------------------------


def test_router_create_list_get_put_patch_delete(
    tenant_a: ApiClient, l3_gateway: dict[str, Any]
) -> None:
    response = tenant_a.post(ROUTERS, {"name": "r1", "tags": ["blue"]})
    assert response.status_code == 201
    created = response.get_json()
    assert response.headers["Location"] == f"{ROUTERS}/{created['id']}"
    assert created["tenant"] == "tenant-a"
    assert created["admin_state_up"] is True
    assert created["gateway_service_id"] is None
    assert ROUTER_KEYS[0] <= created["tunnel_key"] <= ROUTER_KEYS[1]
    url = f"{ROUTERS}/{created['id']}"

    listed = tenant_a.get(ROUTERS).get_json()["items"]
    assert [r["id"] for r in listed] == [created["id"]]
    assert tenant_a.get(f"{ROUTERS}?tag=blue").get_json()["items"] == listed
    assert tenant_a.get(f"{ROUTERS}?name=other").get_json()["items"] == []
    assert tenant_a.get(url).get_json() == created

    replaced = tenant_a.put(
        url,
        {"name": "r1b", "description": "edge", "gateway_service_id": l3_gateway["id"]},
        headers={"If-Match": response.headers["ETag"]},
    )
    assert replaced.status_code == 200, replaced.get_json()
    body = replaced.get_json()
    assert body["name"] == "r1b"
    assert body["gateway_service_id"] == l3_gateway["id"]
    assert body["tags"] == []
    assert body["tunnel_key"] == created["tunnel_key"]
    assert body["revision"] == 2

    stale = tenant_a.patch(url, {"name": "x"}, headers={"If-Match": response.headers["ETag"]})
    assert stale.status_code == 412
    patched = tenant_a.patch(url, {"admin_state_up": False})
    assert patched.status_code == 200
    assert patched.get_json()["admin_state_up"] is False
    assert patched.get_json()["name"] == "r1b"

    deleted = tenant_a.delete(url)
    assert deleted.status_code == 204
    assert int(deleted.headers["X-Loom-Config-Generation"]) > 0
    error(tenant_a.get(url), 404, None)


def test_router_tunnel_keys_unique_stable_and_read_only(admin: ApiClient, store: Store) -> None:
    routers = [admin.create(ROUTERS, {"name": f"r{i}"}) for i in range(3)]
    keys = [r["tunnel_key"] for r in routers]
    assert len(set(keys)) == 3
    assert all(ROUTER_KEYS[0] <= k <= ROUTER_KEYS[1] for k in keys)

    error(admin.post(ROUTERS, {"name": "x", "tunnel_key": 9000000}), 400, "tunnel_key")
    url = f"{ROUTERS}/{routers[1]['id']}"
    error(admin.patch(url, {"tunnel_key": keys[1] + 1}), 400, "tunnel_key")
    # Repeated unchanged, a read-only field is accepted (PUT of a GET).
    same = admin.put(url, {**routers[1], "name": "renamed"})
    assert same.status_code == 200, same.get_json()
    assert same.get_json()["tunnel_key"] == keys[1]

    # A key is not reused while its router exists; the stored rows hold the keys.
    assert admin.delete(f"{ROUTERS}/{routers[0]['id']}").status_code == 204
    fresh = admin.create(ROUTERS, {"name": "r3"})
    assert fresh["tunnel_key"] not in keys[1:]

    def stored(view: ReadView) -> dict[str, int]:
        return {str(r.uuid): r.tunnel_key for r in view.rows("Logical_Router")}

    assert store.read(stored) == {
        routers[1]["id"]: keys[1],
        routers[2]["id"]: keys[2],
        fresh["id"]: fresh["tunnel_key"],
    }


def test_router_validation_names_the_field(tenant_a: ApiClient, l2_gateway: dict[str, Any]) -> None:
    body = error(
        tenant_a.post(ROUTERS, {"gateway_service_id": l2_gateway["id"]}),
        400,
        "gateway_service_id",
    )
    assert "L3" in body["message"]
    missing = "00000000-0000-0000-0000-000000000001"
    body = error(tenant_a.post(ROUTERS, {"gateway_service_id": missing}), 400, "gateway_service_id")
    assert body["error"] == "missing_reference"
    error(tenant_a.post(ROUTERS, {"gateway_service_id": "nope"}), 400, "gateway_service_id")
    assert error(tenant_a.post(ROUTERS, {"colour": "red"}), 400, "colour")["error"] == (
        "unknown_field"
    )
    error(tenant_a.post(ROUTERS, {"admin_state_up": "yes"}), 400, "admin_state_up")
    error(tenant_a.post(ROUTERS, {"tenant": "tenant-b"}), 403, "tenant")
    error(tenant_a.post(ROUTERS, {"name": "x" * 256}), 400, "name")
    bad_json = tenant_a.post(ROUTERS, data="{", content_type="application/json")
    assert error(bad_json, 400, None)["error"] == "malformed_json"
    assert tenant_a.get(ROUTERS).get_json()["items"] == []


def test_router_tenant_isolation(
    tenant_a: ApiClient, tenant_b: ApiClient, admin: ApiClient, router: dict[str, Any]
) -> None:
    url = f"{ROUTERS}/{router['id']}"
    error(tenant_b.get(url), 404, None)
    error(tenant_b.patch(url, {"name": "mine"}), 404, None)
    error(tenant_b.put(url, {"name": "mine"}), 404, None)
    error(tenant_b.delete(url), 404, None)
    assert tenant_b.get(ROUTERS).get_json()["items"] == []
    valid = {
        ports_url(router): {"ip_prefix": "10.0.0.1/24", "logical_switch_id": router["id"]},
        routes_url(router): {"prefix": "10.0.0.0/8", "next_hop": "10.0.0.1"},
        nat_url(router): {"type": "snat", "external_ip": "1.1.1.1", "internal_ip": "10.0.0.0/8"},
    }
    for child, body in valid.items():
        error(tenant_b.get(child), 404, None)
        error(tenant_b.post(child, body), 404, None)
    assert admin.get(url).status_code == 200
    assert [r["id"] for r in admin.get(f"{ROUTERS}?tenant=tenant-a").get_json()["items"]] == [
        router["id"]
    ]
    assert admin.get(f"{ROUTERS}?tenant=tenant-b").get_json()["items"] == []
    assert tenant_a.get(url).status_code == 200


def test_router_delete_refused_while_it_has_ports_routes_or_nat(
    tenant_a: ApiClient, nat_router: dict[str, Any], switch: dict[str, Any]
) -> None:
    port = attach(tenant_a, nat_router, switch, "10.0.0.1/24")
    route = tenant_a.create(
        routes_url(nat_router), {"prefix": "192.168.0.0/16", "next_hop": "10.0.0.254"}
    )
    nat = tenant_a.create(
        nat_url(nat_router),
        {"type": "snat", "external_ip": "198.51.100.10", "internal_ip": "10.0.0.0/24"},
    )
    url = f"{ROUTERS}/{nat_router['id']}"
    body = error(tenant_a.delete(url), 409, None)
    assert body["error"] == "in_use"
    for kind, obj in (
        ("logical router port", port),
        ("static route", route),
        ("NAT rule", nat),
    ):
        assert f"{kind} {obj['id']}" in body["message"]

    assert tenant_a.delete(f"{nat_url(nat_router)}/{nat['id']}").status_code == 204
    assert tenant_a.delete(f"{routes_url(nat_router)}/{route['id']}").status_code == 204
    body = error(tenant_a.delete(url), 409, None)
    assert body["message"].endswith(f"logical router port {port['id']}")
    assert tenant_a.delete(f"{ports_url(nat_router)}/{port['id']}").status_code == 204
    assert tenant_a.delete(url).status_code == 204


def test_router_keeps_its_gateway_while_it_has_nat_rules(
    tenant_a: ApiClient, nat_router: dict[str, Any]
) -> None:
    nat = tenant_a.create(
        nat_url(nat_router),
        {"type": "snat", "external_ip": "198.51.100.10", "internal_ip": "10.0.0.0/24"},
    )
    url = f"{ROUTERS}/{nat_router['id']}"
    body = error(tenant_a.patch(url, {"gateway_service_id": None}), 409, "gateway_service_id")
    assert nat["id"] in body["message"]
    assert tenant_a.patch(url, {"name": "still"}).status_code == 200


def test_gateway_service_in_use_by_a_router(
    admin: ApiClient, nat_router: dict[str, Any], l3_gateway: dict[str, Any]
) -> None:
    body = error(admin.delete(f"{API}/gateway-services/{l3_gateway['id']}"), 409, None)
    assert f"logical router {nat_router['id']}" in body["message"]


# ---- router ports ----------------------------------------------------------------------------


def test_router_port_creates_and_removes_its_switch_side_peer(
    tenant_a: ApiClient, router: dict[str, Any], switch: dict[str, Any]
) -> None:
    vm = tenant_a.create(f"{SWITCHES}/{switch['id']}/ports", {"ips": ["10.0.0.5"]})
    port = attach(tenant_a, router, switch, "10.0.0.1/24")
    assert re.fullmatch(r"02(:[0-9a-f]{2}){5}", port["mac"])
    assert port["logical_router_id"] == router["id"]
    assert port["tenant"] == "tenant-a"
    assert port["port_key"] == 1

    peers = [p for p in switch_ports(tenant_a, switch) if p["id"] != vm["id"]]
    assert len(peers) == 1
    peer = peers[0]
    assert peer["id"] == port["peer_port_id"]
    assert peer["attachment"] == {"type": "router", "router_port_id": port["id"]}
    assert peer["mac"] == port["mac"]
    assert peer["ips"] == ["10.0.0.1"]
    assert peer["tenant"] == switch["tenant"]
    assert peer["port_key"] not in (vm["port_key"], None)
    assert peer["port_security"] is False

    # The peer belongs to the router port: it cannot be deleted or re-attached on its own.
    peer_url = f"{SWITCHES}/{switch['id']}/ports/{peer['id']}"
    body = error(tenant_a.delete(peer_url), 409, None)
    assert f"logical router port {port['id']}" in body["message"]
    error(tenant_a.patch(peer_url, {"attachment": {"type": "none"}}), 400, "attachment.type")
    # Its MAC and address mirror the router port's; they change only through it.
    error(tenant_a.patch(peer_url, {"mac": "02:00:00:00:00:99"}), 400, "mac")
    error(tenant_a.patch(peer_url, {"ips": ["10.0.0.2"]}), 400, "ips")
    renamed = tenant_a.patch(peer_url, {"name": "uplink-side", "ips": ["10.0.0.1"]})
    assert renamed.status_code == 200, renamed.get_json()
    # The switch cannot go while the router is attached to it.
    body = error(tenant_a.delete(f"{SWITCHES}/{switch['id']}"), 409, None)
    assert f"logical router port {port['id']}" in body["message"]

    assert tenant_a.delete(f"{ports_url(router)}/{port['id']}").status_code == 204
    assert [p["id"] for p in switch_ports(tenant_a, switch)] == [vm["id"]]
    error(tenant_a.get(peer_url), 404, None)


def test_router_port_list_get_put_patch_update_the_peer(
    tenant_a: ApiClient, router: dict[str, Any], switch: dict[str, Any]
) -> None:
    port = attach(tenant_a, router, switch, "10.0.0.1/24", mac="02:00:00:00:00:01", name="p")
    url = f"{ports_url(router)}/{port['id']}"
    assert tenant_a.get(ports_url(router)).get_json()["items"] == [port]
    assert tenant_a.get(url).get_json() == port

    patched = tenant_a.patch(url, {"mac": "02:00:00:00:00:AA", "ip_prefix": "10.0.0.254/24"})
    assert patched.status_code == 200, patched.get_json()
    assert patched.get_json()["mac"] == "02:00:00:00:00:aa"
    (peer,) = switch_ports(tenant_a, switch)
    assert peer["mac"] == "02:00:00:00:00:aa"
    assert peer["ips"] == ["10.0.0.254"]

    replaced = tenant_a.put(
        url, {"ip_prefix": "10.0.0.1/25", "logical_switch_id": switch["id"], "tags": ["t"]}
    )
    assert replaced.status_code == 200, replaced.get_json()
    body = replaced.get_json()
    assert body["mac"] == "02:00:00:00:00:aa"  # kept when not given
    assert body["name"] == ""
    assert body["port_key"] == port["port_key"]
    assert body["peer_port_id"] == port["peer_port_id"]
    (peer,) = switch_ports(tenant_a, switch)
    assert peer["ips"] == ["10.0.0.1"]
    assert peer["port_key"] == switch_ports(tenant_a, switch)[0]["port_key"]


def test_router_port_keys_are_per_router_unique_and_stable(
    tenant_a: ApiClient,
    router: dict[str, Any],
    switch: dict[str, Any],
    switch2: dict[str, Any],
) -> None:
    other = tenant_a.create(ROUTERS, {"name": "r2"})
    first = attach(tenant_a, router, switch, "10.0.0.1/24")
    second = attach(tenant_a, router, switch2, "10.0.1.1/24")
    third = attach(tenant_a, other, switch, "10.0.0.2/24")
    assert {first["port_key"], second["port_key"]} == {1, 2}
    assert third["port_key"] == 1
    error(tenant_a.patch(f"{ports_url(router)}/{first['id']}", {"port_key": 7}), 400, "port_key")
    patched = tenant_a.patch(f"{ports_url(router)}/{first['id']}", {"name": "renamed"})
    assert patched.get_json()["port_key"] == first["port_key"]
    # Two routers on one switch: two peers with distinct switch port keys.
    keys = [p["port_key"] for p in switch_ports(tenant_a, switch)]
    assert len(keys) == len(set(keys)) == 2


def test_router_port_validation(
    tenant_a: ApiClient,
    tenant_b: ApiClient,
    router: dict[str, Any],
    switch: dict[str, Any],
    switch2: dict[str, Any],
) -> None:
    url = ports_url(router)
    sid = switch["id"]
    vm = tenant_a.create(
        f"{SWITCHES}/{sid}/ports", {"mac": "02:00:00:00:00:05", "ips": ["10.0.0.5"]}
    )
    error(tenant_a.post(url, {"logical_switch_id": sid}), 400, "ip_prefix")
    error(tenant_a.post(url, {"ip_prefix": "10.0.0.1/24"}), 400, "logical_switch_id")
    for bad in ("10.0.0.1", "10.0.0.300/24", "10.0.0.1/33", 5):
        error(tenant_a.post(url, {"ip_prefix": bad, "logical_switch_id": sid}), 400, "ip_prefix")
    for reserved in ("10.0.0.0/24", "10.0.0.255/24"):
        error(
            tenant_a.post(url, {"ip_prefix": reserved, "logical_switch_id": sid}), 400, "ip_prefix"
        )
    error(
        tenant_a.post(url, {"ip_prefix": "10.0.0.1/24", "logical_switch_id": sid, "mac": "x"}),
        400,
        "mac",
    )
    # The switch's MAC and address space: the peer may not clash with the VM.
    body = {"ip_prefix": "10.0.0.5/24", "logical_switch_id": sid}
    error(tenant_a.post(url, body), 409, "ip_prefix")
    body = {"ip_prefix": "10.0.0.1/24", "logical_switch_id": sid, "mac": vm["mac"]}
    error(tenant_a.post(url, body), 409, "mac")
    # References: a missing switch, another tenant's switch.
    foreign = tenant_b.create(SWITCHES, {"name": "b"})
    for ident in ("00000000-0000-0000-0000-000000000001", foreign["id"], "junk"):
        body = error(
            tenant_a.post(url, {"ip_prefix": "10.0.0.1/24", "logical_switch_id": ident}),
            400,
            "logical_switch_id",
        )
        assert body["error"] == ("invalid_value" if ident == "junk" else "missing_reference")
    assert tenant_a.get(url).get_json()["items"] == []
    assert len(switch_ports(tenant_a, switch)) == 1  # no peer left behind by a refusal

    port = attach(tenant_a, router, switch, "10.0.0.1/24")
    # Overlapping networks on one router, and a second port on the same switch.
    body = error(
        tenant_a.post(url, {"ip_prefix": "10.0.0.129/25", "logical_switch_id": switch2["id"]}),
        409,
        "ip_prefix",
    )
    assert port["id"] in body["message"]
    error(
        tenant_a.post(url, {"ip_prefix": "10.0.9.1/24", "logical_switch_id": sid}),
        409,
        "logical_switch_id",
    )
    # The switch is fixed at creation.
    error(
        tenant_a.patch(f"{url}/{port['id']}", {"logical_switch_id": switch2["id"]}),
        400,
        "logical_switch_id",
    )
    # An IPv6 port on another switch does not overlap the IPv4 one.
    attach(tenant_a, router, switch2, "2001:db8::1/64")
    assert len(switch_ports(tenant_a, switch)) == 2


def test_admin_attaches_a_tenant_router_only_to_that_tenants_switches(
    admin: ApiClient, tenant_b: ApiClient, router: dict[str, Any], switch: dict[str, Any]
) -> None:
    port = attach(admin, router, switch, "10.0.0.1/24")
    assert port["tenant"] == "tenant-a"
    foreign = tenant_b.create(SWITCHES, {"name": "b"})
    error(
        admin.post(
            ports_url(router), {"ip_prefix": "10.1.0.1/24", "logical_switch_id": foreign["id"]}
        ),
        400,
        "logical_switch_id",
    )
    error(
        admin.post(
            ports_url(router),
            {"ip_prefix": "10.1.0.1/24", "logical_switch_id": switch["id"], "tenant": "tenant-b"},
        ),
        400,
        "tenant",
    )


def test_router_port_used_by_a_route_cannot_be_deleted(
    tenant_a: ApiClient, router: dict[str, Any], switch: dict[str, Any]
) -> None:
    port = attach(tenant_a, router, switch, "10.0.0.1/24")
    route = tenant_a.create(
        routes_url(router),
        {"prefix": "0.0.0.0/0", "next_hop": "10.0.0.254", "output_port_id": port["id"]},
    )
    body = error(tenant_a.delete(f"{ports_url(router)}/{port['id']}"), 409, None)
    assert f"static route {route['id']}" in body["message"]
    assert len(switch_ports(tenant_a, switch)) == 1


# ---- static routes ---------------------------------------------------------------------------


def test_static_route_crud(
    tenant_a: ApiClient, router: dict[str, Any], switch: dict[str, Any]
) -> None:
    port = attach(tenant_a, router, switch, "10.0.0.1/24")
    response = tenant_a.post(
        routes_url(router), {"prefix": "192.168.0.0/16", "next_hop": "10.0.0.9"}
    )
    assert response.status_code == 201
    route = response.get_json()
    url = f"{routes_url(router)}/{route['id']}"
    assert response.headers["Location"] == url
    assert route["logical_router_id"] == router["id"]
    assert route["tenant"] == "tenant-a"
    assert route["output_port_id"] is None
    assert tenant_a.get(routes_url(router)).get_json()["items"] == [route]
    assert tenant_a.get(url).get_json() == route

    patched = tenant_a.patch(url, {"output_port_id": port["id"], "next_hop": "10.0.0.10"})
    assert patched.status_code == 200, patched.get_json()
    assert patched.get_json()["output_port_id"] == port["id"]
    replaced = tenant_a.put(url, {"prefix": "192.168.0.0/24", "next_hop": "10.0.0.11"})
    assert replaced.status_code == 200
    assert replaced.get_json()["output_port_id"] is None
    assert replaced.get_json()["prefix"] == "192.168.0.0/24"
    assert tenant_a.delete(url).status_code == 204
    error(tenant_a.get(url), 404, None)


def test_static_route_validation(
    tenant_a: ApiClient, router: dict[str, Any], switch: dict[str, Any], switch2: dict[str, Any]
) -> None:
    url = routes_url(router)
    error(tenant_a.post(url, {"prefix": "10.1.0.1/16", "next_hop": "10.0.0.9"}), 400, "prefix")
    error(tenant_a.post(url, {"prefix": "10.1.0.0/16", "next_hop": "10.0.0"}), 400, "next_hop")
    body = error(
        tenant_a.post(url, {"prefix": "10.1.0.0/16", "next_hop": "2001:db8::1"}), 400, "next_hop"
    )
    assert "IPv6" in body["message"]
    other = tenant_a.create(ROUTERS, {"name": "r2"})
    foreign_port = attach(tenant_a, other, switch, "10.0.0.1/24")
    for ident in (foreign_port["id"], "00000000-0000-0000-0000-000000000001", "junk"):
        body = error(
            tenant_a.post(
                url, {"prefix": "10.1.0.0/16", "next_hop": "10.0.0.9", "output_port_id": ident}
            ),
            400,
            "output_port_id",
        )
        assert body["error"] == ("invalid_value" if ident == "junk" else "missing_reference")
    v6_port = attach(tenant_a, router, switch2, "2001:db8::1/64")
    error(
        tenant_a.post(
            url, {"prefix": "10.1.0.0/16", "next_hop": "10.0.0.9", "output_port_id": v6_port["id"]}
        ),
        400,
        "output_port_id",
    )
    route = tenant_a.create(url, {"prefix": "10.1.0.0/16", "next_hop": "10.0.0.9"})
    body = error(
        tenant_a.post(url, {"prefix": "10.1.0.0/16", "next_hop": "10.0.0.8"}), 409, "prefix"
    )
    assert route["id"] in body["message"]
    # The same prefix on another router is fine.
    tenant_a.create(routes_url(other), {"prefix": "10.1.0.0/16", "next_hop": "10.0.0.8"})
    error(tenant_a.post(url, {"prefix": "10.2.0.0/16", "next_hop": "1.1.1.1", "x": 1}), 400, "x")
    assert len(tenant_a.get(url).get_json()["items"]) == 1


# ---- NAT rules -------------------------------------------------------------------------------


def test_nat_needs_a_gateway_service(tenant_a: ApiClient, router: dict[str, Any]) -> None:
    body = error(
        tenant_a.post(
            nat_url(router),
            {"type": "snat", "external_ip": "198.51.100.10", "internal_ip": "10.0.0.0/24"},
        ),
        400,
        "type",
    )
    assert "gateway service" in body["message"]


def test_nat_rule_crud(tenant_a: ApiClient, nat_router: dict[str, Any]) -> None:
    url = nat_url(nat_router)
    response = tenant_a.post(
        url, {"type": "snat", "external_ip": "198.51.100.10", "internal_ip": "10.0.0.0/24"}
    )
    assert response.status_code == 201
    snat = response.get_json()
    assert snat["logical_router_id"] == nat_router["id"]
    assert snat["internal_ip"] == "10.0.0.0/24"
    assert snat["logical_port_id"] is None
    rule = f"{url}/{snat['id']}"
    assert response.headers["Location"] == rule
    # SNAT is many-to-one: other prefixes may share the external address.
    other = tenant_a.create(
        url, {"type": "snat", "external_ip": "198.51.100.10", "internal_ip": "10.0.1.0/24"}
    )
    assert {r["id"] for r in tenant_a.get(url).get_json()["items"]} == {snat["id"], other["id"]}
    assert tenant_a.get(rule).get_json() == snat
    patched = tenant_a.patch(rule, {"external_ip": "198.51.100.11"})
    assert patched.status_code == 200
    assert patched.get_json()["external_ip"] == "198.51.100.11"
    replaced = tenant_a.put(
        rule, {"type": "snat", "external_ip": "198.51.100.12", "internal_ip": "10.0.2.0/24"}
    )
    assert replaced.status_code == 200
    assert replaced.get_json()["internal_ip"] == "10.0.2.0/24"
    error(tenant_a.patch(rule, {"type": "dnat", "internal_ip": "10.0.2.5"}), 400, "type")
    assert tenant_a.delete(rule).status_code == 204
    error(tenant_a.get(rule), 404, None)


def test_nat_rule_addresses(tenant_a: ApiClient, nat_router: dict[str, Any]) -> None:
    url = nat_url(nat_router)

    def post(**body: Any) -> TestResponse:
        return tenant_a.post(url, {"external_ip": "198.51.100.20", **body})

    error(post(type="snat", internal_ip="10.0.0.1/24"), 400, "internal_ip")
    error(post(type="dnat", internal_ip="10.0.0.0/24"), 400, "internal_ip")
    error(post(type="floating-ip", internal_ip="ten"), 400, "internal_ip")
    error(post(type="snat", internal_ip="2001:db8::/64"), 400, "internal_ip")
    error(post(type="masquerade", internal_ip="10.0.0.5"), 400, "type")
    error(post(type="dnat"), 400, "internal_ip")
    error(tenant_a.post(url, {"type": "dnat", "internal_ip": "10.0.0.5"}), 400, "external_ip")
    error(
        tenant_a.post(
            url, {"type": "dnat", "internal_ip": "10.0.0.5", "external_ip": "198.51.100.300"}
        ),
        400,
        "external_ip",
    )
    error(
        post(type="snat", internal_ip="10.0.0.0/24", logical_port_id=nat_router["id"]),
        400,
        "logical_port_id",
    )
    dnat = post(type="dnat", internal_ip="10.0.0.5")
    assert dnat.status_code == 201
    # One external address maps to one internal address for DNAT and floating IPs.
    body = error(post(type="floating-ip", internal_ip="10.0.0.6"), 409, "external_ip")
    assert dnat.get_json()["id"] in body["message"]
    error(post(type="dnat", internal_ip="10.0.0.7"), 409, "external_ip")
    snat = post(type="snat", internal_ip="10.0.0.0/24")
    assert snat.status_code == 201
    error(post(type="snat", internal_ip="10.0.0.0/24"), 409, "internal_ip")
    v6 = tenant_a.post(
        url, {"type": "dnat", "external_ip": "2001:db8:ff::5", "internal_ip": "2001:db8::5"}
    )
    assert v6.status_code == 201, v6.get_json()
    assert len(tenant_a.get(url).get_json()["items"]) == 3


def test_floating_ip_on_a_logical_port(
    tenant_a: ApiClient,
    tenant_b: ApiClient,
    nat_router: dict[str, Any],
    switch: dict[str, Any],
    switch2: dict[str, Any],
) -> None:
    url = nat_url(nat_router)
    attach(tenant_a, nat_router, switch, "10.0.0.1/24")
    vm = tenant_a.create(f"{SWITCHES}/{switch['id']}/ports", {"ips": ["10.0.0.5"]})
    elsewhere = tenant_a.create(f"{SWITCHES}/{switch2['id']}/ports", {"ips": ["10.0.0.5"]})
    foreign_switch = tenant_b.create(SWITCHES, {"name": "b"})
    foreign = tenant_b.create(f"{SWITCHES}/{foreign_switch['id']}/ports", {"ips": ["10.0.0.5"]})

    def fip(port_id: str, internal: str = "10.0.0.5", external: str = "198.51.100.30") -> Any:
        return tenant_a.post(
            url,
            {
                "type": "floating-ip",
                "external_ip": external,
                "internal_ip": internal,
                "logical_port_id": port_id,
            },
        )

    error(fip(vm["id"], internal="10.0.0.6"), 400, "logical_port_id")  # not the port's IP
    body = error(fip(elsewhere["id"]), 400, "logical_port_id")  # switch not on the router
    assert "no port on" in body["message"]
    assert error(fip(foreign["id"]), 400, "logical_port_id")["error"] == "missing_reference"
    peer = switch_ports(tenant_a, switch)
    router_side = next(p for p in peer if p["attachment"]["type"] == "router")
    error(fip(router_side["id"], internal="10.0.0.1"), 400, "logical_port_id")

    response = fip(vm["id"])
    assert response.status_code == 201, response.get_json()
    rule = response.get_json()
    assert rule["logical_port_id"] == vm["id"]
    # 1:1: the internal address has one floating IP, the external address one owner.
    error(fip(vm["id"], external="198.51.100.31"), 409, "internal_ip")
    error(fip(vm["id"]), 409, "external_ip")
    # The port cannot be deleted under its floating IP.
    body = error(tenant_a.delete(f"{SWITCHES}/{switch['id']}/ports/{vm['id']}"), 409, None)
    assert f"NAT rule {rule['id']}" in body["message"]
    assert tenant_a.delete(f"{url}/{rule['id']}").status_code == 204
    assert tenant_a.delete(f"{SWITCHES}/{switch['id']}/ports/{vm['id']}").status_code == 204


def test_nat_rules_and_routes_are_tenant_scoped(
    admin: ApiClient, tenant_b: ApiClient, nat_router: dict[str, Any]
) -> None:
    rule = admin.create(
        nat_url(nat_router),
        {"type": "snat", "external_ip": "198.51.100.10", "internal_ip": "10.0.0.0/24"},
    )
    assert rule["tenant"] == "tenant-a"
    route = admin.create(routes_url(nat_router), {"prefix": "10.9.0.0/16", "next_hop": "10.0.0.9"})
    assert route["tenant"] == "tenant-a"
    error(tenant_b.get(f"{nat_url(nat_router)}/{rule['id']}"), 404, None)
    error(tenant_b.get(f"{routes_url(nat_router)}/{route['id']}"), 404, None)
    error(
        admin.post(
            routes_url(nat_router),
            {"prefix": "10.8.0.0/16", "next_hop": "10.0.0.9", "tenant": "tenant-b"},
        ),
        400,
        "tenant",
    )
    assert admin.get(
        f"{API}/logical-routers/{nat_router['id']}/nat-rules?tenant=tenant-a"
    ).get_json()["items"] == [rule]


def test_tenants_read_gateway_services_without_their_uplinks(
    admin: ApiClient, tenant_a: ApiClient, l3_gateway: dict[str, Any]
) -> None:
    """A tenant names a gateway service (its id, name, type) but is not told where it is:
    no uplink address, next hop, VLAN, nodes or active node; the admin sees them all.
    Transport zones carry no address: tenants read them (a switch names its zone)."""
    hidden = {"uplink_ip", "uplink_next_hop", "uplink_vlan", "gateway_node_ids", "status"}
    url = f"{API}/gateway-services/{l3_gateway['id']}"
    (listed,) = tenant_a.get(f"{API}/gateway-services").get_json()["items"]
    shown = tenant_a.get(url).get_json()
    assert listed == shown
    assert not hidden & set(shown), shown
    assert (shown["id"], shown["name"], shown["type"], shown["default"]) == (
        l3_gateway["id"], "uplink", "l3", False)  # fmt: skip
    assert admin.get(url).get_json()["uplink_ip"] == "198.51.100.2/24"
    assert hidden <= set(admin.get(url).get_json())
    zone = admin.create(f"{API}/transport-zones", {"name": "tz"})
    assert tenant_a.get(f"{API}/transport-zones/{zone['id']}").get_json() == zone
    # Tenants still name the service (a router on it).
    router = tenant_a.create(ROUTERS, {"name": "r", "gateway_service_id": l3_gateway["id"]})
    assert router["gateway_service_id"] == l3_gateway["id"]
    # Neutron shows a project an external network, not its provider attributes.
    provider = {"provider:network_type": "l3_ext", "provider:physical_network": l3_gateway["id"]}
    response = admin.post("/v2.0/networks", {"network": {
        "name": "public", "router:external": True, **provider}})  # fmt: skip
    assert response.status_code == 201, response.get_json()
    network = response.get_json()["network"]
    assert network.items() >= provider.items()
    url = f"/v2.0/networks/{network['id']}"
    assert admin.get(url).get_json()["network"].items() >= provider.items()
    (listed_network,) = tenant_a.get("/v2.0/networks").get_json()["networks"]
    assert listed_network == tenant_a.get(url).get_json()["network"]
    assert listed_network["router:external"] is True
    assert not {k for k in listed_network if k.startswith("provider:")}, listed_network


def test_a_taken_public_address_names_another_tenants_rule_to_the_admin_only(
    admin: ApiClient, tenant_a: ApiClient, tenant_b: ApiClient, l3_gateway: dict[str, Any]
) -> None:
    """Tenant b's DNAT has 198.51.100.50 on the uplink network. Tenant a's rule on it is
    refused (409) saying it is taken, without b's rule or router; the admin's names them.
    The same through Neutron (floating IP), and a rule on the uplink's own address."""
    theirs = tenant_b.create(ROUTERS, {"name": "b", "gateway_service_id": l3_gateway["id"]})
    taken = tenant_b.create(nat_url(theirs), {
        "type": "dnat", "external_ip": "198.51.100.50", "internal_ip": "10.9.0.5"})  # fmt: skip
    mine = tenant_a.create(ROUTERS, {"name": "a", "gateway_service_id": l3_gateway["id"]})
    body = {"type": "dnat", "external_ip": "198.51.100.50", "internal_ip": "10.0.0.5"}
    message = error(tenant_a.post(nat_url(mine), body), 409, "external_ip")["message"]
    assert "198.51.100.50 is taken" in message
    assert taken["id"] not in message, message
    assert theirs["id"] not in message, message
    message = error(admin.post(nat_url(mine), body), 409, "external_ip")["message"]
    assert taken["id"] in message, message
    assert theirs["id"] in message, message
    # Neutron: an external network on the service, tenant a's router and floating IP.
    net = admin.post("/v2.0/networks", {"network": {
        "name": "public", "router:external": True, "provider:network_type": "l3_ext",
        "provider:physical_network": l3_gateway["id"]}}).get_json()["network"]  # fmt: skip
    response = admin.post("/v2.0/subnets", {"subnet": {
        "network_id": net["id"], "ip_version": 4, "cidr": "198.51.100.0/24"}})  # fmt: skip
    assert response.status_code == 201, response.get_json()
    inside = tenant_a.post("/v2.0/networks", {"network": {"name": "in"}}).get_json()["network"]
    subnet = tenant_a.post(
        "/v2.0/subnets",
        {"subnet": {"network_id": inside["id"], "ip_version": 4, "cidr": "10.0.0.0/24"}},
    ).get_json()["subnet"]
    router = tenant_a.post(
        "/v2.0/routers",
        {"router": {"name": "r", "external_gateway_info": {"network_id": net["id"]}}},
    ).get_json()["router"]
    response = tenant_a.put(f"/v2.0/routers/{router['id']}/add_router_interface",
                            {"subnet_id": subnet["id"]})  # fmt: skip
    assert response.status_code == 200, response.get_json()
    port = tenant_a.post("/v2.0/ports", {"port": {"network_id": inside["id"]}}).get_json()["port"]
    fip = {"floating_network_id": net["id"], "floating_ip_address": "198.51.100.50",
           "port_id": port["id"]}  # fmt: skip
    response = tenant_a.post("/v2.0/floatingips", {"floatingip": fip})
    assert response.status_code == 409, response.get_json()
    message = response.get_json()["NeutronError"]["message"]
    assert "198.51.100.50 is taken" in message
    assert taken["id"] not in message, message
    assert theirs["id"] not in message, message
    response = admin.post("/v2.0/floatingips", {"floatingip": {**fip, "project_id": "tenant-a"}})
    assert response.status_code == 409, response.get_json()
    assert taken["id"] in response.get_json()["NeutronError"]["message"]
    # The uplink's own address (198.51.100.2) is the service's, in both APIs.
    own = {**body, "external_ip": "198.51.100.2"}
    assert "address of gateway service" in error(
        tenant_a.post(nat_url(mine), own), 409, "external_ip")["message"]  # fmt: skip
    response = tenant_a.post("/v2.0/floatingips", {"floatingip": {
        **fip, "floating_ip_address": "198.51.100.2"}})  # fmt: skip
    assert response.status_code == 409, response.get_json()
    assert tenant_a.get("/v2.0/floatingips").get_json()["floatingips"] == []
