"""Loom's rule engine from Python: compile DDlog-style rules and run them incrementally.

Typical use::

    from loom_ddlog import Program

    prog = Program.load(["rules/examples/l2switch.dl"])
    with prog.transaction() as txn:
        txn.insert("Port", ("sw0", "p1", 1, None))
    print(txn.delta, prog.dump("Forward"))
"""

from loom_ddlog._native import CompileError, EngineError
from loom_ddlog.program import Delta, Program, Relation, Row, Stats, Transaction
from loom_ddlog.values import Struct

__all__ = [
    "CompileError",
    "Delta",
    "EngineError",
    "Program",
    "Relation",
    "Row",
    "Stats",
    "Struct",
    "Transaction",
]
