"""The public datalog-conformance suite (basic, negation, recursion, errors) on loom_ddlog.

Cases are discovered from the installed package and run by its own `YamlTestRunner`
against `LoomEvaluator`; only `NOT_APPLICABLE` cases are skipped, each with its reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from datalog_conformance import Model, Program, YamlTestRunner, get_tests_dir
from datalog_conformance import TestCase as Case

from .loom_evaluator import LoomEvaluator

CATEGORIES = ("basic", "negation", "recursion", "errors")

# Sources whose programs read a variable that occurs only under `not` existentially
# (`not s(X, P)` = "no P with s(X, P)"). Elsewhere that is an unsafe-negation error, as in
# DDlog; the adapter rewrites it into an auxiliary projection for these sources only.
EXISTENTIAL_NEGATION_SOURCES = ("nemo/",)

# Case name -> why it cannot apply to a DDlog engine. Empty: every case applies.
NOT_APPLICABLE: dict[str, str] = {}

# YAML files whose one program derives ~1M rows (a points-to analysis over 31k flow
# edges): minutes rather than seconds, so a longer timeout and the `slow` marker.
SLOW_FILES = ("souffle_example_hmmer",)
SLOW_TIMEOUT_S = 400

# Several cases of one YAML file share one program and differ only in the relation they
# check; each distinct program is evaluated once per session.
_MODELS: dict[tuple[object, ...], Model] = {}


class _OncePerProgram:
    """Evaluator wrapper that reuses the model of an identical program."""

    def __init__(self, inner: LoomEvaluator) -> None:
        self.inner = inner

    def evaluate(self, program: Program) -> Model:
        key = (
            self.inner.existential_negation,
            tuple(program.rules),
            tuple((k, tuple(map(tuple, v))) for k, v in sorted(program.facts.items())),
        )
        if key not in _MODELS:
            _MODELS[key] = self.inner.evaluate(program)
        return _MODELS[key]


def _load(path: Path) -> list[Case]:
    """Load one YAML file as the package's plugin does, with libyaml's fast loader."""
    raw = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    if "tests" not in raw:
        return [Case.from_dict(raw)]
    cases = []
    for entry in raw["tests"]:
        merged = dict(entry)
        for key in ("source", "verification"):
            if key not in merged and key in raw:
                merged[key] = raw[key]
        merged["tags"] = [*raw.get("tags", []), *merged.get("tags", [])]
        cases.append(Case.from_dict(merged))
    return cases


def _cases() -> list[tuple[str, Case]]:
    root = get_tests_dir()
    return [
        (f"{category}/{path.stem}::{case.name}", case)
        for category in CATEGORIES
        for path in sorted((root / category).rglob("*.yaml"))
        for case in _load(path)
    ]


CASES = _cases()


def test_suite_is_present() -> None:
    assert len(CASES) >= 50, "datalog-conformance cases not found"


def _param(case_id: str, case: Case) -> object:
    slow = case_id.split("::")[0].split("/")[1] in SLOW_FILES
    marks = [pytest.mark.slow, pytest.mark.timeout(SLOW_TIMEOUT_S)] if slow else []
    return pytest.param(case, id=case_id, marks=marks)


@pytest.mark.parametrize("case", [_param(i, c) for i, c in CASES])
def test_case(case: Case) -> None:
    if case.name in NOT_APPLICABLE:
        pytest.skip(f"not applicable: {NOT_APPLICABLE[case.name]}")
    existential = case.source.startswith(EXISTENTIAL_NEGATION_SOURCES)
    evaluator = _OncePerProgram(LoomEvaluator(existential_negation=existential))
    YamlTestRunner(evaluator).run_test_case(case)
