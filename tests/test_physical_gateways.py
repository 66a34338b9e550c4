"""Gateways and service nodes on real OVS (dummy datapath): an L3 gateway's uplink with a
floating IP and SNAT, an L2 gateway bridging a switch to a VLAN, and broadcast replicated
through a service node. Packets are injected into VMs' ports and into the gateway's uplink
(the physical network) and read back from the ports' captures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

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
from loom_physical.planner import Life

pytestmark = [pytest.mark.ovs, pytest.mark.system]

TOKEN = "admin-secret"
WAIT = 30.0
NEXT_HOP_MAC = "00:00:00:00:99:01"
SNAT_IP = "172.16.0.3"
"""The routers' SNAT address on the uplink network (not the uplink's own: the API refuses
that one)."""


def mac(i: int) -> str:
    return f"50:54:00:00:02:{i:02x}"


class Site:
    """API, controllers and nodes of one test."""

    def __init__(self, api: ApiClient, physical: PhysicalController, sandbox: Sandbox) -> None:
        self.api, self.physical, self.sandbox = api, physical, sandbox
        self.zone = api.create("/api/v1/transport-zones", {"name": "tz"})["id"]
        self.ids: dict[str, str] = {}

    def node(self, name: str, kind: str = "hypervisor") -> OvsNode:
        node = self.sandbox.add_node(name, [self.physical.target])
        self.ids[name] = self.api.create("/api/v1/transport-nodes", {
            "name": name, "node_type": kind, "system_id": name,
            "transport_zone_ids": [self.zone],
            "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})["id"]  # fmt: skip
        return node

    def create(self, path: str, body: dict[str, Any]) -> str:
        return str(self.api.create(f"/api/v1/{path}", body)["id"])

    def l3_network(
        self,
        gateways: list[str],
        *,
        tenant: str = "t",
        uplink_ip: str = "172.16.0.2",
        vm: str = "vm1",
        vif: str = "vif-vm1",
        vm_mac: str = mac(1),
        snat: bool = True,
    ) -> tuple[str, str, str, str]:
        """One tenant's routed network behind an L3 service on `gateways` (uplink
        `uplink_ip`/24, next hop 172.16.0.1): a router on it (port 10.0.1.1/24, MAC
        00:00:00:aa:00:01; with `snat`, 10.0.0.0/16 translated to `SNAT_IP`) and
        a switch with port `vm` (`vm_mac`, 10.0.1.10, VIF `vif`). Returns the service, the
        router, the switch and the port."""
        service = self.create("gateway-services", {
            "name": f"l3-{tenant}", "type": "l3",
            "gateway_node_ids": [self.ids[g] for g in gateways],
            "uplink_ip": f"{uplink_ip}/24", "uplink_next_hop": "172.16.0.1"})  # fmt: skip
        net = self.create("logical-switches", {"name": f"net-{tenant}", "tenant": tenant})
        router = self.create("logical-routers", {
            "name": f"r-{tenant}", "tenant": tenant, "gateway_service_id": service})  # fmt: skip
        self.create(f"logical-routers/{router}/ports", {
            "name": f"r-{tenant}-net", "ip_prefix": "10.0.1.1/24", "logical_switch_id": net,
            "mac": "00:00:00:aa:00:01"})  # fmt: skip
        port = self.create(f"logical-switches/{net}/ports", {
            "name": vm, "mac": vm_mac, "ips": ["10.0.1.10"],
            "attachment": {"type": "vif", "vif_id": vif}})  # fmt: skip
        if snat:
            self.create(f"logical-routers/{router}/nat-rules", {
                "type": "snat", "external_ip": SNAT_IP,
                "internal_ip": "10.0.0.0/16"})  # fmt: skip
        return service, router, net, port

    def active_node(self, service: str) -> str | None:
        """The node gateway service `service`'s status says it is active on."""
        body = self.api.get(f"/api/v1/gateway-services/{service}").get_json()
        return body["status"]["active_node"]  # type: ignore[no-any-return]

    def settled(self, *meshed: str) -> None:
        status = self.api.get("/api/v1/status").get_json()
        wait_for(
            lambda: self.api.get("/api/v1/status").get_json()["realized_generation"]
            >= status["config_generation"], WAIT, "realization")  # fmt: skip

        def mesh() -> bool:
            return all(set(meshed) - {n} <= self.physical.tunnel_peers(n) for n in meshed)

        assert self.physical.wait_pass(lambda c: mesh() and c.settled(), WAIT), "not settled"


