"""The Neutron v2.0 API end to end with the real client, openstacksdk, under `noauth`.

`openstack.connect(auth_type="none", network_endpoint_override=URL)` against the app served
by waitress (`live_api`), built with `LOOM_NEUTRON_AUTH=noauth`: every resource type is
created, listed (with the filters openstacksdk sends), updated and deleted, and what the
SDK writes is read back through the native API (one store: the same ids, the same rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import openstack
import pytest
import requests
from flask import Flask
from openstack import exceptions

from loom_api import create_app
from loom_api.store import Store

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = [
    pytest.mark.ovs,
    # openstacksdk 4.x warns about its own internals (InfluxDB support on every connect(),
    # `_compute_attributes` it still calls itself); nothing this project calls.
    pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning"),
]

API = "/api/v1"
PROJECT = "p-sdk"


@pytest.fixture
def app(app: Flask, store: Store) -> Flask:
    """The API app with Neutron's `noauth` strategy (the native API keeps its tokens)."""
    return create_app(store, app.extensions["loom.tokens"], {"LOOM_NEUTRON_AUTH": "noauth"})


@pytest.fixture
def conn(live_api: str) -> Iterator[Any]:
    connection = openstack.connect(auth_type="none", network_endpoint_override=live_api)
    yield connection
    connection.close()


@pytest.fixture
def net(conn: Any) -> Any:
    return conn.network.create_network(name="net1", project_id=PROJECT)


@pytest.fixture
def subnet(conn: Any, net: Any) -> Any:
    return conn.network.create_subnet(
        name="sub1", network_id=net.id, ip_version=4, cidr="10.0.0.0/24"
    )


@pytest.fixture
def external(conn: Any) -> tuple[Any, Any]:
    """An external network (admin-owned) with one subnet."""
    network = conn.network.create_network(name="public", is_router_external=True)
    sub = conn.network.create_subnet(
        name="public-v4", network_id=network.id, ip_version=4, cidr="198.51.100.0/24"
    )
    return network, sub


@pytest.fixture
def l3_external(conn: Any, admin: ApiClient) -> tuple[Any, dict[str, Any]]:
    """An `l3_ext` external network: its L3 gateway service (on one gateway node) does NAT."""
    node = admin.create(
        f"{API}/transport-nodes", {"name": "gw1", "node_type": "gateway", "system_id": "gw1"}
    )
    service = admin.create(
        f"{API}/gateway-services",
        {
            "name": "uplink",
            "type": "l3",
            "gateway_node_ids": [node["id"]],
            "uplink_ip": "198.51.100.254/24",
            "uplink_next_hop": "198.51.100.1",
        },
    )
    network = conn.network.create_network(
        name="public",
        is_router_external=True,
        provider_network_type="l3_ext",
        provider_physical_network=service["id"],
    )
    conn.network.create_subnet(
        name="public-v4", network_id=network.id, ip_version=4, cidr="198.51.100.0/24"
    )
    return network, service


def native(admin: ApiClient, path: str) -> dict[str, Any]:
    response = admin.get(f"{API}{path}")
    assert response.status_code == 200, response.get_json()
    result: dict[str, Any] = response.get_json()
    return result


def test_versions_document(live_api: str) -> None:
    body = requests.get(f"{live_api}/", timeout=10).json()
    assert body["versions"][0]["id"] == "v2.0"
    assert body["versions"][0]["status"] == "CURRENT"
    assert body["versions"][0]["links"][0]["href"] == f"{live_api}/v2.0/"


def test_network_lifecycle(conn: Any, admin: ApiClient) -> None:
    net = conn.network.create_network(name="web", description="front", project_id=PROJECT, mtu=1400)
    assert (net.name, net.description, net.project_id, net.mtu) == ("web", "front", PROJECT, 1400)
    assert net.is_admin_state_up
    assert net.status == "ACTIVE"
    assert not net.is_router_external
    assert not net.is_shared
    assert net.revision_number == 1

    switch = native(admin, f"/logical-switches/{net.id}")
    assert (switch["name"], switch["tenant"], switch["description"]) == ("web", PROJECT, "front")
    assert switch["tunnel_key"] >= 1

    conn.network.create_network(name="db", project_id=PROJECT)
    assert sorted(n.name for n in conn.network.networks()) == ["db", "web"]
    assert [n.id for n in conn.network.networks(name="web")] == [net.id]
    assert [n.name for n in conn.network.networks(project_id=PROJECT, name="db")] == ["db"]
    assert conn.network.find_network("web").id == net.id

    updated = conn.network.update_network(
        net, name="web2", is_admin_state_up=False, is_port_security_enabled=False
    )
    assert (updated.name, updated.is_admin_state_up) == ("web2", False)
    assert updated.is_port_security_enabled is False
    assert updated.revision_number == 2
    assert native(admin, f"/logical-switches/{net.id}")["admin_state_up"] is False

    conn.network.delete_network(net, ignore_missing=False)
    with pytest.raises(exceptions.NotFoundException):
        conn.network.get_network(net.id)
    assert admin.get(f"{API}/logical-switches/{net.id}").status_code == 404


