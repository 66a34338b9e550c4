"""The rule files: generated inputs are current, every stage the rules use is in the
pipeline layout, the program compiles, and flows group by object."""

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


def test_flows_group_by_object_and_one_object_wants_a_flow_once(tmp_path: Path) -> None:
    """`common.dl`: an object's flows are one `Flow_Group` row, each flow once however
    many rules want it; the same flow wanted for two objects is in both rows (the physical
    controller merges them), and a row goes when its last flow does."""
    for name in ("common.dl", "pipeline.dl"):
        shutil.copy(main_file().parent / name, tmp_path / name)
    (tmp_path / "wishes.dl").write_text(
        "import common\n"
        "input relation Wish(dp: bit<64>, m: string, a: string, s: string)\n"
        'Flow(dp, "ingress", "ls_in_acl", 100, m, a, s) :- Wish(dp, m, a, s).\n'
        'Flow(dp, "ingress", "ls_in_acl", 100, m, a, s) :- Wish(dp, m, a, s), a == "drop".\n'
    )
    program = Program.load(tmp_path / "wishes.dl", internal=False)
    flows: dict[tuple[int, str], list[str]] = {}

    def apply(op: str, *wish: object) -> None:
        with program.transaction() as txn:
            getattr(txn, op)("Wish", wish)
            delta = txn.commit()
        for weight, (dp, source, texts, _local) in sorted(delta.get("Flow_Group", [])):
            if weight > 0:
                flows[(dp, source)] = list(texts)
            else:
                flows.pop((dp, source), None)

    apply("insert", 1, "tcp", "drop", "acl-a")  # wanted by both rules: once
    apply("insert", 1, "udp", "allow", "acl-a")
    assert flows == {
        (1, "acl-a"): ["ingress\tls_in_acl\t100\ttcp\tdrop", "ingress\tls_in_acl\t100\tudp\tallow"]
    }
    apply("insert", 1, "tcp", "drop", "acl-b")
    apply("insert", 2, "tcp", "drop", "acl-b")
    assert flows[(1, "acl-b")] == ["ingress\tls_in_acl\t100\ttcp\tdrop"]
    assert flows[(2, "acl-b")] == ["ingress\tls_in_acl\t100\ttcp\tdrop"]
    assert flows[(1, "acl-a")] == [
        "ingress\tls_in_acl\t100\ttcp\tdrop",
        "ingress\tls_in_acl\t100\tudp\tallow",
    ]

    apply("delete", 1, "tcp", "drop", "acl-a")
    apply("delete", 1, "udp", "allow", "acl-a")
    assert (1, "acl-a") not in flows
    assert set(flows) == {(1, "acl-b"), (2, "acl-b")}
