"""`loom-physical-bench` end to end on a small workload: every hypervisor its own node,
real and stand-in nodes, two physical controllers sharded by ZooKeeper, the port changes.
This checks that the benchmark works and that its figures hang together (the tables on
the nodes equal a from-scratch computation), not how fast anything is; the figures come
from running it (README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loom_lab.physical_bench import growth, plot, run
from loom_lab.workload import generate

pytestmark = [pytest.mark.ovs, pytest.mark.zk, pytest.mark.system]


@pytest.mark.timeout(300)
def test_a_small_workload_end_to_end(tmp_path: Path) -> None:
    workload = generate(0.004)
    figures = run(workload, real=2, controllers=2, changes=4)

    hypervisors = len(workload["hypervisors"])
    assert figures["nodes"] == hypervisors
    assert (figures["real_nodes"], figures["standins"]) == (2, hypervisors - 2)
    assert figures["verified"]["nodes_equal"] == hypervisors, figures["verified"]
    cold = figures["cold_start"]
    assert cold["logical_s"] > 0
    assert cold["installed_s"] > 0
    timeline = cold["cpu_timeline"]  # where the cores went, window by window
    assert {"logical", "physical_1", "physical_2", "standins"} <= set(timeline["roles"])
    assert timeline["cores"], "no window"
    assert all(len(row) == 1 + len(timeline["roles"]) for row in timeline["cores"])
    assert all(value >= 0 for row in timeline["cores"] for value in row[1:])
    assert timeline["cores"][-1][0] <= cold["installed_s"] + 1.0  # (its last sample)
    cpus = timeline["cpus"]
    assert 0 <= timeline["idle_core_s"] <= cpus * cold["installed_s"] + 0.1
    stages = cold["controller_seconds_by_stage"]
    assert len(stages["engine"]) == 2, "both controllers computed (master and standby)"
    assert all(seconds > 0 for seconds in stages["engine"])
    flows = figures["flows_per_node"]
    assert 0 < flows["min"] <= flows["mean"] <= flows["max"]
    assert figures["flows_all_nodes"] > figures["verified"]["distinct_flows"] > 0
    changes = figures["port_changes"]
    assert changes["changes"] == 4
    node, every = changes["port_node_ms"], changes["every_affected_node_ms"]
    assert 0 < node["median"] <= every["median"]
    assert changes["affected_nodes_median"] >= 1
    # where a change's time went: the API's answer, the universal DB written (never after
    # the node's commit, which comes of it)...
    assert changes["api_request_median_ms"] > 0
    assert 0 < changes["universal_db_written_median_ms"] <= node["median"]
    # ... the logical controller's passes that wrote the changes, by phase (its pass log)
    logical = changes["logical_pass_phase_median_ms"]
    assert {"engine", "write"} <= set(logical)
    assert logical["engine"] > 0
    # ... and the physical controllers' (theirs)
    assert changes["controller_pass_phase_median_ms"]["engine"] > 0
    processes = figures["processes_at_end"]
    assert {"logical", "physical_1", "physical_2", "config_db", "universal_db"} <= set(
        processes["loom"]
    )
    assert processes["loom_rss_mib_total"] >= processes["loom_rss_now_mib_total"] > 0
    assert processes["standins"]["cpu_s"] > 0
    assert processes["standins"]["processes"] == figures["standin_processes"] == 2
    assert processes["real_ovs"]["processes"] == 4

    # several scales: the growth table and its plot
    doc = growth([figures, {**figures, "scale": 0.008}])
    assert doc["scale"] == [0.004, 0.008]
    assert doc["change_cost_ratio_to_smallest"] == [1.0, 1.0]
    # the smallest scale run again after the others: the ratio is to the mean of its two
    median = changes["port_node_ms"]["median"]
    slower = {**figures, "port_changes": {**changes, "port_node_ms": {
        **node, "median": 3 * median}}}  # fmt: skip
    bracketed = growth([figures, {**slower, "scale": 0.008}], again=slower)
    assert bracketed["smallest_scale_port_node_median_ms"] == [median, 3 * median]
    assert bracketed["port_node_median_ms"] == [median, 3 * median]
    assert bracketed["change_cost_ratio_to_smallest"] == [0.5, 1.5]
    plot(doc, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.dumps(figures)  # one JSON document
