"""Snapshot-diff regression tests: each scenario under tests/snapshots/ is run through the
API, the logical controller and a real universal DB, and the rendered universal database is
compared with the committed golden file `NAME.golden` (`pytest --update-snapshots`
rewrites them; review the diff like code). Every flow is also installed, localized with
dummy bindings, on a real ovs-vswitchd, which rejects bad syntax and unmet prerequisites,
and no match of a datapath has two meanings (the rules resolve what configuration claims
twice; see `rules/logical/common.dl`)."""

from __future__ import annotations

from collections import defaultdict
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
    golden_check: Callable[[Path, str, str], None],
    openflow_check: Callable[[str], int],
    dump: Callable[[str], dict[str, list[dict[str, Any]]]],
) -> None:
    doc = yaml.safe_load(path.read_text())
    scenario_run = scenario(doc["steps"])
    rendered = scenario_run.render()
    assert _two_meanings(dump(scenario_run.universal.remote)["Universal_Flow"]) == []
    openflow_check(scenario_run.universal.remote)
    golden_check(path.with_suffix(".golden"), rendered, "universal DB")


def _two_meanings(flows: list[dict[str, Any]]) -> list[str]:
    """The matches (datapath, pipeline, stage, priority, match) that flows give different
    actions, each with the actions and the objects that want them."""
    wants: dict[tuple[Any, ...], set[tuple[str, str]]] = defaultdict(set)
    for f in flows:
        key = (f["datapath"], f["pipeline"], f["stage"], f["priority"], f["match"])
        wants[key].add((f["actions"], f["source"]))
    return [
        f"{key}: {sorted(w)}"
        for key, w in sorted(wants.items())
        if len({actions for actions, _ in w}) > 1
    ]
