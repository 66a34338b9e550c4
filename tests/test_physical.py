"""Loom end to end on real Open vSwitch: API -> config DB -> logical controller -> universal DB
-> physical controller -> simulated hypervisors (dummy datapath, Geneve on a dummy underlay).

Packets are injected into a VM's port (`netdev-dummy/receive`) and counted where they leave
(`dump-ports`), or read back from the port's capture (`tx_pcap`). Every daemon is stopped
by the fixtures, even on failure.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.testing import ApiClient, running_store
from loom_common import httpd
from loom_common.ovsdb import OvsdbServer
from loom_common.pki import Pki
from loom_common.testing import tls_controller, wait_for
from loom_logical.controller import LogicalController
from loom_ovs import packets
from loom_ovs.sandbox import OvsNode, Sandbox
from loom_physical.controller import PhysicalController

pytestmark = [pytest.mark.ovs, pytest.mark.system]

TOKEN = "admin-secret"
WAIT = 30.0


@dataclass
class Loom:
    """A running deployment: API client, controllers, nodes."""

    api: ApiClient
    logical: LogicalController
    physical: PhysicalController
    sandbox: Sandbox
    zone: str
    config: OvsdbServer
    universal: OvsdbServer

    def node(self, name: str) -> OvsNode:
        return self.sandbox.nodes[name]

    def add_node(self, name: str, encap: str = "geneve") -> OvsNode:
        node = self.sandbox.add_node(name, [self.physical.target])
        self.api.create("/api/v1/transport-nodes", {
            "name": name, "node_type": "hypervisor", "system_id": name,
            "transport_zone_ids": [self.zone],
            "tunnel_endpoints": [{"encap": encap, "ip": node.encap_ip}]})  # fmt: skip
        return node

    def switch(self, name: str, tenant: str = "t1") -> str:
        body = {"name": name, "tenant": tenant, "replication_mode": "source"}
        return str(self.api.create("/api/v1/logical-switches", body)["id"])

    def port(self, switch: str, name: str, mac: str, ip: str, **more: Any) -> str:
        body = {"name": name, "mac": mac, "ips": [ip],
                "attachment": {"type": "vif", "vif_id": f"vif-{name}"}, **more}  # fmt: skip
        return str(self.api.create(f"/api/v1/logical-switches/{switch}/ports", body)["id"])

    def realized(self, *meshed: str) -> None:
        """Wait until the latest configuration is realized on every connected node, and the
        physical controller is settled (a VIF's location feeds back through the logical
        controller into the other nodes' ways to it). (`meshed`: the nodes that talk to each
        other; they need no tunnel of their own to each other, only their flow-based ports.)"""
        status = self.api.get("/api/v1/status").get_json()
        generation = status["config_generation"]

        def done() -> bool:
            now = self.api.get("/api/v1/status").get_json()
            return bool(now["realized_generation"] >= generation)

        wait_for(done, WAIT, f"generation {generation} realized")

        assert self.physical.wait_pass(lambda c: c.settled(), WAIT), "not settled"


@pytest.fixture
def loom(
    config_db: OvsdbServer, universal_db: OvsdbServer, pki: Pki, tmp_path: Path
) -> Iterator[Loom]:
    """API (in-process), one logical and one physical controller, an empty sandbox; nodes
    and the controller speak TLS (OVSDB and OpenFlow) with certificates from `pki`."""
    nodes = Sandbox(tmp_path / "nodes", pki=pki)
    with running_store(config_db.remote) as store, nodes as sandbox:
        app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
        api = ApiClient(app.test_client(), TOKEN)
        logical = LogicalController(config_db.remote, universal_db.remote).start()
        deployment = None
        try:
            physical = PhysicalController(universal_db.remote, config_db.remote,
                                          **tls_controller(pki)).start()  # fmt: skip
            try:
                zone = str(api.create("/api/v1/transport-zones", {"name": "tz"})["id"])
                deployment = Loom(api, logical, physical, sandbox, zone, config_db, universal_db)
                yield deployment
            finally:  # a test may have replaced the controllers
                (deployment.physical if deployment is not None else physical).stop()
        finally:
            (deployment.logical if deployment is not None else logical).stop()


def mac(i: int) -> str:
    return f"50:54:00:00:00:{i:02x}"


def _reaches(node: OvsNode, vif: str, packet: str, to: OvsNode, port: str) -> bool:
    """Inject `packet` at `vif` of `node`; True if `port` of `to` sent it within 0.5 s."""
    before = to.tx_packets(port)
    node.receive(vif, packet)
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        if to.tx_packets(port) > before:
            return True
        time.sleep(0.02)
    return False


def sent(node: OvsNode, vif: str, packet: str, expect: dict[tuple[OvsNode, str], int]) -> None:
    """Inject `packet` at `vif` of `node`; wait until each (node, port) in `expect` has sent
    that many more packets, then check that the other watched ports sent nothing more (the
    sender makes every copy in one datapath action list, so copies that would go elsewhere
    leave with the ones waited for)."""
    before = {key: key[0].tx_packets(key[1]) for key in expect}
    node.receive(vif, packet)
    wanted = {key: before[key] + n for key, n in expect.items() if n}
    wait_for(lambda: all(k[0].tx_packets(k[1]) >= v for k, v in wanted.items()), 10,
             f"packet delivered to {[(k[0].system_id, k[1]) for k in wanted]}")  # fmt: skip
    after = {key: key[0].tx_packets(key[1]) for key in expect}
    assert {k: after[k] - before[k] for k in expect} == expect


@pytest.fixture
def two_hvs(loom: Loom) -> Loom:
    for name in ("hv1", "hv2", "hv3"):
        loom.add_node(name)
    return loom


def test_vm_to_vm_across_hypervisors(two_hvs: Loom) -> None:
    loom = two_hvs
    sw = loom.switch("sw")
    for i, hv in ((1, "hv1"), (2, "hv2"), (3, "hv3")):
        loom.port(sw, f"p{i}", mac(i), f"10.0.0.{i}")
        loom.node(hv).add_vif("vm", f"vif-p{i}", mac(i))
    loom.realized("hv1", "hv2", "hv3")
    hv1, hv2, hv3 = (loom.node(n) for n in ("hv1", "hv2", "hv3"))
    ports = {(hv1, "vm"): 0, (hv2, "vm"): 1, (hv3, "vm"): 0}
    sent(hv1, "vm", packets.icmp_echo(mac(1), mac(2), "10.0.0.1", "10.0.0.2"), ports)
    # On the underlay: Geneve, VNI = the switch's key, carrying the port keys.
    trace = hv1.appctl("ofproto/trace", "br-int", "in_port=vm",
                       packets.icmp_echo(mac(1), mac(2), "10.0.0.1", "10.0.0.2"))  # fmt: skip
    key = loom.api.get(f"/api/v1/logical-switches/{sw}").get_json()["tunnel_key"]
    assert re.search(rf"geneve\(crit,vni={key:#x},options\(\{{class=0x102,type=0x80,len=4,"
                     r"0x10002\}\)\)", trace), trace  # fmt: skip
    # Broadcast ARP reaches every other port of the switch, once.
    sent(hv1, "vm", packets.arp_request(mac(1), "10.0.0.1", "10.0.0.9"),
         {(hv1, "vm"): 0, (hv2, "vm"): 1, (hv3, "vm"): 1})  # fmt: skip
    # Spoofed sources are dropped (port security is on by default).
    spoofed = packets.icmp_echo(mac(1), mac(2), "10.0.0.99", "10.0.0.2")
    assert "Datapath actions: drop" in hv1.appctl("ofproto/trace", "br-int", "in_port=vm", spoofed)
    # The universal DB says what is realized too.
    generation = loom.api.get("/api/v1/status").get_json()["realized_generation"]
    assert loom.physical.wait_pass(
        lambda c: any(r.get("realized_generation") == generation
                      for r in c.universal.rows["Universal_Global"].values()), WAIT
    )  # fmt: skip
    # Status: the ports are up where their VIFs are.
    for i, hv in ((1, "hv1"), (2, "hv2")):
        items = loom.api.get(f"/api/v1/logical-switches/{sw}/ports").get_json()["items"]
        port = next(p for p in items if p["name"] == f"p{i}")
        assert port["status"]["up"] is True, port
        assert port["status"]["transport_node"] == hv, port


def _metrics() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """This process's Prometheus metrics, as a scrape reads them."""
    text = generate_latest().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip


