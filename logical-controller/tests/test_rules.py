"""The rule files: generated inputs are current, every stage the rules use is in the
pipeline layout, the program compiles, and the shared flow dedup behaves."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

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


def test_conflicting_wishes_for_one_match_make_one_flow_and_a_warning(tmp_path: Path) -> None:
    """`common.dl`'s dedup: concepts that want the same match get one flow (the least
    actions win); different actions for it are a `flow-conflict` warning naming both
    sources, gone when the conflict is."""
    shutil.copy(main_file().parent / "common.dl", tmp_path / "common.dl")
    (tmp_path / "wishes.dl").write_text(
        "import common\n"
        "input relation Wish(dp: bit<64>, m: string, a: string, s: string)\n"
        'LFlow(dp, "ingress", "ls_in_acl", 100, m, a, s) :- Wish(dp, m, a, s).\n'
    )
    program = Program.load(tmp_path / "wishes.dl", internal=False)
    flows: dict[tuple[int, str], list[str]] = {}
    warnings: set[tuple[str, ...]] = set()

    def apply(op: str, *wish: object) -> None:
        with program.transaction() as txn:
            getattr(txn, op)("Wish", wish)
            delta = txn.commit()
        for weight, (dp, source, texts) in delta.get("Flow_Group", []):
            if weight > 0:
                flows[(dp, source)] = list(texts)
            else:
                flows.pop((dp, source), None)
        for weight, row in delta.get("Warning", []):
            (warnings.add if weight > 0 else warnings.discard)(row)

    apply("insert", 1, "tcp", "drop", "acl-a")
    apply("insert", 1, "tcp", "drop", "acl-b")  # the same wish twice: no conflict
    assert flows == {(1, "acl-a"): ["ingress\tls_in_acl\t100\ttcp\tdrop"]}
    assert warnings == set()

    apply("insert", 1, "tcp", "allow", "acl-c")  # "allow" < "drop": acl-c wins
    assert flows == {(1, "acl-c"): ["ingress\tls_in_acl\t100\ttcp\tallow"]}
    [(source, kind, message)] = warnings
    assert (source, kind) == ("acl-b", "flow-conflict")
    assert message.startswith('acl-c and acl-b want different actions for "tcp"'), message

    apply("delete", 1, "tcp", "allow", "acl-c")
    assert flows == {(1, "acl-a"): ["ingress\tls_in_acl\t100\ttcp\tdrop"]}
    assert warnings == set()
