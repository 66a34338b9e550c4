"""Subnets of logical switches, and the pure next-free-address allocator the Neutron layer uses."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.test import TestResponse

from loom_api.service.subnets import (
    default_pools,
    format_pool,
    next_free_address,
    switch_used_addresses,
)
from loom_api.store import ReadView, Store

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
SWITCHES = f"{API}/logical-switches"


def error(response: TestResponse, status: int, field: str | None) -> dict[str, Any]:
    """Assert `response` is the JSON error `status` naming `field`; return its body."""
    body: dict[str, Any] = response.get_json()
    assert response.status_code == status, body
    assert body["field"] == field, body
    return body


@pytest.fixture
def switch(tenant_a: ApiClient) -> dict[str, Any]:
    return tenant_a.create(SWITCHES, {"name": "web"})


def subnets_url(switch: dict[str, Any]) -> str:
    return f"{SWITCHES}/{switch['id']}/subnets"


# ---- the pure allocator ----------------------------------------------------------------------


@dataclass
class FakeSubnet:
    """The two columns `next_free_address` reads."""

    allocation_pools: list[str]
    gateway_ip: list[str] = field(default_factory=list)


def test_next_free_address_walks_the_pools_in_order() -> None:
    subnet = FakeSubnet(["10.0.0.10-10.0.0.12", "10.0.0.2-10.0.0.3"], ["10.0.0.1"])
    assert next_free_address(subnet, []) == "10.0.0.2"
    assert next_free_address(subnet, ["10.0.0.2"]) == "10.0.0.3"
    assert next_free_address(subnet, ["10.0.0.3", "10.0.0.2"]) == "10.0.0.10"
    assert next_free_address(subnet, ["10.0.0.2", "10.0.0.3", "10.0.0.10"]) == "10.0.0.11"
    full = ["10.0.0.2", "10.0.0.3", "10.0.0.10", "10.0.0.11", "10.0.0.12"]
    assert next_free_address(subnet, full) is None
    # Addresses outside the pools, of the other version, or not addresses are ignored.
    assert next_free_address(subnet, ["10.0.0.99", "2001:db8::2", "junk", "10.0.0.1"]) == (
        "10.0.0.2"
    )


def test_next_free_address_skips_the_gateway_even_inside_a_pool() -> None:
    subnet = FakeSubnet(["10.0.0.1-10.0.0.3"], ["10.0.0.1"])
    assert next_free_address(subnet, []) == "10.0.0.2"


def test_next_free_address_ipv6_without_enumerating_the_pool() -> None:
    network = ipaddress.ip_network("2001:db8::/64")
    pools = [format_pool(6, s, e) for s, e in default_pools(network, int(network[1]))]
    subnet = FakeSubnet(pools, ["2001:db8::1"])
    assert next_free_address(subnet, []) == "2001:db8::2"
    assert next_free_address(subnet, ["2001:db8::2", "2001:db8::3"]) == "2001:db8::4"
    last = FakeSubnet(["2001:db8::ffff:ffff:ffff:fffe-2001:db8::ffff:ffff:ffff:ffff"])
    assert next_free_address(last, ["2001:db8::ffff:ffff:ffff:fffe"]) == (
        "2001:db8::ffff:ffff:ffff:ffff"
    )


@given(
    pools=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 8)), min_size=0, max_size=4).map(
        lambda raw: sorted({(s, s + n) for s, n in raw})
    ),
    used=st.sets(st.integers(0, 60), max_size=40),
    gateway=st.none() | st.integers(0, 60),
)
def test_next_free_address_matches_a_brute_force_scan(
    pools: list[tuple[int, int]], used: set[int], gateway: int | None
) -> None:
    base = int(ipaddress.IPv4Address("192.168.0.0"))
    subnet = FakeSubnet(
        [format_pool(4, base + s, base + e) for s, e in pools],
        [] if gateway is None else [str(ipaddress.IPv4Address(base + gateway))],
    )
    taken = used | ({gateway} if gateway is not None else set())
    candidates = sorted(a for s, e in pools for a in range(s, e + 1) if a not in taken)
    expected = str(ipaddress.IPv4Address(base + candidates[0])) if candidates else None
    used_text = [str(ipaddress.IPv4Address(base + u)) for u in used]
    assert next_free_address(subnet, used_text) == expected


def test_default_pools() -> None:
    def pools(cidr: str, gateway: str | None) -> list[str]:
        network = ipaddress.ip_network(cidr)
        gw = int(ipaddress.ip_address(gateway)) if gateway else None
        return [format_pool(network.version, s, e) for s, e in default_pools(network, gw)]

    assert pools("10.0.0.0/24", "10.0.0.1") == ["10.0.0.2-10.0.0.254"]
    assert pools("10.0.0.0/24", None) == ["10.0.0.1-10.0.0.254"]
    assert pools("10.0.0.0/24", "10.0.0.100") == ["10.0.0.1-10.0.0.99", "10.0.0.101-10.0.0.254"]
    assert pools("10.0.0.0/24", "10.0.0.254") == ["10.0.0.1-10.0.0.253"]
    assert pools("10.0.0.0/31", None) == ["10.0.0.0-10.0.0.1"]
    assert pools("10.0.0.0/32", "10.0.0.0") == []
    assert pools("10.0.0.0/30", "10.0.0.1") == ["10.0.0.2-10.0.0.2"]
    assert pools("2001:db8::/126", None) == ["2001:db8::1-2001:db8::3"]


# ---- the collection --------------------------------------------------------------------------


def test_subnet_create_list_get_put_patch_delete(
    tenant_a: ApiClient, switch: dict[str, Any], store: Store
) -> None:
    url = subnets_url(switch)
    response = tenant_a.post(
        url,
        {
            "name": "v4",
            "cidr": "10.0.0.0/24",
            "gateway_ip": "10.0.0.1",
            "dns_nameservers": ["9.9.9.9"],
        },
    )
    assert response.status_code == 201, response.get_json()
    subnet = response.get_json()
    item = f"{url}/{subnet['id']}"
    assert response.headers["Location"] == item
    assert subnet["ip_version"] == 4
    assert subnet["tenant"] == "tenant-a"
    assert subnet["logical_switch_id"] == switch["id"]
    assert subnet["allocation_pools"] == [{"start": "10.0.0.2", "end": "10.0.0.254"}]
    assert subnet["enable_dhcp"] is True
    assert tenant_a.get(url).get_json()["items"] == [subnet]
    assert tenant_a.get(item).get_json() == subnet

    pools = [
        {"start": "10.0.0.100", "end": "10.0.0.150"},
        {"start": "10.0.0.10", "end": "10.0.0.20"},
    ]
    patched = tenant_a.patch(item, {"allocation_pools": pools, "enable_dhcp": False})
    assert patched.status_code == 200, patched.get_json()
    assert patched.get_json()["allocation_pools"] == [pools[1], pools[0]]  # sorted

    def stored(view: ReadView) -> list[str]:
        return sorted(next(iter(view.rows("Subnet"))).allocation_pools)

    assert store.read(stored) == ["10.0.0.10-10.0.0.20", "10.0.0.100-10.0.0.150"]

    # PUT without pools: the default for the (new) gateway.
    replaced = tenant_a.put(item, {"cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.254"})
    assert replaced.status_code == 200, replaced.get_json()
    body = replaced.get_json()
    assert body["allocation_pools"] == [{"start": "10.0.0.1", "end": "10.0.0.253"}]
    assert body["name"] == ""
    assert body["dns_nameservers"] == []
    assert tenant_a.delete(item).status_code == 204
    error(tenant_a.get(item), 404, None)


def test_ipv6_subnet(tenant_a: ApiClient, switch: dict[str, Any]) -> None:
    subnet = tenant_a.create(
        subnets_url(switch), {"cidr": "2001:DB8::/64", "gateway_ip": "2001:db8::1"}
    )
    assert subnet["cidr"] == "2001:db8::/64"
    assert subnet["ip_version"] == 6
    assert subnet["allocation_pools"] == [
        {"start": "2001:db8::2", "end": "2001:db8::ffff:ffff:ffff:ffff"}
    ]
    # An IPv4 subnet on the same switch does not overlap it.
    tenant_a.create(subnets_url(switch), {"cidr": "10.0.0.0/24"})


def test_subnet_validation_names_the_field(tenant_a: ApiClient, switch: dict[str, Any]) -> None:
    url = subnets_url(switch)

    def post(**body: Any) -> TestResponse:
        return tenant_a.post(url, {"cidr": "10.0.0.0/24", **body})

    error(tenant_a.post(url, {}), 400, "cidr")
    error(post(cidr="10.0.0.1/24"), 400, "cidr")
    error(post(cidr="10.0.0.0/33"), 400, "cidr")
    error(post(gateway_ip="10.0.1.1"), 400, "gateway_ip")
    error(post(gateway_ip="2001:db8::1"), 400, "gateway_ip")
    error(post(gateway_ip="10.0.0.255"), 400, "gateway_ip")
    bad_pools = [
        ({"start": "10.0.1.5", "end": "10.0.0.9"}, "start"),  # outside the prefix
        ({"start": "10.0.0.5", "end": "10.0.1.9"}, "end"),
        ({"start": "10.0.0.9", "end": "10.0.0.5"}, "start"),  # inverted
        ({"start": "10.0.0.0", "end": "10.0.0.5"}, "start"),  # network address
        ({"start": "10.0.0.5", "end": "10.0.0.255"}, "end"),  # broadcast address
        ({"start": "10.0.0.5"}, "end"),  # missing
        ({"start": "10.0.0.5", "end": "10.0.0.6", "x": 1}, "x"),  # unknown
        ({"start": "x", "end": "10.0.0.6"}, "start"),  # not an address
    ]
    for pool, at in bad_pools:
        error(post(allocation_pools=[pool]), 400, f"allocation_pools.0.{at}")
    body = error(
        post(gateway_ip="10.0.0.5", allocation_pools=[{"start": "10.0.0.2", "end": "10.0.0.9"}]),
        400,
        "allocation_pools.0",
    )
    assert "gateway_ip" in body["message"]
    overlapping = [
        {"start": "10.0.0.10", "end": "10.0.0.20"},
        {"start": "10.0.0.20", "end": "10.0.0.30"},
    ]
    error(post(allocation_pools=overlapping), 400, "allocation_pools.1")
    error(post(dns_nameservers=["8.8.8.8", "8.8.8.8"]), 400, "dns_nameservers")
    error(post(dns_nameservers=["dns.example"]), 400, "dns_nameservers.0")
    error(post(ip_version=4), 400, "ip_version")
    error(post(enable_dhcp="yes"), 400, "enable_dhcp")
    error(post(mtu=1500), 400, "mtu")
    assert tenant_a.get(url).get_json()["items"] == []


def test_subnet_cidr_is_fixed_and_ip_version_read_only(
    tenant_a: ApiClient, switch: dict[str, Any]
) -> None:
    subnet = tenant_a.create(subnets_url(switch), {"cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.1"})
    item = f"{subnets_url(switch)}/{subnet['id']}"
    error(tenant_a.patch(item, {"cidr": "10.0.1.0/24"}), 400, "cidr")
    error(tenant_a.patch(item, {"ip_version": 6}), 400, "ip_version")
    # A gateway moved into the pool must come with pools that leave it out.
    error(tenant_a.patch(item, {"gateway_ip": "10.0.0.7"}), 400, "allocation_pools.0")
    ok = tenant_a.put(item, {**subnet, "gateway_ip": "10.0.0.7", "allocation_pools": None})
    assert ok.status_code == 200, ok.get_json()
    assert ok.get_json()["allocation_pools"] == [
        {"start": "10.0.0.1", "end": "10.0.0.6"},
        {"start": "10.0.0.8", "end": "10.0.0.254"},
    ]


def test_overlapping_subnets_on_one_switch_conflict(
    tenant_a: ApiClient, switch: dict[str, Any]
) -> None:
    url = subnets_url(switch)
    first = tenant_a.create(url, {"cidr": "10.0.0.0/16"})
    for cidr in ("10.0.0.0/16", "10.0.5.0/24", "10.0.0.0/8"):
        body = error(tenant_a.post(url, {"cidr": cidr}), 409, "cidr")
        assert first["id"] in body["message"]
    tenant_a.create(url, {"cidr": "10.1.0.0/16"})
    other = tenant_a.create(SWITCHES, {"name": "other"})
    tenant_a.create(subnets_url(other), {"cidr": "10.0.0.0/16"})  # another switch: fine


def test_subnet_tenant_isolation(
    tenant_a: ApiClient, tenant_b: ApiClient, admin: ApiClient, switch: dict[str, Any]
) -> None:
    subnet = tenant_a.create(subnets_url(switch), {"cidr": "10.0.0.0/24"})
    item = f"{subnets_url(switch)}/{subnet['id']}"
    error(tenant_b.get(item), 404, None)
    error(tenant_b.get(subnets_url(switch)), 404, None)
    error(tenant_b.post(subnets_url(switch), {"cidr": "10.1.0.0/24"}), 404, None)
    error(tenant_b.patch(item, {"name": "x"}), 404, None)
    error(tenant_b.delete(item), 404, None)
    foreign_tenant = {"cidr": "10.2.0.0/24", "tenant": "tenant-b"}
    error(tenant_a.post(subnets_url(switch), foreign_tenant), 403, "tenant")
    error(admin.post(subnets_url(switch), foreign_tenant), 400, "tenant")
    by_admin = admin.create(subnets_url(switch), {"cidr": "10.3.0.0/24"})
    assert by_admin["tenant"] == "tenant-a"
    assert admin.get(item).status_code == 200


def test_subnet_in_use_by_ports_and_switch_in_use_by_subnets(
    tenant_a: ApiClient, switch: dict[str, Any]
) -> None:
    subnet = tenant_a.create(subnets_url(switch), {"cidr": "10.0.0.0/24"})
    ports = f"{SWITCHES}/{switch['id']}/ports"
    port = tenant_a.create(ports, {"ips": ["10.0.0.5"]})
    tenant_a.create(ports, {"ips": ["2001:db8::5"]})  # IPv6, which no subnet holds: not a user
    item = f"{subnets_url(switch)}/{subnet['id']}"
    body = error(tenant_a.delete(item), 409, None)
    assert body["error"] == "in_use"
    assert body["message"].endswith(f"logical switch port {port['id']}")
    body = error(tenant_a.delete(f"{SWITCHES}/{switch['id']}"), 409, None)
    assert f"subnet {subnet['id']}" in body["message"]
    assert tenant_a.delete(f"{ports}/{port['id']}").status_code == 204
    assert tenant_a.delete(item).status_code == 204


def test_next_free_address_on_a_stored_subnet(
    tenant_a: ApiClient, switch: dict[str, Any], store: Store
) -> None:
    tenant_a.create(
        subnets_url(switch),
        {
            "cidr": "10.0.0.0/29",
            "gateway_ip": "10.0.0.1",
            "allocation_pools": [{"start": "10.0.0.2", "end": "10.0.0.4"}],
        },
    )
    ports = f"{SWITCHES}/{switch['id']}/ports"

    def allocate(view: ReadView) -> str | None:
        (row,) = view.rows("Subnet")
        return next_free_address(row, switch_used_addresses(view, row.logical_switch))

    got = []
    for _ in range(3):
        address = store.read(allocate)
        assert address is not None
        tenant_a.create(ports, {"ips": [address]})
        got.append(address)
    assert got == ["10.0.0.2", "10.0.0.3", "10.0.0.4"]
    assert store.read(allocate) is None
