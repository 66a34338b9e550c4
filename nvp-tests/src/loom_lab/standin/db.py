"""A stand-in node's OVSDB: the `Open_vSwitch` database in memory, with ovsdb-server's
transaction and monitor semantics for what Loom's controllers send. Pure: JSON values in,
JSON values out; the fleet (`loom_lab.standin.fleet`) does the I/O.

Column types, defaults, enums, integer ranges, references, root tables, indexes and
`maxRows` come from the schema file (`loom_lab.standin.schema`: Debian's
`vswitch.ovsschema`). Values are kept in their canonical JSON form, and a row keeps only
the columns that differ from their defaults.

Transactions (`Database.transact`), as ovsdb-server runs them (`ovsdb/execution.c`,
`ovsdb/transaction.c`):

- operations `insert` (with `uuid-name`), `select`, `update`, `mutate` (`insert`/`delete`
  on sets and maps, where a map insert keeps a key already present; arithmetic on
  integers and reals), `delete`, `wait`, `comment`, `abort`; `named-uuid` references
  anywhere in the transaction; `where` with `==`, `!=`, `includes`, `excludes`, `<`, `<=`,
  `>`, `>=`, and on `_uuid`;
- atomic: the first operation that fails ends the transaction and nothing of it applies;
  the results are the earlier operations' results, the error, and `null` for the rest; a
  failure at commit (referential integrity, an index's uniqueness, `maxRows`) is one more
  element after them;
- a `wait` whose condition does not hold fails the transaction ("timed out") when its
  timeout is 0 (how Loom fences its writes);
- strong references are counted: a reference to a row that does not exist, or deleting a
  row still referenced, fails the transaction; rows of non-root tables that nothing
  references any more are deleted (garbage collection: a Port taken off br-int goes, its
  Interfaces with it; a non-root row inserted and not referenced never appears); weak
  references to rows that are gone are removed.

Monitors (`Monitor`, the `monitor` method and its `update` notifications): the initial
rows, then per commit the rows inserted, deleted, and modified in a monitored column
(`old`: the changed columns' old values, `new`: every monitored column), honouring the
`select` flags.

Not implemented: a `wait` that would block (a non-zero or no timeout: ovsdb-server holds
the transaction until the condition holds; here it fails at once, "not supported"), locks
(`assert` fails: "not owner"), `monitor_cond`, `_version`, string length constraints,
durability.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from loom_lab.standin.schema import (
    INF,
    BaseType,
    ColumnType,
    OvsdbFailure,
    Row,
    Schema,
    TableSchema,
    atom_key,
    new_uuid,
    syntax_error,
    value_of,
)

Change = tuple[str, str, "Row | None", "Row | None"]
"""(table, row uuid, the row before the commit or None, after or None)."""


# ---- conditions ----

Predicate = Callable[[str, Row], bool]


def _condition(table: TableSchema, clause: Any, names: dict[str, str]) -> Predicate:
    """One `where` clause [column, function, value] as a predicate on (uuid, row)."""
    if not isinstance(clause, list) or len(clause) != 3 or not isinstance(clause[0], str):
        raise syntax_error(f"{json.dumps(clause)} is not a condition")
    column, function, arg = clause
    if column == "_uuid":
        target = BaseType("uuid").atom(arg, names)[1]
        if function in ("==", "includes"):
            return lambda uuid, _row: uuid == target
        if function in ("!=", "excludes"):
            return lambda uuid, _row: uuid != target
        raise syntax_error(f"function {function!r} does not apply to _uuid")
    ctype = table.columns.get(column)
    if ctype is None:
        raise syntax_error(f"no column {column!r} in table {table.name}")
    default = table.defaults[column]
    if function in ("==", "!="):
        want = ctype.parse(arg, names)
        equal = function == "=="
        return lambda _uuid, row: (row.get(column, default) == want) == equal
    if function in ("includes", "excludes"):
        return _inclusion(ctype, column, default, ctype.parse(arg, names, sized=False),
                          includes=function == "includes")  # fmt: skip
    if function in _ORDER and ctype.key.kind in ("integer", "real"):
        bound, test = ctype.key.atom(arg, names), _ORDER[function]
        return lambda _uuid, row: all(
            test(atom, bound) for atom in ctype.elements(row.get(column, default))
        )
    raise syntax_error(f"function {function!r} does not apply to column {column}")


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}  # fmt: skip


def _inclusion(ctype: ColumnType, column: str, default: Any, value: Any, *,
               includes: bool) -> Predicate:  # fmt: skip
    """`includes` (every element of `value` is in the column) or `excludes` (none is); a
    map's elements are its key-value pairs."""
    wanted = ctype.elements(value)
    if ctype.is_map:
        pairs = [(atom_key(k), v) for k, v in wanted]

        def has_pairs(_uuid: str, row: Row) -> bool:
            held = {atom_key(k): v for k, v in row.get(column, default)[1]}
            found = (key in held and held[key] == v for key, v in pairs)
            return all(found) if includes else not any(found)

        return has_pairs
    keys = [atom_key(atom) for atom in wanted]

    def has_atoms(_uuid: str, row: Row) -> bool:
        held = {atom_key(atom) for atom in ctype.elements(row.get(column, default))}
        found = (key in held for key in keys)
        return all(found) if includes else not any(found)

    return has_atoms


