"""The universal-DB writer: the engine's output deltas in, the fewest OVSDB operations out.

The writer keeps two maps per universal table, both keyed by row identity
(`outputs.OutputTable.identity`): *desired* (what the engine's outputs say, for every shard,
so a standby that takes a shard over already has its state) and *actual* (the rows in the
database, mirrored by the IDL and maintained by its change notifications, whoever wrote
them). `apply(delta)` updates desired and marks the identities it touched; `flush()` makes
actual equal desired for those identities, in owned shards only, in one transaction:
insert what is missing, update what differs, delete what is no longer wanted. Nothing else
is read or written, so a change costs what it touches.

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
        self.dirty: dict[str, set[Identity]] = defaultdict(set)

    # ---- the two sides ----

    def apply(self, delta: Delta) -> None:
        """Fold one engine commit's output delta into desired (deletions first)."""
        for relation, changes in delta.items():
            out = OUTPUTS.get(relation)
            if out is None:
                continue
            desired, dirty = self.desired[out.table], self.dirty[out.table]
            for weight, row in sorted(changes, key=lambda c: c[0]):
                ident = out.identity(row)
                dirty.add(ident)
                if weight < 0:
                    desired.pop(ident, None)
                else:
                    desired[ident] = (out.shard(row), out.columns(row))

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
            self.dirty[table].update(self.desired[table])
            self.dirty[table].update(self.actual[table])

    def pending(self) -> bool:
        """True if some identity awaits a flush."""
        return any(self.dirty.values())

    # ---- writing ----

    def flush(self, idl: ovs.db.idl.Idl, before_commit: Callable[[Any], None]) -> str:
        """Write the dirty identities of owned shards in one transaction; return its status.

        `before_commit(txn)` adds what must commit with the rows (generations, fencing).
        On success the dirty marks are cleared (rows of shards not owned stay marked, for
        when they are); on failure they stay, for a retry after the IDL catches up.
        """
        txn = ovs.db.idl.Transaction(idl)
        kept: dict[str, set[Identity]] = defaultdict(set)
        try:
            for table, idents in self.dirty.items():
                for ident in idents:
                    if not self._sync(txn, idl, table, ident):
                        kept[table].add(ident)
            before_commit(txn)
        except BaseException:
            txn.abort()
            raise
        status = txn.commit_block()
        if status in (ovs.db.idl.Transaction.SUCCESS, ovs.db.idl.Transaction.UNCHANGED):
            self.dirty = kept
        else:
            log.warning("universal DB write failed: %s %s", status, txn.get_error())
        return str(status)

    def _sync(self, txn: Any, idl: ovs.db.idl.Idl, table: str, ident: Identity) -> bool:
        """Add the operations making `ident` right; False if its shard is not owned."""
        want = self.desired[table].get(ident)
        rows = list(self.actual[table].get(ident, []))
        shard = want[0] if want else (shard_of_row(table, rows[0]) if rows else None)
        if shard is None:
            return True
        if not self.owns(shard):
            return False
        if want is None:
            for row in rows:
                row.delete()
            return True
        columns = want[1]
        if not rows:
            new = txn.insert(idl.tables[table])
            for column, value in columns.items():
                setattr(new, column, value)
            return True
        first, extra = rows[0], rows[1:]
        for row in extra:
            row.delete()
        for column, value in columns.items():
            if _normal(getattr(first, column)) != _normal(value):
                setattr(first, column, value)
        return True