def test_network_tags(conn: Any, net: Any) -> None:
    conn.network.set_tags(net, ["blue", "prod"])
    assert sorted(conn.network.get_network(net.id).tags) == ["blue", "prod"]
    assert [n.id for n in conn.network.networks(tags="blue")] == [net.id]
    assert list(conn.network.networks(tags="green")) == []


def test_subnet_lifecycle(conn: Any, net: Any, admin: ApiClient) -> None:
    sub = conn.network.create_subnet(
        name="s", network_id=net.id, ip_version=4, cidr="10.1.0.0/24", dns_nameservers=["9.9.9.9"]
    )
    assert sub.gateway_ip == "10.1.0.1"
    assert sub.allocation_pools == [{"start": "10.1.0.2", "end": "10.1.0.254"}]
    assert sub.project_id == PROJECT
    assert sub.is_dhcp_enabled
    assert conn.network.get_network(net.id).subnet_ids == [sub.id]
    assert native(admin, f"/logical-switches/{net.id}/subnets/{sub.id}")["cidr"] == "10.1.0.0/24"

    pooled = conn.network.create_subnet(
        network_id=net.id,
        ip_version=4,
        cidr="10.2.0.0/24",
        gateway_ip=None,
        allocation_pools=[{"start": "10.2.0.100", "end": "10.2.0.110"}],
    )
    assert pooled.gateway_ip is None
    assert pooled.allocation_pools == [{"start": "10.2.0.100", "end": "10.2.0.110"}]
    assert {s.id for s in conn.network.subnets(network_id=net.id)} == {sub.id, pooled.id}
    assert [s.id for s in conn.network.subnets(cidr="10.2.0.0/24")] == [pooled.id]

    updated = conn.network.update_subnet(sub, name="s2", dns_nameservers=["1.1.1.1"])
    assert (updated.name, updated.dns_nameservers) == ("s2", ["1.1.1.1"])
    with pytest.raises(exceptions.BadRequestException):
        conn.network.update_subnet(sub, cidr="10.9.0.0/24")

    with pytest.raises(exceptions.BadRequestException, match="overlaps"):
        conn.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.1.0.128/25")
    with pytest.raises(exceptions.BadRequestException):
        conn.network.create_subnet(network_id=net.id, ip_version=6, cidr="10.3.0.0/24")

    conn.network.delete_subnet(sub, ignore_missing=False)
    assert [s.id for s in conn.network.subnets(network_id=net.id)] == [pooled.id]


def test_port_addresses_and_mac(conn: Any, net: Any, subnet: Any, admin: ApiClient) -> None:
    first = conn.network.create_port(network_id=net.id, name="vm1")
    assert first.fixed_ips == [{"subnet_id": subnet.id, "ip_address": "10.0.0.2"}]
    assert first.mac_address.startswith("02:")
    assert first.project_id == PROJECT
    assert first.status == "DOWN"

    chosen = conn.network.create_port(
        network_id=net.id,
        fixed_ips=[{"ip_address": "10.0.0.50"}],
        mac_address="fa:16:3e:00:00:01",
    )
    assert chosen.fixed_ips == [{"subnet_id": subnet.id, "ip_address": "10.0.0.50"}]
    assert chosen.mac_address == "fa:16:3e:00:00:01"
    by_subnet = conn.network.create_port(network_id=net.id, fixed_ips=[{"subnet_id": subnet.id}])
    assert by_subnet.fixed_ips[0]["ip_address"] == "10.0.0.3"

    with pytest.raises(exceptions.ConflictException, match=r"10\.0\.0\.50"):
        conn.network.create_port(network_id=net.id, fixed_ips=[{"ip_address": "10.0.0.50"}])
    with pytest.raises(exceptions.ConflictException, match="mac address"):
        conn.network.create_port(network_id=net.id, mac_address="fa:16:3e:00:00:01")
    with pytest.raises(exceptions.BadRequestException):
        conn.network.create_port(network_id=net.id, fixed_ips=[{"ip_address": "192.0.2.1"}])

    port = native(admin, f"/logical-switches/{net.id}/ports/{first.id}")
    assert port["ips"] == ["10.0.0.2"]
    assert port["attachment"] == {"type": "vif", "vif_id": first.id}
    assert port["mac"] == first.mac_address

    moved = conn.network.update_port(chosen, fixed_ips=[{"ip_address": "10.0.0.60"}])
    assert moved.fixed_ips == [{"subnet_id": subnet.id, "ip_address": "10.0.0.60"}]
    again = conn.network.create_port(network_id=net.id, fixed_ips=[{"ip_address": "10.0.0.50"}])
    assert again.fixed_ips[0]["ip_address"] == "10.0.0.50"

    listed = conn.network.ports(network_id=net.id, fixed_ips="ip_address=10.0.0.60")
    assert [p.id for p in listed] == [chosen.id]

    conn.network.delete_port(first, ignore_missing=False)
    assert admin.get(f"{API}/logical-switches/{net.id}/ports/{first.id}").status_code == 404


