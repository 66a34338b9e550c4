"""Value conversion across the binding: every column type, both directions, range checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loom_ddlog import Program, Struct

SOURCE = """
typedef Point = Point{x: signed<32>, y: signed<32>}
typedef Color = Red | Green | Custom{r: bit<8>, g: bit<8>, b: bit<8>}

input relation T(
    b: bool, u8: bit<8>, u128: bit<128>, i16: signed<16>, big: bigint, s: string,
    t: (bit<8>, string), v: Vec<string>, st: Set<bit<32>>, m: Map<string, bit<16>>,
    o: Option<bit<8>>, p: Point, c: Color)

output relation Out(
    b: bool, u8: bit<8>, u128: bit<128>, i16: signed<16>, big: bigint, s: string,
    t: (bit<8>, string), v: Vec<string>, st: Set<bit<32>>, m: Map<string, bit<16>>,
    o: Option<bit<8>>, p: Point, c: Color)
Out(b, u8, u128, i16, big, s, t, v, st, m, o, p, c) :-
    T(b, u8, u128, i16, big, s, t, v, st, m, o, p, c).

input relation Ints(u8: bit<8>, i16: signed<16>, u128: bit<128>, s128: signed<128>)
"""

ROW: tuple[Any, ...] = (
    True,
    255,
    2**128 - 1,
    -32768,
    -(10**40),
    'héllo "world"\n',
    (7, "x"),
    ("a", "b", "a"),
    frozenset({3, 1, 2}),
    (("k1", 1), ("k0", 65535)),
    None,
    Struct("Point", x=-1, y=2**31 - 1),
    Struct("Custom", r=1, g=2, b=3),
)

EXPECTED: tuple[Any, ...] = (
    True,
    255,
    2**128 - 1,
    -32768,
    -(10**40),
    'héllo "world"\n',
    (7, "x"),
    ("a", "b", "a"),
    frozenset({1, 2, 3}),
    (("k0", 65535), ("k1", 1)),
    None,
    Struct("Point", x=-1, y=2**31 - 1),
    Struct("Custom", r=1, g=2, b=3),
)


@pytest.fixture(scope="module")
def prog() -> Program:
    return Program.compile(SOURCE, name="values.dl")


def roundtrip(prog: Program, row: Sequence[Any] | dict[str, Any]) -> tuple[Any, ...]:
    with prog.transaction() as txn:
        txn.clear("T")
    with prog.transaction() as txn:
        txn.insert("T", row)
    assert txn.delta is not None
    [(weight, out)] = txn.delta["Out"]
    assert weight == 1
    assert prog.dump("T") == [out]
    return out


def test_every_type_round_trips(prog: Program) -> None:
    out = roundtrip(prog, ROW)
    assert out == EXPECTED
    assert hash(out) == hash(EXPECTED)  # rows are hashable, Maps and Structs included


def test_alternative_input_forms(prog: Program) -> None:
    row = list(ROW)
    row[6] = [7, "x"]  # any sequence for a tuple
    row[7] = ["a", "b", "a"]  # any sequence for a Vec
    row[8] = [2, 3, 1, 3]  # any iterable for a Set
    row[9] = {"k1": 1, "k0": 65535}  # a dict for a Map
    row[10] = 9  # Some{9}
    row[11] = {"x": -1, "y": 2**31 - 1}  # a dict for a one-constructor struct
    row[12] = {"r": 1, "g": 2, "b": 3}  # a dict naming exactly one union constructor's fields
    out = roundtrip(prog, row)
    assert out[:10] == EXPECTED[:10]
    assert out[10] == 9
    assert out[11:] == EXPECTED[11:]


def test_row_as_mapping_by_column(prog: Program) -> None:
    names = prog.relations["T"].column_names
    assert roundtrip(prog, dict(zip(names, ROW, strict=True))) == EXPECTED


def test_fieldless_union_constructor(prog: Program) -> None:
    row = (*ROW[:12], Struct("Green"))
    assert roundtrip(prog, row)[12] == Struct("Green")


@pytest.mark.parametrize(
    ("column", "value", "error"),
    [
        (1, 256, ValueError),
        (1, -1, ValueError),
        (2, 2**128, ValueError),
        (3, 32768, ValueError),
        (3, -32769, ValueError),
        (1, True, TypeError),
        (0, 1, TypeError),
        (5, b"bytes", TypeError),
        (6, (1, "x", 2), ValueError),
        (7, "not a vec", TypeError),
        (11, Struct("Point", x=1), ValueError),
        (12, Struct("Blue"), ValueError),
        (12, {"x": 1}, ValueError),
        (12, 3, TypeError),
    ],
)
def test_bad_values_name_relation_and_column(
    prog: Program, column: int, value: object, error: type[Exception]
) -> None:
    row = list(ROW)
    row[column] = value
    name = prog.relations["T"].columns[column][0]
    before = prog.dump("Out")
    with prog.transaction() as txn:
        txn.insert("T", row)
        with pytest.raises(error, match=f"relation T, column {name}:"):
            txn.commit()
    assert prog.dump("Out") == before  # nothing applied


def test_wrong_arity_is_a_value_error(prog: Program) -> None:
    txn = prog.transaction()
    txn.insert("Ints", (1, 2, 3))
    with pytest.raises(ValueError, match="relation Ints has 4 columns, got 3"):
        txn.commit()


@given(
    u8=st.integers(0, 255),
    i16=st.integers(-(2**15), 2**15 - 1),
    u128=st.integers(0, 2**128 - 1),
    s128=st.integers(-(2**127), 2**127 - 1),
)
def test_integer_bounds_round_trip(u8: int, i16: int, u128: int, s128: int) -> None:
    prog = _ints()
    with prog.transaction() as txn:
        txn.clear("Ints")
        txn.insert("Ints", (u8, i16, u128, s128))
    assert prog.dump("Ints") == [(u8, i16, u128, s128)]


_INTS: list[Program] = []


def _ints() -> Program:
    if not _INTS:
        _INTS.append(Program.compile(SOURCE))
    return _INTS[0]


def test_struct_value_semantics() -> None:
    a = Struct("Output", port=3)
    b = Struct("Output", {"port": 3})
    assert a == b
    assert hash(a) == hash(b)
    assert a.port == 3
    assert a["port"] == 3
    assert a.ctor == "Output"
    assert dict(a.fields) == {"port": 3}
    assert a != Struct("Output", port=4)
    assert a != Struct("Flood", port=3)
    assert repr(a) == "Struct('Output', port=3)"
    with pytest.raises(AttributeError):
        a.port = 4
    with pytest.raises(AttributeError, match="no field 'nope'"):
        _ = a.nope
    assert {a: 1}[b] == 1


NESTED = """
typedef Shape = Circle{r: bit<8>} | Rect{w: bit<8>, h: bit<8>} | Empty
input relation N(
    v: Vec<(bit<8>, string)>, s: Set<signed<16>>, m: Map<string, Option<bit<8>>>,
    o: Option<Shape>, vv: Vec<Set<string>>)