def _two_vms(loom: Loom) -> None:
    """A switch with a VM on hv1 and one on hv2, realized everywhere."""
    sw = loom.switch("sw")
    for i, hv in ((1, "hv1"), (2, "hv2")):
        loom.port(sw, f"p{i}", mac(i), f"10.0.0.{i}")
        loom.node(hv).add_vif("vm", f"vif-p{i}", mac(i))
    loom.realized("hv1", "hv2", "hv3")


def test_the_controllers_export_their_nodes_tables_and_passes(two_hvs: Loom) -> None:
    loom = two_hvs
    _two_vms(loom)
    name = loom.physical.name
    got = _metrics()
    for state in ("connected", "mastered"):
        key = ("loom_physical_nodes", frozenset({("controller", name), ("state", state)}))
        assert got[key] == 3, state
    for hv in ("hv1", "hv2"):
        # (each read is a moment: a pass may push between the scrape and the dump)
        def agree(hv: str = hv) -> bool:
            key = ("loom_physical_node_flows", frozenset({("controller", name), ("node", hv)}))
            flows = _metrics()[key]
            table = loom.node(hv).ofctl("dump-flows").splitlines()
            return flows == sum("actions=" in line for line in table) > 10

        wait_for(agree, WAIT, f"{hv}'s exported flow count to be its table's")
    total = {("component", "physical"), ("controller", name), ("phase", "total")}
    assert got[("loom_controller_pass_seconds_count", frozenset(total))] >= 1
    logical = (
        "loom_controller_generation",
        frozenset({("component", "logical"), ("controller", loom.logical.name)}),
    )
    assert got[logical] >= loom.api.get("/api/v1/status").get_json()["realized_generation"]
    # the engines' memory: one allocator in this process, the same for both controllers
    native = {(c, n): got[("loom_native_memory_bytes",
                            frozenset({("component", c), ("controller", n)}))]
              for c, n in (("physical", name), ("logical", loom.logical.name))}  # fmt: skip
    assert min(native.values()) > 1 << 20, native


