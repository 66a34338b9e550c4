"""Snapshot-diff regression tests: each scenario under tests/snapshots/ is run through the
API, the logical controller and a real universal DB, and the rendered universal database is
compared with the committed golden file `NAME.golden` (`pytest --update-snapshots`
rewrites them; review the diff like code). Every flow is also installed, localized with
dummy bindings, on a real ovs-vswitchd, which rejects bad syntax and unmet prerequisites."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

SNAPSHOTS = Path(__file__).resolve().parents[2] / "tests" / "snapshots"
SCENARIOS = sorted(SNAPSHOTS.glob("*.yaml"))


def test_there_are_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 25, [p.name for p in SCENARIOS]


@pytest.mark.ovs
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_snapshot(
    path: Path,
    scenario: Callable[[list[dict[str, Any]]], Any],
    request: pytest.FixtureRequest,
    openflow_check: Callable[[str], int],
) -> None:
    doc = yaml.safe_load(path.read_text())
    scenario_run = scenario(doc["steps"])
    rendered = scenario_run.render()
    openflow_check(scenario_run.universal.remote)
    golden = path.with_suffix(".golden")
    if request.config.getoption("--update-snapshots"):
        golden.write_text(rendered)
        return
    assert golden.exists(), f"{golden} is missing: run pytest --update-snapshots and review it"
    expected = golden.read_text()
    if rendered != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                rendered.splitlines(keepends=True),
                fromfile=str(golden),
                tofile="rendered",
            )
        )
        pytest.fail(f"universal DB differs from {golden.name}:\n{diff}")