@pytest.fixture
def site(
    config_db: OvsdbServer, universal_db: OvsdbServer, pki: Pki, tmp_path: Path
) -> Iterator[Site]:
    nodes = Sandbox(tmp_path / "nodes", pki=pki)  # over TLS, as under `loom up`
    with running_store(config_db.remote) as store, nodes as sandbox:
        app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
        api = ApiClient(app.test_client(), TOKEN)
        logical = LogicalController(config_db.remote, universal_db.remote).start()
        try:
            physical = PhysicalController(universal_db.remote, config_db.remote,
                                          **tls_controller(pki)).start()  # fmt: skip
            try:
                yield Site(api, physical, sandbox)
            finally:
                physical.stop()
        finally:
            logical.stop()


def ipv4(frame: bytes) -> tuple[str, str, int]:
    """(source, destination, TTL) of an untagged IPv4 frame; ("", "", 0) for others."""
    if frame[12:14] != b"\x08\x00":
        return "", "", 0
    ip = frame[14:]
    return ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20])), ip[8]


def sent_until(node: OvsNode, vif: str, packet: str, pcap: Path, check: Any) -> bytes:
    """Inject `packet` at `vif` (again while nothing satisfying `check` is in `pcap`: the
    tunnel mesh follows the VIFs); return the first frame that satisfies `check`."""
    found: list[bytes] = []

    def arrived() -> bool:
        node.receive(vif, packet)
        found[:] = [f for f in packets.read_pcap(pcap) if check(f)]
        return bool(found)

    wait_for(arrived, WAIT, f"a frame in {pcap.name}")
    return found[0]


def test_l3_gateway_floating_ip_and_snat(site: Site) -> None:
    hv1, hv2 = site.node("hv1"), site.node("hv2")
    gw = site.node("gw1", "gateway")
    gw.add_uplink()
    gw.set_neighbour("172.16.0.1", NEXT_HOP_MAC)
    _, router, net, vm1 = site.l3_network(["gw1"])
    site.create(f"logical-switches/{net}/ports", {
        "name": "vm2", "mac": mac(2), "ips": ["10.0.1.20"],
        "attachment": {"type": "vif", "vif_id": "vif-vm2"}})  # fmt: skip
    site.create(f"logical-routers/{router}/nat-rules", {
        "type": "floating-ip", "external_ip": "172.16.0.102", "internal_ip": "10.0.1.10",
        "logical_port_id": vm1})  # fmt: skip
    hv1.add_vif("vm1", "vif-vm1", mac(1))
    hv2.add_vif("vm2", "vif-vm2", mac(2))
    site.settled("hv1", "gw1")
    uplink = gw.run_dir / "uplink-tx.pcap"

    # vm1 (floating IP) to the Internet: out of the gateway's uplink, from its floating IP,
    # to the next hop's MAC, TTL decremented.
    out = packets.icmp_echo(mac(1), "00:00:00:aa:00:01", "10.0.1.10", "8.8.8.8")
    frame = sent_until(
        hv1,
        "vm1",
        out,
        uplink,
        lambda f: ipv4(f)[:2] == ("172.16.0.102", "8.8.8.8"),
    )
    assert frame[0:6] == bytes.fromhex(NEXT_HOP_MAC.replace(":", ""))
    assert ipv4(frame) == ("172.16.0.102", "8.8.8.8", 63)
    # vm2 (no floating IP) goes out SNAT'ed to the router's SNAT address.
    out2 = packets.icmp_echo(mac(2), "00:00:00:aa:00:01", "10.0.1.20", "8.8.4.4")
    frame = sent_until(
        hv2,
        "vm2",
        out2,
        uplink,
        lambda f: ipv4(f)[:2] == (SNAT_IP, "8.8.4.4"),
    )
    assert ipv4(frame) == (SNAT_IP, "8.8.4.4", 63)
    # From the Internet to the floating IP: DNAT'ed to vm1, delivered on hv1.
    bindings = site.physical.universal.rows["Gateway_Assignment"].values()
    uplink_mac = next(iter(bindings))["uplink_mac"]
    inbound = packets.icmp_echo(NEXT_HOP_MAC, uplink_mac, "8.8.8.8", "172.16.0.102")
    frame = sent_until(
        gw,
        "uplink",
        inbound,
        hv1.run_dir / "vm1-tx.pcap",
        lambda f: ipv4(f)[1] == "10.0.1.10",
    )
    assert ipv4(frame) == ("8.8.8.8", "10.0.1.10", 63)
    assert frame[0:6] == bytes.fromhex(mac(1).replace(":", ""))


