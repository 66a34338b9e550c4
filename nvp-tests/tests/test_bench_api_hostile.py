"""The hostile API benchmark (`loom_lab.api_bench_hostile`) on a few creates: no attack
gets through, and its figures add up."""

from __future__ import annotations

import pytest

from loom_lab.api_bench_hostile import run_hostile

pytestmark = pytest.mark.ovs


def test_hostile_benchmark_runs_and_nothing_gets_through() -> None:
    figures = run_hostile(creates=10, cost_seconds=0.2)
    assert figures["attacker_rows_written"] == 0
    statuses = {a["kind"]: set(a["statuses"]) for a in figures["attackers"]["hostile"]}
    assert statuses == {"oversized": {413}, "nested": {400}}
    for phase in ("oversized", "nested"):
        (alone,) = figures["attackers"][phase]
        assert alone["kind"] == phase
    assert all(set(f["statuses"]) == {200} for f in figures["flooders"])
    for phase in ("quiet", "oversized", "nested", "hostile", "flood_of_valid_requests"):
        assert 0 < figures[phase]["p50_ms"] <= figures[phase]["p99_ms"]
    assert figures["ratios_p50"]["oversized"] == round(
        figures["oversized"]["p50_ms"] / figures["quiet"]["p50_ms"], 2
    )
    assert figures["within_target"] == (
        max(figures["ratios_p50"]["oversized"], figures["ratios_p50"]["nested"]) <= 2
    )
    assert set(figures["server_cpu_ms"]) == {
        "per_create", "per_oversized_attack_request", "per_nested_attack_request",
        "per_flood_request",
    }  # fmt: skip
