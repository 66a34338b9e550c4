"""The rule files: generated inputs are current, the rules name stages only through the
pipeline contract's typed stages, the program compiles, and flows group by object."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import pytest

from loom_ddlog import CompileError, Program
from loom_logical import pipeline
from loom_logical.inputs import declarations
from loom_logical.rules import main_file, rules_dir
from loom_schemas.pipeline import STAGES


def test_config_dl_is_generated_from_the_config_schema() -> None:
    assert (rules_dir() / "config.dl").read_text() == declarations(), (
        "rules/logical/config.dl is stale: run `make rules`"
    )


def test_the_rules_name_stages_only_by_the_contracts_functions() -> None:
    """A stage is an `s_NAME()` of pipeline.dl (so the compiler checks its name and it
    carries its pipeline), never a string; and every stage of the contract is used."""
    texts = {p.name: p.read_text() for p in rules_dir().glob("*.dl") if p.name != "pipeline.dl"}
    spelt = {
        name: found
        for name, text in texts.items()
        if (found := re.findall(r'"(l[sr]_(?:in|out)_\w+)', text))
    }
    assert not spelt, f"stages as strings (use their s_NAME()): {spelt}"
    used = set(re.findall(r"\bs_(l[sr]_(?:in|out)_\w+)\(\)", "".join(texts.values())))
    assert used == set(pipeline.TABLES), set(pipeline.TABLES) ^ used


def test_a_misspelt_stage_does_not_compile(tmp_path: Path) -> None:
    for name in ("common.dl", "pipeline.dl"):
        shutil.copy(main_file().parent / name, tmp_path / name)
    (tmp_path / "typo.dl").write_text(
        "import common\n"
        "input relation Wish(dp: bit<64>)\n"
        'Flow(dp, s_ls_in_acll(), 100, "", "drop", "") :- Wish(dp).\n'
    )
    error = r"typo\.dl:3:10: error: unknown function `s_ls_in_acll`"
    with pytest.raises(CompileError, match=error):
        Program.load(tmp_path / "typo.dl")


SNAPSHOTS = Path(__file__).resolve().parents[2] / "tests" / "snapshots"
FLOW_LINE = re.compile(r"(\w+)\S* (?:local:\S+ )?(ingress|egress) (\w+) ")


@pytest.mark.parametrize(
    "golden",
    [p for p in sorted(SNAPSHOTS.glob("*.golden")) if "." not in p.stem],
    ids=lambda p: p.stem,
)
def test_every_snapshot_flow_is_at_a_stage_of_its_datapaths_kind(golden: Path) -> None:
    """What a stage's type cannot check as the rules compile (a datapath is a number to
    them): that a switch stage's flow is in a switch, a router stage's in a router. Checked
    on every scenario's universal flows (`switches`: datapath 0, every switch)."""
    lines = golden.read_text().splitlines()
    after = lines[lines.index("## Universal_Flow") + 1 :]
    for line in itertools.takewhile(lambda line: not line.startswith("## "), after):
        found = FLOW_LINE.match(line)
        assert found, line
        kind, pipeline_, stage = found.groups()
        want = (STAGES[stage].kind, STAGES[stage].pipeline)
        assert want == ({"switches": "switch"}.get(kind, kind), pipeline_), line


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
        "Flow(dp, s_ls_in_acl(), 100, m, a, s) :- Wish(dp, m, a, s).\n"
        'Flow(dp, s_ls_in_acl(), 100, m, a, s) :- Wish(dp, m, a, s), a == "drop".\n'
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
