"""The OVSDB codec and op builders (pure): values read as Python and written back, a
column's type from its schema, `update2` diffs, and the operations' JSON."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loom_common.ovsdb import ops
from loom_common.ovsdb.codec import (
    ColumnType,
    atom,
    atoms,
    elements,
    map_pairs,
    omap,
    optional,
    optional_text,
    pack_uuid,
    to_map,
    to_optional,
    to_set,
    unpack_uuid,
)

UUID = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"


def test_values_read_as_python() -> None:
    assert atom(["uuid", UUID]) == UUID
    assert atom(["named-uuid", "r1"]) == "r1"
    assert atoms(["set", [["uuid", UUID], ["uuid", "x"]]]) == [UUID, "x"]
    assert atoms(5) == [5]  # a set of one may come as its atom
    assert elements(["set", [["uuid", UUID]]]) == [["uuid", UUID]]
    assert optional(["set", []]) is None
    assert optional(["set", ["hv1"]]) == optional("hv1") == "hv1"
    assert optional_text(["set", []]) == ""
    assert omap(["map", [["k", ["uuid", UUID]]]]) == {"k": UUID}
    assert omap(["set", []]) == {}
    assert map_pairs(["map", [["b", 2], ["a", 1]]]) == (("a", 1), ("b", 2))
    assert unpack_uuid(pack_uuid(UUID)) == UUID


def test_values_written_as_json() -> None:
    assert to_set(x for x in "ab") == ["set", ["a", "b"]]
    assert to_map({"b": "2", "a": "1"}) == ["map", [["a", "1"], ["b", "2"]]]
    assert to_map([("b", "2"), ("a", "1")], sort=False) == ["map", [["b", "2"], ["a", "1"]]]
    assert to_optional(None) == ["set", []]
    assert to_optional(3) == 3


def test_a_column_type_from_its_schema() -> None:
    assert ColumnType.parse("string").kind == "atom"
    assert ColumnType.parse({"key": "string", "min": 0}).kind == "optional"
    tags = ColumnType.parse({"key": "string", "min": 0, "max": "unlimited"})
    assert tags.kind == "set"
    assert tags.default() == ["set", []]
    refs = ColumnType.parse({"key": {"type": "uuid", "refTable": "T"}, "min": 0, "max": 3})
    assert refs.decode(["set", [["uuid", UUID]]]) == frozenset({UUID})
    assert refs.encode({UUID}) == ["set", [["uuid", UUID]]]
    ids = ColumnType.parse({"key": "string", "value": "string", "min": 0, "max": "unlimited"})
    assert ids.kind == "map"
    assert ids.decode(ids.encode({"k": "v"})) == {"k": "v"}
    assert ColumnType.parse({"key": {"type": "integer", "minInteger": 1}}).default() == 0
    assert ColumnType.parse("uuid").default() == ["uuid", "00000000-0000-0000-0000-000000000000"]


SETS = st.frozensets(st.sampled_from("abcdef"))


@given(SETS, SETS)
def test_a_set_diff_takes_one_set_to_the_other(old: frozenset[str], new: frozenset[str]) -> None:
    """`update2` sends a set's change as the elements added or removed (their symmetric
    difference); a set of one is kept as its atom, as the server writes it."""
    column = ColumnType.parse({"key": "string", "min": 0, "max": "unlimited"})

    def json(items: frozenset[str]) -> object:
        return next(iter(items)) if len(items) == 1 else ["set", sorted(items)]

    assert column.apply_diff(json(old), json(old ^ new)) == json(new)


MAPS = st.dictionaries(st.sampled_from("abcd"), st.sampled_from("xyz"))


@given(MAPS, MAPS)
def test_a_map_diff_takes_one_map_to_the_other(old: dict[str, str], new: dict[str, str]) -> None:
    """A map's change: a pair to add (a key it lacks), to remove (the same pair) or to
    change (its key with the new value)."""
    column = ColumnType.parse({"key": "string", "value": "string", "min": 0, "max": "unlimited"})
    diff = {k: v for k, v in new.items() if old.get(k) != v}
    diff |= {k: v for k, v in old.items() if k not in new}
    assert column.apply_diff(to_map(old), to_map(diff)) == to_map(new)


@pytest.mark.parametrize("spec", ["integer", {"key": "string", "min": 0}])
def test_a_diff_of_a_column_of_at_most_one_is_its_new_value(spec: object) -> None:
    column = ColumnType.parse(spec)  # type: ignore[arg-type]
    assert column.apply_diff(1, 2) == 2


def test_operations() -> None:
    where = ops.where_uuid(UUID)
    assert where == [["_uuid", "==", ["uuid", UUID]]]
    assert ops.where_uuid(["named-uuid", "br"]) == [["_uuid", "==", ["named-uuid", "br"]]]
    assert ops.insert("T", {"a": 1}, uuid_name="r") == {
        "op": "insert", "table": "T", "uuid-name": "r", "row": {"a": 1}}  # fmt: skip
    assert ops.update("T", where, {"a": 2}) == {
        "op": "update", "table": "T", "where": where, "row": {"a": 2}}  # fmt: skip
    assert ops.mutate("T", [], ops.set_keys("ids", {"k": "v"})) == {
        "op": "mutate", "table": "T", "where": [],
        "mutations": [["ids", "delete", ["set", ["k"]]], ["ids", "insert", ["map", [["k", "v"]]]]],
    }  # fmt: skip
    assert ops.delete("T", where) == {"op": "delete", "table": "T", "where": where}
    assert ops.select("T", columns=["a"]) == {
        "op": "select", "table": "T", "where": [], "columns": ["a"]}  # fmt: skip
    assert ops.wait("T", [], columns=["a"], rows=[{"a": 1}], until="!=") == {
        "op": "wait", "table": "T", "timeout": 0, "where": [], "columns": ["a"],
        "until": "!=", "rows": [{"a": 1}]}  # fmt: skip
    assert ops.comment("why") == {"op": "comment", "comment": "why"}
