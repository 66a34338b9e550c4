"""The fault matrix: each daemon of a deployment killed (or hung) under a write load.

Two sites as `loom up` runs them (two logical and two physical controllers sharding their
work through ZooKeeper, the daemons supervised as `loom up` supervises them), each with two
netdev hypervisors and a VM on each: one with a standalone config DB and ZooKeeper, one
with a 3-member RAFT config DB and a 3-member ZooKeeper ensemble. Each row injects one
fault (`loom_nvp.faults.inject`; the config DB's directory is a small tmpfs, which the
full-disk rows fill) while a writer creates ports through the API and one VM
pings the other, and checks: no acknowledged write lost, the last acknowledged generation
realized again, no ping lost (the nodes keep their flows whatever the control plane does),
the universal DB equal to a fresh computation. Each row's figures are printed as a JSON
line (`-s`) and written to `fault-matrix.json` in the module's temporary directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_common.ovsdb import OvsdbServer
from loom_common.testing import SmallDisk
from loom_common.zookeeper import ZooKeeperServer
from loom_nvp import vswitchd
from loom_nvp.faults import Fault, inject, physical_master
from loom_nvp.site import Site

pytestmark = [pytest.mark.ovs, pytest.mark.zk, pytest.mark.system]

ROWS: dict[str, list[tuple[str, str, str]]] = {
    "standalone": [
        ("config DB killed", "config DB", "kill"),
        ("universal DB killed", "universal DB", "kill"),
        ("ZooKeeper killed", "ZooKeeper", "kill"),
        ("API server killed", "API server", "kill"),
        ("logical controller killed", "logical controller 0", "kill"),
        ("physical master killed", "physical master of hv1", "kill"),
        ("logical controller hung", "logical controller 1", "hang"),
        ("physical master hung", "physical master of hv1", "hang"),
        ("logical controller paused under churn", "logical controller 0", "pause"),
        ("config DB disk full", "config DB", "full"),
    ],
    "clustered": [
        ("config DB RAFT leader killed", "config DB leader", "kill"),
        ("ZooKeeper ensemble leader killed", "ZooKeeper leader", "kill"),
        ("config DB RAFT disk full", "config DB members", "full"),
    ],
}
"""Per site: (row, process — or a role resolved when the row runs —, fault)."""


class Bench:
    """A running site with its switch, VMs, and the rows' results."""

    def __init__(self, site: Site, switch: str, src: Any, dst_ip: str, root: Path,
                 disk: SmallDisk) -> None:  # fmt: skip
        self.site = site
        self.switch = switch
        self.src = src
        self.dst_ip = dst_ip
        self.root = root
        self.disk = disk
        """The tmpfs under the config DB (the full-disk rows fill it)."""
        self.rows: list[dict[str, Any]] = []


def _bench(kind: str, root: Path) -> Iterator[Bench]:
    assert os.geteuid() == 0, "the fault matrix pings between VMs: it runs as root (netdev)"
    clustered = kind == "clustered"
    db_dir = root / "loom" / ("config-db-cluster" if clustered else "config-db")
    with SmallDisk(db_dir, "64m") as disk:
        yield from _site(clustered, root, disk)


def _site(clustered: bool, root: Path, disk: SmallDisk) -> Iterator[Bench]:
    site = Site(root, db_cluster=clustered, zookeeper_ensemble=clustered).start()
    try:
        hv1, hv2 = site.add_node("hv1"), site.add_node("hv2")
        switch = site.api.create("/logical-switches", {"name": "web", "tenant": "t"})
        load = site.api.create("/logical-switches", {"name": "load", "tenant": "t"})
        src = site.add_vm(hv1, switch, "vm1", 1)
        dst = site.add_vm(hv2, switch, "vm2", 2)
        assert dst.ip is not None
        reply = site.api.request("GET", "/status")
        generation = int(reply.body["config_generation"])
        site.wait(lambda: site.api.realized(generation), 120, "the site realized")
        bench = Bench(site, load, src, dst.ip.partition("/")[0], root, disk)
        yield bench
        (root / "fault-matrix.json").write_text(json.dumps({"rows": bench.rows}, indent=1))
    finally:
        site.stop()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from _bench("standalone", tmp_path_factory.mktemp("standalone"))


