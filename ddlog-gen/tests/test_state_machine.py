"""Hypothesis state machine: accumulated committed deltas == dump() == naive evaluation.

The program exercises joins, negation, recursion, group_by and FlatMap. Each step is one
transaction of random inserts and deletes (often of rows that are already there or
absent, so updates cancel or are no-ops); after every commit the invariant compares, for
every output relation, the sum of all deltas so far with `dump()` and with a from-scratch
naive evaluation of the current inputs.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from loom_ddlog import Program
from loom_ddlog.program import Row

SOURCE = """
input relation Edge(a: bit<8>, b: bit<8>)
input relation Blocked(n: bit<8>)
input relation Label(n: bit<8>, tags: string)

output relation Path(a: bit<8>, b: bit<8>)
Path(a, b) :- Edge(a, b), not Blocked(a).
Path(a, c) :- Path(a, b), Edge(b, c), not Blocked(b).

output relation Tag(n: bit<8>, tag: string)
Tag(n, t) :- Label(n, tags), var t = FlatMap(split(tags, ",")), t != "".

output relation Tagged(a: bit<8>, b: bit<8>, tag: string)
Tagged(a, b, t) :- Path(a, b), Tag(b, t).

output relation OutDegree(a: bit<8>, n: bit<64>)
OutDegree(a, n) :- Path(a, b), var g = b.group_by(a), var n = g.count().

output relation Unreached(n: bit<8>)
Unreached(n) :- Label(n, _), not Path(_, n).
"""

OUTPUTS = ("Path", "Tag", "Tagged", "OutDegree", "Unreached")

nodes = st.integers(0, 5)
tags = st.lists(st.sampled_from(["a", "b", "c", ""]), max_size=3).map(",".join)
updates = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["insert", "delete"]), st.just("Edge"), st.tuples(nodes, nodes)),
        st.tuples(st.sampled_from(["insert", "delete"]), st.just("Blocked"), st.tuples(nodes)),
        st.tuples(st.sampled_from(["insert", "delete"]), st.just("Label"), st.tuples(nodes, tags)),
    ),
    min_size=1,
    max_size=6,
)


class DeltaAccumulation(RuleBasedStateMachine):
    """Random transactions against one program; outputs tracked from deltas alone."""

    def __init__(self) -> None:
        super().__init__()
        self.prog = Program.compile(SOURCE, name="state_machine.dl")
        self.acc: dict[str, set[Row]] = {rel: set() for rel in OUTPUTS}

    @rule(batch=updates)
    def transaction(self, batch: list[tuple[str, str, Row]]) -> None:
        with self.prog.transaction() as txn:
            for op, rel, row in batch:
                if op == "insert":
                    txn.insert(rel, row)
                else:
                    txn.delete(rel, row)
        assert txn.delta is not None
        for rel, rows in txn.delta.items():
            for weight, row in rows:
                assert weight in (1, -1)
                if weight > 0:
                    assert row not in self.acc[rel], f"{rel}: +1 of a present row {row}"
                    self.acc[rel].add(row)
                else:
                    assert row in self.acc[rel], f"{rel}: -1 of an absent row {row}"
                    self.acc[rel].remove(row)

    @rule(rel=st.sampled_from(["Edge", "Blocked", "Label"]))
    def clear(self, rel: str) -> None:
        self.transaction([])  # an empty transaction changes nothing
        with self.prog.transaction() as txn:
            txn.clear(rel)
        assert txn.delta is not None
        for out, rows in txn.delta.items():
            for weight, row in rows:
                (self.acc[out].add if weight > 0 else self.acc[out].remove)(row)

    @invariant()
    def deltas_equal_dump_and_naive(self) -> None:
        naive = self.prog.naive_evaluate()
        for rel in OUTPUTS:
            dumped = self.prog.dump(rel)
            assert dumped == sorted(dumped)
            assert self.acc[rel] == set(dumped), rel
            assert set(naive[rel]) == set(dumped), rel


# The loaded profile (dev / ci, see conftest.py) with short runs of transactions.
DeltaAccumulation.TestCase.settings = settings(settings.default, stateful_step_count=15)
TestDeltaAccumulation = DeltaAccumulation.TestCase
