"""A hypervisor's ovs-vswitchd killed (kill -9) and started again, under ping (netdev, root).

A restarted ovs-vswitchd has empty OpenFlow tables while its ovsdb-server, which kept
running, keeps the node's OVSDB connection to its controller up and says nothing (a monitor
of Open_vSwitch, Bridge, Interface and Datapath sees no update on a restart). The physical
controller watches each node's kept OpenFlow channel, sees its end, reports the node as
realizing nothing, reaches the switch again as soon as it is back and installs its table
then (`docs/physical.md`, "A node's switch restarted"). Checked here, with one VM pinging
another on a second hypervisor every 50 ms: the node's status and `/realization` never say
realized for a table the switch does not hold, and forwarding is back within a bound of
the switch being up (the measured figures are printed, `-s`). Every daemon is stopped by
the fixtures, even on failure.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.testing import ApiClient, running_store
from loom_common.ovsdb import OvsdbServer
from loom_common.pki import Pki
from loom_common.testing import tls_controller, wait_for
from loom_logical.controller import LogicalController
from loom_nvp.ping import Pinger
from loom_ovs import packets
from loom_ovs.sandbox import OvsNode, Sandbox, Vif
from loom_physical.controller import PhysicalController

pytestmark = [pytest.mark.ovs, pytest.mark.system]

TOKEN = "admin-secret"
WAIT = 30.0
DOWN_S = 2.0
"""How long the test keeps the switch down (the status is watched meanwhile)."""
BACK_S = 5.0
"""The longest forwarding may take to come back once the switch is up again."""


@dataclass
class Site:
    api: ApiClient
    physical: PhysicalController
    sandbox: Sandbox
    vm1: Vif
    vm2: Vif

    def node(self, name: str) -> OvsNode:
        return self.sandbox.nodes[name]

    def generation(self) -> int:
        return int(self.api.get("/api/v1/status").get_json()["config_generation"])

    def node_status(self, name: str) -> dict[str, Any]:
        items = self.api.get("/api/v1/transport-nodes").get_json()["items"]
        return dict(next(item["status"] for item in items if item["name"] == name))

    def realization(self) -> bool:
        return bool(self.api.get("/api/v1/realization").get_json()["realized"])


def _hypervisor(api: ApiClient, sandbox: Sandbox, physical: PhysicalController, zone: str,
                switch: str, i: int) -> Vif:  # fmt: skip
    """Hypervisor `hv<i>` with VM `vm<i>` (10.7.0.<i>/24) on `switch`."""
    name = f"hv{i}"
    node = sandbox.add_node(name, [physical.target])
    endpoints = [{"encap": "geneve", "ip": node.encap_ip}]
    api.create("/api/v1/transport-nodes", {"name": name, "node_type": "hypervisor",
                                           "system_id": name, "transport_zone_ids": [zone],
                                           "tunnel_endpoints": endpoints})  # fmt: skip
    mac, ip = f"50:54:00:00:07:{i:02x}", f"10.7.0.{i}"
    api.create(f"/api/v1/logical-switches/{switch}/ports", {
        "name": f"vm{i}", "mac": mac, "ips": [ip],
        "attachment": {"type": "vif", "vif_id": f"vif-vm{i}"}})  # fmt: skip
    return node.add_vif(f"vm{i}", f"vif-vm{i}", mac, f"{ip}/24")


@contextlib.contextmanager
def _running(config_db: OvsdbServer, universal_db: OvsdbServer, pki: Pki, root: Path,
             datapath: str) -> Iterator[Site]:  # fmt: skip
    """API (in-process), a logical and a physical controller, two hypervisors with a VM
    each on one switch, realized; every daemon stopped at the end."""
    with (
        running_store(config_db.remote) as store,
        Sandbox(root / "nodes", datapath=datapath, pki=pki) as sandbox,
    ):
        app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
        api = ApiClient(app.test_client(), TOKEN)
        logical = LogicalController(config_db.remote, universal_db.remote).start()
        try:
            physical = PhysicalController(universal_db.remote, config_db.remote,
                                          **tls_controller(pki)).start()  # fmt: skip
            try:
                zone = str(api.create("/api/v1/transport-zones", {"name": "tz"})["id"])
                body = {"name": "web", "tenant": "t"}
                switch = str(api.create("/api/v1/logical-switches", body)["id"])
                vms = [_hypervisor(api, sandbox, physical, zone, switch, i) for i in (1, 2)]
                result = Site(api, physical, sandbox, *vms)

                def realized() -> bool:
                    return result.realization() and physical.wait_pass(lambda c: c.settled(), 1.0)

                wait_for(realized, WAIT, "the configuration realized")
                yield result
            finally:
                physical.stop()
        finally:
            logical.stop()


@pytest.fixture
def site(config_db: OvsdbServer, universal_db: OvsdbServer, pki: Pki,
         tmp_path: Path) -> Iterator[Site]:  # fmt: skip
    """Two netdev hypervisors, each VM a namespace (root)."""
    assert os.geteuid() == 0, "pings between VMs in namespaces: runs as root (netdev)"
    with _running(config_db, universal_db, pki, tmp_path, "netdev") as running:
        yield running


@pytest.fixture
def tls_site(config_db: OvsdbServer, universal_db: OvsdbServer, pki: Pki,
             tmp_path: Path) -> Iterator[Site]:  # fmt: skip
    """Two dummy-datapath hypervisors whose OpenFlow is reached over TLS (`ssl:`)."""
    with _running(config_db, universal_db, pki, tmp_path, "dummy") as running:
        yield running


def _says_realized(site: Site, name: str, generation: int) -> bool:
    """Node `name`'s status says it realizes `generation`."""
    return int(site.node_status(name)["realized_generation"]) >= generation


