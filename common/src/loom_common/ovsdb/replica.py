"""A replica of some tables of one database, kept by an OVSDB monitor on a `RawConnection`.

`Replica` reads the tables and follows their changes (`start`, `poll`): with the `monitor`
method by default, or with `monitor_cond` when some tables are followed only for the rows
a condition selects (`conditions`, changed by `change_conditions`: the physical
controller follows `Universal_Flow` only for the datapaths its nodes need).

With `monitor_cond` the server sends `update2`: a new row's columns that are not at their
default, and a modified row's changed columns as diffs (a set's elements added or removed,
a map's pairs). Rows are kept as the `monitor` method gives them all the same (every
column, a set of one as its atom), rebuilt from the diffs with the column types the
server's schema gives (`ColumnType.apply_diff`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from loom_common.ovsdb.client import KEEPALIVE_IDLE, RawConnection
from loom_common.ovsdb.codec import ColumnType

Change = tuple[str, str, "dict[str, Any] | None"]
"""(table, row uuid, the row's new columns or None when it was deleted)."""


SHORT = 16
"""Strings at most this long are interned in a replica's rows (`compact`)."""
_SHARED: dict[str, list[Any]] = {tag: [tag, []] for tag in ("set", "map")}
"""The empty set and map every replica row shares."""


def compact(row: dict[str, Any]) -> dict[str, Any]:
    """`row` (a monitor's freshly parsed JSON, modified in place) with what many rows hold
    alike shared: every empty set and map one object, the "set" / "map" / "uuid" tags and
    the short strings (names, keys, small values) interned. A replica holds every row of
    its tables as parsed: a physical controller ~1,200 objects for each of the 3,000
    nodes it is connected to, a logical controller every row of the config DB. Rows are
    read, never modified in place (a shared value would change in every row)."""
    for column, value in row.items():
        row[column] = _compact(value)
    return row


def _compact(value: Any) -> Any:
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= SHORT else value
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        tag, inner = value
        if tag in _SHARED:
            if not inner:
                return _SHARED[tag]
            value[0] = _SHARED[tag][0]
            for i, item in enumerate(inner):
                if tag == "map":
                    item[0], item[1] = _compact(item[0]), _compact(item[1])
                else:
                    inner[i] = _compact(item)
        elif tag in ("uuid", "named-uuid"):
            value[0] = sys.intern(tag)
    return value


class Replica:
    """A read-only replica of some tables of one database, kept by an OVSDB `monitor` (or
    `monitor_cond`, see the module docstring).

    `rows[table][uuid]` is the row's columns as OVSDB JSON. `start()` (and `restart()` after
    a lost connection) reads the initial contents; `poll()` applies the updates that
    arrived and returns what changed. Writes go through `conn.transact`.

    A table in `unkept` passes through: its changes carry the rows, but the replica keeps
    none of them (no `rows[table]`), for an owner that holds the rows elsewhere — the
    logical controller's engine holds its input rows, and a copy of the config DB as Python
    objects would be a large part of its memory at NVP's full scale. After a lost connection
    `start()` reports every such row read again (it cannot compare) and nothing of those no
    longer there: the owner knows what it holds, and `reads` tells it that a read of every
    row began (what it holds that the changes since do not mention is gone).
    """

    def __init__(
        self,
        remote: str,
        db: str,
        tables: dict[str, list[str]],
        *,
        wake: Callable[[], None] | None = None,
        no_inserts: frozenset[str] = frozenset(),
        unkept: frozenset[str] = frozenset(),
        staged: bool = False,
        connect: Callable[[], RawConnection] | None = None,
        conditions: Mapping[str, list[Any]] | None = None,
        monitor_id: Any = None,
        names: Mapping[str, str] | None = None,
    ) -> None:
        """Describe the replica: `tables` maps each table to the columns to replicate.

        `connect` makes the connection (default: connect to `remote`); a passive manager
        passes the connection a node opened to it.

        With `wake`, the connection answers the server's probes by itself when the owner
        is busy for long (`RawConnection.keep_alive`) and calls `wake()` when updates
        arrived meanwhile.

        For the tables in `no_inserts` the server sends the rows present when the monitor
        starts, their modifications and deletions, but not rows inserted later: for rows the
        owner inserts itself and already knows (a modification or deletion always carries
        the whole row), whose echo would otherwise come back, row by row, after a large
        write.

        `staged` reads the tables one at a time (`_read_staged`): ovsdb-server then makes a
        table's reply at a time, not the whole database's — at NVP's full scale the whole
        reply more than doubled the config DB's RSS — and the owner parses no more at once.

        `conditions` (table -> the `where` of the rows to follow; tables not named are
        followed whole) monitors with `monitor_cond` instead, under `monitor_id` (what
        `change_conditions` names it by); `no_inserts`, `unkept` and `staged` are for the
        `monitor` method only. `names` (table -> name) keeps and reports a table's rows
        under another name."""
        if conditions is not None and (no_inserts or unkept or staged):
            raise ValueError("no_inserts, unkept and staged go with monitor, not monitor_cond")
        self.remote = remote
        self.db = db
        self.tables = tables
        self.wake = wake
        self.no_inserts = no_inserts
        self.unkept = unkept
        self.staged = staged
        self._names = dict(names or {})
        self._connect = connect or (lambda: RawConnection(self.remote, db=self.db))
        self.rows: dict[str, dict[str, dict[str, Any]]] = self._empty_rows()
        self.reads = 0
        """Reads of every row (`start()`s that succeeded): when it changed, the changes
        returned since began with every row of the `unkept` tables."""
        self.conn: RawConnection | None = None
        self.conditions: dict[str, list[Any]] | None = (
            None if conditions is None else dict(conditions)
        )
        """Table -> the `where` of its rows followed (None: `monitor`, every row)."""
        self.monitor_id = monitor_id
        self._types: dict[str, dict[str, ColumnType]] = {}
        """Table -> column -> its type, from the server's schema (`monitor_cond`)."""
        self._defaults: dict[str, dict[str, Any]] = {}
        """Table -> column -> its value when `update2` leaves it out (`monitor_cond`)."""

    def start(self) -> list[Change]:
        """(Re)connect and read the tables; return every difference from what was held
        (of the `unkept` tables: every row read).

        On an error (raised) the replica is left closed (`conn` None) with the rows it
        held, so a later `start()` reports what changed meanwhile.
        """
        self.close()
        conn = self._connect()
        old = self.rows
        self.rows = self._empty_rows()
        passed: list[Change] = []  # the unkept tables' rows, in order
        try:
            if self.wake is not None:
                conn.keep_alive(KEEPALIVE_IDLE, self.wake)
            if self.conditions is not None:
                self._read_conditional(conn)
            elif self.staged:
                self._read_staged(conn, passed)
            else:
                requests = self._requests(initial=True, updates=True)
                initial = conn.call("monitor", [self.db, None, requests])
                for table in self.tables:
                    passed += self._load(table, initial.get(table, {}))
        except BaseException:
            conn.close()
            self.rows = old
            raise
        self.conn = conn
        self.reads += 1
        changes: list[Change] = passed
        for table in self.rows:
            for uuid in old[table].keys() - self.rows[table].keys():
                changes.append((table, uuid, None))
            for uuid, row in self.rows[table].items():
                if old[table].get(uuid) != row:
                    changes.append((table, uuid, row))
        return changes

    def _read_conditional(self, conn: RawConnection) -> None:
        """Read the tables with `monitor_cond` (the rows `conditions` select), having read
        their columns' types from the server's schema (`update2` needs them)."""
        assert self.conditions is not None
        schema = conn.call("get_schema", [self.db])["tables"]
        self._types = {
            table: {c: ColumnType.parse(schema[table]["columns"][c]["type"]) for c in columns}
            for table, columns in self.tables.items()
        }
        # (shared by the rows: a value is replaced when it changes, never modified)
        self._defaults = {
            table: {c: t.default() for c, t in types.items()}
            for table, types in self._types.items()
        }
        requests: dict[str, Any] = {}
        for table, columns in self.tables.items():
            request: dict[str, Any] = {"columns": columns}
            if table in self.conditions:
                request["where"] = self.conditions[table]
            requests[table] = [request]
        initial = conn.call("monitor_cond", [self.db, self.monitor_id, requests])
        for table, updates in initial.items():
            for uuid, update in updates.items():
                self._update2(table, uuid, update)

    def change_conditions(self, steps: Iterable[Mapping[str, list[Any]]]) -> None:
        """Follow the rows each step's conditions (table -> `where`) select, step after
        step (`monitor_cond_change`; at most two in flight: the server makes a step's
        update while this side reads the one before); rows that enter or leave a condition
        arrive as updates, for `poll`. Closed: the last step's conditions are asked for at
        the next `start()`.

        Raises:
            OSError, OvsdbError: the connection failed (`start()` reconnects and asks for
                the last step's conditions).
        """
        assert self.conditions is not None, "a monitor_cond replica's"
        params = []
        for step in steps:
            self.conditions.update(step)
            params.append([self.monitor_id, self.monitor_id,
                           {t: [{"where": w}] for t, w in step.items()}])  # fmt: skip
        if self.conn is None:
            return
        for _ in self.conn.call_each("monitor_cond_change", params):
            pass

    def _update2(self, table: str, uuid: str, update: dict[str, Any]) -> dict[str, Any] | None:
        """Apply one row's `update2` (`initial`, `insert`, `modify` or `delete`); return the
        row now (None: deleted)."""
        rows = self.rows[self._names.get(table, table)]
        if "delete" in update:
            rows.pop(uuid, None)
            return None
        types = self._types[table]
        if "modify" not in update:  # initial or insert: the columns not at their default
            columns = update.get("insert") or update.get("initial") or {}
            row = {**self._defaults[table], **columns}  # (only the columns monitored come)
        else:
            row = dict(rows.get(uuid) or self._defaults[table])
            for column, diff in update["modify"].items():
                row[column] = types[column].apply_diff(row[column], diff)
        rows[uuid] = row
        return row

    def _read_staged(self, conn: RawConnection, passed: list[Change]) -> None:
        """Read the tables one at a time (`staged`): one monitor sends the updates (no
        rows), then each table's rows come from a monitor of their own, cancelled once
        read. ovsdb-server answers a client between its other requests and sends a
        transaction's updates before what it answers next, so the updates that came before
        a table's rows are already in them (dropped for it and for the tables still to be
        read) and those that came after are applied to it: what `start()` returns is the
        database as of the last table's read."""
        conn.call("monitor", [self.db, None, self._requests(initial=False, updates=True)])
        read: set[str] = set()
        for table in self.tables:
            request = self._requests(initial=True, updates=False, only=table)
            reply, before = conn.call_noting("monitor", [self.db, ["initial", table], request])
            passed += [c for c in self._apply(before, read) if c[0] in self.unkept]
            passed += self._load(table, reply.get(table, {}))
            read.add(table)
            conn.call("monitor_cancel", [["initial", table]])

    def _requests(
        self, *, initial: bool, updates: bool, only: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """Monitor requests for the tables (or `only` one) and the kinds of rows wanted."""
        return {
            table: {
                "columns": columns,
                "select": {
                    "initial": initial,
                    "insert": updates and table not in self.no_inserts,
                    "delete": updates,
                    "modify": updates,
                },
            }
            for table, columns in self.tables.items()
            if only in (None, table)
        }

    def _load(self, table: str, rows: dict[str, Any]) -> list[Change]:
        """Take `table`'s rows as read; the changes to pass on (an unkept table's rows)."""
        if table not in self.unkept:
            held = self.rows[table]
            for uuid, update in rows.items():
                held[uuid] = compact(update["new"])
            return []
        return [(table, uuid, compact(update["new"])) for uuid, update in rows.items()]

    def _empty_rows(self) -> dict[str, dict[str, dict[str, Any]]]:
        return {self._names.get(t, t): {} for t in self.tables if t not in self.unkept}

    def poll(self) -> list[Change]:
        """Apply the updates received so far; return the changes."""
        assert self.conn is not None, "start() first"
        if self.conditions is not None:
            return self._apply2(self.conn.poll())
        return self._apply(self.conn.poll())

    def _apply2(self, messages: list[dict[str, Any]]) -> list[Change]:
        """Apply the `update2`s in `messages`; the changes, in commit order."""
        changes: list[Change] = []
        for message in messages:
            if message.get("method") != "update2":
                continue
            for table, updates in message["params"][1].items():
                for uuid, update in updates.items():
                    row = self._update2(table, uuid, update)
                    changes.append((self._names.get(table, table), uuid, row))
        return changes

    def _apply(self, messages: list[dict[str, Any]], only: set[str] | None = None) -> list[Change]:
        """Apply the updates in `messages` (to the tables in `only`, if given); the changes."""
        changes: list[Change] = []
        for message in messages:
            if message.get("method") != "update":
                continue
            for table, updates in message["params"][1].items():
                if only is not None and table not in only:
                    continue
                held = self.rows.get(table)  # (None: unkept)
                for uuid, update in updates.items():
                    new = update.get("new")
                    if new is not None:
                        new = compact(new)
                    if held is not None and new is None:
                        held.pop(uuid, None)
                    elif held is not None:
                        held[uuid] = new
                    changes.append((table, uuid, new))
        return changes

    def fileno(self) -> int:
        """The connection's descriptor."""
        assert self.conn is not None
        return self.conn.fileno()

    def has_pending(self) -> bool:
        """True if updates already received wait for `poll()`."""
        return self.conn is not None and self.conn.has_pending()

    def close(self) -> None:
        """Close the connection."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