def test_an_operator_sees_a_nodes_computed_and_installed_flows(two_hvs: Loom) -> None:
    """`GET /api/v1/transport-nodes/<id>/flows`: the API server asks the node's physical
    controller at the HTTP endpoint it publishes with its heartbeat; in sync after the
    configuration is realized, and a flow nobody computed is what a reconciliation would
    delete. Tenants see no node."""
    loom = two_hvs
    _two_vms(loom)
    host, port = httpd.serve("127.0.0.1:0")
    loom.physical.heartbeat.url = f"http://{host}:{port}"  # (loom up: its --metrics)
    nodes = loom.api.get("/api/v1/transport-nodes").get_json()["items"]
    hv1 = next(n["id"] for n in nodes if n["name"] == "hv1")

    def asked() -> Any:
        reply = loom.api.get(f"/api/v1/transport-nodes/{hv1}/flows")
        return reply.get_json() if reply.status_code == 200 else None

    body = wait_for(asked, WAIT, "the controller's endpoint published")
    assert body["node"] == "hv1"
    assert body["controller"] == loom.physical.name
    assert body["in_sync"] is True, body["changes"]
    assert body["computed_flows"] == body["installed_flows"] > 10
    loom.node("hv1").ofctl("add-flow", "table=99,priority=1,actions=drop")
    body = loom.api.get(f"/api/v1/transport-nodes/{hv1}/flows?tables=true").get_json()
    assert body["in_sync"] is False
    assert [(c["op"], "table=99" in c["flow"]) for c in body["changes"]] == [("delete", True)]
    assert len(body["computed"]) == body["computed_flows"]
    assert len(body["installed"]) == body["installed_flows"] == body["computed_flows"] + 1
    assert loom.api.get(f"/api/v1/transport-nodes/{hv1}/flows?tables=maybe").status_code == 400
    tenant = ApiClient(loom.api.client, None)
    assert tenant.get(f"/api/v1/transport-nodes/{hv1}/flows").status_code == 401