"""

_NESTED: list[Program] = []

shapes = st.one_of(
    st.builds(lambda r: Struct("Circle", r=r), st.integers(0, 255)),
    st.builds(lambda w, h: Struct("Rect", w=w, h=h), st.integers(0, 255), st.integers(0, 255)),
    st.just(Struct("Empty")),
)


@given(
    v=st.lists(st.tuples(st.integers(0, 255), st.text(max_size=5)), max_size=4).map(tuple),
    s=st.frozensets(st.integers(-(2**15), 2**15 - 1), max_size=4),
    m=st.dictionaries(st.text(max_size=3), st.none() | st.integers(0, 255), max_size=4),
    o=st.none() | shapes,
    vv=st.lists(st.frozensets(st.text(max_size=2), max_size=3), max_size=3).map(tuple),
)
def test_nested_values_round_trip(
    v: tuple[tuple[int, str], ...],
    s: frozenset[int],
    m: dict[str, int | None],
    o: Struct | None,
    vv: tuple[frozenset[str], ...],
) -> None:
    if not _NESTED:
        _NESTED.append(Program.compile(NESTED))
    prog = _NESTED[0]
    with prog.transaction() as txn:
        txn.clear("N")
        txn.insert("N", (v, s, m, o, vv))
    assert prog.dump("N") == [(v, s, tuple(sorted(m.items())), o, vv)]
