"""The pipeline contract: consistent in itself, and the rule programs' copies are current."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_schemas import pipeline
from loom_schemas.pipeline import PLACEHOLDERS, STAGES, Flag, Table

ROOT = Path(__file__).resolve().parents[2]


def test_the_documents_register_table_is_the_contracts() -> None:
    document = (ROOT / pipeline.DOCUMENT).read_text()
    assert pipeline.with_register_table(document) == document, (
        f"{pipeline.DOCUMENT}'s register table is stale: run `make rules`"
    )
    assert "| `inport` | `reg14` | 0..15 |" in pipeline.register_table()
    assert "| `flags.loopback` | `reg10` | bit 1 |" in pipeline.register_table()
    with pytest.raises(ValueError, match="register table"):
        pipeline.with_register_table("no table here")


def test_fields_spell_their_matches_and_actions() -> None:
    assert pipeline.INPORT.match(3) == "reg14=0x3"
    assert pipeline.ZONE.load(7) == "set_field:7->reg13"
    assert pipeline.TUN_OUTPORT.match_bits(pipeline.FLOOD_KEY) == "tun_metadata0=0xffff/0xffff"
    assert pipeline.TUN_INPORT.of(0x00030005) == 3
    assert pipeline.ALL_SWITCHES_MATCH == "metadata=0/0x800000"
    assert len({f.role for f in pipeline.FIELDS}) == len(pipeline.FIELDS)
    text = pipeline.dl_text()
    for f in pipeline.FIELDS:
        assert f'function reg_{f.role}(): string = "{f.name}"' in text


@pytest.mark.parametrize("path", pipeline.RULE_FILES)
def test_the_rules_copy_is_generated_from_the_contract(path: str) -> None:
    assert (ROOT / path).read_text() == pipeline.dl_text(), f"{path} is stale: run `make rules`"


def test_every_stage_is_a_typed_value_for_the_rules() -> None:
    text = pipeline.dl_text()
    for s in STAGES.values():
        assert (
            f"function s_{s.name}(): LogicalStage =\n"
            f'    LogicalStage{{"{s.pipeline}", "{s.name}", "{s.kind}", {s.table}}}\n'
        ) in text
    assert text.count("(): LogicalStage =") == len(STAGES)


def test_stages_number_their_pipelines_from_the_bases() -> None:
    for (kind, name), stages in pipeline.PIPELINES.items():
        base = pipeline.INGRESS_BASE if name == "ingress" else pipeline.EGRESS_BASE
        assert [STAGES[s].table for s in stages] == list(range(base, base + len(stages)))
        assert {STAGES[s].kind for s in stages} == {kind}
        assert [STAGES[s].next_table for s in stages] == [*range(base + 1, base + len(stages)), 0]
    assert pipeline.next_table("ls_in_acl") == pipeline.table("ls_in_arp_rsp")
    with pytest.raises(ValueError, match="last stage"):
        pipeline.next_table("ls_in_l2_lkup")


def test_physical_tables_stay_clear_of_the_logical_stages() -> None:
    logical = {stage.table for stage in STAGES.values()}
    assert not logical & {int(t) for t in Table}
    assert max(logical) < Table.FLOOD
    assert set(PLACEHOLDERS.values()) <= set(Table)


def test_flags_spell_their_bit() -> None:
    assert Flag.IN_SECURED.match() == "reg10=0x4/0x4"
    assert Flag.LOOPBACK.match(on=False) == "reg10=0/0x2"
    assert Flag.HOP_LEARNED.set() == "set_field:0x200/0x200->reg10"
    assert len({f.value for f in Flag}) == len(Flag)
    assert pipeline.ZONE.bits == "NXM_NX_REG13[0..15]"
