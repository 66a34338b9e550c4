"""Switches programmed by Hoverboards on real OVS (dummy datapath, Geneve on a dummy
underlay): a host holds only its own ports' lookups and a default to the switch's
Hoverboards, which hold every port's and send what hosts give them on to the destination's
node; a VM added needs its own host and the Hoverboards, no other host.

Packets are injected into VMs' ports (`netdev-dummy/receive`) and read back from the
destination's capture; the Hoverboards' entry flow counts what passed through them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.testing import ApiClient, running_store
from loom_common.ovsdb import OvsdbServer
from loom_common.pki import Pki
from loom_common.testing import tls_controller, wait_for
from loom_logical.controller import LogicalController
from loom_ovs import packets
from loom_ovs.flows import Flow
from loom_ovs.sandbox import OvsNode, Sandbox
from loom_physical.controller import PhysicalController

pytestmark = [pytest.mark.ovs, pytest.mark.system]

TOKEN = "admin-secret"
WAIT = 30.0
HOSTS = ("hv1", "hv2", "hv3")
HOVERBOARDS = ("hb1", "hb2")


def mac(i: int) -> str:
    return f"50:54:00:00:03:{i:02x}"


class Network:
    """API, controllers and nodes, and one switch programmed by Hoverboards."""

    def __init__(self, api: ApiClient, physical: PhysicalController, sandbox: Sandbox) -> None:
        self.api, self.physical, self.sandbox = api, physical, sandbox
        zone = api.create("/api/v1/transport-zones", {"name": "tz"})["id"]
        self.nodes: dict[str, OvsNode] = {}
        for name in HOSTS + HOVERBOARDS:
            node = self.nodes[name] = sandbox.add_node(name, [physical.target])
            api.create("/api/v1/transport-nodes", {
                "name": name, "node_type": "hoverboard" if name in HOVERBOARDS else "hypervisor",
                "system_id": name, "transport_zone_ids": [zone],
                "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})  # fmt: skip
        self.hosts: set[str] = set()
        """The hosts with a VM."""
        self.switch = api.create("/api/v1/logical-switches", {
            "name": "big", "tenant": "t", "programming_model": "hoverboard"})["id"]  # fmt: skip

    def vm(self, i: int, host: str) -> None:
        self.api.create(f"/api/v1/logical-switches/{self.switch}/ports", {
            "name": f"p{i}", "mac": mac(i), "ips": [f"10.0.0.{i}"],
            "attachment": {"type": "vif", "vif_id": f"vif-p{i}"}})  # fmt: skip
        self.nodes[host].add_vif(f"vm{i}", f"vif-p{i}", mac(i))
        self.hosts.add(host)

    def settled(self, *, hoverboards: bool = True) -> None:
        """Wait for realization and a settled controller (`hoverboards`: with the hosts'
        tunnels to the Hoverboards, which a preprogrammed switch does not need)."""
        status = self.api.get("/api/v1/status").get_json()
        wait_for(
            lambda: self.api.get("/api/v1/status").get_json()["realized_generation"]
            >= status["config_generation"], WAIT, "realization")  # fmt: skip

        def meshed() -> bool:  # (each host with a VM has its tunnels to the Hoverboards)
            return all(set(HOVERBOARDS) <= self.physical.tunnel_peers(h) for h in self.hosts
                       ) or not hoverboards  # fmt: skip

        assert self.physical.wait_pass(lambda c: meshed() and c.settled(), WAIT), "not settled"

    def flows(self, node: str) -> list[Flow]:
        return self.physical.flows(node)

    def through_hoverboards(self) -> int:
        """Packets the Hoverboards' entry flows (egress port 0xfffd, table 70) took."""
        total = 0
        for name in HOVERBOARDS:
            text = self.nodes[name].ofctl("dump-flows", "table=70,reg15=0xfffd")
            total += sum(int(n) for n in re.findall(r"n_packets=(\d+)", text))
        return total

    def reaches(self, i: int, host: str, j: int, to: str) -> None:
        """A unicast from VM i (on `host`) arrives at VM j (on `to`)."""
        frame = packets.udp(mac(i), mac(j), f"10.0.0.{i}", f"10.0.0.{j}", 5000, 6000)
        pcap = self.nodes[to].run_dir / f"vm{j}-tx.pcap"
        want = bytes.fromhex(mac(j).replace(":", "") + mac(i).replace(":", ""))

        def arrived() -> bool:
            self.nodes[host].receive(f"vm{i}", frame)
            return any(f[:12] == want for f in packets.read_pcap(pcap))

        wait_for(arrived, WAIT, f"vm{i} -> vm{j}")