def _in_sync(site: Site, name: str) -> bool:
    """The node's switch holds exactly the table computed for it (`loom flows`)."""
    code, body = site.physical.endpoints.flows_report(name)
    return code == 200 and bool(body["in_sync"]) and body["installed_flows"] > 0


def test_a_restarted_vswitchd_gets_its_table_back_at_once(site: Site) -> None:
    generation = site.generation()
    hv1 = site.node("hv1")
    assert _says_realized(site, "hv1", generation)
    # (a VIF's ofport arriving after the generation is realized is a push of its own)
    wait_for(lambda: _in_sync(site, "hv1"), WAIT, "hv1's table as computed")
    assert site.vm2.ip is not None
    pinger = Pinger(site.vm1, site.vm2.ip.partition("/")[0]).start()
    try:
        pinger.wait_replies(5, WAIT)
        killed = time.monotonic()
        hv1.vswitchd.kill9()
        # Its OVSDB stays connected: only the OpenFlow channel's end says the table is gone.
        wait_for(lambda: not _says_realized(site, "hv1", generation), 2.0,
                 "hv1's status no longer saying it realizes the generation")  # fmt: skip
        detected = time.monotonic() - killed
        status = site.node_status("hv1")
        assert status["connected"] is True, status
        assert status["realized_generation"] == 0, status
        assert "its OpenFlow connection closed" in status["message"], status
        assert not site.realization(), "the configuration realized on a node with no table"
        while time.monotonic() - killed < DOWN_S:  # down: never said realized
            assert not _says_realized(site, "hv1", generation), site.node_status("hv1")
            assert not site.realization()
            time.sleep(0.1)  # (a sampling period: nothing is waited for)
        answered = len(pinger.replied)
        started = time.monotonic()
        site.sandbox.restart_vswitchd(hv1)  # (with the underlay's address, route, neighbours)
        up = time.monotonic()
        # Up again: realized is said only once the table is in (checked at every look).
        while not _says_realized(site, "hv1", generation):
            assert time.monotonic() - up < WAIT, site.node_status("hv1")
            time.sleep(0.02)
        realized_s = time.monotonic() - up
        assert _in_sync(site, "hv1"), "hv1 said realized before its table was in"
        wait_for(lambda: len(pinger.replied) > answered, WAIT, "a ping answered again")
        back_s = time.monotonic() - up
        pinger.wait_replies(len(pinger.replied) + 5, WAIT)
    finally:
        pings, lost = pinger.stop()
    assert site.realization()
    print(f"\nvswitchd restart: detected {detected:.3f} s after the kill; the switch up "
          f"{up - started:.3f} s after its start; status realized {realized_s:.3f} s and "
          f"forwarding {back_s:.3f} s after it was up; {len(lost)} of {pings} pings lost "
          f"({DOWN_S:g} s down)")  # fmt: skip
    assert back_s < BACK_S, f"forwarding back {back_s:.2f} s after the switch was up"
    # (the echoes of the time down are lost, and none once forwarding is back)
    assert len(lost) <= (DOWN_S + back_s) / 0.05 + 10, lost