def test_tenants_with_identical_addresses_are_isolated(two_hvs: Loom) -> None:
    loom = two_hvs
    hv1, hv2 = loom.node("hv1"), loom.node("hv2")
    for tenant in ("red", "blue"):
        sw = loom.switch(f"{tenant}-net", tenant=tenant)
        loom.port(sw, f"{tenant}1", mac(1), "10.0.0.1")
        loom.port(sw, f"{tenant}2", mac(2), "10.0.0.2")
        hv1.add_vif(f"{tenant}1", f"vif-{tenant}1", mac(1))
        hv2.add_vif(f"{tenant}2", f"vif-{tenant}2", mac(2))
    loom.realized("hv1", "hv2")
    watched = {(hv2, "red2"): 1, (hv2, "blue2"): 0, (hv1, "blue1"): 0}
    sent(hv1, "red1", packets.icmp_echo(mac(1), mac(2), "10.0.0.1", "10.0.0.2"), watched)
    # An unknown address is flooded in the tenant's switch only; a known one is answered
    # by the switch's ARP responder, back to the asking port.
    sent(hv1, "blue1", packets.arp_request(mac(1), "10.0.0.1", "10.0.0.9"),
         {(hv2, "red2"): 0, (hv2, "blue2"): 1, (hv1, "red1"): 0})  # fmt: skip
    sent(hv1, "blue1", packets.arp_request(mac(1), "10.0.0.1", "10.0.0.2"),
         {(hv1, "blue1"): 1, (hv2, "blue2"): 0, (hv1, "red1"): 0})  # fmt: skip


def test_routing_between_subnets_across_hypervisors(two_hvs: Loom) -> None:
    loom = two_hvs
    hv1, hv2 = loom.node("hv1"), loom.node("hv2")
    net1, net2 = loom.switch("net1"), loom.switch("net2")
    router = str(loom.api.create("/api/v1/logical-routers", {"name": "r", "tenant": "t1"})["id"])
    for net, sw in (("1", net1), ("2", net2)):
        loom.api.create(f"/api/v1/logical-routers/{router}/ports", {
            "name": f"r-{net}", "ip_prefix": f"10.0.{net}.1/24", "logical_switch_id": sw,
            "mac": f"00:00:00:aa:00:0{net}"})  # fmt: skip
    loom.port(net1, "vm1", mac(1), "10.0.1.10")
    loom.port(net2, "vm2", mac(2), "10.0.2.10")
    hv1.add_vif("vm1", "vif-vm1", mac(1))
    hv2.add_vif("vm2", "vif-vm2", mac(2))
    loom.realized("hv1", "hv2")
    packet = packets.icmp_echo(mac(1), "00:00:00:aa:00:01", "10.0.1.10", "10.0.2.10", ttl=64)
    sent(hv1, "vm1", packet, {(hv2, "vm2"): 1, (hv1, "vm1"): 0})
    frame = packets.read_pcap(hv2.run_dir / "vm2-tx.pcap")[-1]
    assert frame[0:6] == bytes.fromhex(mac(2).replace(":", ""))  # to vm2's MAC
    assert frame[6:12] == bytes.fromhex("000000aa0002")  # from the router's port on net2
    assert frame[14 + 8] == 63  # TTL decremented once


