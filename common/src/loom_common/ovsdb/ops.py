"""OVSDB transaction operations (RFC 7047 section 5.2), built here and nowhere else (pure).

Each builder returns one operation as the `transact` method takes it; a transaction is a
list of them, run by `RawConnection.transact` (or a session's `transact`). Conditions
(`where_uuid`, `where_eq`) and mutations (`set_keys`, `delete_keys`, `insert_entries`,
`add_elements`, `remove_elements`) are the parts the operations take. Values are OVSDB JSON
(`loom_common.ovsdb.codec`).

Nothing here does I/O: code that decides what to write builds its operations without a
connection, and code that has one runs them (ovsdbapp's command / transaction split).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loom_common.ovsdb.codec import Json, to_map, to_set, to_uuid

Op = dict[str, Any]
"""One operation of a transaction."""
Condition = list[Any]
"""One clause of a `where`: `[column, function, value]` (clauses are AND'ed)."""
Mutation = list[Any]
"""One mutation: `[column, mutator, value]`."""


# ---- conditions ----


def where_uuid(row: str | Json) -> list[Condition]:
    """The condition that selects one row: by its uuid's text, or by a reference
    (`["uuid", ...]`, or `["named-uuid", ...]` for a row the transaction inserts)."""
    return [["_uuid", "==", to_uuid(row) if isinstance(row, str) else row]]


def where_eq(column: str, value: Json) -> list[Condition]:
    """The condition that selects the rows whose `column` is `value`."""
    return [[column, "==", value]]


# ---- mutations ----


def set_keys(column: str, entries: Mapping[str, Json]) -> list[Mutation]:
    """The mutations that set map `column`'s `entries` (the keys are deleted first: a map
    `insert` keeps a key's old value)."""
    return [[column, "delete", to_set(sorted(entries))], [column, "insert", to_map(entries)]]


def delete_keys(column: str, keys: Iterable[str]) -> Mutation:
    """The mutation that removes `keys` (and their values) from map `column`."""
    return [column, "delete", to_set(keys)]


def insert_entries(column: str, entries: Mapping[str, Json]) -> Mutation:
    """The mutation that adds `entries` to map `column` (a key it has keeps its value:
    `set_keys` replaces)."""
    return [column, "insert", to_map(entries)]


def add_elements(column: str, items: Iterable[Json]) -> Mutation:
    """The mutation that adds `items` to set `column`."""
    return [column, "insert", to_set(items)]


def remove_elements(column: str, items: Iterable[Json]) -> Mutation:
    """The mutation that removes `items` from set `column`."""
    return [column, "delete", to_set(items)]


# ---- operations ----


def insert(table: str, row: Mapping[str, Json], *, uuid_name: str | None = None) -> Op:
    """Insert `row` into `table`; with `uuid_name`, later operations of the transaction
    refer to it as `["named-uuid", uuid_name]`."""
    if uuid_name is None:
        return {"op": "insert", "table": table, "row": row}
    return {"op": "insert", "table": table, "uuid-name": uuid_name, "row": row}


def update(table: str, where: Sequence[Condition], row: Mapping[str, Json]) -> Op:
    """Set `row`'s columns in the rows of `table` that `where` selects."""
    return {"op": "update", "table": table, "where": where, "row": row}


def mutate(table: str, where: Sequence[Condition], mutations: Sequence[Mutation]) -> Op:
    """Apply `mutations` to the rows of `table` that `where` selects."""
    return {"op": "mutate", "table": table, "where": where, "mutations": mutations}


def delete(table: str, where: Sequence[Condition]) -> Op:
    """Delete the rows of `table` that `where` selects."""
    return {"op": "delete", "table": table, "where": where}


def select(table: str, where: Sequence[Condition] = (), columns: Sequence[str] | None = None) -> Op:
    """Read the rows of `table` that `where` selects (every row by default), their
    `columns` (default: all)."""
    op: Op = {"op": "select", "table": table, "where": list(where)}
    if columns is not None:
        op["columns"] = list(columns)
    return op


def wait(
    table: str,
    where: Sequence[Condition],
    *,
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Json]],
    until: str = "==",
    timeout: int = 0,
) -> Op:
    """Fail the transaction unless the `columns` of the rows `where` selects are (`until`
    "==") or are not ("!=") exactly `rows`; `timeout` 0: at once, not waiting."""
    return {"op": "wait", "table": table, "timeout": timeout, "where": list(where),
            "columns": list(columns), "until": until, "rows": list(rows)}  # fmt: skip


def comment(text: str) -> Op:
    """Attach `text` to the transaction (`ovsdb-tool show-log` shows it)."""
    return {"op": "comment", "comment": text}