def test_l2_gateway_bridges_to_a_vlan(site: Site) -> None:
    hv1 = site.node("hv1")
    gw = site.node("gw1", "gateway")
    gw.add_uplink()
    l2 = site.create("gateway-services", {
        "name": "l2", "type": "l2", "gateway_node_ids": [site.ids["gw1"]]})  # fmt: skip
    sw = site.create("logical-switches", {"name": "sw", "tenant": "t"})
    site.create(f"logical-switches/{sw}/ports", {
        "name": "vm1", "mac": mac(1), "ips": ["10.0.0.1"],
        "attachment": {"type": "vif", "vif_id": "vif-vm1"}})  # fmt: skip
    site.create(f"logical-switches/{sw}/ports", {
        "name": "bridge", "mac": "00:00:00:00:0f:01", "port_security": False,
        "attachment": {"type": "l2-gateway", "gateway_service_id": l2, "vlan": 100}})  # fmt: skip
    hv1.add_vif("vm1", "vif-vm1", mac(1))
    site.settled("hv1", "gw1")
    # vm1's broadcast leaves the gateway's uplink tagged with VLAN 100.
    arp = packets.arp_request(mac(1), "10.0.0.1", "10.0.0.77")
    frame = sent_until(hv1, "vm1", arp, gw.run_dir / "uplink-tx.pcap",
                       lambda f: f[12:14] == b"\x81\x00" and f[16:18] == b"\x08\x06")  # fmt: skip
    assert int.from_bytes(frame[14:16], "big") & 0xFFF == 100
    # A host on VLAN 100 reaches vm1; the frame arrives untagged.
    host = "00:00:00:00:0f:50"
    inbound = packets.icmp_echo(host, mac(1), "10.0.0.50", "10.0.0.1", vlan=100)
    frame = sent_until(
        gw,
        "uplink",
        inbound,
        hv1.run_dir / "vm1-tx.pcap",
        lambda f: f[6:12] == bytes.fromhex(host.replace(":", "")),
    )
    assert frame[12:14] == b"\x08\x00"


def test_broadcast_through_a_service_node(site: Site) -> None:
    hv = [site.node(f"hv{i}") for i in (1, 2, 3)]
    site.node("sn1", "service-node")
    sw = site.create("logical-switches", {
        "name": "sw", "tenant": "t", "replication_mode": "service-node"})  # fmt: skip
    for i, node in enumerate(hv, start=1):
        site.create(f"logical-switches/{sw}/ports", {
            "name": f"p{i}", "mac": mac(i), "ips": [f"10.0.0.{i}"],
            "attachment": {"type": "vif", "vif_id": f"vif-p{i}"}})  # fmt: skip
        node.add_vif("vm", f"vif-p{i}", mac(i))
    site.settled("hv1", "sn1")
    # hv1 sends one copy, to the service node (a bundle of its tunnels that BFD watches).
    flood = [f for f in site.physical.flows("hv1") if f.table == 64 and f.priority == 100]
    assert len(flood) == 1
    assert "bundle(eth_src,0,active_backup,ofport,members:" in flood[0].actions
    # ... which replicates it to hv2 and hv3 (BFD must come up first: wait for delivery).
    arp = packets.arp_request(mac(1), "10.0.0.1", "10.0.0.77")
    for node in hv[1:]:
        sent_until(hv[0], "vm", arp, node.run_dir / "vm-tx.pcap",
                   lambda f: f[12:14] == b"\x08\x06" and f[6:12] == bytes.fromhex(
                       mac(1).replace(":", "")))  # fmt: skip


