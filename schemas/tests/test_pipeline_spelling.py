"""Nothing outside the pipeline contract spells a register, a field's bits or a raw mask.

The contract (`loom_schemas.pipeline`) says which register carries what; the rules reach
it through the generated `pipeline.dl` (`match_inport(k)`, `set_outport(k)`, `bits_zone()`,
`m_vlan_tagged()` ...) and the Python side through its `Field`s, so that moving a field
is one edit and a misspelt register cannot happen. Comments may explain with register
names; code may not.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SPELLINGS = re.compile(
    r"\bx{0,2}reg\d+\b"  # reg14, xreg0, xxreg1
    r"|NXM_NX_X{0,2}REG\d*"  # NXM_NX_REG14[0..15]
    r"|OXM_OF_METADATA|\bmetadata=|->metadata\b"  # the datapath field, matched or set
    r"|NXM_NX_TUN_ID|NXM_NX_TUN_METADATA\d|\btun_metadata\d="  # the tunnel's fields
    r"|\b0x[0-9a-fA-F]+/0x[0-9a-fA-F]+"  # a raw mask: vlan_tci=0x1000/0x1000
    r"|/(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b"  # a raw MAC mask: /01:00:00:00:00:00
)
"""What spells a register, a Loom field or a mask."""

GENERATED_RULES = {"pipeline.dl"}
"""The contract's own copy for the rules."""

PRODUCT_EXCEPTIONS = {
    "schemas/src/loom_schemas/pipeline.py": "the contract itself",
    "ovs-integration/src/loom_ovs/ofp.py": "the OpenFlow codec: its table names every "
    "OpenFlow field, registers among them, as the wire format does",
}
"""Product modules allowed to spell registers, and why."""


def _rule_files() -> list[Path]:
    return sorted(p for p in (ROOT / "rules").rglob("*.dl") if p.name not in GENERATED_RULES)


def _product_modules() -> list[Path]:
    """Every module of a product package (the lab, nvp-tests/, is not one)."""
    return sorted(
        p
        for p in ROOT.glob("*/src/**/*.py")
        if p.relative_to(ROOT).parts[0] != "nvp-tests"
        and ".venv" not in p.parts
        and str(p.relative_to(ROOT)) not in PRODUCT_EXCEPTIONS
    )


def _rule_code(text: str) -> str:
    """A rule file without its comments (`/* ... */`, `// ...`)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _python_code(text: str) -> list[tuple[int, str]]:
    """A module's string literals and code, without comments and docstrings, by line."""
    out: list[tuple[int, str]] = []
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = token.type
        if kind == tokenize.COMMENT:
            continue
        # a string standing alone as a statement is a docstring
        if kind == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.INDENT,
                                                    tokenize.DEDENT, tokenize.NL):  # fmt: skip
            previous = kind
            continue
        if kind not in (tokenize.NL, tokenize.COMMENT):
            previous = kind
        out.append((token.start[0], token.string))
    return out


def _hits(pairs: list[tuple[int, str]]) -> list[str]:
    return [f"{line}: {m.group(0)}" for line, text in pairs for m in SPELLINGS.finditer(text)]


def test_the_patterns_catch_what_they_are_for() -> None:
    code = _rule_code('/* reg14 */ Flow(dp, s, 1, "reg14=${x(k)}", "set_field:0->reg13", p)')
    assert [m.group(0) for m in SPELLINGS.finditer(code)] == ["reg14", "reg13"]
    for spelt in ("move:NXM_NX_REG14[]->NXM_NX_REG15[]", "set_field:0x1->metadata",
                  "vlan_tci=0x1000/0x1000", "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
                  "move:NXM_NX_TUN_ID[0..23]->OXM_OF_METADATA[0..23]", "xreg3=1"):  # fmt: skip
        assert SPELLINGS.search(spelt), spelt
    for fine in ("tp_dst=${x(lo)}/${x(mask)}", "match_inport(k)", "tun_dst=10.0.0.1",
                 "nw_dst=224.0.0.0/4", "registers"):  # fmt: skip
        assert not SPELLINGS.search(fine), fine
    python = _python_code('"""reg14 here is prose."""\nx = f"metadata={dp:#x}"  # reg15\n')
    assert _hits(python) == ["2: metadata="]


@pytest.mark.parametrize("path", _rule_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_rule_spells_a_register(path: Path) -> None:
    code = _rule_code(path.read_text())
    hits = _hits(list(enumerate(code.splitlines(), start=1)))
    assert hits == [], f"{path.relative_to(ROOT)} spells what pipeline.dl's helpers say"


def test_no_product_module_spells_a_register() -> None:
    modules = _product_modules()
    assert len(modules) > 50  # the glob found the packages
    found = {
        str(path.relative_to(ROOT)): hits
        for path in modules
        if (hits := _hits(_python_code(path.read_text())))
    }
    assert found == {}, "use loom_schemas.pipeline's Fields (DATAPATH.match, INPORT.bits ...)"


def test_the_exceptions_still_exist() -> None:
    for path in PRODUCT_EXCEPTIONS:
        assert (ROOT / path).exists(), f"{path} is gone: drop its exception"
