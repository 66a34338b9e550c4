"""Physical tier benchmark at NVP's scale: every workload hypervisor its own transport node.

    loom-physical-bench [--scale S ... | --workload FILE] [--nodes N] [--real 20]
                        [--controllers 2] [--standin-processes 2] [--changes 100] [--out DIR]

One run per scale (`--scale` may repeat: 0.1, 0.25, 0.5, 1.0 shows how each figure grows),
each on fresh databases and processes, all real and local; with several scales the
smallest runs once more after the others, so that the machine's drift over the invocation
cancels out of the ratio of a change's cost to the smallest scale's (`growth`):

1. **Load.** The NVP workload (`loom_lab.workload`) goes into a fresh config DB
   (`loom_lab.api_bench.drive_raw`): a transport node per hypervisor (with `--nodes N`, the
   hypervisors folded onto N), the switches, ports and ACLs.
2. **Nodes.** Every node comes up before any controller, its VIFs plugged (the ports'
   VIF ids; and one spare VIF per port change to come, a VM waiting for its port): the
   first `--real` nodes are real Open vSwitch (`ovsdb-server` + `ovs-vswitchd`, dummy
   datapath: `loom_ovs.sandbox`), the others stand-ins served by `--standin-processes`
   processes (`loom_lab.standin`: each node its own OVSDB manager connection to every
   controller and its own OpenFlow channel; their CPU and memory are reported apart; one
   process kept the controllers' pushes waiting on a single core). Every node's Manager
   rows list every physical controller.
3. **Cold start** (the clock starts here): ZooKeeper up, the logical controller and
   `--controllers` physical controller processes start at once (`python -m loom_logical`,
   `python -m loom_physical --pass-log`): the physical ones shard the nodes through
   ZooKeeper, each master of some and hot standby of others. Milestones: `logical` (the
   universal DB stamped with the config's generation), `first_push` and `installed`
   (every node connected and reporting the generation realized, as the controllers write
   it in the config DB); the controllers' own time by stage (engine, push) from their
   pass logs.
4. **Port changes.** `--changes` times, alternately, a port is added through the API (a
   real `loom_api` process) for a spare VIF of a stand-in, and deleted; each timed from the
   request until the port's node committed the bundle (the stand-ins log each commit's
   wall-clock time) and until every affected node did (the last commit before the
   controllers report the generation realized), with the stages on the way: the API's
   reply, and the universal DB stamped with the change's generation (the logical tier
   done). A first pair warms up and is reported apart. Milestones are read from OVSDB
   monitors and from the one node's commits, so the waiting loads nothing measured.
5. **Processes.** Peak and present RSS and CPU seconds of every process, at the end of the
   cold start and of the port changes, and each one's CPU seconds during the cold start alone;
   and the cold start's CPU timeline (`CpuTimeline`: the cores each role used, 5 s at a
   time, and the core-seconds left idle).
6. **Verified, and the baseline.** Once every node reports the last change realized,
   Loom's controllers are stopped (the nodes keep their tables; the databases stay), and
   a from-scratch `loom_physical.core.Localizer` (timed: the baseline) is fed the
   universal DB and every node's rows as its OVSDB gives them, read as a controller reads
   them (`NodeSession.snapshot`), and computes every node's table: each stand-in's table
   digest and each real node's table (`ovs-ofctl diff-flows`) must equal it — what the
   cold start and every change since left on the nodes equals a fresh computation.
   Flows per node are counted on the nodes. (Run with the controllers stopped, the
   baseline's memory — about a controller's — does not add to theirs.)

Prints one JSON document (`--out DIR`: also `DIR/physical-bench.json` and, with several
scales, the plot `DIR/physical-bench.png`, each figure against the scale).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom_common.progress import Reporter
from loom_lab.api_process import percentile

log = logging.getLogger(__name__)

TARGETS = {
    "cold_start_s": 90.0, "port_node_median_ms": 20.0, "port_node_p99_ms": 100.0,
    "every_node_median_ms": 50.0, "loom_rss_mib": 8192.0,
    "change_cost_ratio_s1_over_s01": 1.5,
}  # fmt: skip
"""The issue's targets at S = 1.0 (figures, not timed tests)."""
OVN_FLOWS_PER_NODE = {0.02: 3858, 1.0: 7054}
"""OVN 23.03's ovn-controller on the same workload files, flows per hypervisor."""


_progress = Reporter("loom-physical-bench")
"""Milestones on stderr (on a terminal with the time since the start)."""


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


# ---- the workload's nodes ----


@dataclass
class Plan:
    """The nodes of one run and their VIFs."""

    workload: dict[str, Any]
    nodes: list[str]
    """Every node's system-id, in order: the first `real` are real Open vSwitch."""
    real: int
    vifs: dict[str, list[tuple[str, str]]]
    """Node -> its VIFs at start: (VIF id, MAC)."""
    spares: list[tuple[str, str, str]]
    """One per port change pair: (node, VIF id, MAC) of a VM waiting for its port."""

    @property
    def standins(self) -> list[str]:
        """The nodes that are stand-ins."""
        return self.nodes[self.real :]


