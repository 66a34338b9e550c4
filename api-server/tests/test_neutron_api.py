"""The Neutron v2.0 API through the Flask test client under `noauth`: errors, one store, queries.

Neutron's error bodies (`{"NeutronError": {"type", "message", "detail"}}`) with the right
status for the main failures, and nothing written when a request fails; the same rows seen
through both APIs in both directions (ids, revisions, what the mapping puts where); list
filters, `fields`, sorting and `limit`/`marker` paging; If-Match on revision_number; bulk
create; the tag routes.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.test import TestResponse

from loom_api import create_app
from loom_api.store import ReadView, Store

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
V2 = "/v2.0"
PROJECT = "p-api"


class Neutron:
    """A test client for /v2.0 that wraps bodies in Neutron's envelope."""

    def __init__(self, client: FlaskClient, token: str | None = None) -> None:
        self.client = client
        self.token = token

    def send(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> TestResponse:
        sent = {"X-Auth-Token": self.token} if self.token else {}
        sent.update(headers or {})
        kw: dict[str, Any] = {"headers": sent}
        if body is not None:
            kw["json"] = body
        return self.client.open(path, method=method, **kw)

    def get(self, path: str, **kw: Any) -> TestResponse:
        return self.send("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> TestResponse:
        return self.send("POST", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> TestResponse:
        return self.send("PUT", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> TestResponse:
        return self.send("DELETE", path, **kw)

    def create(self, collection: str, member: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.post(f"{V2}/{collection}", {member: body})
        assert response.status_code == 201, response.get_json()
        result: dict[str, Any] = response.get_json()[member]
        return result


def neutron_error(response: TestResponse, status: int, kind: str) -> str:
    """Assert `response` is Neutron error `kind` with `status`; return its message."""
    body = response.get_json()
    assert response.status_code == status, body
    assert set(body) == {"NeutronError"}, body
    assert body["NeutronError"]["type"] == kind, body
    assert body["NeutronError"]["detail"] == ""
    message: str = body["NeutronError"]["message"]
    return message


def generation(store: Store) -> int:
    return store.read(lambda view: view.generation())


@pytest.fixture
def app(app: Flask, store: Store) -> Flask:
    """The API app with Neutron's `noauth` strategy (the native API keeps its tokens)."""
    return create_app(store, app.extensions["loom.tokens"], {"LOOM_NEUTRON_AUTH": "noauth"})


@pytest.fixture
def neutron(app: Flask) -> Neutron:
    return Neutron(app.test_client())


@pytest.fixture
def net(neutron: Neutron) -> dict[str, Any]:
    return neutron.create("networks", "network", {"name": "n", "project_id": PROJECT})


@pytest.fixture
def subnet(neutron: Neutron, net: dict[str, Any]) -> dict[str, Any]:
    return neutron.create(
        "subnets",
        "subnet",
        {"network_id": net["id"], "ip_version": 4, "cidr": "10.0.0.0/24"},
    )


@pytest.fixture
def public(neutron: Neutron) -> dict[str, Any]:
    network = neutron.create("networks", "network", {"name": "public", "router:external": True})
    neutron.create(
        "subnets",
        "subnet",
        {"network_id": network["id"], "ip_version": 4, "cidr": "198.51.100.0/29"},
    )
    return network


# ---- errors ------------------------------------------------------------------------------


def test_not_found_errors(neutron: Neutron) -> None:
    missing = "5a1f2b9e-0000-4000-8000-000000000000"
    for collection, kind in [
        ("networks", "NetworkNotFound"),
        ("subnets", "SubnetNotFound"),
        ("ports", "PortNotFound"),
        ("routers", "RouterNotFound"),
        ("floatingips", "FloatingIPNotFound"),
        ("security-groups", "SecurityGroupNotFound"),
        ("security-group-rules", "SecurityGroupRuleNotFound"),
    ]:
        message = neutron_error(neutron.get(f"{V2}/{collection}/{missing}"), 404, kind)
        assert missing in message
        neutron_error(neutron.delete(f"{V2}/{collection}/not-a-uuid"), 404, kind)
    neutron_error(neutron.get(f"{V2}/no-such-things"), 404, "HTTPNotFound")
    neutron_error(neutron.post(f"{V2}/networks/{missing}", {}), 405, "HTTPMethodNotAllowed")
    neutron_error(
        neutron.post(f"{V2}/ports", {"port": {"network_id": missing}}), 404, "NetworkNotFound"
    )


def test_bad_request_errors(neutron: Neutron, net: dict[str, Any], store: Store) -> None:
    before = generation(store)
    message = neutron_error(
        neutron.post(f"{V2}/networks", {"network": {"name": "x", "color": "red"}}),
        400,
        "HTTPBadRequest",
    )
    assert message == "Unrecognized attribute(s) 'color'"
    neutron_error(neutron.post(f"{V2}/networks", {"name": "x"}), 400, "HTTPBadRequest")
    response = neutron.client.post(
        f"{V2}/networks", data="{nope", headers={"Content-Type": "application/json"}
    )
    neutron_error(response, 400, "HTTPBadRequest")
    message = neutron_error(
        neutron.post(f"{V2}/networks", {"network": {"admin_state_up": "yes"}}),
        400,
        "HTTPBadRequest",
    )
    assert message.startswith("Invalid input for admin_state_up")
    message = neutron_error(
        neutron.post(f"{V2}/subnets", {"subnet": {"network_id": net["id"], "ip_version": 4}}),
        400,
        "HTTPBadRequest",
    )
    assert "'cidr' not specified" in message
    neutron_error(
        neutron.post(
            f"{V2}/subnets",
            {"subnet": {"network_id": net["id"], "ip_version": 4, "cidr": "10.0.0.1/24"}},
        ),
        400,
        "HTTPBadRequest",
    )
    neutron_error(
        neutron.post(f"{V2}/ports", {"port": {"network_id": net["id"], "mac_address": "zz"}}),
        400,
        "HTTPBadRequest",
    )
    neutron_error(
        neutron.put(f"{V2}/networks/{net['id']}", {"network": {"id": "x"}}), 400, "HTTPBadRequest"
    )
    neutron_error(
        neutron.post(f"{V2}/networks", {"network": {"project_id": "a", "tenant_id": "b"}}),
        400,
        "HTTPBadRequest",
    )
    assert generation(store) == before


def test_rule_and_route_validation(neutron: Neutron, net: dict[str, Any], store: Store) -> None:
    group = neutron.create("security-groups", "security_group", {"project_id": PROJECT})
    before = generation(store)
    for rule in (
        {"protocol": "icmp", "port_range_min": 8, "port_range_max": 0},
        {"protocol": "tcp", "port_range_min": 90, "port_range_max": 80},
        {"protocol": "bogus"},
        {"ethertype": "IPv6", "remote_ip_prefix": "10.0.0.0/8"},
        {"remote_ip_prefix": "not-a-prefix"},
        {"port_range_min": 70000, "protocol": "tcp"},
    ):
        body = {"security_group_id": group["id"], "direction": "ingress", **rule}
        response = neutron.post(f"{V2}/security-group-rules", {"security_group_rule": body})
        neutron_error(response, 400, "HTTPBadRequest")
    missing = {"security_group_id": group["id"], "direction": "ingress"}
    missing["remote_group_id"] = "5a1f2b9e-0000-4000-8000-000000000000"
    neutron_error(
        neutron.post(f"{V2}/security-group-rules", {"security_group_rule": missing}),
        404,
        "SecurityGroupNotFound",
    )
    bad_route = {
        "network_id": net["id"],
        "ip_version": 4,
        "cidr": "10.4.0.0/24",
        "host_routes": [{"destination": "nowhere", "nexthop": "10.4.0.9"}],
    }
    neutron_error(neutron.post(f"{V2}/subnets", {"subnet": bad_route}), 400, "HTTPBadRequest")
    assert generation(store) == before


def test_address_conflicts(neutron: Neutron, net: dict[str, Any], store: Store) -> None:
    neutron.create(
        "subnets",
        "subnet",
        {
            "network_id": net["id"],
            "ip_version": 4,
            "cidr": "10.9.0.0/24",
            "allocation_pools": [{"start": "10.9.0.10", "end": "10.9.0.11"}],
        },
    )
    first = neutron.create("ports", "port", {"network_id": net["id"]})
    neutron.create("ports", "port", {"network_id": net["id"]})
    before = generation(store)
    message = neutron_error(
        neutron.post(f"{V2}/ports", {"port": {"network_id": net["id"]}}),
        409,
        "IpAddressGenerationFailure",
    )
    assert net["id"] in message
    message = neutron_error(
        neutron.post(
            f"{V2}/ports",
            {"port": {"network_id": net["id"], "fixed_ips": [{"ip_address": "10.9.0.10"}]}},
        ),
        409,
        "IpAddressInUse",
    )
    assert "10.9.0.10" in message
    neutron_error(
        neutron.post(
            f"{V2}/ports", {"port": {"network_id": net["id"], "mac_address": first["mac_address"]}}
        ),
        409,
        "MacAddressInUse",
    )
    neutron_error(
        neutron.post(
            f"{V2}/ports",
            {"port": {"network_id": net["id"], "fixed_ips": [{"ip_address": "10.8.0.1"}]}},
        ),
        400,
        "InvalidIpForNetwork",
    )
    # Addresses outside the pools may still be asked for by address.
    outside = neutron.create(
        "ports", "port", {"network_id": net["id"], "fixed_ips": [{"ip_address": "10.9.0.200"}]}
    )
    assert outside["fixed_ips"][0]["ip_address"] == "10.9.0.200"
    assert generation(store) == before + 1


def test_in_use_conflicts(neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any]) -> None:
    group = neutron.create("security-groups", "security_group", {"project_id": PROJECT})
    port = neutron.create(
        "ports", "port", {"network_id": net["id"], "security_groups": [group["id"]]}
    )
    message = neutron_error(neutron.delete(f"{V2}/networks/{net['id']}"), 409, "NetworkInUse")
    assert port["id"] in message
    message = neutron_error(neutron.delete(f"{V2}/subnets/{subnet['id']}"), 409, "SubnetInUse")
    assert port["id"] in message
    neutron_error(neutron.delete(f"{V2}/security-groups/{group['id']}"), 409, "SecurityGroupInUse")
    assert neutron.delete(f"{V2}/ports/{port['id']}").status_code == 204
    assert neutron.delete(f"{V2}/security-groups/{group['id']}").status_code == 204
    # A network goes with its subnets once no port is left.
    assert neutron.delete(f"{V2}/networks/{net['id']}").status_code == 204
    neutron_error(neutron.get(f"{V2}/subnets/{subnet['id']}"), 404, "SubnetNotFound")


def test_router_and_floating_ip_errors(
    neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any], public: dict[str, Any]
) -> None:
    router = neutron.create("routers", "router", {"project_id": PROJECT})
    url = f"{V2}/routers/{router['id']}"
    neutron_error(neutron.put(f"{url}/add_router_interface", {}), 400, "HTTPBadRequest")
    no_gateway = neutron.create(
        "subnets",
        "subnet",
        {"network_id": public["id"], "ip_version": 6, "cidr": "2001:db8::/64", "gateway_ip": None},
    )
    message = neutron_error(
        neutron.put(f"{url}/add_router_interface", {"subnet_id": no_gateway["id"]}),
        400,
        "BadRequest",
    )
    assert "gateway IP" in message
    neutron_error(
        neutron.put(f"{url}/remove_router_interface", {"subnet_id": subnet["id"]}),
        404,
        "RouterInterfaceNotFoundForSubnet",
    )
    neutron_error(
        neutron.put(url, {"router": {"external_gateway_info": {"network_id": net["id"]}}}),
        400,
        "BadRequest",
    )
    neutron_error(
        neutron.post(f"{V2}/floatingips", {"floatingip": {"floating_network_id": net["id"]}}),
        400,
        "BadRequest",
    )
    port = neutron.create("ports", "port", {"network_id": net["id"]})
    neutron_error(
        neutron.post(
            f"{V2}/floatingips",
            {
                "floatingip": {
                    "floating_network_id": public["id"],
                    "port_id": port["id"],
                    "project_id": PROJECT,
                }
            },
        ),
        404,
        "ExternalGatewayForFloatingIPNotFound",
    )
    assert neutron.get(f"{V2}/floatingips").get_json() == {"floatingips": []}
    # The /29 has five addresses: 198.51.100.1 (gateway) and .2-.6; take them all.
    for _ in range(5):
        neutron.create("floatingips", "floatingip", {"floating_network_id": public["id"]})
    neutron_error(
        neutron.post(f"{V2}/floatingips", {"floatingip": {"floating_network_id": public["id"]}}),
        409,
        "IpAddressGenerationFailure",
    )
    neutron_error(
        neutron.put(url, {"router": {"external_gateway_info": {"network_id": public["id"]}}}),
        409,
        "IpAddressGenerationFailure",
    )
    neutron_error(neutron.delete(f"{V2}/networks/{public['id']}"), 409, "NetworkInUse")


def test_if_match_revision_number(neutron: Neutron, net: dict[str, Any]) -> None:
    url = f"{V2}/networks/{net['id']}"
    stale = {"If-Match": "revision_number=7"}
    neutron_error(
        neutron.put(url, {"network": {"name": "x"}}, headers=stale), 412, "PreconditionFailed"
    )
    neutron_error(neutron.delete(url, headers=stale), 412, "PreconditionFailed")
    neutron_error(
        neutron.put(url, {"network": {"name": "x"}}, headers={"If-Match": "7"}),
        400,
        "HTTPBadRequest",
    )
    current = {"If-Match": f"revision_number={net['revision_number']}"}
    response = neutron.put(url, {"network": {"name": "x"}}, headers=current)
    assert response.status_code == 200
    assert response.get_json()["network"]["revision_number"] == net["revision_number"] + 1


# ---- one store, both directions ----------------------------------------------------------


def test_neutron_objects_are_native_rows(
    neutron: Neutron,
    net: dict[str, Any],
    subnet: dict[str, Any],
    public: dict[str, Any],
    admin: ApiClient,
    store: Store,
) -> None:
    port = neutron.create(
        "ports",
        "port",
        {"network_id": net["id"], "binding:host_id": "hv1", "device_owner": "compute:az"},
    )
    router = neutron.create(
        "routers",
        "router",
        {"project_id": PROJECT, "external_gateway_info": {"network_id": public["id"]}},
    )
    neutron.put(f"{V2}/routers/{router['id']}/add_router_interface", {"subnet_id": subnet["id"]})
    fip = neutron.create("floatingips", "floatingip", {"floating_network_id": public["id"]})

    switch = admin.get(f"{API}/logical-switches/{net['id']}").get_json()
    assert (switch["name"], switch["tenant"], switch["revision"]) == ("n", PROJECT, 1)
    native_subnet = admin.get(f"{API}/logical-switches/{net['id']}/subnets/{subnet['id']}")
    assert native_subnet.get_json()["gateway_ip"] == "10.0.0.1"
    native_port = admin.get(f"{API}/logical-switches/{net['id']}/ports/{port['id']}").get_json()
    assert native_port["attachment"] == {"type": "vif", "vif_id": port["id"]}
    assert native_port["security_profile_ids"] == port["security_groups"]

    def rows(view: ReadView) -> dict[str, Any]:
        nat = {str(n.uuid): n for n in view.rows("NAT_Rule")}
        lsp = next(p for p in view.rows("Logical_Switch_Port") if str(p.uuid) == port["id"])
        ls = next(s for s in view.rows("Logical_Switch") if str(s.uuid) == public["id"])
        return {
            "fip": (nat[fip["id"]].type, nat[fip["id"]].logical_router, nat[fip["id"]].internal_ip),
            "snat": sorted(
                (n.external_ip, n.internal_ip[0]) for n in nat.values() if n.type == "snat"
            ),
            "lsp": dict(lsp.external_ids),
            "external": dict(ls.external_ids),
        }

    seen = store.read(rows)
    assert seen["fip"] == ("floating-ip", [], [])
    assert seen["snat"] == [("198.51.100.2", "10.0.0.0/24")]
    assert seen["lsp"] == {"neutron:host_id": "hv1", "neutron:device_owner": "compute:az"}
    assert seen["external"] == {"neutron:router_external": "true"}

    # A native change shows in Neutron, and revision_number follows the row's revision.
    patched = admin.patch(f"{API}/logical-switches/{net['id']}", {"name": "renamed"})
    assert patched.status_code == 200
    again = neutron.get(f"{V2}/networks/{net['id']}").get_json()["network"]
    assert (again["name"], again["revision_number"]) == ("renamed", 2)


def test_native_objects_appear_in_neutron(neutron: Neutron, admin: ApiClient) -> None:
    switch = admin.create(f"{API}/logical-switches", {"name": "ls", "tenant": PROJECT})
    native_subnet = admin.create(
        f"{API}/logical-switches/{switch['id']}/subnets",
        {"cidr": "10.3.0.0/24", "gateway_ip": "10.3.0.1"},
    )
    network = neutron.get(f"{V2}/networks/{switch['id']}").get_json()["network"]
    assert network["subnets"] == [native_subnet["id"]]
    assert network["project_id"] == network["tenant_id"] == PROJECT
    # Neutron allocates from the native subnet's pools.
    port = neutron.create("ports", "port", {"network_id": switch["id"]})
    assert port["fixed_ips"] == [{"subnet_id": native_subnet["id"], "ip_address": "10.3.0.2"}]
    router = admin.create(f"{API}/logical-routers", {"name": "lr", "tenant": PROJECT})
    admin.create(
        f"{API}/logical-routers/{router['id']}/ports",
        {"ip_prefix": "10.3.0.1/24", "logical_switch_id": switch["id"]},
    )
    interfaces = neutron.get(
        f"{V2}/ports?device_id={router['id']}&device_owner=network:router_interface"
    ).get_json()["ports"]
    assert [p["fixed_ips"][0]["ip_address"] for p in interfaces] == ["10.3.0.1"]
    neutron_error(neutron.delete(f"{V2}/routers/{router['id']}"), 409, "RouterInUse")


def test_parents_and_children_in_one_write_beside_others(
    neutron: Neutron, public: dict[str, Any]
) -> None:
    """A router inserted with its gateway port, a network deleted with its subnets, while
    other routers and networks have ports and subnets (the store's parent indexes)."""
    keep = neutron.create("networks", "network", {"name": "keep"})
    neutron.create(
        "subnets", "subnet", {"network_id": keep["id"], "ip_version": 4, "cidr": "10.1.0.0/24"}
    )
    gone = neutron.create("networks", "network", {"name": "gone"})
    for cidr in ("10.2.0.0/24", "10.2.1.0/24"):
        neutron.create(
            "subnets", "subnet", {"network_id": gone["id"], "ip_version": 4, "cidr": cidr}
        )
    routers = [
        neutron.create("routers", "router", {"external_gateway_info": {"network_id": public["id"]}})
        for _ in range(3)
    ]
    assert neutron.delete(f"{V2}/networks/{gone['id']}").status_code == 204
    assert len(neutron.get(f"{V2}/subnets?network_id={keep['id']}").get_json()["subnets"]) == 1
    for router in routers:
        assert neutron.delete(f"{V2}/routers/{router['id']}").status_code == 204
    assert neutron.get(f"{V2}/ports").get_json() == {"ports": []}


# ---- queries, bulk, tags -----------------------------------------------------------------


def test_filters_fields_sorting_and_paging(neutron: Neutron) -> None:
    made = [
        neutron.create("networks", "network", {"name": f"net-{i}", "project_id": PROJECT})
        for i in range(5)
    ]
    ids = sorted(n["id"] for n in made)
    body = neutron.get(f"{V2}/networks?name=net-1&name=net-3&fields=id&fields=name").get_json()
    assert sorted(n["name"] for n in body["networks"]) == ["net-1", "net-3"]
    assert all(set(n) == {"id", "name"} for n in body["networks"])
    assert len(neutron.get(f"{V2}/networks?shared=false").get_json()["networks"]) == 5
    assert neutron.get(f"{V2}/networks?router:external=True").get_json()["networks"] == []
    neutron_error(neutron.get(f"{V2}/networks?colour=red"), 400, "HTTPBadRequest")

    page = neutron.get(f"{V2}/networks?limit=2").get_json()
    assert [n["id"] for n in page["networks"]] == ids[:2]
    link = page["networks_links"][0]
    assert link["rel"] == "next"
    assert f"marker={ids[1]}" in link["href"]
    rest = neutron.get(f"{V2}/networks?limit=10&marker={ids[1]}").get_json()
    assert [n["id"] for n in rest["networks"]] == ids[2:]
    assert "networks_links" not in rest

    names = neutron.get(f"{V2}/networks?sort_key=name&sort_dir=desc").get_json()["networks"]
    assert [n["name"] for n in names] == [f"net-{i}" for i in range(4, -1, -1)]


def test_bulk_create_is_one_transaction(neutron: Neutron, store: Store) -> None:
    before = generation(store)
    response = neutron.post(
        f"{V2}/networks", {"networks": [{"name": "a"}, {"name": "b", "project_id": PROJECT}]}
    )
    assert response.status_code == 201
    assert [n["name"] for n in response.get_json()["networks"]] == ["a", "b"]
    assert generation(store) == before + 1
    bad = neutron.post(f"{V2}/networks", {"networks": [{"name": "c"}, {"mtu": 1}]})
    neutron_error(bad, 400, "HTTPBadRequest")
    assert len(neutron.get(f"{V2}/networks").get_json()["networks"]) == 2


def test_tag_routes(neutron: Neutron, net: dict[str, Any]) -> None:
    url = f"{V2}/networks/{net['id']}/tags"
    response = neutron.put(url, {"tags": ["b", "a"]})
    assert response.status_code == 200
    assert neutron.put(f"{url}/c").status_code == 201
    assert neutron.get(url).get_json() == {"tags": ["a", "b", "c"]}
    assert neutron.get(f"{url}/a").status_code == 204
    assert neutron.delete(f"{url}/a").status_code == 204
    neutron_error(neutron.get(f"{url}/a"), 404, "HTTPNotFound")
    assert neutron.delete(url).status_code == 204
    assert neutron.get(url).get_json() == {"tags": []}


def test_extensions_and_resources(neutron: Neutron) -> None:
    aliases = {e["alias"] for e in neutron.get(f"{V2}/extensions").get_json()["extensions"]}
    assert {"router", "external-net", "security-group", "binding", "port-security"} <= aliases
    assert neutron.get(f"{V2}/extensions/router").get_json()["extension"]["alias"] == "router"
    neutron_error(neutron.get(f"{V2}/extensions/nope"), 404, "HTTPNotFound")
    collections = {r["collection"] for r in neutron.get(f"{V2}/").get_json()["resources"]}
    assert "security-group-rules" in collections


def test_subnet_allocation_follows_pools_and_gateway(neutron: Neutron, net: dict[str, Any]) -> None:
    subnet = neutron.create(
        "subnets",
        "subnet",
        {
            "network_id": net["id"],
            "ip_version": 6,
            "cidr": "2001:db8:1::/64",
            "allocation_pools": [{"start": "2001:db8:1::10", "end": "2001:db8:1::11"}],
        },
    )
    assert subnet["gateway_ip"] == "2001:db8:1::1"
    ports = [neutron.create("ports", "port", {"network_id": net["id"]}) for _ in range(2)]
    addresses = [ipaddress.ip_address(p["fixed_ips"][0]["ip_address"]) for p in ports]
    assert [str(a) for a in addresses] == ["2001:db8:1::10", "2001:db8:1::11"]


# ---- no 5xx for any body -----------------------------------------------------------------

_ATTRIBUTES = {
    "networks": ["name", "admin_state_up", "shared", "router:external", "mtu", "tags",
                 "port_security_enabled", "provider:network_type", "provider:physical_network",
                 "loom:programming_model"],
    "subnets": ["network_id", "cidr", "ip_version", "gateway_ip", "allocation_pools",
                "dns_nameservers", "host_routes", "enable_dhcp", "ipv6_ra_mode"],
    "ports": ["network_id", "fixed_ips", "mac_address", "security_groups", "device_id",
              "binding:host_id", "binding:profile", "port_security_enabled",
              "allowed_address_pairs"],
    "routers": ["name", "external_gateway_info", "routes", "admin_state_up"],
    "floatingips": ["floating_network_id", "floating_ip_address", "port_id",
                    "fixed_ip_address", "subnet_id"],
    "security-groups": ["name", "description", "stateful"],
    "security-group-rules": ["security_group_id", "direction", "ethertype", "protocol",
                             "port_range_min", "port_range_max", "remote_ip_prefix",
                             "remote_group_id"],
}  # fmt: skip
_MEMBERS = {
    "networks": "network",
    "subnets": "subnet",
    "ports": "port",
    "routers": "router",
    "floatingips": "floatingip",
    "security-groups": "security_group",
    "security-group-rules": "security_group_rule",
}


def _values(ids: list[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.text(max_size=20),
        st.sampled_from(
            ["10.0.0.0/24", "10.0.0.5", "2001:db8::/64", "fa:16:3e:00:00:09", "ingress",
             "tcp", "IPv6", "l3_ext", "10.0.0.300", "", *ids]
        ),
    )  # fmt: skip
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["ip_address", "subnet_id", "network_id",
                                           "start", "end", "destination", "nexthop"]),
                          inner, max_size=3),
        max_leaves=6,
    )  # fmt: skip


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_server_error_for_any_body(
    neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any], data: st.DataObject
) -> None:
    ids = [net["id"], subnet["id"]]
    collection = data.draw(st.sampled_from(sorted(_ATTRIBUTES)))
    names = data.draw(st.lists(st.sampled_from(_ATTRIBUTES[collection]), unique=True))
    body = {name: data.draw(_values(ids)) for name in names}
    member = _MEMBERS[collection]
    created = neutron.post(f"{V2}/{collection}", {member: body})
    assert created.status_code < 500, created.get_json()
    if created.status_code == 201:
        ident = created.get_json()[member]["id"]
        updated = neutron.put(f"{V2}/{collection}/{ident}", {member: body})
        assert updated.status_code < 500, updated.get_json()
        deleted = neutron.delete(f"{V2}/{collection}/{ident}")
        assert deleted.status_code < 500, deleted.get_json()
    for path in ("add_router_interface", "remove_router_interface"):
        routers = neutron.get(f"{V2}/routers").get_json()["routers"]
        if routers:
            response = neutron.put(f"{V2}/routers/{routers[0]['id']}/{path}", body)
            assert response.status_code < 500, response.get_json()
