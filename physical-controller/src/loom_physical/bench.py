"""Physical controller benchmark: from an API change to flows installed on the hypervisor.

    loom-physical-bench [--scale 0.1 | --workload FILE] [--nodes 20] [--changes 100]

Unlike the daemons, this composes the whole system in one process (the API server is a
real process over HTTP; the logical and physical controllers run in-process so that their
pass timings can be read):

1. Loads the NVP workload into a fresh config DB (`loom_api.bench.drive_raw`), with its
   hypervisors folded onto `--nodes` simulated transport nodes (workload hypervisor i goes
   to node `hv{(i - 1) % nodes + 1}`): the same ports, switches and ACLs, on fewer, fuller
   nodes. A logical controller computes the universal flows.
2. **Cold start**: the physical controller starts, `--nodes` dummy-datapath nodes dial it,
   every VIF of the workload is plugged into its node; the clock runs until every node's
   flows are installed and every VIF is bound. Reports the time, flows per node, memory.
3. **Port adds and deletes**: `--changes` times, alternately, a port is added through the
   API (its VM's VIF already plugged on its node, as when a VM boots and waits for its
   port) and deleted again; the clock runs from the request until the node's installed
   OpenFlow table has the port's flows (its classifier flow and its L2 lookup), or no
   longer has them. Median, p99, and the share of each stage: the API request, the
   logical controller's passes, the physical controller's engine and push, and the rest
   (the universal DB's commit and the updates in transit, and waiting between passes).
   `every_node_*`: until every node has its changes (the port's node is pushed first,
   and its port reported up, before the nodes where no port came or went). A first
   add/delete pair warms caches and opens the nodes' OpenFlow channels; it is reported
   apart (`warm_up_pair_ms`).
4. **Baseline, same invocation**: a fresh engine computes every node's table from scratch
   (what a physical controller without incremental computation does per change), and one
   node's whole table is reconciled (`Switch.replace`: the switch's table read and
   compared with it by `ovs-ofctl diff-flows`, what a push without a kept diff costs);
   the ratio to the median change says what incrementality buys.

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import logging
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

L2_LOOKUP_TABLE = 15
"""`ls_in_l2_lkup`'s table (rules/physical/stages.dl)."""


