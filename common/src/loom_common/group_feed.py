"""Rows fed to an engine by group, so that feeding a group anew sends only the difference.

A controller feeds some input relations from sources that say "here is all of it, now"
rather than "this row changed": a transport node's OVSDB (its VIFs, tunnel ports, uplinks,
each time something of it changed), the liveness of every node. `GroupFeed` keeps, per
group (a node, say), the rows it stands for, and counts how many groups hold each row: a
row goes to the engine when its first group wants it and leaves when its last one stops
(two groups may want the same row; a row may move from one group to another in one
pass). `flush` writes the net difference into one engine transaction, every deletion
before any insertion.

    feed = GroupFeed()
    feed.replace("hv1", {"Iface": {("hv1", "vif-1", 5)}})
    feed.flush(txn)        # inserts Iface("hv1", "vif-1", 5)
    feed.replace("hv1", {"Iface": set()})
    feed.flush(txn)        # deletes it
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Protocol

Row = tuple[Any, ...]


class Transaction(Protocol):
    """What `flush` needs of an engine transaction (`loom_ddlog.Transaction`)."""

    def insert(self, relation: str, row: Row) -> None:
        """Insert `row` into `relation`."""

    def delete(self, relation: str, row: Row) -> None:
        """Delete `row` from `relation`."""


class GroupFeed:
    """Rows by group, counted across groups (see the module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[Hashable, dict[str, frozenset[Row]]] = {}
        self._count: dict[tuple[str, Row], int] = {}
        self._touched: dict[tuple[str, Row], bool] = {}
        """Rows whose count changed since the last flush -> whether the engine had them."""

    def replace(self, group: Hashable, rows: Mapping[str, Iterable[Row]]) -> None:
        """Group `group` stands for `rows` (relation -> rows) now, and for nothing else."""
        old = self._groups.get(group, {})
        new = {relation: frozenset(r) for relation, r in rows.items() if r}
        for relation in old.keys() | new.keys():
            was, now = old.get(relation, frozenset()), new.get(relation, frozenset())
            if was != now:
                for row in was - now:
                    self._less(relation, row)
                for row in now - was:
                    self._more(relation, row)
        if new:
            self._groups[group] = new
        else:
            self._groups.pop(group, None)

    def add(self, group: Hashable, relation: str, row: Row) -> None:
        """Group `group` stands for `row` too."""
        rows = self._groups.setdefault(group, {})
        held = rows.get(relation, frozenset())
        if row not in held:
            rows[relation] = held | {row}
            self._more(relation, row)

    def discard(self, group: Hashable, relation: str, row: Row) -> None:
        """Group `group` no longer stands for `row`."""
        rows = self._groups.get(group)
        if rows is None or row not in rows.get(relation, frozenset()):
            return
        rows[relation] = rows[relation] - {row}
        if not rows[relation]:
            del rows[relation]
        if not rows:
            del self._groups[group]
        self._less(relation, row)

    def drop(self, group: Hashable) -> None:
        """Group `group` stands for nothing any more."""
        self.replace(group, {})

    def group(self, group: Hashable) -> Mapping[str, frozenset[Row]]:
        """What group `group` stands for (do not modify)."""
        return self._groups.get(group, {})

    def pending(self) -> bool:
        """Some row's presence may have changed since the last flush."""
        return bool(self._touched)

    def flush(self, txn: Transaction) -> int:
        """Write the rows that came and went since the last flush into `txn` (deletions
        first); return how many."""
        deletes, inserts = [], []
        for key, had in self._touched.items():
            has = key in self._count
            if had and not has:
                deletes.append(key)
            elif has and not had:
                inserts.append(key)
        self._touched = {}
        for relation, row in deletes:
            txn.delete(relation, row)
        for relation, row in inserts:
            txn.insert(relation, row)
        return len(deletes) + len(inserts)

    def rows(self) -> dict[str, set[Row]]:
        """Every row held, by relation (what a new engine is fed)."""
        found: dict[str, set[Row]] = {}
        for relation, row in self._count:
            found.setdefault(relation, set()).add(row)
        return found

    def _more(self, relation: str, row: Row) -> None:
        key = (relation, row)
        count = self._count.get(key, 0)
        if key not in self._touched:
            self._touched[key] = count > 0
        self._count[key] = count + 1

    def _less(self, relation: str, row: Row) -> None:
        key = (relation, row)
        count = self._count[key]
        if key not in self._touched:
            self._touched[key] = True
        if count == 1:
            del self._count[key]
        else:
            self._count[key] = count - 1
