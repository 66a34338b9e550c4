"""Validation of the Neutron v2.0 API under hostile input, and floating IPs' honest status.

The same checks as the native API's (test_validation.py), in Neutron's error form: each case
asserts the status, the Neutron error type, and that nothing was written. Floating IPs are
associated whenever a router joins the port's subnet to the floating network (as Neutron
has them); an external network that names no L3 gateway service is served by the
deployment's default one, and a floating IP's `status` is ACTIVE only while something
translates it, with `loom:status_reason` saying why not.
"""

from __future__ import annotations

import http.client
import json
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from loom_api import create_app
from loom_api.store import ReadView, Store, WriteView

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
V2 = "/v2.0"
PROJECT = "p-val"
REASON = "loom:status_reason"


class Neutron:
    """A test client for /v2.0 (noauth: every request acts as the admin)."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client

    def send(self, method: str, path: str, body: Any = None) -> TestResponse:
        return self.client.open(path, method=method, json=body)

    def create(self, collection: str, member: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.send("POST", f"{V2}/{collection}", {member: body})
        assert response.status_code == 201, response.get_json()
        result: dict[str, Any] = response.get_json()[member]
        return result

    def get(self, collection: str, ident: str) -> dict[str, Any]:
        response = self.send("GET", f"{V2}/{collection}/{ident}")
        assert response.status_code == 200, response.get_json()
        result: dict[str, Any] = response.get_json()[collection.rstrip("s").replace("-", "_")]
        return result


def neutron_error(response: TestResponse, status: int, kind: str) -> str:
    """Assert `response` is Neutron error `kind` with `status`; return its message."""
    body = response.get_json()
    assert response.status_code == status, body
    assert body["NeutronError"]["type"] == kind, body
    message: str = body["NeutronError"]["message"]
    return message


def count(store: Store, table: str) -> int:
    def read(view: ReadView) -> int:
        return view.count(table)

    return store.read(read)


@pytest.fixture
def app(app: Flask, store: Store) -> Flask:
    """The API app with Neutron's `noauth` strategy."""
    return create_app(store, app.extensions["loom.tokens"], {"LOOM_NEUTRON_AUTH": "noauth"})


@pytest.fixture
def neutron(app: Flask) -> Neutron:
    return Neutron(app.test_client())


@pytest.fixture
def net(neutron: Neutron) -> dict[str, Any]:
    return neutron.create("networks", "network", {"name": "n", "project_id": PROJECT})


@pytest.fixture
def subnet(neutron: Neutron, net: dict[str, Any]) -> dict[str, Any]:
    body = {"network_id": net["id"], "ip_version": 4, "cidr": "10.0.0.0/24"}
    return neutron.create("subnets", "subnet", body)


@pytest.fixture
def service(admin: ApiClient) -> dict[str, Any]:
    """An L3 gateway service whose uplink is 198.51.100.0/24 (next hop .1)."""
    node = admin.create(
        f"{API}/transport-nodes", {"name": "gw1", "node_type": "gateway", "system_id": "gw1"}
    )
    return admin.create(
        f"{API}/gateway-services",
        {
            "name": "uplink",
            "type": "l3",
            "gateway_node_ids": [node["id"]],
            "uplink_ip": "198.51.100.254/24",
            "uplink_next_hop": "198.51.100.1",
        },
    )


def external_network(neutron: Neutron, service: dict[str, Any] | None) -> dict[str, Any]:
    """An external network on 198.51.100.0/24: `l3_ext` on `service`, or a plain one."""
    body: dict[str, Any] = {"name": "public", "router:external": True}
    if service is not None:
        body.update({"provider:network_type": "l3_ext", "provider:physical_network": service["id"]})
    network = neutron.create("networks", "network", body)
    neutron.create(
        "subnets",
        "subnet",
        {"network_id": network["id"], "ip_version": 4, "cidr": "198.51.100.0/24"},
    )
    return network