def plan(workload: dict[str, Any], nodes: int | None, real: int, pairs: int) -> Plan:
    """Place the workload: every hypervisor its own node, or folded onto `nodes`; `real`
    of them real (at least one node stays a stand-in: the port changes are timed on
    stand-ins); `pairs` spare VIFs over the stand-ins."""
    if nodes is not None:
        index = {hv["name"]: i for i, hv in enumerate(workload["hypervisors"])}
        folded = workload["hypervisors"][:nodes]
        for switch in workload["switches"]:
            for port in switch["ports"]:
                port["hypervisor"] = folded[index[port["hypervisor"]] % nodes]["name"]
        workload["hypervisors"] = folded
    names = [hv["name"] for hv in workload["hypervisors"]]
    real = max(0, min(real, len(names) - 1))
    vifs: dict[str, list[tuple[str, str]]] = {name: [] for name in names}
    for switch in workload["switches"]:
        for port in switch["ports"]:
            vifs[port["hypervisor"]].append((port["name"], port["mac"]))
    standins = names[real:]
    spares = [
        (
            standins[(i * 7919) % len(standins)],
            f"bench-{i}",
            f"0e:00:00:00:{i >> 8:02x}:{i & 255:02x}",
        )
        for i in range(pairs)
    ]
    return Plan(workload, names, real, vifs, spares)


# ---- processes ----


@dataclass
class Processes:
    """The processes of a run, by role, for their usage figures."""

    pids: dict[str, int] = field(default_factory=dict)
    """Loom's processes (controllers, databases) and ZooKeeper: name -> pid."""
    standins: list[int] = field(default_factory=list)
    """The stand-in fleet's processes."""
    real: list[int] = field(default_factory=list)
    """The real nodes' ovsdb-server and ovs-vswitchd."""

    def usage(self) -> dict[str, Any]:
        """Peak and present RSS and CPU seconds of each process (the real nodes' summed):
        a peak well over the present RSS is a transient of the cold start's computation."""
        from loom_common.procstat import ProcessUsage

        def one(pid: int | None) -> dict[str, float]:
            if pid is None:
                return {}
            try:
                u = ProcessUsage.of(pid)
            except ProcessLookupError:
                return {}
            return {"peak_rss_mib": round(u.peak_mib, 1), "rss_mib": round(u.rss_mib, 1),
                    "cpu_s": round(u.cpu_seconds, 2)}  # fmt: skip

        def summed(pids: list[int]) -> dict[str, float]:
            each = [one(pid) for pid in pids]
            return {"peak_rss_mib": round(sum(v.get("peak_rss_mib", 0) for v in each), 1),
                    "cpu_s": round(sum(v.get("cpu_s", 0) for v in each), 2)}  # fmt: skip

        # (copies: the CPU timeline's thread asks while processes are being added)
        loom = {name: one(pid) for name, pid in list(self.pids.items())}
        real = [one(pid) for pid in list(self.real)]
        own = ProcessUsage.of()
        ours = [v for k, v in loom.items() if k != "zookeeper"]  # controllers and databases
        return {
            "loom": loom,
            "loom_rss_mib_total": round(sum(v.get("peak_rss_mib", 0) for v in ours), 1),
            "loom_rss_now_mib_total": round(sum(v.get("rss_mib", 0) for v in ours), 1),
            "loom_cpu_s_total": round(sum(v.get("cpu_s", 0) for v in ours), 2),
            "standins": {"processes": len(self.standins), **summed(list(self.standins))},
            "real_ovs": {
                "processes": len(real),
                "peak_rss_mib": round(sum(v.get("peak_rss_mib", 0) for v in real), 1),
                "cpu_s": round(sum(v.get("cpu_s", 0) for v in real), 2),
            },
            "benchmark": {"peak_rss_mib": round(own.peak_mib, 1),
                          "cpu_s": round(own.cpu_seconds, 2)},
        }  # fmt: skip