def test_port_moves_to_another_hypervisor(two_hvs: Loom) -> None:
    loom = two_hvs
    hv1, hv2, hv3 = (loom.node(n) for n in ("hv1", "hv2", "hv3"))
    sw = loom.switch("sw")
    loom.port(sw, "a", mac(1), "10.0.0.1")
    loom.port(sw, "b", mac(2), "10.0.0.2")
    hv1.add_vif("a", "vif-a", mac(1))
    hv2.add_vif("b", "vif-b", mac(2))
    loom.realized("hv1", "hv2")
    packet = packets.icmp_echo(mac(1), mac(2), "10.0.0.1", "10.0.0.2")
    sent(hv1, "a", packet, {(hv2, "b"): 1})
    # Live migration: b appears on hv3, then leaves hv2.
    hv3.add_vif("b", "vif-b", mac(2))
    hv2.remove_vif("b")
    loom.realized("hv1", "hv3")
    sent(hv1, "a", packet, {(hv3, "b"): 1})
    wait_for(lambda: "reg15=0x2" not in "".join(hv2.ofctl("dump-flows", "--no-stats")),
             WAIT, "b's flows gone from hv2")  # fmt: skip


def test_a_new_ports_zones_come_with_its_flows(two_hvs: Loom) -> None:
    """A stateful port created on a switch its node already has: the conntrack zone its
    flows name is given in the engine transaction that brings them (no second round for
    it), and the flows that use it are on the node; deleted, its zone's record goes."""
    loom = two_hvs
    hv1 = loom.node("hv1")
    sw = loom.switch("sw")
    profile = loom.api.create("/api/v1/security-profiles", {
        "name": "web", "tenant": "t1", "stateful": True,
        "rules": [{"direction": "ingress", "ethertype": "IPv4"}]})["id"]  # fmt: skip
    a = loom.port(sw, "a", mac(1), "10.0.0.1", security_profile_ids=[profile])
    hv1.add_vif("a", "vif-a", mac(1))  # hv1 needs the switch from now on

    def zoned(port: str) -> bool:
        core = loom.physical.core
        return (
            "hv1" in core.nodes and port in core.located("hv1") and port in core.zones("hv1").zones
        )

    # (the plug is not a configuration change: `realized` alone does not wait for it)
    assert loom.physical.wait_pass(lambda c: zoned(a), WAIT), "a got no zone"
    loom.realized("hv1")
    rounds = loom.physical.zone_rounds
    hv1.add_vif("b", "vif-b", mac(2))  # a VM waiting for its port, seen by the controller
    assert loom.physical.wait_pass(lambda c: "vif-b" in c.nodes["hv1"].session.vifs(), WAIT)
    b = loom.port(sw, "b", mac(2), "10.0.0.2", security_profile_ids=[profile])
    loom.realized("hv1")
    assert loom.physical.wait_pass(lambda c: zoned(b), WAIT), "b got no zone"
    assert loom.physical.zone_rounds == rounds, "b's zone took a round of its own"
    zone = loom.physical.core.zones("hv1").zones[b]
    flows = hv1.ofctl("dump-flows", "--no-stats")
    assert f"set_field:{zone:#x}->reg13" in flows, "no flow loads b's zone for ct()"

    # Deleted: its flows leave the node, then its zone's record (released after them).
    def recorded() -> str:
        return hv1.vsctl("get", "Bridge", "br-int", "external_ids")

    assert f"loom-zone-{b}" in recorded()
    assert loom.api.delete(f"/api/v1/logical-switches/{sw}/ports/{b}").status_code == 204
    wait_for(lambda: f"loom-zone-{b}" not in recorded(), WAIT, "b's zone record released")
    assert f"set_field:{zone:#x}->reg13" not in hv1.ofctl("dump-flows", "--no-stats")
    assert f"loom-zone-{a}" in recorded()


