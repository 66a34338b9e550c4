"""The NVP tests' harness: its oracle, sample and figures (pure), and one short run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loom_lab.workload import generate
from loom_nvp import nvp
from loom_nvp.probe import echo_request, parse_reply

WORKLOAD = generate(0.01)
ORACLE = nvp.Oracle(WORKLOAD)


def _switch(name: str) -> dict[str, object]:
    return next(sw for sw in WORKLOAD["switches"] if sw["name"] == name)


def test_fold_puts_every_port_on_one_of_the_nodes() -> None:
    placement = nvp.fold(WORKLOAD, 3)
    assert len(placement) == 21 * 30
    assert set(placement.values()) == {"hv1", "hv2", "hv3"}
    port = WORKLOAD["switches"][0]["ports"][0]
    k = int(port["hypervisor"][2:])
    assert placement[port["name"]] == f"hv{(k - 1) % 3 + 1}"


def test_the_oracle_follows_switches_profiles_and_isolation() -> None:
    isolated = next(sw for sw in WORKLOAD["switches"] if nvp._profiled(sw)[0])
    plain = next(sw for sw in WORKLOAD["switches"]
                 if not nvp._profiled(sw)[0] and nvp._profiled(sw)[1])  # fmt: skip
    web = sorted(nvp._profiled(plain)[1])[0]
    other = next(p["name"] for p in plain["ports"] if p["name"] != web)
    assert ORACLE.reachable(other, web)[0] is False  # only TCP 22/80/443 in
    a, b = isolated["ports"][0]["name"], isolated["ports"][1]["name"]
    assert ORACLE.reachable(a, b)[0] is True  # its own subnet, whatever else
    assert ORACLE.reachable(a, other)[0] is False  # another switch
    assert "different switches" in ORACLE.reachable(a, other)[1]


def test_the_sample_has_nvps_share_expected_to_fail() -> None:
    pairs = nvp.sample(WORKLOAD, 100)
    assert len(pairs) == 100
    failing = [p for p in pairs if not p.expected]
    assert len(failing) == 17
    assert {p.why.split(";")[0] for p in failing} == {
        "same switch",
        "different switches (no router joins them)",
    }
    for p in pairs:
        assert ORACLE.reachable(p.src, p.dst) == (p.expected, p.why)
    assert nvp.sample(WORKLOAD, 100) == pairs  # fixed


def test_timeline_figures() -> None:
    tl = nvp.Timeline("t", 0.0, points=[(0.0, 100.0), (1.0, 83.0), (2.0, 100.0), (3.0, 100.0)])
    summary = tl.summary()
    assert summary["min_correct_percent"] == 83.0
    assert summary["time_to_100_percent_s"] == 2.0
    assert tl.summary(since=2.5)["min_correct_percent"] == 100.0


def test_echo_round_trip() -> None:
    request = echo_request(7, 9)
    reply = bytes([0x45]) + bytes(19) + bytes([0]) + request[1:]
    assert parse_reply(reply) == (7, 9)
    assert parse_reply(bytes([0x45]) + bytes(19) + request) is None  # a request, not a reply
    assert parse_reply(b"\x45") is None


@pytest.mark.ovs
@pytest.mark.zk
@pytest.mark.system
@pytest.mark.timeout(600)
def test_a_short_run_meets_the_targets(tmp_path: Path) -> None:
    """restore, failover and the steady state on a small workload: every round correct
    through the faults; every change's pairs get their new outcome, no other pair is
    disturbed; a JSON document and a plot per test."""
    assert os.geteuid() == 0, "the NVP tests ping between VMs in namespaces: root only"
    nvp.main(["--scale", "0.01", "--nodes", "2", "--pairs", "40", "--test", "restore",
              "--test", "failover", "--test", "steady-state", "--out", str(tmp_path)])  # fmt: skip
    document = json.loads((tmp_path / "nvp-tests.json").read_text())
    tests = {t["test"]: t for t in document["tests"]}
    assert list(tests) == ["restore", "failover", "steady-state"]
    for test in tests.values():
        assert test["rounds"] > 10
        assert (tmp_path / f"nvp-{test['test']}.png").stat().st_size > 1000
    assert tests["restore"]["min_correct_percent"] == 100.0
    assert tests["failover"]["min_correct_percent"] == 100.0
    steady = tests["steady-state"]
    assert len(steady["changes"]) == 12
    assert all(c["converged_s"] is not None and c["pairs_affected"] > 0
               for c in steady["changes"]), steady["changes"]  # fmt: skip
    assert steady["unaffected_pairs_disturbed"] == 0
    assert document["setup"]["expected_to_fail"] == 7