# ---- transactions ----


class _Txn:
    """The rows a transaction changed, over the database's."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.changed: dict[str, dict[str, Row | None]] = {}
        self.names: dict[str, str] = {}

    def row(self, table: str, uuid: str) -> Row | None:
        changed = self.changed.get(table)
        if changed is not None and uuid in changed:
            return changed[uuid]
        return self.db.rows[table].get(uuid)

    def put(self, table: str, uuid: str, row: Row | None) -> None:
        self.changed.setdefault(table, {})[uuid] = row

    def rows(self, table: str) -> Iterator[tuple[str, Row]]:
        changed = self.changed.get(table, {})
        for uuid, row in self.db.rows[table].items():
            if uuid not in changed:
                yield uuid, row
        for uuid, maybe in changed.items():
            if maybe is not None:
                yield uuid, maybe

    def matching(self, table: TableSchema, where: Any) -> list[tuple[str, Row]]:
        """The rows of `table` that satisfy every clause of `where`."""
        if not isinstance(where, list):
            raise syntax_error("where must be an array")
        if (len(where) == 1 and isinstance(where[0], list) and len(where[0]) == 3
                and where[0][0] == "_uuid" and where[0][1] == "=="):  # fmt: skip
            uuid = BaseType("uuid").atom(where[0][2], self.names)[1]  # (the usual case)
            row = self.row(table.name, uuid)
            return [] if row is None else [(uuid, row)]
        predicates = [_condition(table, clause, self.names) for clause in where]
        return [(uuid, row) for uuid, row in self.rows(table.name)
                if all(p(uuid, row) for p in predicates)]  # fmt: skip


class Database:
    """One node's database: rows by table and uuid, and strong reference counts."""

    _on_rows: ClassVar[dict[str, Callable[..., Any]]]
    """The operations on the rows a `where` selects, by name."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.rows: dict[str, dict[str, Row]] = {name: {} for name in schema.tables}
        self.refs: dict[str, int] = {}
        """Row uuid -> the strong references to it (rows not referenced are absent)."""
        self.unique: dict[tuple[str, tuple[str, ...]], tuple[dict[Any, str], dict[str, Any]]] = {
            (name, index): ({}, {})
            for name, table in schema.tables.items()
            for index in table.indexes
        }
        """(table, index columns) -> (the index's values -> the row that has them, and back)."""

    def get(self, table: str, uuid: str, column: str) -> Any:
        """A column of a row (which must exist)."""
        return value_of(self.schema.tables[table], self.rows[table][uuid], column)

    def find(self, table: str, column: str, value: Any) -> str | None:
        """The uuid of a row of `table` whose `column` is `value` (canonical JSON)."""
        default = self.schema.tables[table].defaults[column]
        for uuid, row in self.rows[table].items():
            if row.get(column, default) == value:
                return uuid
        return None

    def transact(self, ops: list[Any]) -> tuple[list[Any], list[Change]]:
        """Run a transaction's operations; return its results (as ovsdb-server answers
        them) and the changes committed (none if it failed)."""
        txn = _Txn(self)
        results: list[Any] = []
        try:
            for op in ops:  # named rows first: they may be referred to before
                if isinstance(op, dict) and op.get("op") == "insert" and "uuid-name" in op:
                    name = op["uuid-name"]
                    if not isinstance(name, str) or name in txn.names:
                        raise syntax_error(f"duplicate or invalid uuid-name {name!r}")
                    txn.names[name] = new_uuid()
            for op in ops:
                results.append(self._execute(txn, op))
        except OvsdbFailure as failure:
            results.append(failure.to_json())
            results += [None] * (len(ops) - len(results))
            return results, []
        try:
            changes = self._commit(txn)
        except OvsdbFailure as failure:
            return [*results, failure.to_json()], []
        return results, changes

    # ---- operations ----

    def _execute(self, txn: _Txn, op: Any) -> Any:
        if not isinstance(op, dict):
            raise syntax_error("an operation must be an object")
        kind = op.get("op")
        if kind == "comment":
            return {}
        if kind == "abort":
            raise OvsdbFailure("aborted", "aborted by request")
        if kind == "assert":
            raise OvsdbFailure("not owner", "the stand-in grants no locks")
        table = self.schema.table(op.get("table"))
        if kind == "insert":
            return self._insert(txn, table, op)
        run = self._on_rows.get(kind) if isinstance(kind, str) else None
        if run is None:
            raise syntax_error(f"no operation {kind!r}")
        return run(self, txn, table, op, txn.matching(table, op.get("where")))

    def _select(self, _txn: _Txn, table: TableSchema, op: dict[str, Any],
                rows: list[tuple[str, Row]]) -> Any:  # fmt: skip
        columns = op.get("columns", ["_uuid", *table.columns])
        return {"rows": [self._project(table, uuid, row, columns) for uuid, row in rows]}

    def _update(self, txn: _Txn, table: TableSchema, op: dict[str, Any],
                rows: list[tuple[str, Row]]) -> Any:  # fmt: skip
        values = self._values(txn, table, op.get("row"), update=True)
        for uuid, row in rows:
            txn.put(table.name, uuid, _with(table, row, values))
        return {"count": len(rows)}

    def _mutate(self, txn: _Txn, table: TableSchema, op: dict[str, Any],
                rows: list[tuple[str, Row]]) -> Any:  # fmt: skip
        for uuid, row in rows:
            txn.put(table.name, uuid, self._mutated(txn, table, row, op.get("mutations")))
        return {"count": len(rows)}

    def _delete(self, txn: _Txn, table: TableSchema, _op: dict[str, Any],
                rows: list[tuple[str, Row]]) -> Any:  # fmt: skip
        for uuid, _ in rows:
            txn.put(table.name, uuid, None)
        return {"count": len(rows)}

    def _insert(self, txn: _Txn, table: TableSchema, op: dict[str, Any]) -> Any:
        if "uuid-name" in op:
            uuid = txn.names[op["uuid-name"]]
        elif isinstance(op.get("uuid"), str):
            uuid = op["uuid"]
        else:
            uuid = new_uuid()
        if txn.row(table.name, uuid) is not None:
            raise OvsdbFailure("duplicate uuid", f"row {uuid} exists in table {table.name}")
        txn.put(table.name, uuid, _with(table, {}, self._values(txn, table, op.get("row", {}))))
        return {"uuid": ["uuid", uuid]}

    @staticmethod
    def _values(txn: _Txn, table: TableSchema, row: Any, *, update: bool = False) -> Row:
        if not isinstance(row, dict):
            raise syntax_error("row must be an object")
        values = {}
        for column, value in row.items():
            ctype = table.columns.get(column)
            if ctype is None:
                raise syntax_error(f"no column {column!r} in table {table.name}")
            if update and not ctype.mutable:
                raise OvsdbFailure(
                    "constraint violation",
                    f"cannot update immutable column {column} in {table.name}",
                )
            values[column] = ctype.parse(value, txn.names)
        return values

    @staticmethod
    def _project(table: TableSchema, uuid: str, row: Row, columns: Any) -> dict[str, Any]:
        if not isinstance(columns, list):
            raise syntax_error("columns must be an array")
        out = {}
        for column in columns:
            if column == "_uuid":
                out[column] = ["uuid", uuid]
            elif column in table.columns:
                out[column] = row.get(column, table.defaults[column])
            else:
                raise syntax_error(f"no column {column!r} in table {table.name}")
        return out

    def _mutated(self, txn: _Txn, table: TableSchema, row: Row, mutations: Any) -> Row:
        if not isinstance(mutations, list):
            raise syntax_error("mutations must be an array")
        values = dict(row)
        for mutation in mutations:
            if not isinstance(mutation, list) or len(mutation) != 3:
                raise syntax_error(f"{json.dumps(mutation)} is not a mutation")
            column, mutator, arg = mutation
            ctype = table.columns.get(column)
            if ctype is None:
                raise syntax_error(f"no column {column!r} in table {table.name}")
            if not ctype.mutable:
                raise OvsdbFailure("constraint violation", f"cannot mutate immutable {column}")
            current = values.get(column, table.defaults[column])
            new = _mutated_value(ctype, current, mutator, arg, txn.names)
            if not ctype.n_min <= len(ctype.elements(new)) <= ctype.n_max:
                raise OvsdbFailure(
                    "constraint violation",
                    f"{column} would hold {len(ctype.elements(new))} elements",
                )
            values[column] = new
        return _with(table, values, {})

    def _wait(self, txn: _Txn, table: TableSchema, op: dict[str, Any],
              rows: list[tuple[str, Row]]) -> Any:  # fmt: skip
        """Fail unless the rows `where` selects, projected on `columns`, are (`==`) or are
        not (`!=`) exactly `rows`."""
        until = op.get("until")
        if until not in ("==", "!="):
            raise syntax_error('"until" must be "==" or "!="')
        columns = op.get("columns", list(table.columns))
        expected = set()
        for wanted in op.get("rows", []):
            if not isinstance(wanted, dict):
                raise syntax_error("a wait's rows must be objects")
            given = {c: v for c, v in wanted.items() if c != "_uuid"}
            values = self._values(txn, table, given)
            if "_uuid" in wanted:
                values["_uuid"] = BaseType("uuid").atom(wanted["_uuid"], txn.names)
            expected.add(_frozen([(c, values.get(c, table.defaults.get(c))) for c in columns]))
        actual = set()
        for uuid, row in rows:
            projected = self._project(table, uuid, row, columns)
            actual.add(_frozen([(c, projected[c]) for c in columns]))
        if (actual == expected) == (until == "=="):
            return {}
        if op.get("timeout") == 0:
            raise OvsdbFailure("timed out", '"where" clause test failed')
        raise OvsdbFailure(
            "not supported", "a wait that would block (the stand-in has no triggers)"
        )

    # ---- commit ----

    def _commit(self, txn: _Txn) -> list[Change]:
        """Check the transaction's outcome as ovsdb-server's precommit does (references,
        garbage, weak references, row limits, indexes) and store it; its changes."""
        for table, changed in txn.changed.items():  # inserted and deleted again: no change
            for uuid in [u for u, r in changed.items() if r is None and u not in self.rows[table]]:
                del changed[uuid]
        delta, where = self._count_refs(txn)
        for table, changed in txn.changed.items():
            for uuid, new in changed.items():
                count = self.refs.get(uuid, 0) + delta.get(uuid, 0)
                if new is None and count:
                    raise OvsdbFailure("referential integrity violation",
                                       f"cannot delete {table} row {uuid} because of {count}"
                                       " remaining reference(s)")  # fmt: skip
        self._collect_garbage(txn, delta, where)
        self._drop_weak_refs(txn)
        for table, changed in txn.changed.items():
            spec = self.schema.tables[table]
            if spec.max_rows < INF and sum(1 for _ in txn.rows(table)) > spec.max_rows:
                raise OvsdbFailure("constraint violation",
                                   f'transaction causes "{table}" table to contain more than'
                                   f" {spec.max_rows} row(s)")  # fmt: skip
            for index in spec.indexes:
                self._check_index(txn, spec, index, changed)
        return self._store(txn, delta)

    def _count_refs(self, txn: _Txn) -> tuple[dict[str, int], dict[str, str]]:
        """How the transaction changes each row's strong reference count, and the tables
        of those rows; a reference to a row that does not exist fails it."""
        delta: dict[str, int] = {}
        where: dict[str, str] = {}
        for table, changed in txn.changed.items():
            spec = self.schema.tables[table]
            for uuid, new in changed.items():
                old = self.rows[table].get(uuid)
                for column in spec.strong_columns:
                    before = value_of(spec, old, column) if old is not None else None
                    after = value_of(spec, new, column) if new is not None else None
                    if before == after:
                        continue
                    ctype = spec.columns[column]
                    for target_table, target in ctype.refs(before, True) if old else ():
                        if target != uuid:
                            delta[target] = delta.get(target, 0) - 1
                            where[target] = target_table
                    for target_table, target in ctype.refs(after, True) if new else ():
                        if target == uuid:
                            continue
                        if txn.row(target_table, target) is None:
                            raise OvsdbFailure("referential integrity violation",
                                               f"Table {table} column {column} row {uuid}"
                                               f" references nonexistent row {target} in"
                                               f" table {target_table}.")  # fmt: skip
                        delta[target] = delta.get(target, 0) + 1
                        where[target] = target_table
        return delta, where

    def _store(self, txn: _Txn, delta: dict[str, int]) -> list[Change]:
        changes: list[Change] = []
        for table, changed in txn.changed.items():
            stored = self.rows[table]
            for uuid, new in changed.items():
                old = stored.get(uuid)
                if old == new:
                    continue
                if new is None:
                    del stored[uuid]
                else:
                    stored[uuid] = new
                changes.append((table, uuid, old, new))
            spec = self.schema.tables[table]
            for index in spec.indexes:
                self._reindex(spec, index, changed)
        for uuid, change in delta.items():
            count = self.refs.get(uuid, 0) + change
            if count:
                self.refs[uuid] = count
            else:
                self.refs.pop(uuid, None)
        return changes

    def _reindex(self, spec: TableSchema, index: tuple[str, ...],
                 changed: dict[str, Row | None]) -> None:  # fmt: skip
        """Keep an index's values in step with the rows just stored (`_check_index` made
        sure they are unique)."""
        by_key, by_row = self.unique[(spec.name, index)]
        for uuid in changed:  # (all taken out first: two rows may swap their values)
            old = by_row.pop(uuid, None)
            if old is not None and by_key.get(old) == uuid:
                del by_key[old]
        stored = self.rows[spec.name]
        for uuid in changed:
            row = stored.get(uuid)
            if row is not None:
                key = _index_key(spec, index, row)
                by_key[key], by_row[uuid] = uuid, key

    def _collect_garbage(self, txn: _Txn, delta: dict[str, int], where: dict[str, str]) -> None:
        """Delete the rows of non-root tables that nothing references any more, among the
        rows this transaction touched (as ovsdb-server does), and what only they held."""
        schema = self.schema
        pending = [(t, u) for t, changed in txn.changed.items() for u in changed]
        pending += [(where[u], u) for u in delta]
        while pending:
            table, uuid = pending.pop()
            spec = schema.tables[table]
            if spec.is_root or self.refs.get(uuid, 0) + delta.get(uuid, 0) > 0:
                continue
            row = txn.row(table, uuid)
            if row is None:
                continue
            txn.put(table, uuid, None)
            for column in spec.strong_columns:
                for target_table, target in spec.columns[column].refs(
                    value_of(spec, row, column), strong=True
                ):
                    if target != uuid:
                        delta[target] = delta.get(target, 0) - 1
                        where[target] = target_table
                        pending.append((target_table, target))

    def _drop_weak_refs(self, txn: _Txn) -> None:
        """Remove weak references to rows that do not exist after the transaction."""
        schema = self.schema
        gone = {t for t, changed in txn.changed.items() if None in changed.values()}
        for table, spec in schema.tables.items():
            if not spec.weak_columns:
                continue
            touched = table in txn.changed
            if not touched and not any(
                base is not None and base.ref_table in gone
                for column in spec.weak_columns
                for base in (spec.columns[column].key, spec.columns[column].value)
            ):
                continue
            for uuid, row in list(txn.rows(table)):
                fixed = dict(row)
                for column in spec.weak_columns:
                    ctype = spec.columns[column]
                    value = value_of(spec, row, column)
                    kept = [e for e in ctype.elements(value) if _weak_target_exists(txn, ctype, e)]
                    if len(kept) == len(ctype.elements(value)):
                        continue
                    if len(kept) < ctype.n_min:
                        raise OvsdbFailure(
                            "constraint violation",
                            f"deleting weak references emptied {table}.{column}",
                        )
                    fixed[column] = ctype.pack(kept)
                if fixed != row:
                    txn.put(table, uuid, _with(spec, fixed, {}))

    def _check_index(self, txn: _Txn, spec: TableSchema, index: tuple[str, ...],
                     changed: dict[str, Row | None]) -> None:  # fmt: skip
        """Fail if the transaction leaves two rows with the same values of `index`."""
        held = self.unique[(spec.name, index)][0]
        stored = self.rows[spec.name]
        claims: dict[Any, str] = {}
        for uuid, row in changed.items():
            if row is None:
                continue
            key = _index_key(spec, index, row)
            old = stored.get(uuid)
            if old is not None and _index_key(spec, index, old) == key:
                continue  # (its values stay: another row claiming them is caught as that row)
            rival = claims.get(key)
            holder = held.get(key)
            if rival is None and holder is not None and holder != uuid:
                still = changed.get(holder, stored.get(holder))
                if holder not in changed or (
                    still is not None and _index_key(spec, index, still) == key
                ):
                    rival = holder
            if rival is not None:
                values = ", ".join(map(str, key))
                raise OvsdbFailure("constraint violation",
                                   f'Transaction causes multiple rows in "{spec.name}" table to'
                                   f" have identical values ({values}) for index on columns"
                                   f" {list(index)}: rows {rival} and {uuid}")  # fmt: skip
            claims[key] = uuid


Database._on_rows = {
    "select": Database._select, "update": Database._update, "mutate": Database._mutate,
    "delete": Database._delete, "wait": Database._wait,
}  # fmt: skip


def _index_key(spec: TableSchema, index: tuple[str, ...], row: Row) -> Any:
    """A row's values of an index, hashable (most indexes are of names: strings as they are)."""
    return tuple(
        json.dumps(v) if isinstance(v, list) else v
        for v in (value_of(spec, row, column) for column in index)
    )


def _weak_target_exists(txn: _Txn, ctype: ColumnType, element: Any) -> bool:
    for base, index in ((ctype.key, 0), (ctype.value, 1)):
        if base is None or base.ref_table is None or base.strong:
            continue
        atom = element[index] if ctype.value is not None else element
        if txn.row(base.ref_table, atom[1]) is None:
            return False
    return True


def _with(table: TableSchema, row: Row, values: Row) -> Row:
    """`row` with `values` set, keeping only what differs from the defaults."""
    out = {**row, **values}
    defaults = table.defaults
    return {c: v for c, v in out.items() if v != defaults[c]}


def _frozen(items: Iterable[tuple[str, Any]]) -> str:
    return json.dumps(list(items), sort_keys=True)


def _mutated_value(ctype: ColumnType, current: Any, mutator: Any, arg: Any,
                   names: dict[str, str]) -> Any:  # fmt: skip
    """`current` mutated (RFC 7047 5.1 "mutate")."""
    if mutator in ("insert", "delete") and (ctype.is_map or ctype.n_max > 1 or ctype.n_min == 0):
        held = ctype.elements(current)
        if ctype.is_map:
            if mutator == "insert":
                given = ctype.elements(ctype.parse(arg, names, sized=False))
                keys = {atom_key(k) for k, _ in held}
                return ctype.pack(held + [p for p in given if atom_key(p[0]) not in keys])
            if isinstance(arg, list) and arg and arg[0] == "map":  # delete pairs
                given = ctype.elements(ctype.parse(arg, names, sized=False))
                pairs = {(atom_key(k), json.dumps(v)) for k, v in given}
                return ctype.pack(
                    [p for p in held if (atom_key(p[0]), json.dumps(p[1])) not in pairs]
                )
            keys_type = ColumnType(ctype.key, None, 0, INF)  # delete keys
            doomed = {
                atom_key(k) for k in keys_type.elements(keys_type.parse(arg, names, sized=False))
            }
            return ctype.pack([p for p in held if atom_key(p[0]) not in doomed])
        given = ctype.elements(ctype.parse(arg, names, sized=False))
        if mutator == "insert":
            keys = {atom_key(atom) for atom in held}
            return ctype.pack(held + [a for a in given if atom_key(a) not in keys])
        doomed = {atom_key(atom) for atom in given}
        return ctype.pack([a for a in held if atom_key(a) not in doomed])
    operators: dict[str, Callable[[Any, Any], Any]] = {
        "+=": lambda a, b: a + b, "-=": lambda a, b: a - b, "*=": lambda a, b: a * b,
        "/=": lambda a, b: a // b if isinstance(a, int) else a / b,
        "%=": lambda a, b: a % b,
    }  # fmt: skip
    if mutator not in operators or ctype.is_map or ctype.key.kind not in ("integer", "real"):
        raise syntax_error(f"mutator {mutator!r} does not apply to this column")
    operand = ctype.key.atom(arg, names)
    if operand == 0 and mutator in ("/=", "%="):
        raise OvsdbFailure("domain error", "division by zero")
    try:
        atoms = [ctype.key.atom(operators[mutator](a, operand), names)
                 for a in ctype.elements(current)]  # fmt: skip
    except OvsdbFailure as exc:
        raise OvsdbFailure("range error", exc.details) from exc
    return ctype.pack(atoms)


# ---- monitors ----


@dataclass(frozen=True)
class _Watch:
    columns: tuple[str, ...]
    initial: bool
    insert: bool
    delete: bool
    modify: bool


class Monitor:
    """One `monitor` request's view of the database: what it sends at first and after
    each commit."""

    def __init__(self, schema: Schema, requests: Any) -> None:
        """Parse a monitor request ({table: request or [requests]}).

        Raises:
            OvsdbFailure: the request names an unknown table or column.
        """
        if not isinstance(requests, dict):
            raise syntax_error("monitor requests must be an object")
        self.tables: dict[str, _Watch] = {}
        for name, request in requests.items():
            table = schema.table(name)
            for one in request if isinstance(request, list) else [request]:
                columns = one.get("columns", list(table.columns))
                for column in columns:
                    if column not in table.columns:
                        raise syntax_error(f"no column {column!r} in table {name}")
                select = one.get("select", {})
                self.tables[name] = _Watch(
                    tuple(columns), select.get("initial", True), select.get("insert", True),
                    select.get("delete", True), select.get("modify", True),
                )  # fmt: skip
        self.schema = schema

    def initial(self, db: Database) -> dict[str, Any]:
        """The monitor's first answer: every row of its tables (unless `initial` is off)."""
        out: dict[str, Any] = {}
        for name, watch in self.tables.items():
            if not watch.initial:
                continue
            table = self.schema.tables[name]
            rows = {uuid: {"new": _columns(table, row, watch.columns)}
                    for uuid, row in db.rows[name].items()}  # fmt: skip
            if rows:
                out[name] = rows
        return out

    def update(self, changes: list[Change]) -> dict[str, Any] | None:
        """The `update` notification's table-updates for `changes`, None if none matter."""
        out: dict[str, dict[str, Any]] = {}
        for name, uuid, old, new in changes:
            watch = self.tables.get(name)
            if watch is None:
                continue
            table = self.schema.tables[name]
            if old is None:
                if not watch.insert or new is None:
                    continue
                entry = {"new": _columns(table, new, watch.columns)}
            elif new is None:
                if not watch.delete:
                    continue
                entry = {"old": _columns(table, old, watch.columns)}
            else:
                defaults = table.defaults
                changed = [c for c in watch.columns
                           if old.get(c, defaults[c]) != new.get(c, defaults[c])]  # fmt: skip
                if not changed or not watch.modify:
                    continue
                entry = {"old": _columns(table, old, changed),
                         "new": _columns(table, new, watch.columns)}  # fmt: skip
            out.setdefault(name, {})[uuid] = entry
        return out or None


def _columns(table: TableSchema, row: Row, columns: Iterable[str]) -> dict[str, Any]:
    defaults = table.defaults
    return {c: row.get(c, defaults[c]) for c in columns}