@pytest.fixture(scope="module")
def clustered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield from _bench("clustered", tmp_path_factory.mktemp("clustered"))


def _resolve(site: Site, process: str) -> str:
    """A role ("physical master of hv1", "config DB leader", "ZooKeeper leader") as the
    name of the process that has it now."""
    if process.startswith("physical master of "):
        return physical_master(site, process.rpartition(" ")[2])
    if process == "config DB leader":
        for name, proc in site.deployment.processes.items():
            if (
                name.startswith("config DB member")
                and isinstance(proc, OvsdbServer)
                and "Role: leader" in proc.appctl("cluster/status", "Loom_Config")
            ):
                return name
        raise AssertionError("no config DB member is leader")
    if process == "ZooKeeper leader":
        for name, proc in site.deployment.processes.items():
            if isinstance(proc, ZooKeeperServer) and proc.mode() == "leader":
                return name
        raise AssertionError("no ZooKeeper member is leader")
    return process


def _run(bench: Bench, row: str, process: str, kind: str) -> dict[str, Any]:
    fault = Fault(row, _resolve(bench.site, process), kind)  # type: ignore[arg-type]
    scratch = bench.root / f"fresh-{len(bench.rows)}"
    result = inject(bench.site, fault, switch=bench.switch, src=bench.src,
                    dst_ip=bench.dst_ip, scratch=scratch, disk=bench.disk)  # fmt: skip
    bench.rows.append(result)
    print(json.dumps(result))
    assert result["acked_writes"] > 0
    assert result["acked_lost"] == 0, result
    assert result["pings"] > 0
    assert result["pings_lost"] == 0, result
    assert result["universal_equals_fresh"], result
    if kind == "kill":
        assert f"loom: {fault.process} restarted (" in "\n".join(bench.site.said)
    if kind in ("hang", "pause"):
        assert result["resumed_cleanly"], result
    if kind == "pause":
        assert result["churn_left"] == [], result
    if kind == "full":
        assert {e.split()[0] for e in result["refused_while_full"]} == {"503"}, result
        if process == "config DB members":  # failed members, restarted once space returned
            assert result["restarted"], result
        else:  # a standalone server writes again by itself, and says why it could not
            assert result["refused_while_full"] == ["503 storage_full"], result
    return result


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("row", "process", "kind"), ROWS["standalone"],
                         ids=[r[0] for r in ROWS["standalone"]])  # fmt: skip
def test_standalone(standalone: Bench, row: str, process: str, kind: str) -> None:
    _run(standalone, row, process, kind)


@pytest.mark.timeout(300)
def test_standalone_vswitchd_restarted(standalone: Bench) -> None:
    """A node's ovs-vswitchd killed and started again at once (`loom_nvp.vswitchd`): its
    table is back within a bound of the switch being up, its status said it realized
    nothing meanwhile, and no acknowledged write is lost."""
    bench = standalone
    result = vswitchd.restarted(bench.site, "hv1", switch=bench.switch, src=bench.src,
                                dst_ip=bench.dst_ip,
                                scratch=bench.root / f"fresh-{len(bench.rows)}")  # fmt: skip
    bench.rows.append(result)
    print(json.dumps(result))
    assert result["acked_writes"] > 0
    assert result["acked_lost"] == 0, result
    assert result["universal_equals_fresh"], result
    assert result["forwarding_back_s"] < 5.0, result
    assert result["status_back_s"] is None or result["status_back_s"] < 5.0, result
    # (the echoes of the time it forwarded nothing are lost: none after)
    outage = result["restarted_s"] + result["forwarding_back_s"]
    assert result["pings_lost"] <= outage / 0.05 + 4, result


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("row", "process", "kind"), ROWS["clustered"],
                         ids=[r[0] for r in ROWS["clustered"]])  # fmt: skip
def test_clustered(clustered: Bench, row: str, process: str, kind: str) -> None:
    _run(clustered, row, process, kind)