def test_control_cluster_restart_changes_no_flow(two_hvs: Loom) -> None:
    """The whole control cluster (logical and physical controller) stops and new ones
    start on the same databases: the nodes forward meanwhile (fail mode secure keeps their
    flows), and the new physical controller reconciles with replace-flows: every flow stays
    installed (its age keeps growing), none is deleted and added again."""
    loom = two_hvs
    hv1, hv2 = loom.node("hv1"), loom.node("hv2")
    sw = loom.switch("sw")
    profile = loom.api.create("/api/v1/security-profiles", {
        "name": "web", "tenant": "t1", "stateful": True,
        "rules": [{"direction": "ingress", "ethertype": "IPv4"},
                  {"direction": "egress", "ethertype": "IPv4"}]})["id"]  # fmt: skip
    # A port that comes and goes first: the zones a and b get are not the first ones a
    # fresh controller would hand out, so only zones read back from the node match.
    early = loom.port(sw, "c", mac(3), "10.0.0.3", security_profile_ids=[profile])
    hv1.add_vif("c", "vif-c", mac(3))

    def zoned(*ports: str) -> bool:
        core = loom.physical.core
        return "hv1" in core.nodes and all(p in core.zones("hv1").zones for p in ports)

    assert loom.physical.wait_pass(lambda c: zoned(early), WAIT), "c got no zone"
    a = loom.port(sw, "a", mac(1), "10.0.0.1", security_profile_ids=[profile])
    loom.port(sw, "b", mac(2), "10.0.0.2", security_profile_ids=[profile])  # its VIF: hv2
    hv1.add_vif("a", "vif-a", mac(1))  # before c leaves: hv1 keeps the switch (and zones)
    assert loom.physical.wait_pass(lambda c: zoned(early, a), WAIT), "a got no zone"
    assert loom.api.delete(f"/api/v1/logical-switches/{sw}/ports/{early}").status_code == 204
    hv1.remove_vif("c")
    hv2.add_vif("b", "vif-b", mac(2))
    loom.realized("hv1", "hv2")
    # (Plugging b is no configuration change: the realized generation says nothing of it.
    # Its way is on hv1 once a packet from a reaches it; then nothing more is due.)
    packet = packets.icmp_echo(mac(1), mac(2), "10.0.0.1", "10.0.0.2")
    wait_for(lambda: _reaches(hv1, "a", packet, hv2, "b"), WAIT, "a's packet to reach b")
    assert loom.physical.wait_pass(lambda c: c.settled(), WAIT), "not settled"
    before = {node: node.flow_ages() for node in (hv1, hv2)}
    assert len(before[hv1]) > 50
    # Conntrack zones are in use, and recorded on the node (a successor must keep them).
    assert any("zone=" in flow for flow in before[hv1]), "no stateful flows"
    assert "loom-zone-" in hv1.vsctl("get", "Bridge", "br-int", "external_ids")
    loom.physical.stop()
    loom.logical.stop()
    sent(hv1, "a", packet, {(hv2, "b"): 1})  # no controller at all: still forwarding
    loom.logical = LogicalController(loom.config.remote, loom.universal.remote, name="logical-1")
    loom.logical.start()
    assert loom.sandbox.pki is not None
    loom.physical = PhysicalController(loom.universal.remote, loom.config.remote, name="p-1",
                                       **tls_controller(loom.sandbox.pki, "p-1"))  # fmt: skip
    loom.physical.start()
    for node in loom.sandbox:
        node.set_managers([loom.physical.target])
    loom.realized("hv1", "hv2")
    assert loom.physical.wait_pass(lambda c: all(n.pushes for n in c.planner.nodes.values()), WAIT)
    for node, ages in before.items():
        after = node.flow_ages()
        assert sorted(after) == sorted(ages)
        readded = [f for f in ages if after[f] < ages[f]]
        assert not readded, readded
    sent(hv1, "a", packet, {(hv2, "b"): 1})


