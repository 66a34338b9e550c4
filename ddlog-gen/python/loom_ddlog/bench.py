"""`loom-ddlog bench`: the engine on a synthetic NVP-sized program, against a naive baseline.

The program (`benchdata/nvp_synthetic.dl`) has the shape of the NVP controller workload:
63,000 ports on 7,000 switches (6,300 with ports), 10 ACL rows per switch, and chains of
10 linked switches, giving ~200k output flows through joins, FlatMap, an antijoin, a
recursive relation and a group_by. The benchmark prints one JSON document:

- cold load: one transaction inserting every input row, end to end through Python;
- single-row transactions: median and p99 latency of inserting and deleting one port;
- memory: RSS before and after the load, and over a long churn of transactions;
- baseline: a naive from-scratch recompute of the same program in Python (hash joins,
  the way a non-incremental controller recomputes on every change), measured in the
  same run; the ratio says how much one incremental change beats one recompute.

The engine's final output is checked against the baseline's, so a fast wrong answer
fails the run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from loom_ddlog.program import Program

FlowRow = tuple[int, int, int, str, str]

TARGET_COLD_LOAD_S = 2.0
TARGET_TXN_MEDIAN_MS = 1.0
# RSS may grow this much over the churn before we call it "not flat": allocator noise, not
# a leak, small against the steady state.
FLAT_RSS_SLACK_MB = 32.0
# Cold loads measured (each on a fresh engine); the median is reported.
COLD_LOAD_RUNS = 3
# Timely workers: this machine kind has 2 cores (`--workers 1` for the one-core figure).
DEFAULT_WORKERS = 2


@dataclass
class Inputs:
    """Input rows of the synthetic program, by relation."""

    switches: list[tuple[int, int]] = field(default_factory=list)
    ports: list[tuple[int, int, int]] = field(default_factory=list)
    acls: list[tuple[int, int, str]] = field(default_factory=list)
    links: list[tuple[int, int]] = field(default_factory=list)

    def rows(self) -> int:
        """Return the number of input rows."""
        return len(self.switches) + len(self.ports) + len(self.acls) + len(self.links)


def generate(scale: float, seed: int) -> Inputs:
    """Return the synthetic workload at `scale` (1.0 = 63,000 ports on 7,000 switches).

    Args:
        scale: fraction of the full NVP size.
        seed: seed of the port-to-switch assignment.

    Returns:
        The input rows; deterministic for a given `scale` and `seed`.
    """
    rng = random.Random(seed)
    n_switches = max(10, int(7000 * scale)) // 10 * 10
    n_with_ports = n_switches * 9 // 10
    n_ports = int(63000 * scale)
    inp = Inputs()
    inp.switches = [(sw, 0x10000 + sw) for sw in range(n_switches)]
    inp.ports = [(p, rng.randrange(n_with_ports), 0x020000000000 + p) for p in range(n_ports)]
    inp.acls = [
        (sw, 1000 + i, f"tcp,tp_dst={80 + i}" if i % 3 else f"udp,tp_dst={i};icmp")
        for sw in range(n_switches)
        for i in range(10)
    ]
    for first in range(0, n_switches, 10):
        for sw in range(first, first + 9):
            inp.links += [(sw, sw + 1), (sw + 1, sw)]
    return inp


def mac_format(mac: int) -> str:
    """Return `mac` as colon-separated lowercase hex, as the engine's `mac_format`."""
    return ":".join(f"{(mac >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def naive_flows(inp: Inputs) -> set[FlowRow]:
    """Recompute every `Flow` row from scratch: the baseline a non-incremental system pays
    on every change. Mirrors `nvp_synthetic.dl` rule by rule."""
    key_of = dict(inp.switches)
    flows = _port_flows(inp, key_of)
    flows.update(
        (sw, 1, prio, m, "resubmit(,2)")
        for sw, prio, text in inp.acls
        if sw in key_of
        for m in text.split(";")
    )
    ports_of: dict[int, set[int]] = defaultdict(set)
    for p, sw, _ in inp.ports:
        ports_of[sw].add(p)
    flows.update((sw, 0, 1, "", "drop") for sw in key_of if sw not in ports_of)
    flows.update(_reach_flows(inp))
    flows.update((sw, 4, 0, "n_ports", str(len(ps))) for sw, ps in ports_of.items())
    return flows


def _port_flows(inp: Inputs, key_of: dict[int, int]) -> set[FlowRow]:
    """Table 0: one classifier flow per port of an existing switch."""
    return {
        (
            sw,
            0,
            100,
            f"in_port={p},dl_src={mac_format(mac)}",
            f"set_field:{key_of[sw]}->tun_id,resubmit(,1)",
        )
        for p, sw, mac in inp.ports
        if sw in key_of
    }


def _reach_flows(inp: Inputs) -> set[FlowRow]:
    """Table 3: every switch reachable over links (a depth-first search per switch)."""
    succ: dict[int, set[int]] = defaultdict(set)
    for a, b in inp.links:
        succ[a].add(b)
    flows: set[FlowRow] = set()
    for a in list(succ):
        seen: set[int] = set()
        stack = list(succ[a])
        while stack:
            b = stack.pop()
            if b not in seen:
                seen.add(b)
                stack.extend(succ[b])
        flows.update((a, 3, 10, f"reach={b}", "output") for b in seen if b != a)
    return flows


def rss_mb() -> float:
    """Return this process's resident set size in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("VmRSS not found in /proc/self/status")


def percentile(samples: Sequence[float], q: float) -> float:
    """Return the `q`-quantile (0..1) of `samples` by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load_program(workers: int) -> Program:
    """Compile the packaged synthetic program."""
    src = resources.files("loom_ddlog").joinpath("benchdata/nvp_synthetic.dl")
    return Program.compile(src.read_text(), name="nvp_synthetic.dl", workers=workers)


def cold_load(prog: Program, inp: Inputs) -> tuple[float, int]:
    """Insert every input row in one transaction; return (seconds, output rows added)."""
    start = time.perf_counter()
    with prog.transaction() as txn:
        for row in inp.switches:
            txn.insert("Switch", row)
        for port in inp.ports:
            txn.insert("Port", port)
        for acl in inp.acls:
            txn.insert("Acl", acl)
        for link in inp.links:
            txn.insert("Link", link)
        delta = txn.commit()
    elapsed = time.perf_counter() - start
    return elapsed, sum(1 for w, _ in delta.get("Flow", []) if w > 0)


def port_txns(prog: Program, inp: Inputs, count: int, rng: random.Random) -> dict[str, float]:
    """Insert then delete `count` new ports, one per transaction; return latency figures."""
    n_with_ports = len(inp.switches) * 9 // 10
    first = len(inp.ports) + 1_000_000
    new_ports = [(first + i, rng.randrange(n_with_ports), 0x060000000000 + i) for i in range(count)]
    ins: list[float] = []
    for port in new_ports:
        t0 = time.perf_counter()
        with prog.transaction() as txn:
            txn.insert("Port", port)
        ins.append((time.perf_counter() - t0) * 1000)
    dels: list[float] = []
    for port in new_ports:
        t0 = time.perf_counter()
        with prog.transaction() as txn:
            txn.delete("Port", port)
        dels.append((time.perf_counter() - t0) * 1000)
    return {
        "insert_median_ms": statistics.median(ins),
        "insert_p99_ms": percentile(ins, 0.99),
        "delete_median_ms": statistics.median(dels),
        "delete_p99_ms": percentile(dels, 0.99),
    }


def churn(prog: Program, inp: Inputs, count: int, rng: random.Random) -> list[float]:
    """Run `count` single-port transactions (insert, then delete it); return RSS samples."""
    n_with_ports = len(inp.switches) * 9 // 10
    samples = [rss_mb()]
    step = max(1, count // 10)
    for i in range(count // 2):
        port = (2_000_000 + i, rng.randrange(n_with_ports), 0x0A0000000000 + i)
        with prog.transaction() as txn:
            txn.insert("Port", port)
        with prog.transaction() as txn:
            txn.delete("Port", port)
        if (2 * (i + 1)) % step == 0:
            samples.append(rss_mb())
    return samples


def run(scale: float, txns: int, churn_txns: int, seed: int, workers: int) -> dict[str, object]:
    """Run the whole benchmark and return its figures."""
    rng = random.Random(seed + 1)
    inp = generate(scale, seed)
    rss_start = rss_mb()
    prog = load_program(workers)
    load_s, flows = cold_load(prog, inp)
    rss_loaded = rss_mb()
    # A cold load happens once per engine; repeat it on fresh engines so one noisy
    # moment on a small machine doesn't make the figure.
    loads = [load_s]
    for _ in range(COLD_LOAD_RUNS - 1):
        fresh = load_program(workers)
        loads.append(cold_load(fresh, inp)[0])
        del fresh
    load_s = statistics.median(loads)

    naive_times = []
    expected: set[FlowRow] = set()
    for _ in range(3):
        t0 = time.perf_counter()
        expected = naive_flows(inp)
        naive_times.append((time.perf_counter() - t0) * 1000)
    got = set(prog.dump("Flow"))
    if got != expected:
        raise SystemExit(
            f"bench: engine output differs from the baseline: {len(got - expected)} extra, "
            f"{len(expected - got)} missing"
        )

    lat = port_txns(prog, inp, txns, rng)
    rss = churn(prog, inp, churn_txns, rng)
    naive_ms = statistics.median(naive_times)
    incr_ms = (lat["insert_median_ms"] + lat["delete_median_ms"]) / 2
    growth = max(rss) - rss[0]
    return {
        "benchmark": "nvp_synthetic",
        "scale": scale,
        "workers": workers,
        "input_rows": inp.rows(),
        "output_rows": flows,
        "cold_load_s": round(load_s, 3),
        "cold_load_runs_s": [round(x, 3) for x in loads],
        "rss_mb_before_load": round(rss_start, 1),
        "rss_mb_after_load": round(rss_loaded, 1),
        **{k: round(v, 4) for k, v in lat.items()},
        "churn_txns": churn_txns,
        "churn_rss_mb": [round(x, 1) for x in rss],
        "churn_rss_growth_mb": round(growth, 1),
        "baseline_naive_recompute_ms": round(naive_ms, 1),
        "ratio_naive_over_incremental": round(naive_ms / incr_ms, 1),
        "targets": {
            "cold_load_le_2s": load_s <= TARGET_COLD_LOAD_S,
            "txn_median_le_1ms": max(lat["insert_median_ms"], lat["delete_median_ms"])
            <= TARGET_TXN_MEDIAN_MS,
            "memory_flat": growth <= FLAT_RSS_SLACK_MB,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `loom-ddlog bench`; prints the figures as JSON."""
    ap = argparse.ArgumentParser(prog="loom-ddlog bench", description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of NVP size (1.0)")
    ap.add_argument("--txns", type=int, default=1000, help="single-row txns of each kind")
    ap.add_argument("--churn", type=int, default=50_000, help="txns in the memory churn")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="timely workers (2)")
    args = ap.parse_args(argv)
    figures = run(args.scale, args.txns, args.churn, args.seed, args.workers)
    json.dump(figures, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