def test_l3_gateway_fails_over_when_bfd_loses_its_node(site: Site) -> None:
    """An L3 service on two gateway nodes. Its traffic leaves the active node's uplink;
    that node's ovs-vswitchd stops while its OVSDB stays connected to the controller (a
    dead datapath the controller cannot see): the BFD sessions to it go down, and the
    service moves to the other node, whose uplink then carries the traffic."""
    hv1 = site.node("hv1")
    gateways = {name: site.node(name, "gateway") for name in ("gw1", "gw2")}
    for gw in gateways.values():
        gw.add_uplink()
        gw.set_neighbour("172.16.0.1", NEXT_HOP_MAC)
    service, *_ = site.l3_network(["gw1", "gw2"])
    hv1.add_vif("vm1", "vif-vm1", mac(1))
    site.settled("hv1", "gw1", "gw2")
    out = packets.icmp_echo(mac(1), "00:00:00:aa:00:01", "10.0.1.10", "8.8.8.8")

    def snat(frame: bytes) -> bool:
        return ipv4(frame)[:2] == (SNAT_IP, "8.8.8.8")

    def leaving() -> set[str]:
        return {
            name
            for name, gw in gateways.items()
            if any(snat(f) for f in packets.read_pcap(gw.run_dir / "uplink-tx.pcap"))
        }

    def left_by_one() -> bool:
        hv1.receive("vm1", out)
        return bool(leaving())

    wait_for(left_by_one, WAIT, "the service's traffic on an uplink")
    (active,) = leaving()
    (standby,) = set(gateways) - {active}
    # The service's status names the node its traffic leaves by (written by its master).
    wait_for(lambda: site.active_node(service) == active, WAIT, f"active_node {active}")
    # Every session to the active node has come up (one never up says nothing of it).
    peers = ("hv1", standby)
    wait_for(lambda: all(site.physical.nodes[p].session.bfd().get(active) for p in peers),
             WAIT, f"BFD to {active} up")  # fmt: skip
    gateways[active].vswitchd.stop()
    sent_until(hv1, "vm1", out, gateways[standby].run_dir / "uplink-tx.pcap", snat)
    assert active in site.physical.nodes, "the node stays connected: BFD moved the service"
    wait_for(lambda: site.active_node(service) == standby, WAIT, f"active_node {standby}")
    # What moved it is public: hv1's status (written by its master, read by every
    # controller) says its session to the old gateway is down.
    status = site.api.get(f"/api/v1/transport-nodes/{site.ids['hv1']}").get_json()["status"]
    assert status["bfd"].get(active) == "down", status
    assert status["bfd"].get(standby) == "up", status