def test_port_binding_device_and_security(conn: Any, net: Any, subnet: Any) -> None:
    port = conn.network.create_port(
        network_id=net.id,
        device_id="vm-1",
        device_owner="compute:nova",
        binding_host_id="hv1",
        binding_profile={"a": "b"},
    )
    assert (port.device_id, port.device_owner, port.binding_host_id) == (
        "vm-1",
        "compute:nova",
        "hv1",
    )
    assert port.binding_profile == {"a": "b"}
    assert port.binding_vif_type == "ovs"
    default = conn.network.find_security_group("default", project_id=PROJECT)
    assert port.security_group_ids == [default.id]
    assert port.is_port_security_enabled

    assert [p.id for p in conn.network.ports(device_id="vm-1")] == [port.id]
    assert [p.id for p in conn.network.ports(binding_host_id="hv1")] == [port.id]

    moved = conn.network.update_port(port, binding_host_id="hv2")
    assert moved.binding_host_id == "hv2"
    with pytest.raises(exceptions.ConflictException):
        conn.network.update_port(port, is_port_security_enabled=False)
    open_port = conn.network.update_port(
        port, is_port_security_enabled=False, security_group_ids=[]
    )
    assert open_port.security_group_ids == []
    assert not open_port.is_port_security_enabled

    bare = conn.network.create_port(
        network_id=net.id, is_port_security_enabled=False, security_group_ids=[]
    )
    assert bare.security_group_ids == []
    with pytest.raises(exceptions.BadRequestException):
        conn.network.create_port(
            network_id=net.id, is_port_security_enabled=False, security_group_ids=[default.id]
        )


def test_default_security_group(conn: Any, net: Any, admin: ApiClient) -> None:
    groups = list(conn.network.security_groups(project_id=PROJECT))
    assert [g.name for g in groups] == ["default"]
    default = groups[0]
    rules = {
        (r["direction"], r["ethertype"], r["remote_group_id"]) for r in default.security_group_rules
    }
    assert rules == {
        ("egress", "IPv4", None),
        ("egress", "IPv6", None),
        ("ingress", "IPv4", default.id),
        ("ingress", "IPv6", default.id),
    }
    profile = native(admin, f"/security-profiles/{default.id}")
    assert profile["tenant"] == PROJECT
    assert len(profile["rules"]) == 4

    # Listing for a project that never used the API creates its default group, once.
    fresh = list(conn.network.security_groups(project_id="p-new"))
    assert [g.name for g in fresh] == ["default"]
    assert len(list(conn.network.security_groups(project_id="p-new"))) == 1


