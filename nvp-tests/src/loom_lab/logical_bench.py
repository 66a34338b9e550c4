"""Logical controller benchmark: the NVP workload from a loaded config DB to universal flows.

    loom-logical-bench [--scale 0.1 | --workload FILE] [--changes 100]

1. Loads the NVP paper's controller workload into a fresh config DB with raw OVSDB writes
   (`loom_lab.api_bench.drive_raw`: the same rows the API would write; the API's own cost is
   `loom-api-bench`'s subject, not this one's).
2. **Cold start**: a logical controller starts on it with an empty universal DB; the clock
   runs until every universal row is written (the controller reports the configuration
   generation written). Reports the time, the number of universal flows and other rows,
   and the resident memory of the controller process and of the universal ovsdb-server.
3. **Port changes**: `--changes` times, one port's addresses change through the API (a
   real API server process, over HTTP with keep-alive); the clock runs from the request until
   the controller has written that generation's universal rows. Median and p99, and the
   median of the API request alone (until the config DB has committed the change).
4. **Baseline, same invocation**: a fresh engine computes the final configuration from
   scratch (what a controller without incremental computation would do for every change);
   the ratio to the median port change says what incrementality buys.

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import resource
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loom_common.procstat import ProcessUsage
from loom_common.progress import Reporter
from loom_lab import workload
from loom_lab.api_process import percentile
from loom_logical import rules

if TYPE_CHECKING:
    from loom_lab.api_process import HttpClient


def _rss_mib(pid: int | None = None) -> float:
    """Resident memory of `pid` (default: this process's peak), MiB."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return ProcessUsage.of(pid).rss_mib


_progress = Reporter("loom-logical-bench")
"""Milestones on stderr (on a terminal with the time since the start)."""


def sum_phases(passes: Iterable[tuple[int, Mapping[str, float]]]) -> dict[str, float]:
    """The seconds by phase of the controller's passes, summed (a cold start is one pass,
    or a few when the config DB changed meanwhile)."""
    total: dict[str, float] = {}
    for _, phases in passes:
        for name, seconds in phases.items():
            total[name] = total.get(name, 0.0) + seconds
    return total


def slowest_change(
    latencies: list[float], generations: list[int], passes: list[tuple[int, Mapping[str, float]]]
) -> dict[str, Any]:
    """The slowest change: its place in the sequence, its latency and the phases (ms) of the
    controller's passes that wrote its generation (after the previous change's; empty if
    they have left the controller's record of its last 1,000 passes)."""
    i = max(range(len(latencies)), key=latencies.__getitem__)
    after = generations[i - 1] if i else generations[0] - 1
    mine = [(g, p) for g, p in passes if after < g <= generations[i]]
    return {
        "index": i,
        "ms": round(latencies[i] * 1000, 2),
        "phases_ms": {k: round(v * 1000, 2) for k, v in sum_phases(mine).items()},
    }


def _port_changes(
    api: HttpClient, controller: Any, changes: int
) -> tuple[list[float], list[float], list[int]]:
    """Change `changes` ports' addresses one at a time; return (request -> universal rows
    written, request -> API reply) in seconds, and each change's generation."""
    status, listing, _ = api.request("GET", "/api/v1/logical-switches?limit=20")
    assert status == 200, listing
    port_paths = []
    for sw in listing["items"]:
        status, ports, _ = api.request("GET", f"/api/v1/logical-switches/{sw['id']}/ports")
        assert status == 200, ports
        base = f"/api/v1/logical-switches/{sw['id']}/ports"
        port_paths += [f"{base}/{p['id']}" for p in ports["items"]]
    latencies, api_latencies, generations = [], [], []
    controller.timings.clear()
    for i in range(changes):
        ip = f"10.250.{i // 250}.{i % 250 + 1}"
        began = time.perf_counter()
        status, body, headers = api.request("PATCH", port_paths[i % len(port_paths)], {"ips": [ip]})
        api_latencies.append(time.perf_counter() - began)
        assert status == 200, body
        generation = int(headers["X-Loom-Config-Generation"])
        assert controller.wait_generation(generation, 60) >= generation
        latencies.append(time.perf_counter() - began)
        generations.append(generation)
    return latencies, api_latencies, generations


def _raw_port_changes(remote: str, controller: Any, changes: int) -> tuple[list[float], list[int]]:
    """The same port changes as raw OVSDB transactions (the rows the API would write: the
    port's addresses and the configuration generation), for scales where the API server
    cannot be used; return request -> universal rows written, in seconds, and each
    change's generation."""
    from loom_common.ovsdb import RawConnection

    conn = RawConnection(remote)
    try:
        select = [{"op": "select", "table": "Logical_Switch_Port", "where": [],
                   "columns": ["_uuid"]}]  # fmt: skip
        ports = [r["_uuid"][1] for r in conn.transact("Loom_Config", select)[0]["rows"]]
        ports = sorted(ports)[:200]
        glob = [{"op": "select", "table": "Loom_Global", "where": [], "columns": ["_uuid"]}]
        if not conn.transact("Loom_Config", glob)[0]["rows"]:  # a raw load leaves none
            conn.transact("Loom_Config", [{"op": "insert", "table": "Loom_Global", "row": {}}])
        latencies, generations = [], []
        controller.timings.clear()
        for i in range(changes):
            ip = f"10.250.{i // 250}.{i % 250 + 1}"
            ops: list[dict[str, Any]] = [
                {"op": "update", "table": "Logical_Switch_Port",
                 "where": [["_uuid", "==", ["uuid", ports[i % len(ports)]]]],
                 "row": {"ips": ip}},
                {"op": "mutate", "table": "Loom_Global", "where": [],
                 "mutations": [["generation", "+=", 1]]},
                {"op": "select", "table": "Loom_Global", "where": [], "columns": ["generation"]},
            ]  # fmt: skip
            began = time.perf_counter()
            generation = int(conn.transact("Loom_Config", ops)[2]["rows"][0]["generation"])
            assert controller.wait_generation(generation, 60) >= generation
            latencies.append(time.perf_counter() - began)
            generations.append(generation)
        return latencies, generations
    finally:
        conn.close()


def run(
    workload: dict[str, Any], changes: int, workers: int = 2, *, raw_changes: bool = False
) -> dict[str, Any]:
    """Run the benchmark on `workload` (`loom_lab.workload`); return its figures."""
    from loom_common.ovsdb import OvsdbServer
    from loom_ddlog import Program
    from loom_lab.api_bench import drive_raw, phases
    from loom_lab.api_process import TOKEN, HttpClient, api_server
    from loom_logical.controller import LogicalController
    from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

    with tempfile.TemporaryDirectory(prefix="loom-logical-bench-") as tmp:
        config = OvsdbServer(Path(tmp) / "config", schema_path(CONFIG_SCHEMA)).start()
        universal = OvsdbServer(
            Path(tmp) / "universal", schema_path(UNIVERSAL_SCHEMA), name="universal"
        ).start()
        controller = None
        try:
            began = time.perf_counter()
            drive_raw(config.remote, phases(workload))
            load_s = time.perf_counter() - began
            _progress(f"config loaded in {load_s:.1f}s")

            began = time.perf_counter()
            controller = LogicalController(
                config.unix_remote, universal.unix_remote, workers=workers
            ).start()
            written = controller.wait_generation(0, 3600)
            cold_s = time.perf_counter() - began
            cold_phases = {k: round(v, 2) for k, v in sum_phases(list(controller.passes)).items()}
            _progress(f"cold start {cold_s:.1f}s")
            assert written >= 0, "the cold start did not finish"
            rows = {t: len(d) for t, d in controller.writer.desired.items()}
            rss_controller = _rss_mib()
            rss_universal = _rss_mib(universal.pid)
            # (after the peak is read: the engine's rows converted are a large transient)
            groups = controller.program.dump("Flow_Group")
            flows = sum(len(flows) + len(local) for _, _, flows, local in groups)
            del groups

            api_latencies: list[float] = []
            if raw_changes:
                latencies, generations = _raw_port_changes(config.remote, controller, changes)
            else:
                with api_server(config.unix_remote, Path(tmp), ready_timeout=900) as base:
                    api = HttpClient(base, TOKEN)
                    _progress("API server up")
                    try:
                        latencies, api_latencies, generations = _port_changes(
                            api, controller, changes
                        )
                    finally:
                        api.close()
            engine_ms = sorted(t[0] * 1000 for t in controller.timings)
            write_ms = sorted(t[1] * 1000 for t in controller.timings)
            slowest = slowest_change(latencies, generations, list(controller.passes))

            # Baseline: the same final configuration computed from scratch by a fresh
            # engine, once the controller's engine is gone (two would not fit at scale 1).
            snapshot = controller.config_rows()
            controller.stop()
            controller = None
            gc.collect()
            program = Program.load([rules.main_file()], workers=workers, internal=False)
            began = time.perf_counter()
            with program.transaction() as txn:
                for name, tuples in snapshot.items():
                    for row in tuples:
                        txn.insert(name, row)
                txn.commit()
            recompute_s = time.perf_counter() - began
        finally:
            if controller is not None:
                controller.stop()
            universal.stop()
            config.stop()

    median = statistics.median(latencies)
    return {
        "benchmark": "logical-controller",
        "scale": workload.get("scale"),
        "workers": workers,
        "config_rows_loaded_s": round(load_s, 2),
        "cold_start_s": round(cold_s, 2),
        "cold_start_phases_s": cold_phases,
        "universal_rows": rows,
        "universal_flows": flows,
        "rss_mib": {
            "controller_process_peak": round(rss_controller, 1),
            "universal_ovsdb_server": round(rss_universal, 1),
        },
        "port_change_ms": {
            "changes": len(latencies),
            "median": round(median * 1000, 2),
            "p99": round(percentile(latencies, 0.99) * 1000, 2),
            "via": "raw OVSDB transactions" if raw_changes else "API server (HTTP)",
            "api_request_median": (
                round(statistics.median(api_latencies) * 1000, 2) if api_latencies else None
            ),
            "controller_engine_median": round(statistics.median(engine_ms), 2),
            "controller_write_median": round(statistics.median(write_ms), 2),
            "slowest": slowest,
        },
        "baseline_recompute_engine_only_s": round(recompute_s, 2),
        "ratio_recompute_over_median_change": round(recompute_s / median, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON."""
    parser = argparse.ArgumentParser(prog="loom-logical-bench", description=__doc__)
    workload.add_arguments(parser)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2, help="the engine's worker threads")
    parser.add_argument(
        "--raw-changes",
        action="store_true",
        help="make the port changes as raw OVSDB transactions, not through the API server",
    )
    args = parser.parse_args(argv)
    # The controller's slow-pass log says where a cold start's time goes.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("loom_logical.controller").setLevel(logging.INFO)
    # SIGTERM (a timeout, Ctrl-C's cousin) unwinds like Ctrl-C: the daemons started are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    figures = run(workload.from_arguments(args), args.changes, args.workers,
                  raw_changes=args.raw_changes)  # fmt: skip
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