def test_two_l3_services_share_one_untagged_uplink(site: Site) -> None:
    """Two tenants' routers, each with its own L3 service, both active on one gateway node
    and untagged on its one uplink (every tenant's uplink on the same physical segment):
    a packet to a service's uplink MAC enters that tenant's router only, and a broadcast
    ARP reaches both, the one whose address it asks for answering."""
    hv1 = site.node("hv1")
    gw = site.node("gw1", "gateway")
    gw.add_uplink()
    gw.set_neighbour("172.16.0.1", NEXT_HOP_MAC)
    vms = {}
    for i, tenant in enumerate(("red", "blue"), start=1):
        l3, router, _, vm = site.l3_network(
            ["gw1"], tenant=tenant, uplink_ip=f"172.16.0.{i + 1}", vm=f"vm-{tenant}",
            vif=f"vif-{tenant}", vm_mac=mac(i), snat=False)  # fmt: skip
        site.create(f"logical-routers/{router}/nat-rules", {
            "type": "floating-ip", "external_ip": f"172.16.0.{100 + i}",
            "internal_ip": "10.0.1.10", "logical_port_id": vm})  # fmt: skip
        hv1.add_vif(f"vm-{tenant}", f"vif-{tenant}", mac(i))
        vms[tenant] = (f"vm-{tenant}", f"172.16.0.{100 + i}", f"172.16.0.{i + 1}", l3)
    site.settled("hv1", "gw1")
    macs = {str(row["service"]): str(row["uplink_mac"])
            for row in site.physical.universal.rows["Gateway_Assignment"].values()}  # fmt: skip

    def received(vm: str, source: str) -> int:
        pcap = hv1.run_dir / f"{vm}-tx.pcap"
        return sum(ipv4(f)[:2] == (source, "10.0.1.10") for f in packets.read_pcap(pcap))

    sources = {"red": "8.8.8.8", "blue": "8.8.4.4"}  # (which tenant's packet is which)
    for name in ("red", "blue"):
        vm, floating, _, service = vms[name]
        inbound = packets.icmp_echo(NEXT_HOP_MAC, macs[service], sources[name], floating)
        frame = sent_until(gw, "uplink", inbound, hv1.run_dir / f"{vm}-tx.pcap",
                           lambda f, s=sources[name]: ipv4(f)[:2] == (s, "10.0.1.10"))  # fmt: skip
        assert frame[0:6] == bytes.fromhex(mac(1 if name == "red" else 2).replace(":", ""))
    # Who has each uplink address? (broadcast: every router on the segment sees it; the
    # one it asks for answers, with its own MAC, and no other)
    uplink_tx = gw.run_dir / "uplink-tx.pcap"

    def arp_replies(sha: bytes) -> int:
        return sum(f[12:14] == b"\x08\x06" and f[20:22] == b"\x00\x02" and f[22:28] == sha
                   for f in packets.read_pcap(uplink_tx))  # fmt: skip

    for name, other in (("blue", "red"), ("red", "blue")):
        _, _, address, service = vms[name]
        own = bytes.fromhex(macs[service].replace(":", ""))
        others = bytes.fromhex(macs[vms[other][3]].replace(":", ""))
        before = arp_replies(others)
        ask = packets.arp_request(NEXT_HOP_MAC, "172.16.0.1", address)
        reply = sent_until(gw, "uplink", ask, uplink_tx,
                           lambda f, own=own: f[12:14] == b"\x08\x06"
                           and f[20:22] == b"\x00\x02" and f[22:28] == own)  # fmt: skip
        assert reply[28:32] == bytes(int(b) for b in address.split("."))
        assert arp_replies(others) == before, f"{other} answered for {name}'s address"
    # Nothing crossed over (checked last: a stray copy has had the ARP exchanges' time).
    assert received("vm-red", sources["blue"]) == 0, "blue's traffic reached red"
    assert received("vm-blue", sources["red"]) == 0, "red's traffic reached blue"


