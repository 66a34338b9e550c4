"""The universal-DB writer: the engine's output deltas in, the fewest OVSDB operations out.

The writer keeps two maps per universal table, both keyed by row identity
(`outputs.OutputTable.identity`): *desired* (what the engine's outputs say, for every shard,
so a standby that takes a shard over already has its state) and *actual* (the rows in the
database, mirrored by the IDL and maintained by its change notifications, whoever wrote
them). `apply(delta)` updates desired and marks the identities it touched, per shard;
`flush()` makes actual equal desired for the marked identities of owned shards, in one
transaction: insert what is missing, update what differs, delete what is no longer wanted.
Nothing else is read or written, so a change costs what it touches, and marks of shards
this controller only stands by for wait, untouched, until it owns them.

`reconcile()` marks every identity of both maps, for a full comparison: after (re)connecting
and when the controller takes shards over (rows a previous master left behind, or a crash
between engine commit and database write, are then corrected).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ovs.db.idl

from loom_logical.outputs import OUTPUTS, TABLE_OUTPUT, Columns, Identity, shard_of_row

log = logging.getLogger(__name__)

Delta = Mapping[str, Sequence[tuple[int, tuple[Any, ...]]]]


def _normal(value: Any) -> Any:
    """A column value in a form where desired and actual compare equal when they are."""
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    if isinstance(value, list | tuple | set | frozenset):
        return tuple(sorted(value))
    return value


class Writer:
    """Writes the engine's outputs to the universal database, for the shards it owns."""

    def __init__(self, owns: Callable[[str], bool]) -> None:
        """Create a writer that writes only rows whose shard `owns(shard)` accepts."""
        self.owns = owns
        self.desired: dict[str, dict[Identity, tuple[str, Columns]]] = defaultdict(dict)
        self.actual: dict[str, dict[Identity, list[Any]]] = defaultdict(dict)
        self.dirty: dict[str, dict[str, set[Identity]]] = defaultdict(lambda: defaultdict(set))
        """Shard -> table -> identities to compare at the next flush."""
        self.touched: set[str] = set()
        """The shards the transaction being built writes (for fencing)."""

    # ---- the two sides ----

    def apply(self, delta: Delta) -> None:
        """Fold one engine commit's output delta into desired (deletions first)."""
        for relation, changes in delta.items():
            out = OUTPUTS.get(relation)
            if out is None:
                continue
            desired = self.desired[out.table]
            for weight, row in sorted(changes, key=lambda c: c[0]):
                ident = out.identity(row)
                shard = out.shard(row)
                self.dirty[shard][out.table].add(ident)
                if weight < 0:
                    desired.pop(ident, None)
                else:
                    desired[ident] = (shard, out.columns(row))

    def observe(self, event: str, table: str, row: Any) -> None:
        """Mirror one IDL change of a universal row into actual (called from `notify`).

        Identities are columns nobody updates in place (a changed flow is a new row), so an
        update does not move a row between identities.
        """
        out = TABLE_OUTPUT.get(table)
        if out is None or event == ovs.db.idl.ROW_UPDATE:
            return
        actual = self.actual[table]
        ident = out.identity_of_row(row)
        if event == ovs.db.idl.ROW_DELETE:
            rows = actual.get(ident, [])
            if row in rows:
                rows.remove(row)
            if not rows:
                actual.pop(ident, None)
        else:
            actual.setdefault(ident, []).append(row)

    def reconcile(self) -> None:
        """Mark every identity, desired or actual, for comparison at the next flush."""
        for table in TABLE_OUTPUT:
            for ident, (shard, _) in self.desired[table].items():
                self.dirty[shard][table].add(ident)
            for ident, rows in self.actual[table].items():
                self.dirty[shard_of_row(table, rows[0])][table].add(ident)

    def pending(self) -> bool:
        """True if some identity of an owned shard awaits a flush."""
        return any(self.owns(shard) and any(t.values()) for shard, t in self.dirty.items())

    # ---- writing ----

    def flush(self, idl: ovs.db.idl.Idl, before_commit: Callable[[Any], None]) -> str:
        """Write the dirty identities of owned shards in one transaction; return its status.

        `before_commit(txn)` adds what must commit with the rows (generations, fencing of
        `touched`, the shards written). On success the marks of those shards are cleared
        (marks of shards not owned stay, for when they are); on failure they stay, for a
        retry once the IDL has caught up.
        """
        txn = ovs.db.idl.Transaction(idl)
        shards = [shard for shard in self.dirty if self.owns(shard)]
        self.touched = set()
        try:
            for shard in shards:
                for table, idents in self.dirty[shard].items():
                    for ident in idents:
                        self._sync(txn, idl, table, ident)
                self.touched.add(shard)
            before_commit(txn)
        except BaseException:
            txn.abort()
            raise
        status = txn.commit_block()
        if status in (ovs.db.idl.Transaction.SUCCESS, ovs.db.idl.Transaction.UNCHANGED):
            for shard in shards:
                self.dirty.pop(shard, None)
        else:
            log.warning("universal DB write failed: %s %s", status, txn.get_error())
        return str(status)

    def _sync(self, txn: Any, idl: ovs.db.idl.Idl, table: str, ident: Identity) -> None:
        """Add the operations that make `ident`'s rows what desired says."""
        want = self.desired[table].get(ident)
        rows = list(self.actual[table].get(ident, []))
        if want is None:
            for row in rows:
                row.delete()
            return
        columns = want[1]
        if not rows:
            new = txn.insert(idl.tables[table])
            for column, value in columns.items():
                setattr(new, column, value)
            return
        first, extra = rows[0], rows[1:]
        for row in extra:
            row.delete()
        for column, value in columns.items():
            if _normal(getattr(first, column)) != _normal(value):
                setattr(first, column, value)