def routed_port(
    neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any], public: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A router from `subnet` to `public`, and a port on `net`."""
    body = {"project_id": PROJECT, "external_gateway_info": {"network_id": public["id"]}}
    router = neutron.create("routers", "router", body)
    response = neutron.send(
        "PUT", f"{V2}/routers/{router['id']}/add_router_interface", {"subnet_id": subnet["id"]}
    )
    assert response.status_code == 200, response.get_json()
    return router, neutron.create("ports", "port", {"network_id": net["id"]})


# ---- floating IPs: served by the default gateway service, and an honest status ----------


def l3_service(admin: ApiClient, name: str, uplink: str) -> dict[str, Any]:
    """Another L3 service on gateway node gw1 (made here if missing), uplink `uplink`/24."""
    nodes = admin.get(f"{API}/transport-nodes?name=gw1").get_json()["items"]
    node = nodes[0] if nodes else admin.create(
        f"{API}/transport-nodes", {"name": "gw1", "node_type": "gateway", "system_id": "gw1"}
    )  # fmt: skip
    prefix = uplink.rsplit(".", 1)[0]
    body = {"name": name, "type": "l3", "gateway_node_ids": [node["id"]],
            "uplink_ip": f"{uplink}/24", "uplink_next_hop": f"{prefix}.1"}  # fmt: skip
    return admin.create(f"{API}/gateway-services", body)


def test_a_floating_ip_follows_the_default_gateway_service(
    neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any], admin: ApiClient
) -> None:
    """An external network without provider attributes: the floating IP is associated
    whatever the deployment has, and translated by its default L3 service while it has
    one (the only L3 service, or the one marked default), as it comes and goes."""
    public = external_network(neutron, None)
    router, port = routed_port(neutron, net, subnet, public)
    body = {"floating_network_id": public["id"], "port_id": port["id"], "project_id": PROJECT}
    fip = neutron.create("floatingips", "floatingip", body)
    assert (fip["router_id"], fip["port_id"]) == (router["id"], port["id"])
    assert fip["fixed_ip_address"] == port["fixed_ips"][0]["ip_address"]
    assert fip["status"] == "DOWN"
    assert "the deployment has no default one" in fip[REASON]

    def native_router() -> dict[str, Any]:
        result: dict[str, Any] = admin.get(f"{API}/logical-routers/{router['id']}").get_json()
        return result

    assert native_router()["gateway_service_id"] is None
    # The only L3 service is the default: the router is on it, the floating IP translated.
    first = l3_service(admin, "first", "198.51.100.254")
    assert first["default"] is False
    assert native_router()["gateway_service_id"] == first["id"]
    assert (neutron.get("floatingips", fip["id"])["status"], neutron.get(
        "floatingips", fip["id"])[REASON]) == ("ACTIVE", None)  # fmt: skip
    # Two L3 services, none marked: no default, so nothing translates it.
    second = l3_service(admin, "second", "192.0.2.254")
    assert native_router()["gateway_service_id"] is None
    shown = neutron.get("floatingips", fip["id"])
    assert shown["status"] == "DOWN"
    assert "the deployment has no default one" in shown[REASON]
    # The one marked default serves it; one default at most.
    response = admin.patch(f"{API}/gateway-services/{second['id']}", {"default": True})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["default"] is True
    assert native_router()["gateway_service_id"] == second["id"]
    assert neutron.get("floatingips", fip["id"])["status"] == "ACTIVE"
    response = admin.patch(f"{API}/gateway-services/{first['id']}", {"default": True})
    assert response.status_code == 409, response.get_json()
    assert response.get_json()["field"] == "default"
    assert second["id"] in response.get_json()["message"]
    # The default in use cannot go; the other can, and the default stays.
    response = admin.delete(f"{API}/gateway-services/{second['id']}")
    assert response.status_code == 409, response.get_json()
    assert router["id"] in response.get_json()["message"]
    assert admin.delete(f"{API}/gateway-services/{first['id']}").status_code == 204
    assert native_router()["gateway_service_id"] == second["id"]
    # Without its gateway the router follows nothing, and the default can go.
    response = neutron.send(
        "PUT", f"{V2}/floatingips/{fip['id']}", {"floatingip": {"port_id": None}}
    )
    assert response.status_code == 200, response.get_json()
    update: dict[str, Any] = {"router": {"external_gateway_info": {}}}
    response = neutron.send("PUT", f"{V2}/routers/{router['id']}", update)
    assert response.status_code == 200, response.get_json()
    assert native_router()["gateway_service_id"] is None
    assert admin.delete(f"{API}/gateway-services/{second['id']}").status_code == 204


def test_a_router_given_a_service_natively_stops_following_the_default(
    neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any], admin: ApiClient
) -> None:
    """Left without a service (two L3 services, none marked), a router that follows the
    default still takes native changes; given a service through the native API, it keeps
    that one whatever the default becomes."""
    first = l3_service(admin, "first", "198.51.100.254")
    second = l3_service(admin, "second", "192.0.2.254")
    public = external_network(neutron, None)
    router, _ = routed_port(neutron, net, subnet, public)
    url = f"{API}/logical-routers/{router['id']}"
    assert admin.get(url).get_json()["gateway_service_id"] is None
    response = admin.patch(url, {"description": "edge"})  # (its SNAT rule waits for one)
    assert response.status_code == 200, response.get_json()
    response = admin.patch(url, {"gateway_service_id": second["id"]})
    assert response.status_code == 200, response.get_json()
    response = admin.patch(f"{API}/gateway-services/{first['id']}", {"default": True})
    assert response.status_code == 200, response.get_json()
    assert admin.get(url).get_json()["gateway_service_id"] == second["id"]


def test_a_router_gateway_on_the_default_service_snats(
    neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any], admin: ApiClient, store: Store
) -> None:
    """The router of an external network without provider attributes gets the default
    service when its gateway is set, so its SNAT rule translates (no warning for it)."""
    service = l3_service(admin, "only", "198.51.100.254")
    public = external_network(neutron, None)
    router, _ = routed_port(neutron, net, subnet, public)
    native = admin.get(f"{API}/logical-routers/{router['id']}").get_json()
    assert native["gateway_service_id"] == service["id"]
    rules = admin.get(f"{API}/logical-routers/{router['id']}/nat-rules").get_json()["items"]
    address = router["external_gateway_info"]["external_fixed_ips"][0]["ip_address"]
    assert [(r["type"], r["external_ip"], r["internal_ip"]) for r in rules] == [
        ("snat", address, "10.0.0.0/24")]  # fmt: skip


def test_the_uplinks_own_address_is_no_nat_address(
    neutron: Neutron,
    net: dict[str, Any],
    subnet: dict[str, Any],
    service: dict[str, Any],
    admin: ApiClient,
    store: Store,
) -> None:
    """The gateway service's uplink address (198.51.100.254) is the service's: a floating
    IP or a DNAT rule on it is refused (409: it would take the uplink's own packets for one
    host), no address is allocated there, and an SNAT rule may masquerade behind it."""
    public = external_network(neutron, service)
    router, port = routed_port(neutron, net, subnet, public)
    before = count(store, "NAT_Rule")
    body = {"floating_network_id": public["id"], "floating_ip_address": "198.51.100.254",
            "port_id": port["id"], "project_id": PROJECT}  # fmt: skip
    message = neutron_error(neutron.send("POST", f"{V2}/floatingips", {"floatingip": body}),
                            409, "IpAddressInUse")  # fmt: skip
    assert "198.51.100.254" in message
    assert count(store, "NAT_Rule") == before
    rules = f"{API}/logical-routers/{router['id']}/nat-rules"
    for kind, internal in (("dnat", "10.0.0.5"), ("floating-ip", "10.0.0.6")):
        response = admin.post(rules, {"type": kind, "external_ip": "198.51.100.254",
                                      "internal_ip": internal})  # fmt: skip
        assert response.status_code == 409, response.get_json()
        assert response.get_json()["field"] == "external_ip"
        assert "address of gateway service" in response.get_json()["message"]
    assert count(store, "NAT_Rule") == before
    snat = {"type": "snat", "external_ip": "198.51.100.254", "internal_ip": "10.1.0.0/24"}
    assert admin.post(rules, snat).status_code == 201
    # Automatic addresses skip it (and the next hop, .1) until none is left.
    given = set()
    for _ in range(254):
        response = neutron.send("POST", f"{V2}/floatingips",
                                {"floatingip": {"floating_network_id": public["id"]}})  # fmt: skip
        if response.status_code != 201:
            break
        given.add(response.get_json()["floatingip"]["floating_ip_address"])
    neutron_error(response, 409, "IpAddressGenerationFailure")
    assert "198.51.100.253" in given
    assert not given & {"198.51.100.254", "198.51.100.1"}


def test_a_floating_ip_is_active_only_while_something_translates_it(
    neutron: Neutron,
    net: dict[str, Any],
    subnet: dict[str, Any],
    service: dict[str, Any],
    store: Store,
) -> None:
    public = external_network(neutron, service)
    router, port = routed_port(neutron, net, subnet, public)
    body = {"floating_network_id": public["id"], "port_id": port["id"], "project_id": PROJECT}
    fip = neutron.create("floatingips", "floatingip", body)
    assert (fip["status"], fip[REASON], fip["router_id"]) == ("ACTIVE", None, router["id"])
    extensions = neutron.send("GET", f"{V2}/extensions").get_json()["extensions"]
    assert "loom-status-reason" in {e["alias"] for e in extensions}

    def warn(view: WriteView) -> None:
        view.insert("Warning", source=fip["id"], kind="nat", message="claimed twice")

    store.write(warn)  # what a logical controller reports about it
    shown = neutron.get("floatingips", fip["id"])
    assert (shown["status"], shown[REASON]) == ("DOWN", "claimed twice")
    listed = neutron.send("GET", f"{V2}/floatingips").get_json()["floatingips"]
    assert [(f["id"], f["status"], f[REASON]) for f in listed] == [
        (fip["id"], "DOWN", "claimed twice")
    ]

    def lose_the_service(view: WriteView) -> None:  # a configuration written past the API
        for row in list(view.rows("Warning")):
            view.delete(row)
        for row in view.rows("Logical_Router"):
            view.update(row, gateway_service=[])

    store.write(lose_the_service)
    shown = neutron.get("floatingips", fip["id"])
    assert shown["status"] == "DOWN"
    assert f"router {router['id']} has no L3 gateway service" in shown[REASON]


def test_a_floating_ip_address_another_router_translates_is_409(
    neutron: Neutron,
    net: dict[str, Any],
    subnet: dict[str, Any],
    service: dict[str, Any],
    admin: ApiClient,
    store: Store,
) -> None:
    public = external_network(neutron, service)
    _, port = routed_port(neutron, net, subnet, public)
    # A native router of another tenant on the same service DNATs an address of the network.
    other = admin.create(
        f"{API}/logical-routers", {"tenant": "other", "gateway_service_id": service["id"]}
    )
    taken = admin.create(
        f"{API}/logical-routers/{other['id']}/nat-rules",
        {"type": "dnat", "external_ip": "198.51.100.50", "internal_ip": "10.9.0.5"},
    )
    body = {
        "floating_network_id": public["id"],
        "floating_ip_address": "198.51.100.50",
        "port_id": port["id"],
        "project_id": PROJECT,
    }
    response = neutron.send("POST", f"{V2}/floatingips", {"floatingip": body})
    message = neutron_error(response, 409, "Conflict")
    assert taken["id"] in message
    assert other["id"] in message
    assert neutron.send("GET", f"{V2}/floatingips").get_json()["floatingips"] == []
    # ... and the native API refuses a DNAT of a Neutron floating IP's address.
    fip = neutron.create("floatingips", "floatingip", {**body, "floating_ip_address": None})
    response = admin.post(
        f"{API}/logical-routers/{other['id']}/nat-rules",
        {"type": "dnat", "external_ip": fip["floating_ip_address"], "internal_ip": "10.9.0.6"},
    )
    assert response.status_code == 409, response.get_json()
    assert fip["id"] in response.get_json()["message"]
    assert count(store, "NAT_Rule") == 3  # the DNAT, the Neutron router's SNAT, the floating IP


def test_a_router_gateway_on_an_address_another_router_translates_is_409(
    neutron: Neutron, subnet: dict[str, Any], service: dict[str, Any], admin: ApiClient
) -> None:
    public = external_network(neutron, service)
    other = admin.create(
        f"{API}/logical-routers", {"tenant": "other", "gateway_service_id": service["id"]}
    )
    taken = admin.create(
        f"{API}/logical-routers/{other['id']}/nat-rules",
        {"type": "snat", "external_ip": "198.51.100.2", "internal_ip": "10.9.0.0/24"},
    )
    router = neutron.create("routers", "router", {"project_id": PROJECT})
    response = neutron.send(
        "PUT", f"{V2}/routers/{router['id']}/add_router_interface", {"subnet_id": subnet["id"]}
    )
    assert response.status_code == 200
    # The gateway takes 198.51.100.2 (the network's first free address): its SNAT would too.
    gateway = {"network_id": public["id"]}
    response = neutron.send(
        "PUT", f"{V2}/routers/{router['id']}", {"router": {"external_gateway_info": gateway}}
    )
    assert taken["id"] in neutron_error(response, 409, "Conflict")
    assert neutron.get("routers", router["id"])["external_gateway_info"] is None


# ---- ports: fixed IPs and MACs no port can have -----------------------------------------


@pytest.mark.parametrize(
    ("address", "kind", "kind_in_subnet"),
    [
        ("10.0.0.0", "InvalidIpForSubnet", "InvalidIpForSubnet"),
        ("10.0.0.255", "InvalidIpForSubnet", "InvalidIpForSubnet"),
        ("10.1.0.5", "InvalidIpForNetwork", "InvalidIpForSubnet"),
        ("224.0.0.5", "HTTPBadRequest", "HTTPBadRequest"),
        ("127.0.0.1", "HTTPBadRequest", "HTTPBadRequest"),
        ("0.0.0.0", "HTTPBadRequest", "HTTPBadRequest"),
        ("255.255.255.255", "HTTPBadRequest", "HTTPBadRequest"),
        ("fe80::1%eth0", "HTTPBadRequest", "HTTPBadRequest"),
    ],
)
def test_fixed_ips_no_port_can_have_are_refused(
    neutron: Neutron,
    net: dict[str, Any],
    subnet: dict[str, Any],
    store: Store,
    address: str,
    kind: str,
    kind_in_subnet: str,
) -> None:
    """Without a subnet_id (any subnet of the network), and with one (that subnet)."""
    before = count(store, "Logical_Switch_Port")
    body = {"network_id": net["id"], "fixed_ips": [{"ip_address": address}]}
    neutron_error(neutron.send("POST", f"{V2}/ports", {"port": body}), 400, kind)
    with_subnet = {"network_id": net["id"],
                   "fixed_ips": [{"subnet_id": subnet["id"], "ip_address": address}]}  # fmt: skip
    neutron_error(neutron.send("POST", f"{V2}/ports", {"port": with_subnet}), 400, kind_in_subnet)
    assert count(store, "Logical_Switch_Port") == before


def test_a_port_update_to_a_reserved_address_is_refused(
    neutron: Neutron, net: dict[str, Any], subnet: dict[str, Any]
) -> None:
    port = neutron.create("ports", "port", {"network_id": net["id"]})
    url = f"{V2}/ports/{port['id']}"
    body = {"port": {"fixed_ips": [{"ip_address": "10.0.0.255"}]}}
    neutron_error(neutron.send("PUT", url, body), 400, "InvalidIpForSubnet")
    assert neutron.get("ports", port["id"])["fixed_ips"] == port["fixed_ips"]


@pytest.mark.parametrize("mac", ["00:00:00:00:00:00", "01:00:5e:00:00:01", "ff:ff:ff:ff:ff:ff"])
def test_the_zero_mac_and_multicast_macs_are_refused(
    neutron: Neutron, net: dict[str, Any], store: Store, mac: str
) -> None:
    body = {"network_id": net["id"], "mac_address": mac}
    neutron_error(neutron.send("POST", f"{V2}/ports", {"port": body}), 400, "HTTPBadRequest")
    assert count(store, "Logical_Switch_Port") == 0


def test_a_floating_ip_address_that_is_reserved_is_refused(
    neutron: Neutron, service: dict[str, Any], store: Store
) -> None:
    public = external_network(neutron, service)
    body = {"floating_network_id": public["id"], "floating_ip_address": "198.51.100.255"}
    response = neutron.send("POST", f"{V2}/floatingips", {"floatingip": body})
    neutron_error(response, 400, "InvalidIpForSubnet")
    assert count(store, "NAT_Rule") == 0


# ---- subnets and routes ------------------------------------------------------------------


def test_a_subnet_that_leaves_native_ports_outside_is_409(
    neutron: Neutron, net: dict[str, Any], admin: ApiClient, store: Store
) -> None:
    port = admin.create(f"{API}/logical-switches/{net['id']}/ports", {"ips": ["10.1.0.5"]})
    body = {"network_id": net["id"], "ip_version": 4, "cidr": "10.0.0.0/24"}
    message = neutron_error(
        neutron.send("POST", f"{V2}/subnets", {"subnet": body}), 409, "Conflict"
    )
    assert port["id"] in message
    assert count(store, "Subnet") == 0
    # An overlap is still Neutron's 400.
    neutron.create("subnets", "subnet", {**body, "cidr": "10.1.0.0/24"})
    response = neutron.send("POST", f"{V2}/subnets", {"subnet": {**body, "cidr": "10.1.0.0/16"}})
    assert "overlaps" in neutron_error(response, 400, "InvalidInput")


@pytest.mark.parametrize(
    "changes",
    [
        {"cidr": "fe80::%eth0/64", "ip_version": 6},
        {"cidr": "224.0.0.0/24"},
        {"host_routes": [{"destination": "10.9.0.0/16", "nexthop": "fe80::1%eth0"}]},
        {
            "host_routes": [
                {"destination": f"10.{i}.0.0/16", "nexthop": "10.0.0.9"} for i in range(21)
            ]
        },
        {"dns_nameservers": [f"192.0.2.{i}" for i in range(1, 7)]},
        {"allocation_pools": [{"start": "10.0.0.2", "end": "10.0.0.3"}] * 65},
        {"name": "s\x1b[2J"},
        {"description": "d" * 256},
    ],
)
def test_bad_subnets_are_400(
    neutron: Neutron, net: dict[str, Any], store: Store, changes: dict[str, Any]
) -> None:
    body = {"network_id": net["id"], "ip_version": 4, "cidr": "10.0.0.0/24", **changes}
    neutron_error(neutron.send("POST", f"{V2}/subnets", {"subnet": body}), 400, "HTTPBadRequest")
    assert count(store, "Subnet") == 0


def test_bad_router_routes_are_400(neutron: Neutron, subnet: dict[str, Any], store: Store) -> None:
    router = neutron.create("routers", "router", {"project_id": PROJECT})
    url = f"{V2}/routers/{router['id']}"
    neutron.send("PUT", f"{url}/add_router_interface", {"subnet_id": subnet["id"]})
    for routes, words in (
        ([{"destination": "fe80::%eth0/64", "nexthop": "10.0.0.9"}], "zone index"),
        ([{"destination": "2001:db8::/64", "nexthop": "10.0.0.9"}], "IP version"),
        ([{"destination": f"10.{i}.0.0/16", "nexthop": "10.0.0.9"} for i in range(31)], "30"),
    ):
        response = neutron.send("PUT", url, {"router": {"routes": routes}})
        assert words in neutron_error(response, 400, "HTTPBadRequest")
    assert count(store, "Static_Route") == 0
    neutron.send("PUT", url, {"router": {"routes": [{"destination": "10.9.0.0/16",
                                                     "nexthop": "10.0.0.9"}]}})  # fmt: skip
    assert count(store, "Static_Route") == 1


# ---- names, descriptions, tags, lists ---------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "n\x1b[31m"},
        {"name": "n\x9b1m"},
        {"name": "n" * 256},
        {"description": "bell\x07"},
        {"description": "d" * 256},
        {"tags": ["t" * 61]},
        {"tags": ["a\x7f"]},
        {"tags": [f"t{i}" for i in range(65)]},
        {"device_owner": "compute:\x1b"},
        {"fixed_ips": [{"ip_address": f"10.0.0.{i}"} for i in range(2, 19)]},
        {"security_groups": [f"00000000-0000-0000-0000-{i:012d}" for i in range(33)]},
        {"binding:profile": {"k": "v" * 5000}},
    ],
)
def test_bad_port_attributes_are_400(
    neutron: Neutron,
    net: dict[str, Any],
    subnet: dict[str, Any],
    store: Store,
    changes: dict[str, Any],
) -> None:
    body = {"network_id": net["id"], **changes}
    neutron_error(neutron.send("POST", f"{V2}/ports", {"port": body}), 400, "HTTPBadRequest")
    assert count(store, "Logical_Switch_Port") == 0


def test_descriptions_keep_line_breaks_and_limits_hold_at_their_edge(
    neutron: Neutron, net: dict[str, Any]
) -> None:
    port = neutron.create(
        "ports",
        "port",
        {
            "network_id": net["id"],
            "name": "n" * 255,
            "description": "line one\nline two",
            "tags": ["t" * 60],
        },
    )
    assert (port["description"], port["tags"]) == ("line one\nline two", ["t" * 60])


def test_the_tag_routes_hold_the_same_limits(neutron: Neutron, net: dict[str, Any]) -> None:
    url = f"{V2}/networks/{net['id']}/tags"
    neutron_error(neutron.send("PUT", f"{url}/{'t' * 61}"), 400, "HTTPBadRequest")
    neutron_error(neutron.send("PUT", f"{url}/bad%1B%5B2J"), 400, "HTTPBadRequest")
    many = {"tags": [f"t{i}" for i in range(65)]}
    neutron_error(neutron.send("PUT", url, many), 400, "HTTPBadRequest")
    full = {"tags": [f"t{i}" for i in range(64)]}
    assert neutron.send("PUT", url, full).status_code == 200
    neutron_error(neutron.send("PUT", f"{url}/one-more"), 400, "HTTPBadRequest")
    assert len(neutron.get("networks", net["id"])["tags"]) == 64


@pytest.mark.parametrize(
    ("collection", "member", "changes"),
    [
        ("networks", "network", {"name": "n\x1b[31m"}),
        ("routers", "router", {"description": "d\x1b"}),
        ("security-groups", "security_group", {"name": "g\x85"}),
    ],
)
def test_control_characters_are_refused_everywhere(
    neutron: Neutron, store: Store, collection: str, member: str, changes: dict[str, Any]
) -> None:
    before = {t: count(store, t) for t in ("Logical_Switch", "Logical_Router")}
    body = {"project_id": PROJECT, **changes}
    response = neutron.send("POST", f"{V2}/{collection}", {member: body})
    assert "control character" in neutron_error(response, 400, "HTTPBadRequest")
    assert {t: count(store, t) for t in before} == before


@pytest.mark.parametrize(
    ("collection", "member", "field", "char"),
    [
        ("networks", "network", "name", "\u202e"),
        ("networks", "network", "description", "\u2067"),
        ("routers", "router", "name", "\u202a"),
        ("security-groups", "security_group", "name", "\u2069"),
        ("networks", "network", "name", "\u200f"),  # a mark: invisible in a name
    ],
)
def test_bidi_formatting_characters_are_refused_over_http(
    live_api: str, store: Store, collection: str, member: str, field: str, char: str
) -> None:
    before = {t: count(store, t) for t in ("Logical_Switch", "Logical_Router")}
    body = {member: {"project_id": PROJECT, field: f"admin{char}nimda"}}
    conn = http.client.HTTPConnection("127.0.0.1", int(live_api.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.request("POST", f"{V2}/{collection}", json.dumps(body),
                     {"Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        answer = json.loads(response.read())
    finally:
        conn.close()
    assert response.status == 400, answer
    assert answer["NeutronError"]["type"] == "HTTPBadRequest", answer
    message = answer["NeutronError"]["message"]
    assert field in message, message
    assert f"bidirectional formatting character U+{ord(char):04X}" in message, message
    assert {t: count(store, t) for t in before} == before


# ---- sort_key / sort_dir ---------------------------------------------------------------------


def get_over_http(live_api: str, path: str) -> tuple[int, Any]:
    """GET `path` from the live server (noauth); return (status, JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(live_api.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_sort_keys_and_directions_are_validated_on_every_collection(live_api: str) -> None:
    from loom_api import neutron as neutron_api

    pairs = "The number of sort_keys and sort_dirs must be same"
    refused = [
        ("sort_key=nonexistent&sort_dir=asc", "['nonexistent'] is invalid attribute for sort_keys"),
        ("sort_key=tags&sort_dir=asc", "['tags'] is invalid attribute for sort_keys"),
        ("sort_key=id", pairs),
        ("sort_dir=desc", pairs),
        ("sort_key=id&sort_dir=asc&sort_key=id", pairs),
        ("sort_key=id&sort_dir=up",
         "['up'] is invalid value for sort_dirs, valid value is 'asc' and 'desc'"),
        ("sort_key=id&sort_dir=ASC", "['ASC'] is invalid value for sort_dirs"),
    ]  # fmt: skip
    for path, res in neutron_api.RESOURCES.items():
        for query, message in refused:
            status, body = get_over_http(live_api, f"{V2}/{path}?{query}")
            assert status == 400, (path, query, body)
            assert body["NeutronError"]["type"] == "HTTPBadRequest", body
            assert body["NeutronError"]["message"].startswith(message), (path, query, body)
        status, body = get_over_http(live_api, f"{V2}/{path}?sort_key=id&sort_dir=desc")
        assert (status, body) == (200, {res.collection: []}), (path, body)


def test_sorting_by_several_keys_is_applied_and_pages_follow_it(
    live_api: str, neutron: Neutron
) -> None:
    made = [("b", 9000, True), ("a", 1500, False), ("b", 900, False), ("a", 1000, True),
            ("c", 1500, True), ("a", 9000, False)]  # fmt: skip
    for name, mtu, up in made:
        neutron.create("networks", "network", {"name": name, "mtu": mtu, "admin_state_up": up})

    def order(query: str) -> list[tuple[str, int, bool]]:
        status, body = get_over_http(live_api, f"{V2}/networks?{query}")
        assert status == 200, body
        return [(n["name"], n["mtu"], n["admin_state_up"]) for n in body["networks"]]

    # By number, not by text ("900" after "1500" as text).
    assert [mtu for _, mtu, _ in order("sort_key=mtu&sort_dir=asc")] == [
        900, 1000, 1500, 1500, 9000, 9000]  # fmt: skip
    by_name_then_mtu = sorted(made, key=lambda n: (n[0], -n[1]))
    assert order("sort_key=name&sort_dir=asc&sort_key=mtu&sort_dir=desc") == by_name_then_mtu
    by_up_then_name = sorted(made, key=lambda n: (not n[2], n[0], n[1]))
    query = (
        "sort_key=admin_state_up&sort_dir=desc&sort_key=name&sort_dir=asc&sort_key=mtu&sort_dir=asc"
    )
    assert order(query) == by_up_then_name
    # Pages follow the order: each next link's marker continues where the page ended.
    seen: list[tuple[str, int, bool]] = []
    path = f"{V2}/networks?{query}&limit=4"
    while path:
        status, body = get_over_http(live_api, path)
        assert status == 200, body
        seen += [(n["name"], n["mtu"], n["admin_state_up"]) for n in body["networks"]]
        links = body.get("networks_links", [])
        path = links[0]["href"].split(live_api, 1)[1] if links else ""
    assert seen == by_up_then_name


@pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")
def test_sorting_through_openstacksdk(live_api: str) -> None:
    import openstack
    from openstack import exceptions as sdk_exceptions

    conn = openstack.connect(auth_type="none", network_endpoint_override=live_api)
    try:
        for name in ("m", "z", "a"):
            conn.network.create_network(name=name, project_id=PROJECT)
        names = [n.name for n in conn.network.networks(sort_key="name", sort_dir="desc")]
        assert names == ["z", "m", "a"]
        with pytest.raises(sdk_exceptions.BadRequestException, match="invalid attribute"):
            list(conn.network.networks(sort_key="nonexistent", sort_dir="asc"))
    finally:
        conn.close()
