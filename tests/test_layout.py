"""`rules/` holds Loom's one rule set and its goldens, nothing else: no Python or Rust
(DESIGN.md), and not the rule language's own tests and examples, which live beside the
compiler in `ddlog-gen/` (`tests/programs/`, `examples/`)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "rules"


def test_rules_holds_only_the_rule_set() -> None:
    files = [p.relative_to(RULES) for p in RULES.rglob("*") if p.is_file()]
    assert len(files) > 20
    assert [f for f in files if not f.name.endswith((".dl", ".dat", ".expected", ".md"))] == []
    # One folder per tier a controller loads (`loom_common.rules`), nothing beside them.
    assert {f.parts[0] for f in files if len(f.parts) > 1} == {"logical", "physical"}
    assert [f for f in files if len(f.parts) == 1 and f.suffix != ".md"] == []