def test_stt_node_is_reported(loom: Loom) -> None:
    loom.add_node("hv1", encap="stt")
    loom.add_node("hv2", encap="stt")
    stt_zone = str(
        loom.api.create("/api/v1/transport-zones", {"name": "stt", "encap": "stt"})["id"]
    )
    for name in ("hv1", "hv2"):
        nodes = loom.api.get("/api/v1/transport-nodes").get_json()["items"]
        node = next(n for n in nodes if n["name"] == name)
        response = loom.api.patch(f"/api/v1/transport-nodes/{node['id']}",
                                  {"transport_zone_ids": [stt_zone]})  # fmt: skip
        assert response.status_code == 200, response.get_json()
    sw = loom.switch("sw")
    loom.port(sw, "a", mac(1), "10.0.0.1")
    loom.port(sw, "b", mac(2), "10.0.0.2")
    loom.node("hv1").add_vif("a", "vif-a", mac(1))
    loom.node("hv2").add_vif("b", "vif-b", mac(2))

    def reported() -> bool:
        nodes = loom.api.get("/api/v1/transport-nodes").get_json()["items"]
        return all("STT" in n["status"].get("message", "") for n in nodes)

    wait_for(reported, WAIT, "STT reported in both nodes' status")

    # The flows are computed all the same (once b's binding is known): the way to b is by
    # the STT port.
    def by_stt(c: PhysicalController) -> bool:
        flows = c.flows("hv1")
        return any("TUN_ID" in f.actions and "resubmit(,75)" in f.actions for f in flows)

    assert loom.physical.wait_pass(by_stt, WAIT), "no way to b by the STT port"
    flows = loom.physical.flows("hv1")
    assert any(f.table == 75 and f.actions.startswith("output:") for f in flows)


def test_node_connection_status(loom: Loom) -> None:
    node = loom.add_node("hv1")

    def status() -> dict[str, Any]:
        nodes = loom.api.get("/api/v1/transport-nodes").get_json()["items"]
        return dict(next(n for n in nodes if n["name"] == "hv1")["status"])

    wait_for(lambda: status().get("connected") is True, WAIT, "hv1 connected")
    assert status()["controller"] == loom.physical.name
    node.stop()  # the node's ovsdb-server goes away: the controller sees the connection close
    wait_for(lambda: status().get("connected") is False, WAIT, "hv1 reported disconnected")


