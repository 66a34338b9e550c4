"""Stand-in transport nodes (`loom_lab.standin`) driven by a real physical controller, with
a real node beside them: they dial in, get br-int and tunnel ports, their VIFs are bound,
their tables hold exactly what the controller computed for them (digest equality), VIFs
plugged and unplugged at run time get and lose their flows; and two controllers with
ZooKeeper share them (every stand-in dials both)."""

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
from loom_common.testing import wait_for
from loom_common.zookeeper import ZooKeeperServer
from loom_lab.standin import Fleet, FleetGroup, NodeSpec, VifSpec, expected_digest
from loom_logical.controller import LogicalController
from loom_ovs.sandbox import Sandbox
from loom_physical.controller import PhysicalController

pytestmark = [pytest.mark.ovs, pytest.mark.system]

TOKEN = "admin-secret"
WAIT = 60.0
STANDINS = ["hv1", "hv2", "hv3", "hv4"]


def mac(i: int) -> str:
    return f"50:54:00:00:02:{i:02x}"


def encap_ip(i: int) -> str:
    return f"172.31.9.{i}"


@dataclass
class Site:
    """The API (in-process), a logical controller, physical controllers, a sandbox."""

    api: ApiClient
    logical: LogicalController
    sandbox: Sandbox
    zone: str
    universal: str
    """The universal DB's remote."""
    config: str

    def node(self, name: str, ip: str) -> None:
        self.api.create("/api/v1/transport-nodes", {
            "name": name, "node_type": "hypervisor", "system_id": name,
            "transport_zone_ids": [self.zone],
            "tunnel_endpoints": [{"encap": "geneve", "ip": ip}]})  # fmt: skip

    def port(self, switch: str, i: int) -> str:
        body = {"name": f"p{i}", "mac": mac(i), "ips": [f"10.0.0.{i}"],
                "attachment": {"type": "vif", "vif_id": f"vif-{i}"}}  # fmt: skip
        return str(self.api.create(f"/api/v1/logical-switches/{switch}/ports", body)["id"])

    def realized(self) -> None:
        """Wait until the API says the latest configuration is realized."""
        generation = self.api.get("/api/v1/status").get_json()["config_generation"]

        def done() -> bool:
            answer = self.api.get(f"/api/v1/realization?generation={generation}").get_json()
            return bool(answer["realized"])

        wait_for(done, WAIT, f"generation {generation} realized")

    def ports_up(self, switch: str) -> dict[str, Any]:
        items = self.api.get(f"/api/v1/logical-switches/{switch}/ports").get_json()["items"]
        return {p["name"]: p["status"].get("transport_node") for p in items if p["status"]["up"]}


@pytest.fixture
def site(config_db: OvsdbServer, universal_db: OvsdbServer, tmp_path: Path) -> Iterator[Site]:
    with running_store(config_db.remote) as store, Sandbox(tmp_path / "nodes") as sandbox:
        app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
        api = ApiClient(app.test_client(), TOKEN)
        logical = LogicalController(config_db.remote, universal_db.remote).start()
        try:
            zone = str(api.create("/api/v1/transport-zones", {"name": "tz"})["id"])
            yield Site(api, logical, sandbox, zone, universal_db.remote, config_db.remote)
        finally:
            logical.stop()


def _standins(site: Site) -> list[NodeSpec]:
    """hv<i>: ports p<2i-1> and p<2i> on one switch (so every node needs every other)."""
    specs = []
    for i, name in enumerate(STANDINS, start=1):
        site.node(name, encap_ip(i))
        vifs = tuple(VifSpec(f"vm{j}", f"vif-{j}", mac(j)) for j in (2 * i - 1, 2 * i))
        specs.append(NodeSpec(name, encap_ip(i), vifs))
    return specs


def _matches_computed(fleet: Fleet | FleetGroup, physical: PhysicalController, node: str) -> bool:
    flows = physical.flows(node)
    return bool(flows) and fleet.digest(node) == expected_digest(flows)


def _vif_flows(physical: PhysicalController, node: str, ofport: int) -> int:
    """The flows of node `node`'s table that take packets from `ofport` (its classifier)."""
    return sum(1 for f in physical.flows(node) if f"in_port={ofport}" in f.match.split(","))


