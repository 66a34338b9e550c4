"""Loom's rule engine from Python: compile DDlog-style rules and run them incrementally.

Typical use::

    from loom_ddlog import Program

    prog = Program.load(["ddlog-gen/examples/l2switch.dl"])
    with prog.transaction() as txn:
        txn.insert("Port", ("sw0", "p1", 1, None))
    print(txn.delta, prog.dump("Forward"))

Rows are tuples of column values, converted by the column's declared type:

=====================  ==============================================  ======================
type                   accepted on input                               returned
=====================  ==============================================  ======================
bool                   bool                                            bool
bit<N>, signed<N>      int (not bool), range-checked -> ValueError     int
bigint                 int                                             int
string                 str                                             str
(A, B, ...)            any sequence of that length                     tuple
Vec<T>                 any sequence but str/bytes                      tuple
Set<T>                 any iterable but str/bytes                      frozenset
Map<K, V>              a mapping, or an iterable of (k, v) pairs       tuple of (k, v) pairs,
                                                                       sorted by key
Option<T>              None, or a T (Some)                             None, or the T
struct / union         Struct(ctor, field=...), or a dict of fields    Struct
=====================  ==============================================  ======================

Maps come back as sorted tuples of pairs so that rows stay hashable (usable in sets and as
dict keys); ``dict(value)`` turns one into a dict, and the tuple is accepted back as input.
``Option<Option<T>>`` cannot tell ``Some{None}`` from ``None`` in this mapping.
Conversion errors name the relation and column.
"""

from loom_ddlog._native import CompileError, EngineError, allocator_memory
from loom_ddlog.program import (
    Delta,
    PendingDelta,
    Program,
    Relation,
    Row,
    Stats,
    Transaction,
    gc_paused,
)
from loom_ddlog.values import Struct

__all__ = [
    "CompileError",
    "Delta",
    "EngineError",
    "PendingDelta",
    "Program",
    "Relation",
    "Row",
    "Stats",
    "Struct",
    "Transaction",
    "allocator_memory",
    "gc_paused",
]