def test_failed_pass_starts_over_without_touching_the_dataplane(
    two_hvs: Loom, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass that fails (here: the engine's commit raises once) leaves the engine in an
    unknown state: the controller builds a new one from the databases and the nodes, and
    reconciles each node whole — no flow changes, and changes go on being realized."""
    loom = two_hvs
    hv1, hv2 = loom.node("hv1"), loom.node("hv2")
    sw = loom.switch("sw")
    loom.port(sw, "a", mac(1), "10.0.0.1")
    loom.port(sw, "b", mac(2), "10.0.0.2")
    hv1.add_vif("a", "vif-a", mac(1))
    hv2.add_vif("b", "vif-b", mac(2))
    loom.realized("hv1", "hv2")
    before = hv1.flow_ages()
    physical = loom.physical
    program = physical.core.program
    failures = []

    class Failing:
        def __getattr__(self, name: str) -> Any:
            return getattr(program, name)

        def transaction(self) -> Any:
            failures.append(1)
            raise RuntimeError("injected: the engine failed")

    monkeypatch.setattr(physical.core, "program", Failing())
    loom.port(sw, "c", mac(3), "10.0.0.3")  # a change: the next pass computes and fails
    assert physical.wait_pass(lambda c: bool(failures) and c.core.program is not program, WAIT)
    hv2.add_vif("c", "vif-c", mac(3))
    loom.realized("hv1", "hv2")
    after = hv1.flow_ages()
    assert not [f for f in before if f in after and after[f] < before[f]], "a flow was re-added"
    sent(hv1, "a", packets.icmp_echo(mac(1), mac(3), "10.0.0.1", "10.0.0.3"), {(hv2, "c"): 1})


def _qos_on(node: OvsNode, vif: str) -> tuple[int, int, dict[str, str], str]:
    """(ingress_policing_rate, burst, the queue 0 other_config, the QoS type) of `vif`."""
    rate = int(node.vsctl("get", "Interface", vif, "ingress_policing_rate").strip())
    burst = int(node.vsctl("get", "Interface", vif, "ingress_policing_burst").strip())
    qos = node.vsctl("get", "Port", vif, "qos").strip()
    if qos == "[]":
        return rate, burst, {}, ""
    kind = node.vsctl("get", "QoS", qos, "type").strip()
    queue = node.vsctl("get", "QoS", qos, "queues:0").strip()
    config = node.vsctl("get", "Queue", queue, "other_config").strip()
    pairs = re.findall(r'([\w-]+)="?(\d+)"?', config)
    return rate, burst, dict(pairs), kind


def test_qos_queue_reaches_the_vif(loom: Loom) -> None:
    hv1 = loom.add_node("hv1")
    sw = loom.switch("sw")
    queue = loom.api.create("/api/v1/qos-queues", {
        "name": "gold", "tenant": "t1", "min_rate": 10_000, "max_rate": 50_000,
        "dscp": 46})["id"]  # fmt: skip
    port = loom.port(sw, "vm1", mac(1), "10.0.0.1", qos_queue_id=queue)
    loom.port(sw, "vm2", mac(2), "10.0.0.2")
    hv1.add_vif("vm1", "vif-vm1", mac(1))
    hv1.add_vif("vm2", "vif-vm2", mac(2))
    loom.realized("hv1")
    wait_for(lambda: _qos_on(hv1, "vm1")[0] == 50_000, WAIT, "vm1 policed")
    assert _qos_on(hv1, "vm1") == (
        50_000,
        5_000,
        {"max-rate": "50000000", "min-rate": "10000000"},
        "linux-htb",
    )
    assert _qos_on(hv1, "vm2") == (0, 0, {}, "")  # no queue: nothing written
    # vm1's IP packets are marked DSCP 46 on the way in; vm2's are not
    to_vm2 = packets.icmp_echo(mac(1), mac(2), "10.0.0.1", "10.0.0.2")
    sent(hv1, "vm1", to_vm2, {(hv1, "vm2"): 1})
    assert packets.read_pcap(hv1.run_dir / "vm2-tx.pcap")[-1][15] >> 2 == 46  # IPv4 TOS
    to_vm1 = packets.icmp_echo(mac(2), mac(1), "10.0.0.2", "10.0.0.1")
    sent(hv1, "vm2", to_vm1, {(hv1, "vm1"): 1})
    assert packets.read_pcap(hv1.run_dir / "vm1-tx.pcap")[-1][15] == 0
    # the queue's rates change: the VIF follows (a new QoS row, the old one deleted)
    loom.api.patch(f"/api/v1/qos-queues/{queue}", {"max_rate": 20_000})
    wait_for(lambda: _qos_on(hv1, "vm1")[0] == 20_000, WAIT, "vm1 policed at the new rate")
    assert _qos_on(hv1, "vm1")[2] == {"max-rate": "20000000", "min-rate": "10000000"}
    assert len(hv1.vsctl("--bare", "--columns=_uuid", "list", "QoS").split()) == 1
    # the port leaves the queue: rates and rows go
    loom.api.patch(f"/api/v1/logical-switches/{sw}/ports/{port}", {"qos_queue_id": None})
    wait_for(lambda: _qos_on(hv1, "vm1")[0] == 0, WAIT, "vm1 no longer policed")
    assert _qos_on(hv1, "vm1") == (0, 0, {}, "")
    assert hv1.vsctl("--bare", "--columns=_uuid", "list", "QoS").split() == []
    assert hv1.vsctl("--bare", "--columns=_uuid", "list", "Queue").split() == []