def _progress(text: str) -> None:
    print(f"loom-physical-bench: {text}", file=sys.stderr, flush=True)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rss_mib(pid: int | None = None) -> float:
    path = Path(f"/proc/{pid or 'self'}/status")
    for line in path.read_text().splitlines():
        if line.startswith("VmHWM:" if pid is None else "VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fold_hypervisors(workload: dict[str, Any], nodes: int) -> dict[str, str]:
    """Replace the workload's hypervisors by `nodes` simulated ones; return port -> node."""
    from loom_ovs.sandbox import underlay_ip

    index = {hv["name"]: i for i, hv in enumerate(workload["hypervisors"])}
    workload["hypervisors"] = [
        {"name": f"hv{i}", "encap": "geneve", "ip": underlay_ip(i)} for i in range(1, nodes + 1)
    ]
    return {
        port["name"]: f"hv{index[port['hypervisor']] % nodes + 1}"
        for switch in workload["switches"]
        for port in switch["ports"]
    }


def _phase_sums(
    passes: Iterable[tuple[float, Mapping[str, float]]], start: float, end: float
) -> dict[str, float]:
    total: dict[str, float] = {}
    for began, phases in passes:
        if start <= began <= end:
            for name, seconds in phases.items():
                total[name] = total.get(name, 0.0) + seconds
    return total


def _installed(physical: Any, node: str, keys: list[tuple[int, int, str]]) -> bool:
    state = physical.nodes.get(node)
    return state is not None and set(keys) <= physical.installed(node)


def _all_pushed(physical: Any) -> bool:
    """No node has flow changes left to push."""
    return not physical.pushes_due()


def _absent(physical: Any, node: str, keys: list[tuple[int, int, str]]) -> bool:
    state = physical.nodes.get(node)
    return state is not None and physical.installed(node).isdisjoint(keys)


def _vif_fed(physical: Any, node: str, iface_id: str) -> bool:
    """The physical engine has VIF `iface_id` of `node` as an input (it saw the plug)."""
    view = physical.core.nodes.get(node)
    return view is not None and iface_id in view.facts.vifs


def _quiesce(logical: Any, physical: Any, port: str, node: str | None) -> None:
    """Wait until a change has run its course: the logical controller has taken in the
    port's location as the physical controller reported it (`node`, None once deleted) and
    written what followed, and the physical controller has pushed and reported all of it.
    Each change is timed alone, on a quiet system, not behind the previous one's tail."""
    assert logical.wait_pass(lambda c: c.location(port) == node, 60), f"location of {port}"
    assert physical.wait_pass(lambda c: _all_pushed(c) and c.settled(), 60, wake=False)


def run(workload: dict[str, Any], nodes: int, changes: int) -> dict[str, Any]:
    """Run the benchmark on `workload` (`loom_common.workload`); return its figures."""
    from loom_api.bench import TOKEN, HttpClient, api_server, drive_raw, phases
    from loom_common.heap import GcWatch
    from loom_common.ovsdb import OvsdbServer, tool
    from loom_ddlog import Program
    from loom_logical.controller import LogicalController
    from loom_ovs.openflow import Switch
    from loom_ovs.sandbox import Sandbox
    from loom_physical.controller import PhysicalController
    from loom_physical.rules import main_file
    from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

    placement = fold_hypervisors(workload, nodes)
    macs = {p["name"]: p["mac"] for sw in workload["switches"] for p in sw["ports"]}
    with tempfile.TemporaryDirectory(prefix="loom-physical-bench-") as tmp:
        state = Path(tmp)
        config = OvsdbServer(state / "config", schema_path(CONFIG_SCHEMA)).start()
        universal = OvsdbServer(
            state / "universal", schema_path(UNIVERSAL_SCHEMA), name="universal"
        ).start()
        logical = physical = None
        sandbox = Sandbox(state / "nodes")
        try:
            drive_raw(config.remote, phases(workload))
            logical = LogicalController(config.unix_remote, universal.unix_remote).start()
            assert logical.wait_generation(0, 3600) >= 0
            _progress("universal flows written")

            began = time.perf_counter()
            physical = PhysicalController(universal.unix_remote, config.unix_remote).start()
            for i in range(1, nodes + 1):
                node = sandbox.add_node(f"hv{i}", [physical.target])
                _plug(node, [p for p, n in placement.items() if n == f"hv{i}"], macs)
            _progress(f"{nodes} nodes up, {len(placement)} VIFs plugged")
            total_ports = len(placement)

            def cold_done(c: Any) -> bool:
                located = sum(len(s.located) for s in c.nodes.values())
                return len(c.nodes) == nodes and located == total_ports and c.settled()

            assert physical.wait_pass(cold_done, 3600, wake=False), "cold start did not finish"
            cold_s = time.perf_counter() - began
            per_node = [physical.core.images.size(s.parts) for s in physical.nodes.values()]
            _progress(f"cold start {cold_s:.1f}s, {sum(per_node)} flows on {nodes} nodes")
            rss_physical = _rss_mib()

            with api_server(config.unix_remote, state, ready_timeout=900) as base:
                api = HttpClient(base, TOKEN)
                _progress(f"API server up; {changes} port adds and deletes")
                try:
                    with GcWatch() as gc_watch:
                        results = _changes(api, logical, physical, sandbox, workload, changes)
                finally:
                    api.close()

            # Baselines: every node's table from scratch; one node's whole table pushed.
            program = Program.load([main_file()], workers=1, internal=False)
            fed = _engine_inputs(physical)
            began = time.perf_counter()
            with program.transaction() as txn:
                for relation, rows in fed.items():
                    for row in rows:
                        txn.insert(relation, row)
                txn.commit()
            recompute_s = time.perf_counter() - began
            images = physical.core.images
            biggest = max(physical.nodes, key=lambda n: images.size(physical.nodes[n].parts))
            node_state = physical.nodes[biggest]
            began = time.perf_counter()
            remote = node_state.session.openflow_remote
            assert remote is not None
            Switch(remote).replace(physical.core.images.flows(node_state.parts))
            replace_s = time.perf_counter() - began
            ofctl = subprocess.run([tool("ovs-ofctl"), "--version"], capture_output=True, text=True)
            assert ofctl.returncode == 0
        finally:
            if physical is not None:
                physical.stop()
            if logical is not None:
                logical.stop()
            sandbox.stop()
            universal.stop()
            config.stop()

    latencies = results["latencies"]
    median = statistics.median(latencies)
    return {
        "benchmark": "physical-controller",
        "scale": workload.get("scale"),
        "nodes": nodes,
        "vifs": total_ports,
        "cold_start_s": round(cold_s, 2),
        "flows_per_node": {"mean": round(statistics.mean(per_node)), "max": max(per_node)},
        "rss_mib": {"physical_and_logical_controller_process_peak": round(rss_physical, 1)},
        "port_add_delete_ms": {
            "changes": len(latencies),
            "median": round(median * 1000, 2),
            "p99": round(_percentile(latencies, 0.99) * 1000, 2),
            "add_median": round(statistics.median(results["adds"]) * 1000, 2),
            "delete_median": round(statistics.median(results["deletes"]) * 1000, 2),
            "stage_median_ms": {
                k: round(statistics.median(v) * 1000, 2) for k, v in results["stages"].items()
            },
            "warm_up_pair_ms": [round(t * 1000, 1) for t in results["warm_up"]],
            "every_node_median": round(statistics.median(results["everywhere"]) * 1000, 2),
            "every_node_p99": round(_percentile(results["everywhere"], 0.99) * 1000, 2),
            "slowest": _slowest(results),
            "garbage_collection": gc_watch.figures(),
        },
        "baseline_recompute_all_nodes_engine_s": round(recompute_s, 2),
        "baseline_replace_one_node_table_s": round(replace_s, 3),
        "ratio_recompute_over_median_change": round(recompute_s / median, 1),
        "ratio_replace_over_median_change": round(replace_s / median, 1),
        "targets_ms": {"median": 20, "p99": 100},
    }


def _slowest(results: Mapping[str, Any]) -> dict[str, Any]:
    """The slowest change: its place in the sequence (even: an add), latency, stages."""
    latencies = results["latencies"]
    i = max(range(len(latencies)), key=latencies.__getitem__)
    return {
        "index": i,
        "ms": round(latencies[i] * 1000, 1),
        "stages_ms": {k: round(v[i] * 1000, 1) for k, v in results["stages"].items()},
    }


def _plug(node: Any, ports: list[str], macs: Mapping[str, str]) -> None:
    """Plug VIFs for `ports` into `node` (iface-id = the port's name), in one transaction."""
    args = ["--may-exist", "add-br", "br-int", "--", "set", "Bridge", "br-int",
            "fail-mode=secure"]  # fmt: skip
    for i, port in enumerate(ports):
        args += [
            "--", "add-port", "br-int", f"v{i}", "--", "set", "Interface", f"v{i}", "type=dummy",
            f"external_ids:iface-id={port}", f"external_ids:attached-mac={macs.get(port, '')}",
        ]  # fmt: skip
    node.vsctl(*args)


def _engine_inputs(physical: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the physical controller has fed its engine."""
    rows: dict[str, list[tuple[Any, ...]]] = physical.core.engine_rows()
    return rows


def _changes(
    api: Any, logical: Any, physical: Any, sandbox: Any, workload: dict[str, Any], changes: int
) -> dict[str, Any]:
    """Alternately add and delete a port; time each until the node's table shows it."""
    status, listing, _ = api.request("GET", "/api/v1/logical-switches?limit=50")
    assert status == 200, listing
    switches = listing["items"]
    adds: list[float] = []
    deletes: list[float] = []
    latencies: list[float] = []
    everywhere: list[float] = []
    stages: dict[str, list[float]] = {
        "api": [], "logical": [], "physical_engine": [], "physical_push": [], "rest": [],
    }  # fmt: skip
    datapaths = {
        row["config_id"]: row["key"] for row in physical.universal.rows["Datapath"].values()
    }
    warm_up: list[float] = []
    for i in range(changes // 2 + 1):  # (i = 0: a warm-up pair, reported apart)
        switch = switches[i % len(switches)]
        node_name = f"hv{i % len(sandbox.nodes) + 1}"
        node = sandbox.nodes[node_name]
        mac = f"0e:00:00:00:{i // 256:02x}:{i % 256:02x}"
        vif = node.add_vif(f"b{i}", f"bench-{i}", mac)
        ofport = int(node.vsctl("get", "Interface", vif.name, "ofport").strip())
        # A VM that boots and waits for its port: the controller has seen its VIF.
        assert physical.wait_pass(lambda c, n=node_name, v=f"bench-{i}": _vif_fed(c, n, v), 60)
        dp = datapaths[switch["id"]]
        keys = [(0, 100, f"in_port={ofport}"),
                (L2_LOOKUP_TABLE, 50, f"metadata={dp:#x},dl_dst={mac}")]  # fmt: skip
        body = {"name": f"bench-{i}", "mac": mac, "ips": [f"10.251.{i // 250}.{i % 250 + 1}"],
                "attachment": {"type": "vif", "vif_id": f"bench-{i}"}}  # fmt: skip
        path = f"/api/v1/logical-switches/{switch['id']}/ports"
        for adding in (True, False):
            began = time.perf_counter()
            if adding:
                status, created, headers = api.request("POST", path, body)
                assert status == 201, created
            else:
                status, gone, headers = api.request("DELETE", f"{path}/{created['id']}")
                assert status == 204, gone
            replied = time.perf_counter()
            generation = int(headers["X-Loom-Config-Generation"])
            check = _installed if adding else _absent
            assert physical.wait_pass(
                lambda c, k=keys, a=check, n=node_name: a(c, n, k), 60, wake=False
            )
            done = time.perf_counter()
            assert physical.wait_pass(_all_pushed, 60, wake=False)
            everywhere_s = time.perf_counter() - began
            _quiesce(logical, physical, created["id"], node_name if adding else None)
            if i == 0:  # the first change after the cold start warms caches and connections
                warm_up.append(done - began)
                continue
            everywhere.append(everywhere_s)
            took = done - began
            latencies.append(took)
            (adds if adding else deletes).append(took)
            logical_phases: dict[str, float] = {}
            for g, pass_phases in list(logical.passes):
                if g == generation:
                    for phase, seconds in pass_phases.items():
                        logical_phases[phase] = logical_phases.get(phase, 0.0) + seconds
            logical_phases.pop("total", None)  # the sum of the others
            logical_s = sum(logical_phases.values())
            phys = _phase_sums(list(physical.pass_phases), replied, done)
            engine_s = phys.get("engine", 0.0)
            push_s = phys.get("push", 0.0)
            stages["api"].append(replied - began)
            stages["logical"].append(logical_s)
            stages["physical_engine"].append(engine_s)
            stages["physical_push"].append(push_s)
            accounted = (replied - began) + logical_s + engine_s + push_s
            stages["rest"].append(max(0.0, took - accounted))
        node.remove_vif(vif.name)
        assert physical.wait_pass(lambda c, n=node_name, v=f"bench-{i}": not _vif_fed(c, n, v), 60)
    return {"latencies": latencies, "adds": adds, "deletes": deletes, "stages": stages,
            "everywhere": everywhere, "warm_up": warm_up}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON."""
    import json

    from loom_common.workload import add_arguments as add_workload_arguments
    from loom_common.workload import from_arguments as workload_from

    parser = argparse.ArgumentParser(prog="loom-physical-bench", description=__doc__)
    add_workload_arguments(parser)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--changes", type=int, default=100)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    print(json.dumps(run(workload_from(args), args.nodes, args.changes), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
