"""`loom trace` through the universal flows of every datapath the packet enters, on a
physical controller that has no node (so follows no datapath's flows): real config and
universal ovsdb-servers, ZooKeeper, the API in-process, a logical and a physical controller.

The controller reads the flows it does not follow from the universal DB for the trace (or
answers 503 when it cannot); through a router to another switch, out of an L3 gateway's
uplink by SNAT with a next hop learned by ARP (the ideal node's stand-in MAC for it), and
from the uplink in to a floating IP. Every daemon is stopped by the fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.testing import ApiClient, running_store
from loom_common.ovsdb import OvsdbServer
from loom_common.zookeeper import ZooKeeperServer
from loom_logical.controller import LogicalController
from loom_physical.controller import PhysicalController

pytestmark = [pytest.mark.ovs, pytest.mark.zk, pytest.mark.system]

TOKEN = "admin-secret"
WAIT = 30.0
API = "/api/v1"


@dataclass
class Site:
    """The API, the controllers and what the test built."""

    api: ApiClient
    physical: PhysicalController
    universal: OvsdbServer
    ids: dict[str, Any]


@pytest.fixture
def site(config_db: OvsdbServer, universal_db: OvsdbServer, zk: ZooKeeperServer,
         tmp_path: Path) -> Iterator[Site]:  # fmt: skip
    """Tenant t: switches a (vm1 10.0.1.11) and b (vm3 10.0.2.13) joined by router r, whose
    uplink is an L3 gateway service on gw1 (a node that never connects: its next hop is
    learned by ARP) with SNAT of 10.0.0.0/16 and a floating IP 172.16.0.102 for vm1."""
    with running_store(config_db.remote) as store:
        app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
        api = ApiClient(app.test_client(), TOKEN)
        logical = LogicalController(config_db.remote, universal_db.remote).start()
        try:
            physical = PhysicalController(universal_db.remote, config_db.remote,
                                          zookeeper=zk.hosts).start()  # fmt: skip
            try:
                yield Site(api, physical, universal_db, _build(api, physical))
            finally:
                physical.stop()
        finally:
            logical.stop()


def _build(api: ApiClient, physical: PhysicalController) -> dict[str, Any]:
    zone = api.create(f"{API}/transport-zones", {"name": "tz"})["id"]
    gw1 = api.create(f"{API}/transport-nodes", {
        "name": "gw1", "node_type": "gateway", "system_id": "gw1", "transport_zone_ids": [zone],
        "tunnel_endpoints": [{"encap": "geneve", "ip": "192.168.0.9"}]})["id"]  # fmt: skip
    service = api.create(f"{API}/gateway-services", {
        "name": "ext", "type": "l3", "gateway_node_ids": [gw1], "uplink_ip": "172.16.0.2/24",
        "uplink_next_hop": "172.16.0.1"})["id"]  # fmt: skip
    router = api.create(f"{API}/logical-routers", {"name": "r", "tenant": "t",
                                                   "gateway_service_id": service})  # fmt: skip
    ids: dict[str, Any] = {"router": router["id"], "router_key": router["tunnel_key"]}
    for subnet, host, vm in (("1", 11, "vm1"), ("2", 13, "vm3")):
        switch = api.create(f"{API}/logical-switches", {"name": f"net-{subnet}", "tenant": "t"})
        ids[f"net-{subnet}"] = switch["tunnel_key"]
        api.create(f"{API}/logical-routers/{router['id']}/ports", {
            "ip_prefix": f"10.0.{subnet}.1/24", "logical_switch_id": switch["id"],
            "mac": f"00:00:00:aa:00:0{subnet}"})  # fmt: skip
        ids[vm] = api.create(f"{API}/logical-switches/{switch['id']}/ports", {
            "name": vm, "mac": f"50:54:00:00:00:{host:02x}", "ips": [f"10.0.{subnet}.{host}"],
            "attachment": {"type": "vif", "vif_id": f"vif-{vm}"}})["id"]  # fmt: skip
    for body in ({"type": "snat", "external_ip": "172.16.0.3", "internal_ip": "10.0.0.0/16"},
                 {"type": "floating-ip", "external_ip": "172.16.0.102",
                  "internal_ip": "10.0.1.11"}):  # fmt: skip
        api.create(f"{API}/logical-routers/{router['id']}/nat-rules", body)
    generation = api.get(f"{API}/status").get_json()["config_generation"]

    def computed(c: PhysicalController) -> bool:
        rows = c.universal.rows
        done = [int(g["generation"]) for g in rows["Universal_Global"].values()]
        return bool(done) and done[0] >= generation

    assert physical.wait_pass(computed, WAIT), "the universal flows were not computed"
    return ids


def _traced(site: Site, port: str, flow: str) -> dict[str, Any]:
    status, body = site.physical.endpoints.trace_report(port, flow)
    assert status == 200, body
    return body


def _stages(body: dict[str, Any]) -> list[str]:
    return [str(s["stage"]) for p in body["passes"] for s in p["steps"]]


def test_a_trace_reads_the_flows_of_the_datapaths_it_enters(site: Site) -> None:
    """No node is connected, so the controller follows no datapath's flows; the trace reads
    those of the packet's datapaths and walks switch, router and switch to the egress port
    (not `dropped at table 8` for a table that lacks the switch)."""
    assert site.physical.nodes == {}
    assert site.physical.universal.datapaths == frozenset({0})  # (what every switch shares)
    flow = ("icmp,dl_src=50:54:00:00:00:0b,dl_dst=00:00:00:aa:00:01,nw_src=10.0.1.11,"
            "nw_dst=10.0.2.13,nw_ttl=64,icmp_type=8,icmp_code=0")  # fmt: skip
    body = _traced(site, site.ids["vm1"], flow)
    assert body["verdict"]["outcome"] == "delivered", body["verdict"]
    assert [d["port"] for d in body["verdict"]["delivered"]] == [site.ids["vm3"]]
    keys = [site.ids["net-1"], site.ids["net-2"], site.ids["router_key"]]
    assert body["datapaths_read"] == keys
    assert "lr_in_ip_routing" in _stages(body)
    assert site.physical.universal.datapaths == frozenset({0})  # (read once, not followed)


def test_out_of_the_uplink_by_snat_with_a_learned_next_hop(site: Site) -> None:
    """To an external address: the router routes it to its uplink, SNAT translates it, and
    it leaves by the uplink (the next hop, learned by ARP on the active node, is resolved
    at the ideal node's stand-in MAC, and the answer says so)."""
    flow = ("icmp,dl_src=50:54:00:00:00:0d,dl_dst=00:00:00:aa:00:02,nw_src=10.0.2.13,"
            "nw_dst=8.8.8.8,nw_ttl=64,icmp_type=8,icmp_code=0")  # fmt: skip
    body = _traced(site, site.ids["vm3"], flow)
    assert body["verdict"]["outcome"] == "uplink", body["verdict"]
    assert body["stand_in_next_hops"] == ["172.16.0.1"]
    assert "lr_out_snat" in _stages(body)
    assert "nat(src=172.16.0.3)" in body["trace"]
    assert body["verdict"]["uplink_source"] == "172.16.0.3"
    # vm1 has a floating IP: it leaves from that address.
    floating = flow.replace("50:54:00:00:00:0d", "50:54:00:00:00:0b").replace(
        "00:00:00:aa:00:02", "00:00:00:aa:00:01").replace("10.0.2.13", "10.0.1.11")  # fmt: skip
    out = _traced(site, site.ids["vm1"], floating)
    assert out["verdict"]["outcome"] == "uplink", out["verdict"]
    assert out["verdict"]["uplink_source"] == "172.16.0.102"


def test_in_from_the_uplink_to_a_floating_ip(site: Site) -> None:
    """A packet from the physical network enters at the router's uplink (its MAC given by
    the controller): DNAT to vm1's address, then routed to vm1."""
    uplink = f"{site.ids['router']}-uplink"
    flow = "icmp,nw_src=8.8.8.8,nw_dst=172.16.0.102,nw_ttl=64,icmp_type=8,icmp_code=0"
    body = _traced(site, uplink, flow)
    assert body["verdict"]["outcome"] == "delivered", body["verdict"]
    assert [d["port"] for d in body["verdict"]["delivered"]] == [site.ids["vm1"]]
    assert "lr_in_dnat" in _stages(body)
    assert "nat(dst=10.0.1.11)" in body["trace"]
    assert ",dl_dst=0a:" in body["flow"]  # (the uplink's MAC: locally administered)


def test_flows_that_cannot_be_read_are_a_503_not_a_verdict(site: Site) -> None:
    """With the universal DB gone, the flows the controller does not follow cannot be read:
    the answer says which datapaths are missing and gives no verdict."""
    site.universal.stop()
    status, body = site.physical.endpoints.trace_report(site.ids["vm1"], "ip,nw_dst=10.0.2.13")
    assert status == 503, body
    assert body["error"] == "flows_unavailable"
    assert str(site.ids["net-1"]) in body["message"]
    assert "verdict" not in body
