"""The rule files: generated inputs are current, every stage the rules use is in the
pipeline layout, and the program compiles."""

from __future__ import annotations

import re

from loom_ddlog import Program
from loom_logical import pipeline
from loom_logical.inputs import declarations
from loom_logical.rules import main_file, rules_dir


def test_config_dl_is_generated_from_the_config_schema() -> None:
    assert (rules_dir() / "config.dl").read_text() == declarations(), (
        "rules/logical/config.dl is stale: run `make rules`"
    )


def test_every_stage_the_rules_name_is_in_the_pipeline() -> None:
    text = "".join(p.read_text() for p in rules_dir().glob("*.dl"))
    named = set(re.findall(r'"(l[sr]_(?:in|out)_\w+)"', text))
    assert named, "no stage names found"
    assert named <= set(pipeline.TABLES), named - set(pipeline.TABLES)
    assert set(pipeline.TABLES) <= named, set(pipeline.TABLES) - named


def test_the_program_compiles_with_every_output_the_writer_knows() -> None:
    from loom_logical.outputs import OUTPUTS

    program = Program.load([main_file()])
    outputs = {name for name, rel in program.relations.items() if rel.role == "output"}
    assert outputs == set(OUTPUTS)