@pytest.fixture
def network(
    config_db: OvsdbServer, universal_db: OvsdbServer, pki: Pki, tmp_path: Path
) -> Iterator[Network]:
    nodes = Sandbox(tmp_path / "nodes", pki=pki)
    with running_store(config_db.remote) as store, nodes as sandbox:
        app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
        api = ApiClient(app.test_client(), TOKEN)
        logical = LogicalController(config_db.remote, universal_db.remote).start()
        try:
            physical = PhysicalController(universal_db.remote, config_db.remote,
                                          **tls_controller(pki)).start()  # fmt: skip
            try:
                yield Network(api, physical, sandbox)
            finally:
                physical.stop()
        finally:
            logical.stop()


def _looks_up(flows: list[Flow], i: int) -> bool:
    return any(f"dl_dst={mac(i)}" in f.match for f in flows)


def test_hosts_hold_their_own_ports_and_the_hoverboards_every_port(network: Network) -> None:
    for i, host in enumerate(HOSTS, start=1):
        network.vm(i, host)
    network.settled()
    hv1, hb1 = network.flows("hv1"), network.flows("hb1")
    # hv1 looks up its own VM only; the Hoverboards look up every VM and know its node.
    assert _looks_up(hv1, 1)
    assert not _looks_up(hv1, 2)
    assert not _looks_up(hv1, 3)
    assert all(_looks_up(hb1, i) for i in (1, 2, 3))
    hv2_ip = network.nodes["hv2"].encap_ip
    assert not [f for f in hv1 if f.table == 70 and f"{hv2_ip}->tun_dst" in f.actions]
    assert [f for f in hb1 if f.table == 70 and f"{hv2_ip}->tun_dst" in f.actions]
    # What hv1 does not know goes to a live Hoverboard (a BFD-kept bundle, spread by flow).
    (default,) = [f for f in hv1 if f.table == 64 and f.priority == 105]
    assert "set_field:0xfffd->reg15" in default.actions
    assert "bundle(symmetric_l4,0,hrw,ofport,members:" in default.actions
    # And packets take that way, both directions, through the Hoverboards.
    before = network.through_hoverboards()
    network.reaches(1, "hv1", 2, "hv2")
    network.reaches(2, "hv2", 1, "hv1")
    network.reaches(3, "hv3", 1, "hv1")
    assert network.through_hoverboards() >= before + 3


def test_a_new_vm_needs_only_its_host_and_the_hoverboards(network: Network) -> None:
    network.vm(1, "hv1")
    network.vm(2, "hv2")
    network.settled()
    hv1_before = sorted(network.flows("hv1"))
    network.vm(3, "hv3")
    network.settled()
    # hv1's table did not change: nothing about the new VM reached it ...
    assert sorted(network.flows("hv1")) == hv1_before
    # ... yet the new VM reaches hv1's and is reached from it.
    network.reaches(3, "hv3", 1, "hv1")
    network.reaches(1, "hv1", 3, "hv3")


def test_a_switch_moves_between_models_live(network: Network) -> None:
    network.vm(1, "hv1")
    network.vm(2, "hv2")
    network.settled()
    assert not _looks_up(network.flows("hv1"), 2)
    done = network.api.patch(f"/api/v1/logical-switches/{network.switch}",
                             {"programming_model": "preprogrammed"})  # fmt: skip
    assert done.status_code == 200
    network.settled(hoverboards=False)
    assert _looks_up(network.flows("hv1"), 2), "preprogrammed: every host has every port"
    assert not [f for f in network.flows("hv1") if f.table == 64 and f.priority == 105]
    network.reaches(1, "hv1", 2, "hv2")
    network.api.patch(f"/api/v1/logical-switches/{network.switch}",
                      {"programming_model": "hoverboard"})  # fmt: skip
    network.settled()
    assert not _looks_up(network.flows("hv1"), 2)
    network.reaches(1, "hv1", 2, "hv2")