def test_l3_gateway_learns_its_next_hops_mac(site: Site) -> None:
    """An L3 service whose gateway node names no static neighbour for the next hop: the
    node asks for it by ARP out of the uplink (from the uplink's MAC and address); until the
    reply, nothing goes out to the next hop; after it, the service's traffic leaves with the
    MAC the reply gave."""
    hv1 = site.node("hv1")
    gw = site.node("gw1", "gateway")
    gw.add_uplink()  # (no set_neighbour: the next hop's MAC is to be learned)
    service, *_ = site.l3_network(["gw1"])
    hv1.add_vif("vm1", "vif-vm1", mac(1))
    site.settled("hv1", "gw1")
    uplink_tx = gw.run_dir / "uplink-tx.pcap"
    uplink_mac = next(iter(site.physical.universal.rows["Gateway_Assignment"].values()))[
        "uplink_mac"]  # fmt: skip
    uplink = bytes.fromhex(uplink_mac.replace(":", ""))

    def asks(frame: bytes) -> bool:  # who has 172.16.0.1? tell 172.16.0.2 (the uplink)
        return (frame[12:14] == b"\x08\x06" and frame[20:22] == b"\x00\x01"
                and frame[22:28] == uplink and frame[28:32] == bytes([172, 16, 0, 2])
                and frame[38:42] == bytes([172, 16, 0, 1]))  # fmt: skip

    wait_for(lambda: any(asks(f) for f in packets.read_pcap(uplink_tx)), WAIT, "the ARP request")
    out = packets.icmp_echo(mac(1), "00:00:00:aa:00:01", "10.0.1.10", "8.8.8.8")
    hv1.receive("vm1", out)  # before the reply: it must not leave
    reply_body = bytes.fromhex("0001080006040002") + bytes.fromhex(NEXT_HOP_MAC.replace(":", ""))
    reply_body += bytes([172, 16, 0, 1]) + uplink + bytes([172, 16, 0, 2])
    reply = packets.ethernet(NEXT_HOP_MAC, uplink_mac, 0x0806, reply_body)
    gw.receive("uplink", reply)
    frame = sent_until(hv1, "vm1", out, uplink_tx,
                       lambda f: ipv4(f)[:2] == (SNAT_IP, "8.8.8.8"))  # fmt: skip
    assert frame[0:6] == bytes.fromhex(NEXT_HOP_MAC.replace(":", "")), "the MAC learned"
    unresolved = [f for f in packets.read_pcap(uplink_tx)
                  if ipv4(f)[1] == "8.8.8.8" and f[0:6] != frame[0:6]]  # fmt: skip
    assert not unresolved, "a packet left before the next hop's MAC was known"
    assert site.active_node(service) == "gw1"
    # `loom flows gw1`: the flow the node learned is shown as learned, and the node, holding
    # what is computed and what it learned, is in sync.
    host, port = httpd.serve("127.0.0.1:0")
    site.physical.heartbeat.url = f"http://{host}:{port}"  # (loom up: its --metrics)
    url = f"/api/v1/transport-nodes/{site.ids['gw1']}/flows"

    def asked() -> Any:
        reply = site.api.get(url)
        return reply.get_json() if reply.status_code == 200 else None

    body = wait_for(asked, WAIT, "the controller's endpoint published")
    assert body["in_sync"] is True, body["changes"]
    (learned,) = body["learned"]
    assert learned.startswith("table=65,"), learned
    assert NEXT_HOP_MAC in learned, learned
    assert body["installed_flows"] == body["computed_flows"] + 1
    # A reconciliation (the node reconnects: its whole table compared with the computed
    # one) leaves it there: the MAC stays known, with no new ARP reply.
    old = site.physical.nodes["gw1"].session
    gw.set_managers([])
    assert site.physical.wait_pass(lambda c: not old.alive, WAIT), "gw1 not disconnected"
    gw.set_managers([site.physical.target])

    def reconciled(c: PhysicalController) -> bool:
        state = c.nodes.get("gw1")
        return (state is not None and state.session is not old
                and c.life("gw1") is Life.SYNCED and "gw1" in c.masters())  # fmt: skip

    assert site.physical.wait_pass(reconciled, WAIT), "gw1 not back and reconciled"
    body = site.api.get(url).get_json()
    assert body["in_sync"] is True, body["changes"]
    assert body["learned"] == [learned], "the reconciliation removed the learned MAC"
    # The node gets a static neighbour for the next hop: nothing is learned any more, and
    # the flow learned before goes with the next push (not left behind as a difference).
    gw.set_neighbour("172.16.0.1", NEXT_HOP_MAC)

    def static() -> Any:
        body = site.api.get(url).get_json()
        return body if not body["learned"] else None

    body = wait_for(static, WAIT, "the learned flow removed")
    assert body["in_sync"] is True, body["changes"]
    assert body["installed_flows"] == body["computed_flows"]