class CpuTimeline:
    """Every process's CPU use from the clock's start, sampled each second by a thread: a
    CPU-bound cold start on few cores shows where cores stood idle (the pushes waiting on
    one stand-in process did; so do the logical tier's first read and the universal DB's
    commit of its write). `stop()` at the clock's end takes a last sample;
    `figures()` gives the cores each role used in each `WINDOW_S`, and the core-seconds
    left idle."""

    WINDOW_S = 5.0

    def __init__(self, processes: Processes) -> None:
        self._processes = processes
        self._samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-timeline", daemon=True)

    def start(self) -> CpuTimeline:
        """Sample now and every second after."""
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self._samples.append((time.time(), _cpu_of(self._processes.usage())))
            if self._stop.wait(1.0):
                return

    def stop(self) -> None:
        """Stop sampling, with a last sample now (the clock's end)."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._samples.append((time.time(), _cpu_of(self._processes.usage())))

    def figures(self, began: float) -> dict[str, Any]:
        """The timeline from `began` (wall-clock time) to `stop()`."""
        self.stop()
        samples = self._samples
        roles = sorted({role for _, cpu in samples for role in cpu})
        cores, idle = [], 0.0
        width = self.WINDOW_S
        start = 0
        while start + 1 < len(samples):
            t0, cpu0 = samples[start]
            end = start + 1
            while end + 1 < len(samples) and samples[end][0] - t0 < width:
                end += 1
            t1, cpu1 = samples[end]
            used = [max(0.0, cpu1.get(r, 0.0) - cpu0.get(r, 0.0)) / (t1 - t0) for r in roles]
            cores.append([round(t1 - began, 1), *(round(u, 2) for u in used)])
            idle += max(0.0, (os.cpu_count() or 1) - sum(used)) * (t1 - t0)
            start = end
        return {"window_s": width, "roles": roles, "cores": cores,
                "cpus": os.cpu_count(), "idle_core_s": round(idle, 1)}  # fmt: skip


@dataclass
class Site:
    """One run's databases, nodes and controllers (see the module docstring)."""

    run_dir: Path
    config: Any
    universal: Any
    zk: Any
    fleet: Any
    sandbox: Any
    real_nodes: dict[str, Any]
    controllers: list[Any]
    processes: Processes
    pass_logs: list[Path]
    watch: Watch

    def select(self, remote: str, db: str, tables: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Every row of `tables` (one transaction)."""
        from loom_common.ovsdb import RawConnection

        conn = RawConnection(remote)
        try:
            results = conn.transact(db, [{"op": "select", "table": t, "where": []} for t in tables])
        finally:
            conn.close()
        return {t: r["rows"] for t, r in zip(tables, results, strict=True)}

    @property
    def logical_pass_log(self) -> Path:
        """The logical controller's pass log."""
        return self.run_dir / "lc1.passes.jsonl"

    def logical_passes(self) -> list[dict[str, Any]]:
        """The logical controller's pass log lines."""
        return _json_lines(self.logical_pass_log)

    def passes(self) -> list[dict[str, Any]]:
        """Every physical controller's pass log lines, each with its controller's index."""
        return [{**record, "controller": i} for i, path in enumerate(self.pass_logs)
                for record in _json_lines(path)]  # fmt: skip


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of `path` (none if it is not there); a last line still being written
    (no newline yet: its controller is writing it as the benchmark reads) is left out."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


class Watch:
    """The milestones the benchmark waits for, read from OVSDB monitors: the controllers'
    status in the config DB (`Transport_Node.status`, `Loom_Global`) and the universal DB's
    generation. A wait costs the updates that come, not a look at the databases every
    50 ms (a `select` of the 3,000 nodes' status, 20 times a second, was all their JSON
    each time for the config DB to write and this process to read, all through the cold
    start: CPU taken from the processes being measured)."""

    def __init__(self, config_remote: str, universal_remote: str) -> None:
        from loom_common.ovsdb import Replica

        self.config = Replica(config_remote, "Loom_Config", {
            "Transport_Node": ["status"],
            "Loom_Global": ["generation", "realized_generation", "external_ids"],
        })  # fmt: skip
        self.universal = Replica(universal_remote, "Loom_Universal",
                                 {"Universal_Global": ["generation"]})  # fmt: skip
        self._statuses: dict[str, dict[str, str]] = {}
        """Transport_Node uuid -> its status map."""

    def start(self) -> Watch:
        """Connect and read the rows."""
        self.config.start()
        self.universal.start()
        self._take(self.config.rows["Transport_Node"].items())
        return self

    def close(self) -> None:
        """Close the monitors."""
        self.config.close()
        self.universal.close()

    def _take(self, rows: Iterable[tuple[str, Mapping[str, Any] | None]]) -> None:
        from loom_ovs.manager import omap

        for uuid, row in rows:
            if row is None:
                self._statuses.pop(uuid, None)
            else:
                self._statuses[uuid] = omap(row["status"])

    def poll(self) -> None:
        """Take in the updates received."""
        changes = self.config.poll()
        self._take((uuid, row) for table, uuid, row in changes if table == "Transport_Node")
        self.universal.poll()

    def filenos(self) -> list[int]:
        """The monitors' descriptors to wait on: none while updates already read wait for
        `poll()`."""
        conns = [self.config, self.universal]
        return [] if any(c.has_pending() for c in conns) else [c.fileno() for c in conns]

    def wait(self, what: str, predicate: Callable[[Watch], bool], timeout: float) -> float:
        """Wait until `predicate(self)` holds on the rows received; return the wall-clock
        time it was first seen to hold."""
        from loom_common.ovsdb import readable

        deadline = time.monotonic() + timeout
        self.poll()
        while not predicate(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{what}: not within {timeout:.0f} s")
            if fds := self.filenos():
                readable(fds, min(left, 1.0))
            self.poll()
        return time.time()

    def _global(self, column: str) -> int:
        rows = self.config.rows["Loom_Global"].values()
        return max((int(r[column]) for r in rows), default=0)

    def config_generation(self) -> int:
        """The configuration's generation."""
        return self._global("generation")

    def config_realized(self) -> int:
        """The generation the controllers report realized on every node."""
        return self._global("realized_generation")

    def universal_generation(self) -> int:
        """The config generation the universal DB is stamped with (-1: none yet)."""
        rows = self.universal.rows["Universal_Global"].values()
        return max((int(r["generation"]) for r in rows), default=-1)

    def realized_nodes(self, generation: int) -> tuple[int, int]:
        """(nodes connected, nodes connected that report `generation` realized), as the
        controllers write their status in the config DB."""
        from loom_common.realized import node_realized
        from loom_ovs.manager import omap

        published: dict[str, str] = {}
        for row in self.config.rows["Loom_Global"].values():
            published.update(omap(row["external_ids"]))
        connected = realized = 0
        for status in self._statuses.values():
            if status.get("connected") == "true":
                connected += 1
                if node_realized(status, published) >= generation:
                    realized += 1
        return connected, realized


@contextmanager
def site(run_dir: Path, the_plan: Plan, controllers: int,
         standin_processes: int = 2) -> Iterator[Site]:  # fmt: skip
    """Databases loaded, ZooKeeper, the nodes up and dialling; the controllers not yet
    started (`start_controllers`). Everything started is stopped on the way out."""
    from loom_common.ovsdb import OvsdbServer
    from loom_common.zookeeper import ZooKeeperServer
    from loom_lab.standin import FleetGroup, NodeSpec, VifSpec
    from loom_ovs.sandbox import Sandbox
    from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

    with ExitStack() as stack:
        config = OvsdbServer(run_dir / "config", schema_path(CONFIG_SCHEMA)).start()
        stack.callback(config.stop)
        universal = OvsdbServer(run_dir / "universal", schema_path(UNIVERSAL_SCHEMA),
                                name="universal").start()  # fmt: skip
        stack.callback(universal.stop)
        zk = ZooKeeperServer(run_dir / "zk").start()
        stack.callback(zk.stop)
        began = time.perf_counter()
        # In a child: building every row of the workload costs GBs at S=1.0 that the
        # allocator would keep in this process for the whole run.
        loader = multiprocessing.get_context("fork").Process(
            target=_load_config, args=(config.remote, the_plan.workload), name="config-load"
        )
        loader.start()
        loader.join()
        if loader.exitcode != 0:
            raise RuntimeError(f"loading the config DB failed (exit code {loader.exitcode})")
        _progress(f"config DB loaded in {time.perf_counter() - began:.1f} s")
        targets = [f"unix:{run_dir / f'pc{i}.sock'}" for i in range(1, controllers + 1)]
        spares: dict[str, list[tuple[str, str]]] = {}
        for where, vif, mac in the_plan.spares:
            spares.setdefault(where, []).append((vif, mac))
        specs = [
            NodeSpec(name, hv["ip"], tuple(
                VifSpec(f"v{i}", vif, mac)
                for i, (vif, mac) in enumerate(the_plan.vifs[name] + spares.get(name, []))
            ))
            for hv in the_plan.workload["hypervisors"]
            if (name := hv["name"]) in set(the_plan.standins)
        ]  # fmt: skip
        fleet = FleetGroup(run_dir / "fleet", specs, targets,
                           processes=standin_processes).start(timeout=600)  # fmt: skip
        stack.callback(fleet.stop)
        sandbox = Sandbox(run_dir / "real")
        stack.callback(sandbox.stop)
        real_nodes = {}
        for name in the_plan.nodes[: the_plan.real]:
            node = sandbox.add_node(name, targets)
            _plug(node, the_plan.vifs[name])
            real_nodes[name] = node
        _progress(f"{len(specs)} stand-ins and {len(real_nodes)} real nodes up")
        processes = Processes(
            pids={"config_db": _pid(config), "universal_db": _pid(universal),
                  "zookeeper": _pid(zk)},
            standins=fleet.pids,
            real=[p for n in real_nodes.values() for p in (n.db.pid, n.vswitchd.pid) if p],
        )  # fmt: skip
        watch = Watch(config.unix_remote, universal.unix_remote).start()
        stack.callback(watch.close)
        the_site = Site(run_dir, config, universal, zk, fleet, sandbox, real_nodes, [],
                        processes, [], watch)  # fmt: skip
        stack.callback(lambda: [c.stop() for c in the_site.controllers])
        yield the_site


def _load_config(remote: str, workload: dict[str, Any]) -> None:
    """The workload into the config DB as the API would write it, as one change."""
    from loom_lab.api_bench import bump_generation, drive_raw, phases

    drive_raw(remote, phases(workload))
    bump_generation(remote)


def _pid(server: Any) -> int:
    pid = server.pid
    assert pid is not None, f"{server} has no pid"
    return int(pid)


def _plug(node: Any, vifs: list[tuple[str, str]]) -> None:
    """Plug `vifs` (VIF id, MAC) into a real node in one transaction."""
    args = ["--may-exist", "add-br", "br-int", "--", "set", "Bridge", "br-int",
            "fail-mode=secure"]  # fmt: skip
    for i, (vif, mac) in enumerate(vifs):
        args += [
            "--", "add-port", "br-int", f"v{i}", "--", "set", "Interface", f"v{i}", "type=dummy",
            f"external_ids:iface-id={vif}", f"external_ids:attached-mac={mac}",
        ]  # fmt: skip
    node.vsctl(*args)


def start_controllers(s: Site, controllers: int) -> None:
    """Start the logical controller and the physical controllers (daemons)."""
    from loom_common.procs import Daemon

    python = sys.executable
    logical = Daemon("logical", [python, "-m", "loom_logical", "--config-db", s.config.unix_remote,
                                 "--universal-db", s.universal.unix_remote, "--name", "lc1",
                                 "--zookeeper", s.zk.hosts, "--pass-log", str(s.logical_pass_log)],
                     s.run_dir / "lc1")  # fmt: skip
    s.controllers.append(logical.start())
    s.processes.pids["logical"] = _pid(logical)
    for i in range(1, controllers + 1):
        pass_log = s.run_dir / f"pc{i}.passes.jsonl"
        s.pass_logs.append(pass_log)
        daemon = Daemon(f"pc{i}", [
            python, "-m", "loom_physical", "--universal-db", s.universal.unix_remote,
            "--config-db", s.config.unix_remote, "--listen", f"punix:{s.run_dir / f'pc{i}.sock'}",
            "--name", f"pc{i}", "--zookeeper", s.zk.hosts, "--pass-log", str(pass_log),
        ], s.run_dir / f"pc{i}")  # fmt: skip
        s.controllers.append(daemon.start())
        s.processes.pids[f"physical_{i}"] = _pid(daemon)


# ---- the run ----


def run(
    workload: dict[str, Any], *, nodes: int | None = None, real: int = 20, controllers: int = 2,
    changes: int = 100, timeout: float = 3600.0, keep: Path | None = None,
    standin_processes: int = 2,
) -> dict[str, Any]:  # fmt: skip
    """One run on `workload` (see the module docstring); its figures. With `keep`, the
    run's directory (logs, pass logs) is `keep` and stays (a short path: sockets are in
    it)."""
    pairs = changes // 2 + 1  # (the first pair warms up)
    the_plan = plan(workload, nodes, real, pairs)
    with ExitStack() as dirs:
        if keep is None:
            scratch = tempfile.TemporaryDirectory(prefix="lpb-", dir="/tmp")
            run_dir = Path(dirs.enter_context(scratch))
        else:
            run_dir = keep
            run_dir.mkdir(parents=True, exist_ok=True)
        return _run(the_plan, run_dir, controllers, timeout, standin_processes)


def _run(the_plan: Plan, run_dir: Path, controllers: int, timeout: float,
         standin_processes: int) -> dict[str, Any]:  # fmt: skip
    workload = the_plan.workload
    with site(run_dir, the_plan, controllers, standin_processes) as s:
        generation = s.watch.config_generation()
        at_clock = s.processes.usage()
        began = time.time()
        timeline = CpuTimeline(s.processes).start()
        start_controllers(s, controllers)
        cold, installed = _cold_start(s, the_plan, generation, began, timeout, timeline)
        cold["cpu_timeline"] = timeline.figures(began)
        _progress(f"cold start: {cold['installed_s']:.1f} s")
        at_cold_start = s.processes.usage()
        cold["cpu_s_by_process"] = _cpu_since(at_clock, at_cold_start)
        changes_figures = _port_changes(s, the_plan, timeout)
        at_end = s.processes.usage()
        last = s.watch.config_generation()
        s.watch.wait("every node realized the last change", _realized(last), timeout)
        for controller in s.controllers:
            controller.stop()
        cold.update(_cold_stages(s, began, installed))
        verified = _verify(s, the_plan)
        _progress(f"verified: {verified['nodes_equal']} of {len(the_plan.nodes)} nodes equal")
    per_node = verified.pop("flows_per_node")
    scale = workload.get("scale")
    return {
        "benchmark": "physical-controller",
        "scale": scale,
        "nodes": len(the_plan.nodes),
        "real_nodes": the_plan.real,
        "standins": len(the_plan.standins),
        "standin_processes": len(s.processes.standins),
        "physical_controllers": controllers,
        "vifs": sum(len(v) for v in the_plan.vifs.values()),
        "cold_start": cold,
        "flows_per_node": {
            "mean": round(statistics.mean(per_node)),
            "max": max(per_node),
            "min": min(per_node),
            "ovn": OVN_FLOWS_PER_NODE.get(scale) if isinstance(scale, float) else None,
        },
        "flows_all_nodes": sum(per_node),
        "verified": verified,
        "port_changes": changes_figures,
        "processes_at_cold_start": at_cold_start,
        "processes_at_end": at_end,
        "targets_at_scale_1": TARGETS,
    }


def _cpu_of(usage: dict[str, Any]) -> dict[str, float]:
    """Each process's (or role's: the stand-ins', the real nodes') CPU seconds in a
    `Processes.usage()`."""
    roles = {**usage["loom"], **{k: usage[k] for k in ("standins", "real_ovs", "benchmark")}}
    return {name: float(found.get("cpu_s", 0.0)) for name, found in roles.items()}


def _cpu_since(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """Each process's CPU seconds between two `Processes.usage()` (the loading of the
    config DB and the nodes' start, before the clock, left out)."""
    then, now = _cpu_of(before), _cpu_of(after)
    spent = {name: round(cpu - then.get(name, 0.0), 2) for name, cpu in now.items()}
    spent["all"] = round(sum(spent.values()), 2)
    return spent


def _cold_start(s: Site, the_plan: Plan, generation: int, began: float,
                timeout: float, timeline: CpuTimeline) -> tuple[dict[str, Any], float]:  # fmt: skip
    """Wait for the cold start's milestones; their times from `began` (`timeline` stopped
    at the end), and when every node was realized (for `_cold_stages`)."""
    every = len(the_plan.nodes)
    logical = s.watch.wait("the universal DB",
                           lambda w: w.universal_generation() >= generation, timeout)  # fmt: skip
    _progress(f"logical done at {logical - began:.1f} s")
    installed = s.watch.wait("every node realized",
                             lambda w: w.realized_nodes(generation) == (every, every),
                             timeout)  # fmt: skip
    timeline.stop()
    last_commit = max((t for entries in s.fleet.commits(began).values() for t, _ in entries),
                      default=installed)  # fmt: skip
    return {
        "logical_s": round(logical - began, 2),
        "installed_s": round(installed - began, 2),
        "last_standin_commit_s": round(last_commit - began, 2),
    }, installed


def _cold_stages(s: Site, began: float, installed: float) -> dict[str, Any]:
    """The controllers' time by stage in the passes that began before every node was
    realized, from their pass logs. Read once the controllers are stopped: a pass is
    logged when it ends, and the cold start's long pass reports every node realized before
    its last stage (`settle`)."""
    passes = [p for p in s.passes() if p["time"] <= installed]
    pushing = [p["time"] for p in passes if p["pushed"]]
    by_stage: dict[str, list[float]] = {}
    for p in passes:
        for stage, seconds in p["phases"].items():
            stage = "push" if stage == "push_others" else stage
            by_stage.setdefault(stage, [0.0] * len(s.pass_logs))[p["controller"]] += seconds
    return {
        "first_push_s": round(min(pushing) - began, 2) if pushing else None,
        "controller_seconds_by_stage": {k: [round(v, 2) for v in vs] for k, vs in by_stage.items()},
        "passes": len(passes),
    }  # fmt: skip


def _verify(s: Site, the_plan: Plan) -> dict[str, Any]:
    """Every node's table against a from-scratch computation (the baseline, timed)."""
    from loom_lab.standin import expected_digest
    from loom_ovs.manager import NODE_TABLES, NodeSession
    from loom_physical import rules
    from loom_physical.core import Localizer, liveness
    from loom_physical.executor import NodeLink
    from loom_physical.universal import TABLES

    read_began = time.perf_counter()
    tables = [*TABLES, "Universal_Flow"]
    rows = s.select(s.universal.unix_remote, "Loom_Universal", tables)
    sessions = {}
    for name in the_plan.nodes:
        if name in s.real_nodes:
            selected = s.select(
                s.real_nodes[name].db.unix_remote, "Open_vSwitch", list(NODE_TABLES)
            )
        else:
            selected = s.fleet.select(name)
        sessions[name] = NodeSession.snapshot(selected)
    config_nodes = s.select(s.config.unix_remote, "Loom_Config", ["Transport_Node"])
    read_s = time.perf_counter() - read_began

    began = time.perf_counter()
    core = Localizer(rules.load())
    core.universal(
        ("Flow" if table == "Universal_Flow" else table, r["_uuid"][1], _monitor_row(table, r))
        for table, found in rows.items()
        for r in found
    )
    for name, session in sessions.items():
        core.node(name, NodeLink(session).facts(), session.zones())
    core.set_computed(set(sessions))
    core.set_liveness(*liveness(config_nodes["Transport_Node"], sessions))
    rounds = 0
    while core.compute() and core.feeds_back():
        rounds += 1
    baseline_s = time.perf_counter() - began

    equal, unequal = 0, []
    per_node = []
    first_difference: dict[str, Any] | None = None
    for name in the_plan.nodes:
        flows = core.flows(name)  # one node's table at a time: 7M flows in all at S=1.0
        if name in s.real_nodes:
            same, count = _real_table_equals(s.real_nodes[name], flows)
        else:
            answer = s.fleet.request({"digest": name})
            same, count = answer["digest"] == expected_digest(flows), int(answer["flows"])
        per_node.append(count)
        if same:
            equal += 1
        else:
            unequal.append(name)
            if first_difference is None and name not in s.real_nodes:
                first_difference = _difference(s, name, flows)
    distinct = sum(len(part) for part in core.images.parts.values())
    return {
        "nodes_equal": equal,
        "nodes_unequal": unequal[:20],
        "first_difference": first_difference,
        "baseline_from_scratch_s": round(baseline_s, 2),
        "baseline_rounds": rounds + 1,
        "read_nodes_and_universal_db_s": round(read_s, 2),
        "distinct_flows": distinct,
        "flows_per_node": per_node,
    }


def _difference(s: Site, node: str, flows: list[Any]) -> dict[str, Any]:
    """How stand-in `node`'s table differs from `flows`: counts and a few examples."""
    from loom_lab.standin.flows import parts, split
    from loom_ovs.openflow import encode

    wanted = {}
    for flow in flows:
        table, priority, match, cookie, instructions = parts(*split(encode(("add", flow))))
        wanted[(table, priority, match.hex())] = (flow, cookie, instructions.hex())
    held = {(t, p, m): (c, i) for t, p, m, c, i in s.fleet.flows(node)}
    missing = [wanted[k][0].text() for k in sorted(wanted.keys() - held.keys())]
    extra = [f"table={t},priority={p},match={m}" for t, p, m in sorted(held.keys() - wanted.keys())]
    changed = [
        {"wanted": flow.text(), "held_cookie": hex(held[k][0]),
         "same_instructions": held[k][1] == instructions}
        for k, (flow, cookie, instructions) in sorted(wanted.items())
        if k in held and held[k] != (cookie, instructions)
    ]  # fmt: skip
    return {"node": node, "missing": len(missing), "extra": len(extra), "changed": len(changed),
            "missing_examples": missing[:3], "extra_examples": extra[:3],
            "changed_examples": changed[:3]}  # fmt: skip


def _monitor_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A selected universal row as the controllers' replica holds it (a `Universal_Flow`
    row's flows as sets)."""
    from loom_ovs.manager import atoms

    if table != "Universal_Flow":
        return row
    sets = {c: set(atoms(row[c])) - {"set"} if isinstance(row[c], list) else {row[c]}
            for c in ("flows", "local_flows")}  # fmt: skip
    return {**row, **sets}


def _real_table_equals(node: Any, flows: list[Any]) -> tuple[bool, int]:
    """Whether a real node's table is exactly `flows` (`ovs-ofctl diff-flows`), and how
    many flows it holds."""
    from loom_common.ovsdb import tool

    wanted = "".join(f"{flow.text()}\n" for flow in flows)  # (on stdin, as Switch does)
    argv = [tool("ovs-ofctl"), "-O", "OpenFlow15", "diff-flows", node.openflow, "/dev/stdin"]
    diff = subprocess.run(argv, input=wanted, capture_output=True, text=True, check=False)
    dumped = node.ofctl("dump-aggregate")
    count = int(dumped.split("flow_count=")[1].split()[0])
    return diff.returncode == 0, count


def _port_changes(s: Site, the_plan: Plan, timeout: float) -> dict[str, Any]:
    """Add a port for each spare VIF and delete it again; time each (module docstring)."""
    from loom_lab.api_process import TOKEN, HttpClient, api_server

    figures: dict[str, list[float]] = {"node": [], "every": [], "api": [], "affected": [],
                                       "universal": []}  # fmt: skip
    adds: list[float] = []
    deletes: list[float] = []
    warm_up: list[float] = []
    stages: dict[str, list[float]] = {}
    logical_stages: dict[str, list[float]] = {}
    with api_server(s.config.unix_remote, s.run_dir / "api", ready_timeout=900) as base:
        api = HttpClient(base, TOKEN)
        try:
            status, listing, _ = api.request("GET", "/api/v1/logical-switches?limit=50")
            assert status == 200, listing
            switches = listing["items"]
            for i, (node, vif, mac) in enumerate(the_plan.spares):
                switch = switches[i % len(switches)]
                path = f"/api/v1/logical-switches/{switch['id']}/ports"
                body = {"name": f"bench-{i}", "mac": mac,
                        "ips": [f"10.251.{i // 250}.{i % 250 + 1}"],
                        "attachment": {"type": "vif", "vif_id": vif}}  # fmt: skip
                created: dict[str, Any] = {}
                for adding in (True, False):
                    before = s.fleet.stats(node)["flows"]
                    began = time.time()
                    if adding:
                        status, created, headers = api.request("POST", path, body)
                        assert status == 201, created
                    else:
                        status, gone, headers = api.request("DELETE", f"{path}/{created['id']}")
                        assert status == 204, gone
                    replied = time.time()
                    generation = int(headers["X-Loom-Config-Generation"])
                    at_node, stamped = _commit_on(s, node, began, generation, timeout)
                    s.watch.wait("the change realized", _realized(generation), timeout)
                    commits = s.fleet.commits(began)
                    every = max(t for entries in commits.values() for t, _ in entries)
                    after = s.fleet.stats(node)["flows"]
                    assert (after > before) if adding else (after < before), (
                        f"node {node}: {before} flows before, {after} after the change"
                    )
                    took = at_node - began
                    if i == 0:
                        warm_up.append(took)
                        continue
                    figures["node"].append(took)
                    figures["every"].append(every - began)
                    figures["api"].append(replied - began)
                    figures["universal"].append(stamped - began)
                    figures["affected"].append(len(commits))
                    (adds if adding else deletes).append(took)
                    _add_phases(stages, s.passes(), began, every)
                    written = [p for p in s.logical_passes() if p["generation"] >= generation]
                    _add_phases(logical_stages, written, began, every)
        finally:
            api.close()
    node_ms, every_ms = figures["node"], figures["every"]
    return {
        "changes": len(node_ms),
        "port_node_ms": {"median": _ms(statistics.median(node_ms)),
                         "p99": _ms(percentile(node_ms, 0.99)),
                         "add_median": _ms(statistics.median(adds)),
                         "delete_median": _ms(statistics.median(deletes))},
        "every_affected_node_ms": {"median": _ms(statistics.median(every_ms)),
                                   "p99": _ms(percentile(every_ms, 0.99))},
        "affected_nodes_median": statistics.median(figures["affected"]),
        "api_request_median_ms": _ms(statistics.median(figures["api"])),
        "universal_db_written_median_ms": _ms(statistics.median(figures["universal"])),
        "controller_pass_phase_median_ms": {k: _ms(statistics.median(v))
                                            for k, v in sorted(stages.items())},
        "logical_pass_phase_median_ms": {k: _ms(statistics.median(v))
                                         for k, v in sorted(logical_stages.items())},
        "warm_up_pair_ms": [_ms(t) for t in warm_up],
    }  # fmt: skip


def _add_phases(
    stages: dict[str, list[float]], passes: list[dict[str, Any]], began: float, until: float
) -> None:
    """Add to `stages` (phase -> seconds) the phases of the `passes` begun in
    [`began`, `until`]."""
    for p in passes:
        if began <= p["time"] <= until:
            for stage, seconds in p["phases"].items():
                stages.setdefault(stage, []).append(seconds)


def _realized(generation: int) -> Callable[[Watch], bool]:
    return lambda w: w.config_realized() >= generation


def _commit_on(
    s: Site, node: str, since: float, generation: int, timeout: float
) -> tuple[float, float]:
    """The wall-clock times of the first bundle node `node` committed at or after `since`,
    and of the universal DB stamped with `generation` (the logical tier done), as seen
    meanwhile. Both are waited for on sockets (the stand-in answers an `await_commit` when
    the node commits; the universal DB's monitor sends the stamp): the benchmark takes no
    CPU from the processes it times (it looked at both every millisecond: a thousand
    requests a second to the stand-ins' process while it served the change being timed)."""
    from loom_common.ovsdb import readable

    deadline = time.monotonic() + timeout
    stamped: float | None = None
    with s.fleet.await_commit(node, since, timeout) as waiting:
        while True:
            if stamped is None:
                s.watch.poll()
                if s.watch.universal_generation() >= generation:
                    stamped = time.time()
            left = deadline - time.monotonic() + 5.0  # (the stand-in answers at `timeout`)
            if left <= 0:
                raise TimeoutError(f"node {node}: no stand-in answer within {timeout:.0f} s")
            watched = s.watch.filenos() if stamped is None else []
            if stamped is None and not watched:
                continue  # (updates read and not yet taken in)
            if waiting.fileno() in readable([waiting.fileno(), *watched], left):
                break
        entries = waiting.result()
    if not entries:
        raise TimeoutError(f"node {node}: no bundle committed within {timeout:.0f} s")
    at = float(min(t for t, _ in entries))
    return at, min(stamped if stamped is not None else at, at)


# ---- several scales ----


def growth(runs: list[dict[str, Any]], again: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each headline figure by scale, and the change cost's ratio to the smallest scale's.

    `again`: a second run of the smallest scale, made after the others. The scales run one
    after the other, and this machine's speed drifts by up to 1.6 times in a day: the
    ratio then takes the mean of the smallest scale's two medians, one from before the
    larger scales and one from after, so that a steady drift cancels out of it."""
    by_scale = sorted(runs, key=lambda r: r["scale"])
    smallest = [r["port_changes"]["port_node_ms"]["median"] for r in [by_scale[0], again] if r]
    first = statistics.mean(smallest)
    return {
        "smallest_scale_port_node_median_ms": smallest,
        "scale": [r["scale"] for r in by_scale],
        "nodes": [r["nodes"] for r in by_scale],
        "cold_start_s": [r["cold_start"]["installed_s"] for r in by_scale],
        "logical_s": [r["cold_start"]["logical_s"] for r in by_scale],
        "flows_per_node_mean": [r["flows_per_node"]["mean"] for r in by_scale],
        "flows_all_nodes": [r["flows_all_nodes"] for r in by_scale],
        "distinct_flows": [r["verified"]["distinct_flows"] for r in by_scale],
        "port_node_median_ms": [r["port_changes"]["port_node_ms"]["median"] for r in by_scale],
        "port_node_p99_ms": [r["port_changes"]["port_node_ms"]["p99"] for r in by_scale],
        "every_node_median_ms": [r["port_changes"]["every_affected_node_ms"]["median"]
                                 for r in by_scale],
        "loom_rss_mib": [r["processes_at_end"]["loom_rss_mib_total"] for r in by_scale],
        "change_cost_ratio_to_smallest": [
            round(r["port_changes"]["port_node_ms"]["median"] / first, 2) for r in by_scale],
        "baseline_from_scratch_s": [r["verified"]["baseline_from_scratch_s"] for r in by_scale],
    }  # fmt: skip


def plot(figures: Mapping[str, Any], path: Path) -> None:
    """The growth of each figure with the scale, one panel each, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("cold_start_s", "cold start, s", TARGETS["cold_start_s"]),
        ("port_node_median_ms", "port change → its node, median ms",
         TARGETS["port_node_median_ms"]),
        ("every_node_median_ms", "→ every affected node, median ms",
         TARGETS["every_node_median_ms"]),
        ("flows_per_node_mean", "flows per node, mean", None),
        ("loom_rss_mib", "RSS of Loom's processes, MiB", TARGETS["loom_rss_mib"]),
        ("baseline_from_scratch_s", "baseline: all tables from scratch, s", None),
    ]  # fmt: skip
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (key, title, target) in zip(axes.flat, panels, strict=True):
        ax.plot(figures["scale"], figures[key], marker="o")
        if target is not None:
            ax.axhline(target, color="red", linestyle="--", linewidth=1, label="target at S=1")
            ax.legend(fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("workload scale (1.0: 3,000 nodes)")
        ax.grid(alpha=0.3)
    fig.suptitle("loom-physical-bench: every hypervisor its own transport node")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark at each scale and print its JSON."""
    from loom_lab.workload import generate, read

    parser = argparse.ArgumentParser(
        prog="loom-physical-bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--scale",
        type=float,
        action="append",
        help="the NVP workload at this scale (repeatable; default 0.1)",
    )
    which.add_argument("--workload", type=Path, metavar="FILE", help="a loom-workload file")
    parser.add_argument("--nodes", type=int, help="fold the hypervisors onto N nodes")
    parser.add_argument("--real", type=int, default=20, help="real Open vSwitch nodes")
    parser.add_argument("--controllers", type=int, default=2, help="physical controllers")
    parser.add_argument("--changes", type=int, default=100, help="port adds and deletes")
    parser.add_argument("--standin-processes", type=int, default=2,
                        help="processes serving the stand-in nodes")  # fmt: skip
    parser.add_argument("--out", type=Path, help="also write the JSON (and plot) here")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="run in DIR and keep it (logs, pass logs; a short path)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    workloads = [read(args.workload)] if args.workload else [
        generate(scale) for scale in (args.scale or [0.1])]  # fmt: skip

    def one(workload: dict[str, Any], name: str) -> dict[str, Any]:
        _progress(f"scale {name}")
        keep = args.keep / name if args.keep else None
        return run(workload, nodes=args.nodes, real=args.real, controllers=args.controllers,
                   changes=args.changes, keep=keep,
                   standin_processes=args.standin_processes)  # fmt: skip

    runs = [one(workload, str(workload.get("scale"))) for workload in workloads]
    again = None
    if len(runs) > 1:
        # The smallest scale once more, after the others (`growth`: the ratio's bracket).
        smallest = min(args.scale)
        again = one(generate(smallest), f"{smallest}-again")
    document: dict[str, Any] = runs[0] if len(runs) == 1 else {
        "runs": runs, "smallest_scale_again": again, "growth": growth(runs, again)}  # fmt: skip
    text = json.dumps(document, indent=2)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "physical-bench.json").write_text(text + "\n")
        if len(runs) > 1:
            plot(document["growth"], args.out / "physical-bench.png")
    failed = [r["scale"] for r in [*runs, again] if r and r["verified"]["nodes_unequal"]]
    if failed:
        _progress(f"tables differ from the computation at scales {failed}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