def test_flow_restore_wait_holds_the_table_until_the_flows_are_back(site: Site) -> None:
    """`ovs-ctl restart` starts ovs-vswitchd with `flow-restore-wait` and puts the flows it
    saved back itself: meanwhile the node is not realized and nothing is pushed to it (a
    flow written by hand stays); once it is cleared the table is compared and made what is
    computed (that flow removed)."""
    generation = site.generation()
    hv1 = site.node("hv1")
    hv1.vsctl("set", "Open_vSwitch", ".", "other_config:flow-restore-wait=true")
    wait_for(lambda: not _says_realized(site, "hv1", generation), 5.0,
             "hv1 not realized while it waits for its flows")  # fmt: skip
    assert "flow-restore-wait" in site.node_status("hv1")["message"]
    assert not site.realization()
    hv1.ofctl("add-flow", "cookie=0x7,table=0,priority=1,actions=drop")  # (what ovs-save does)
    passes = site.physical.passes
    assert site.physical.wait_pass(lambda c: c.passes > passes + 2, WAIT)  # (pushes nothing)
    assert "cookie=0x7," in hv1.ofctl("dump-flows")
    hv1.vsctl("remove", "Open_vSwitch", ".", "other_config", "flow-restore-wait")
    wait_for(lambda: _says_realized(site, "hv1", generation), 5.0, "hv1 realized again")
    assert _in_sync(site, "hv1")
    assert "cookie=0x7," not in hv1.ofctl("dump-flows")
    assert site.realization()


def test_a_tls_nodes_restarted_switch_gets_its_table_and_tlv_map_back(tls_site: Site) -> None:
    """A node whose OpenFlow is an `ssl:` address (the bridge listens with the node's
    certificate): after a kill -9 and restart of its ovs-vswitchd the channel is made again
    over TLS, the Geneve option mapped again (a restarted switch forgets it, and the flows
    that match the option need it) and the whole table installed; a packet crosses again."""
    site = tls_site
    generation = site.generation()
    hv1, hv2 = site.node("hv1"), site.node("hv2")
    assert hv1.openflow_address is not None
    assert hv1.openflow_address.startswith("ssl:")
    echo = packets.icmp_echo(site.vm1.mac, site.vm2.mac, "10.7.0.1", "10.7.0.2")

    def crosses() -> bool:
        before = hv2.tx_packets("vm2")
        hv1.receive("vm1", echo)
        return wait_until(lambda: hv2.tx_packets("vm2") > before, 0.5)

    wait_for(crosses, WAIT, "vm1's packet at vm2")
    hv1.vswitchd.kill9()
    wait_for(lambda: not _says_realized(site, "hv1", generation), 5.0, "hv1 not realized")
    site.sandbox.restart_vswitchd(hv1)  # (its TLV map empty: test_openflow.py)
    wait_for(lambda: _says_realized(site, "hv1", generation), WAIT, "hv1 realized again")
    assert _in_sync(site, "hv1")
    assert "0x102" in hv1.ofctl("dump-tlv-map")
    wait_for(crosses, WAIT, "vm1's packet at vm2 again")
    assert site.realization()


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll `predicate` for up to `timeout` seconds; whether it held."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