def test_security_group_and_rules(conn: Any, net: Any, subnet: Any, admin: ApiClient) -> None:
    group = conn.network.create_security_group(name="web", description="w", project_id=PROJECT)
    assert {(r["direction"], r["ethertype"]) for r in group.security_group_rules} == {
        ("egress", "IPv4"),
        ("egress", "IPv6"),
    }
    ssh = conn.network.create_security_group_rule(
        security_group_id=group.id,
        direction="ingress",
        ether_type="IPv4",
        protocol="tcp",
        port_range_min=22,
        port_range_max=22,
        remote_ip_prefix="192.0.2.0/24",
    )
    assert (ssh.protocol, ssh.port_range_min, ssh.remote_ip_prefix) == ("tcp", 22, "192.0.2.0/24")
    assert ssh.project_id == PROJECT
    icmp = conn.network.create_security_group_rule(
        security_group_id=group.id, direction="ingress", protocol="icmp"
    )
    with pytest.raises(exceptions.ConflictException, match="already exists"):
        conn.network.create_security_group_rule(
            security_group_id=group.id, direction="ingress", protocol="icmp"
        )
    listed = {r.id for r in conn.network.security_group_rules(security_group_id=group.id)}
    assert {ssh.id, icmp.id} <= listed
    assert len(listed) == 4
    rules = native(admin, f"/security-profiles/{group.id}")["rules"]
    assert {"protocol": "tcp", "port_range_min": 22, "port_range_max": 22}.items() <= next(
        r for r in rules if r["protocol"] == "tcp"
    ).items()

    renamed = conn.network.update_security_group(group, name="web2")
    assert renamed.name == "web2"

    conn.network.delete_security_group_rule(icmp, ignore_missing=False)
    assert icmp.id not in {r.id for r in conn.network.security_group_rules()}
    with pytest.raises(exceptions.NotFoundException):
        conn.network.get_security_group_rule(icmp.id)

    port = conn.network.create_port(network_id=net.id, security_group_ids=[group.id])
    assert port.security_group_ids == [group.id]
    with pytest.raises(exceptions.ConflictException, match="in use"):
        conn.network.delete_security_group(group)
    conn.network.delete_port(port)
    conn.network.delete_security_group(group, ignore_missing=False)
    assert admin.get(f"{API}/security-profiles/{group.id}").status_code == 404


def test_router_gateway_interfaces_and_routes(
    conn: Any, net: Any, subnet: Any, external: tuple[Any, Any], admin: ApiClient
) -> None:
    public, public_v4 = external
    router = conn.network.create_router(
        name="r1", project_id=PROJECT, external_gateway_info={"network_id": public.id}
    )
    gateway = router.external_gateway_info
    assert gateway["network_id"] == public.id
    assert gateway["enable_snat"] is True
    assert gateway["external_fixed_ips"] == [
        {"subnet_id": public_v4.id, "ip_address": "198.51.100.2"}
    ]
    gateway_ports = list(conn.network.ports(device_id=router.id))
    assert [p.device_owner for p in gateway_ports] == ["network:router_gateway"]
    assert gateway_ports[0].network_id == public.id

    info = conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    assert info["subnet_id"] == subnet.id
    assert info["network_id"] == net.id
    interface = conn.network.get_port(info["port_id"])
    assert interface.device_owner == "network:router_interface"
    assert interface.device_id == router.id
    assert interface.fixed_ips == [{"subnet_id": subnet.id, "ip_address": "10.0.0.1"}]

    router_ports = native(admin, f"/logical-routers/{router.id}/ports")["items"]
    assert sorted(p["ip_prefix"] for p in router_ports) == ["10.0.0.1/24", "198.51.100.2/24"]
    nat = native(admin, f"/logical-routers/{router.id}/nat-rules")["items"]
    assert [(n["type"], n["external_ip"], n["internal_ip"]) for n in nat] == [
        ("snat", "198.51.100.2", "10.0.0.0/24")
    ]

    # A second interface through an existing port.
    other = conn.network.create_network(name="net2", project_id=PROJECT)
    other_v4 = conn.network.create_subnet(network_id=other.id, ip_version=4, cidr="10.5.0.0/24")
    port = conn.network.create_port(network_id=other.id, fixed_ips=[{"ip_address": "10.5.0.9"}])
    info = conn.network.add_interface_to_router(router, port_id=port.id)
    assert (info["port_id"], info["subnet_id"]) == (port.id, other_v4.id)
    assert conn.network.get_port(port.id).device_owner == "network:router_interface"
    with pytest.raises(exceptions.BadRequestException):
        conn.network.add_interface_to_router(router, subnet_id=subnet.id)  # already there
    with pytest.raises(exceptions.ConflictException):
        conn.network.delete_port(port)  # a router's port

    routed = conn.network.update_router(
        router, routes=[{"destination": "172.16.0.0/16", "nexthop": "10.0.0.254"}]
    )
    assert routed.routes == [{"destination": "172.16.0.0/16", "nexthop": "10.0.0.254"}]
    assert native(admin, f"/logical-routers/{router.id}/routes")["items"][0]["prefix"] == (
        "172.16.0.0/16"
    )
    with pytest.raises(exceptions.BadRequestException, match="not connected"):
        conn.network.update_router(
            router, routes=[{"destination": "172.17.0.0/16", "nexthop": "192.0.2.1"}]
        )
    conn.network.update_router(router, routes=[])

    no_snat = conn.network.update_router(
        router, external_gateway_info={"network_id": public.id, "enable_snat": False}
    )
    assert no_snat.external_gateway_info["enable_snat"] is False
    assert native(admin, f"/logical-routers/{router.id}/nat-rules")["items"] == []

    with pytest.raises(exceptions.ConflictException):
        conn.network.delete_router(router)  # interfaces remain
    conn.network.remove_interface_from_router(router, port_id=port.id)
    conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    with pytest.raises(exceptions.NotFoundException):
        conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    assert [p.device_owner for p in conn.network.ports(device_id=router.id)] == [
        "network:router_gateway"
    ]
    assert (
        conn.network.update_router(router, external_gateway_info=None).external_gateway_info is None
    )
    assert list(conn.network.ports(device_id=router.id)) == []

    conn.network.delete_router(router, ignore_missing=False)
    assert admin.get(f"{API}/logical-routers/{router.id}").status_code == 404
    conn.network.delete_network(public)  # nothing of the router is left on it