def test_standins_beside_a_real_node(site: Site, tmp_path: Path) -> None:
    physical = PhysicalController(site.universal, site.config)
    physical.start()
    try:
        sw = str(site.api.create("/api/v1/logical-switches", {"name": "sw", "tenant": "t1"})["id"])
        specs = _standins(site)
        for i in range(1, 2 * len(STANDINS) + 1):
            site.port(sw, i)
        real = site.sandbox.add_node("real", [physical.target])
        site.node("real", real.encap_ip)
        site.port(sw, 20)
        real.add_vif("vm20", "vif-20", mac(20))
        with Fleet(tmp_path / "fleet", specs, [physical.target]) as fleet:
            site.realized()
            assert physical.wait_pass(lambda c: c.settled(), WAIT), "not settled"
            wait_for(lambda: len(site.ports_up(sw)) == 9, WAIT, "every port up")
            assert site.ports_up(sw) == {
                **{f"p{j}": f"hv{(j + 1) // 2}" for j in range(1, 9)}, "p20": "real"}  # fmt: skip
            for name in STANDINS:
                # br-int as the controller writes it, one flow-based tunnel port (every peer
                # is reached through it), with an ofport
                bridges = list(fleet.rows(name, "Bridge").values())
                assert [b["name"] for b in bridges] == ["br-int"]
                assert sorted(bridges[0]["protocols"][1]) == ["OpenFlow13", "OpenFlow15"]
                tunnels = [row for row in fleet.rows(name, "Interface").values()
                           if row.get("type") == "geneve"]  # fmt: skip
                assert [row["name"] for row in tunnels] == ["loom-geneve"]
                assert ["remote_ip", "flow"] in tunnels[0]["options"][1]
                # the number it asks for: the first table pushed already used it
                assert tunnels[0].get("ofport") == 65001
            # each table is exactly what the controller computed for its node (once the
            # passes that follow the bindings are done)
            assert physical.wait_pass(
                lambda c: c.settled() and all(_matches_computed(fleet, c, n) for n in STANDINS),
                WAIT,
            ), "a stand-in's table is not what the controller computed"
            for name in STANDINS:
                stats = fleet.stats(name)
                assert stats["flows"] == len(physical.flows(name))
                assert stats["failed"] == 0
                assert stats["unknown"] == 0
            assert len(real.ofctl("dump-flows").splitlines()) - 1 == len(physical.flows("real"))
            assert real.vsctl("get", "Interface", "loom-geneve", "ofport").strip() == "65001"
            # a VM boots on hv1: its port, then its VIF plugged through the control socket
            before = fleet.digest("hv1")
            site.port(sw, 9)
            ofport = fleet.add_vif("hv1", "vm9", "vif-9", mac(9))
            assert ofport is not None
            assert ofport > 2  # (after 2 VIFs)
            wait_for(lambda: site.ports_up(sw).get("p9") == "hv1", WAIT, "p9 up on hv1")
            site.realized()
            assert physical.wait_pass(
                lambda c: c.settled() and _vif_flows(c, "hv1", ofport) > 0
                and _matches_computed(fleet, c, "hv1"), WAIT
            ), "vm9's flows are not on hv1"  # fmt: skip
            assert fleet.digest("hv1") != before
            # ... and is unplugged: its flows go
            assert fleet.remove_vif("hv1", "vm9")
            assert physical.wait_pass(
                lambda c: c.settled() and _vif_flows(c, "hv1", ofport) == 0
                and _matches_computed(fleet, c, "hv1"), WAIT
            ), "vm9's flows stayed on hv1"  # fmt: skip
            wait_for(lambda: "p9" not in site.ports_up(sw), WAIT, "p9 down")
            assert fleet.stats()["cpu_seconds"] > 0
            assert fleet.cpu_seconds() > 0
    finally:
        physical.stop()


@pytest.mark.zk
@pytest.mark.timeout(180)
def test_two_controllers_share_the_standins(
    site: Site, tmp_path: Path, zk: ZooKeeperServer
) -> None:
    controllers = {
        name: PhysicalController(site.universal, site.config,
                                 name=name, zookeeper=zk.hosts, session_timeout=4.0)
        for name in ("pc1", "pc2")
    }  # fmt: skip
    try:
        for controller in controllers.values():
            controller.start()
        sw = str(site.api.create("/api/v1/logical-switches", {"name": "sw", "tenant": "t1"})["id"])
        specs = _standins(site)
        for i in range(1, 2 * len(STANDINS) + 1):
            site.port(sw, i)
        targets = [c.target for c in controllers.values()]
        # (served by two processes, as the benchmark's are)
        with FleetGroup(tmp_path / "fleet", specs, targets, processes=2) as fleet:
            assert len(fleet.pids) == 2

            def masters() -> dict[str, str]:
                items = site.api.get("/api/v1/transport-nodes").get_json()["items"]
                return {n["name"]: n["status"].get("controller") for n in items}

            wait_for(lambda: set(masters().values()) <= set(controllers) and None not in
                     masters().values(), WAIT, "every stand-in mastered")  # fmt: skip
            site.realized()
            wait_for(lambda: len(site.ports_up(sw)) == 8, WAIT, "every port up")
            for name in STANDINS:
                assert fleet.stats(name)["managers"] == 2  # it dials both
                master = controllers[masters()[name]]

                def holds_computed(c: PhysicalController, node: str = name) -> bool:
                    return c.settled() and _matches_computed(fleet, c, node)

                assert master.wait_pass(holds_computed, WAIT), (
                    f"{name}'s table is not what {master.name} computed"
                )
            # a VIF plugged at run time reaches its master's table and the stand-in's
            site.port(sw, 9)
            ofport = fleet.add_vif("hv2", "vm9", "vif-9", mac(9))
            assert ofport is not None
            master = controllers[masters()["hv2"]]
            assert master.wait_pass(
                lambda c: c.settled() and _vif_flows(c, "hv2", ofport) > 0
                and _matches_computed(fleet, c, "hv2"), WAIT
            ), "vm9's flows did not reach hv2"  # fmt: skip
            totals = fleet.stats()
            assert totals["connected"] == len(STANDINS)
            assert totals["unknown"] == 0
    finally:
        for controller in controllers.values():
            controller.stop()
