"""`loom-logical-bench` runs end to end on a small slice of the NVP workload (the real
figures come from `make bench-logical`; this checks that the benchmark works and that
its figures are consistent, not how fast anything is)."""

from __future__ import annotations

import pytest

from loom_lab.logical_bench import run
from loom_lab.workload import generate

pytestmark = [pytest.mark.ovs]


def test_benchmark_on_a_slice_of_the_workload() -> None:
    workload = generate(0.1)
    switches = workload["switches"][:6]
    used = {p["hypervisor"] for s in switches for p in s["ports"]}
    workload["switches"] = switches
    workload["hypervisors"] = [h for h in workload["hypervisors"] if h["name"] in used]

    figures = run(workload, changes=5)

    ports = sum(len(s["ports"]) for s in switches)
    assert figures["universal_rows"]["Datapath"] == len(switches)
    assert figures["universal_rows"]["Port_Binding"] == ports
    assert figures["universal_flows"] > 20 * ports  # every port has its own flows
    changes = figures["port_change_ms"]
    assert changes["changes"] == 5
    assert 0 < changes["api_request_median"] <= changes["median"] <= changes["p99"]
    slowest = changes["slowest"]
    assert 0 <= slowest["index"] < 5
    assert slowest["ms"] == changes["p99"]  # of 5 changes, the 99th percentile is the max
    assert 0 < slowest["phases_ms"]["total"] <= slowest["ms"]
    assert figures["cold_start_s"] > 0
    phases = figures["cold_start_phases_s"]
    assert {"replicas", "engine", "write", "total"} <= set(phases)
    assert 0 < phases["engine"] <= phases["total"] <= figures["cold_start_s"]
    assert figures["baseline_recompute_engine_only_s"] > 0

    raw = run(workload, changes=3, raw_changes=True)["port_change_ms"]
    assert raw["via"] == "raw OVSDB transactions"
    assert raw["changes"] == 3
    assert 0 < raw["median"] <= raw["p99"]