def test_floating_ip_lifecycle(
    conn: Any, net: Any, subnet: Any, l3_external: tuple[Any, dict[str, Any]], admin: ApiClient
) -> None:
    public, service = l3_external
    router = conn.network.create_router(
        project_id=PROJECT, external_gateway_info={"network_id": public.id}
    )
    conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    port = conn.network.create_port(network_id=net.id)

    assert native(admin, f"/logical-routers/{router.id}")["gateway_service_id"] == service["id"]
    fip = conn.network.create_ip(floating_network_id=public.id, project_id=PROJECT)
    assert fip.floating_ip_address == "198.51.100.3"  # .2 is the router's gateway
    assert (fip.status, fip.router_id, fip.port_id) == ("DOWN", None, None)

    associated = conn.network.update_ip(fip, port_id=port.id)
    assert associated.fixed_ip_address == port.fixed_ips[0]["ip_address"]
    assert (associated.router_id, associated.status) == (router.id, "ACTIVE")
    nat = native(admin, f"/logical-routers/{router.id}/nat-rules")["items"]
    floating = next(n for n in nat if n["type"] == "floating-ip")
    assert floating["id"] == fip.id
    assert floating["logical_port_id"] == port.id

    assert [f.id for f in conn.network.ips(port_id=port.id)] == [fip.id]
    assert [f.id for f in conn.network.ips(floating_ip_address="198.51.100.3")] == [fip.id]
    with pytest.raises(exceptions.ConflictException):
        conn.network.remove_interface_from_router(router, subnet_id=subnet.id)
    with pytest.raises(exceptions.ConflictException):
        conn.network.update_router(router, external_gateway_info=None)

    with pytest.raises(exceptions.ConflictException, match="already has a floating IP"):
        conn.network.create_ip(floating_network_id=public.id, project_id=PROJECT, port_id=port.id)
    other_port = conn.network.create_port(network_id=net.id)
    second = conn.network.create_ip(
        floating_network_id=public.id, project_id=PROJECT, port_id=other_port.id
    )
    assert (second.port_id, second.router_id, second.status) == (other_port.id, router.id, "ACTIVE")
    conn.network.delete_ip(second)

    disassociated = conn.network.update_ip(fip, port_id=None)
    assert (disassociated.port_id, disassociated.router_id, disassociated.status) == (
        None,
        None,
        "DOWN",
    )
    conn.network.update_ip(fip, port_id=port.id)
    conn.network.delete_port(port)  # disassociates, as Neutron does
    assert conn.network.get_ip(fip.id).port_id is None

    conn.network.delete_ip(fip, ignore_missing=False)
    with pytest.raises(exceptions.NotFoundException):
        conn.network.get_ip(fip.id)


def test_native_objects_are_visible_through_neutron(conn: Any, admin: ApiClient) -> None:
    switch = admin.create(f"{API}/logical-switches", {"name": "native-ls", "tenant": PROJECT})
    port = admin.create(
        f"{API}/logical-switches/{switch['id']}/ports", {"ips": ["10.7.0.5"], "name": "np"}
    )
    router = admin.create(f"{API}/logical-routers", {"name": "native-lr", "tenant": PROJECT})
    profile = admin.create(f"{API}/security-profiles", {"name": "native-sp", "tenant": PROJECT})

    network = conn.network.get_network(switch["id"])
    assert (network.name, network.project_id, network.mtu) == ("native-ls", PROJECT, 1442)
    neutron_port = conn.network.get_port(port["id"])
    assert neutron_port.fixed_ips == [{"subnet_id": None, "ip_address": "10.7.0.5"}]
    assert neutron_port.mac_address == port["mac"]
    assert conn.network.get_router(router["id"]).name == "native-lr"
    assert conn.network.get_security_group(profile["id"]).name == "native-sp"
    with pytest.raises(exceptions.ConflictException):
        conn.network.delete_network(network)  # its port is still there
