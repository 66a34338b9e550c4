"""OVSDB tables as engine input relations, derived from a schema (as DDlog's ovsdb2ddlog
does), and the adapter that feeds a database's updates to them.

Each table chosen becomes one input relation of the same name, keyed by `_uuid`, with the
columns chosen. Types map as ovsdb2ddlog maps them: a uuid (reference or not) is its
text, `integer` is `bit<64>` when the schema says it is never negative (else
`signed<64>`), `boolean` is `bool`; a column of at most one value is `Option<T>`, a set
`Set<T>`, a map `Map<K, V>`.

Both controllers use it — the logical one for the config DB (`rules/logical/config.dl`),
the physical one for the universal DB (`rules/physical/universal.dl`) — and so do the
snapshot tests, which load a whole database the way a controller loads its updates. The
`.dl` files are generated from here (`make rules`), and tests keep them current.

    tables = input_tables(schema_file, {"Port_Binding": ["logical_port", "datapath"]})
    with program.transaction() as txn:
        feed(txn, tables, replica_changes)  # insert_or_update / delete_key by _uuid
        txn.commit()
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from loom_common.ovsdb.codec import ColumnType, atom, atoms, map_pairs, optional


class Transaction(Protocol):
    """What `feed` needs of an engine transaction (`loom_ddlog.Transaction`)."""

    def insert_or_update(self, relation: str, row: Sequence[Any]) -> None:
        """Insert `row`, or replace the row with its key."""

    def delete_key(self, relation: str, key: Any) -> None:
        """Delete the row with key `key`."""


@dataclass(frozen=True)
class Column:
    """One input column: its name, engine type, and how a value converts."""

    name: str
    engine_type: str
    shape: str  # "scalar" | "optional" | "set" | "map"
    atom: str  # "uuid" | "string" | "integer" | "boolean"
    value_atom: str | None = None  # maps only


@dataclass(frozen=True)
class InputTable:
    """One database table as an engine input relation."""

    name: str
    columns: tuple[Column, ...]

    def row_tuple(self, row: Any) -> tuple[Any, ...]:
        """Convert a python-ovs IDL row into this relation's tuple (`_uuid` first)."""
        values: list[Any] = [str(row.uuid)]
        for column in self.columns:
            values.append(_convert(column, getattr(row, column.name)))
        return tuple(values)

    def json_tuple(self, uuid: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """Convert a row read as OVSDB JSON (RFC 7047) into this relation's tuple."""
        return (uuid, *[row[n] if f is None else f(row[n]) for n, f in self._from_json])

    @functools.cached_property
    def _from_json(self) -> tuple[tuple[str, Callable[[Any], Any] | None], ...]:
        """Per column, its name and the conversion of its OVSDB JSON value (None: the value
        is itself). Chosen once per table rather than per value: a full-scale cold start
        converts 275,859 config rows, and a choice per value is paid for every one."""
        return tuple((c.name, _json_converter(c)) for c in self.columns)

    @property
    def column_names(self) -> list[str]:
        """The database columns this relation reads."""
        return [c.name for c in self.columns]

    def declaration(self) -> str:
        """The `input relation` declaration of this table."""
        fields = ", ".join(["_uuid: string"] + [f"{c.name}: {c.engine_type}" for c in self.columns])
        return f"input relation {self.name}({fields})\n    primary key (r) r._uuid\n"


def input_tables(
    schema_file: Path,
    chosen: Mapping[str, Sequence[str]] | None = None,
    *,
    skipped_tables: Iterable[str] = (),
    skipped_columns: Iterable[str] = (),
) -> dict[str, InputTable]:
    """The input relations of the schema in `schema_file`, by table name: the tables and
    columns in `chosen` (in its order), or, without it, every table but `skipped_tables`
    with every column but `skipped_columns` (in the schema's order)."""
    schema = json.loads(schema_file.read_text())
    specs: dict[str, Any] = schema["tables"]
    tables = {}
    if chosen is None:
        skip_t, skip_c = frozenset(skipped_tables), frozenset(skipped_columns)
        chosen = {
            name: [c for c in spec["columns"] if c not in skip_c]
            for name, spec in specs.items()
            if name not in skip_t
        }
    for name, columns in chosen.items():
        if name not in specs:
            raise ValueError(f"{schema_file.name} has no table {name!r}")
        known = specs[name]["columns"]
        missing = [c for c in columns if c not in known]
        if missing:
            raise ValueError(f"{schema_file.name}: table {name} has no column {missing[0]!r}")
        tables[name] = InputTable(name, tuple(_column(c, known[c]) for c in columns))
    return tables


def declarations(tables: Iterable[InputTable], header: str, database: str) -> str:
    """The text of a generated `.dl` file: `header` (a comment), then each declaration
    (`database`: what the comments call the database, "config")."""
    out = [header]
    for table in tables:
        out.append(f"\n/* Each row is one row of {database} table {table.name}. */\n")
        out.append(table.declaration())
    return "".join(out)


Change = tuple[str, str, Mapping[str, Any] | None]
"""(table, row uuid, the row as OVSDB JSON, None once deleted): a monitor's update."""


def feed(txn: Transaction, tables: Mapping[str, InputTable], changes: Iterable[Change]) -> int:
    """Feed a database's changes to the engine: each row of a table in `tables` inserted or
    updated by its uuid, or deleted by it (the engine keeps what it was). Rows of other
    tables are left alone. Returns the number of rows fed."""
    fed = 0
    for table, uuid, row in changes:
        spec = tables.get(table)
        if spec is None:
            continue
        if row is None:
            txn.delete_key(table, uuid)
        else:
            txn.insert_or_update(table, spec.json_tuple(uuid, row))
        fed += 1
    return fed


def _atom_type(atom: Mapping[str, Any] | str) -> tuple[str, str]:
    kind = atom if isinstance(atom, str) else atom["type"]
    if kind in ("uuid", "string"):
        return kind, "string"
    if kind == "boolean":
        return kind, "bool"
    if kind == "integer":
        minimum = 0 if isinstance(atom, str) else atom.get("minInteger")
        signed = isinstance(atom, str) or minimum is None or minimum < 0
        return kind, "signed<64>" if signed else "bit<64>"
    raise ValueError(f"column type {kind!r} has no engine mapping")


def _column(name: str, spec: Mapping[str, Any]) -> Column:
    ctype = spec["type"]
    kind = ColumnType.parse(ctype).kind
    atom, engine = _atom_type(ctype if isinstance(ctype, str) else ctype["key"])
    if kind == "map":
        vatom, vengine = _atom_type(ctype["value"])
        return Column(name, f"Map<{engine}, {vengine}>", "map", atom, vatom)
    if kind == "atom":
        return Column(name, engine, "scalar", atom)
    if kind == "optional":
        return Column(name, f"Option<{engine}>", "optional", atom)
    return Column(name, f"Set<{engine}>", "set", atom)


def _atom(atom: str, value: Any) -> Any:
    if atom == "uuid":
        return str(value.uuid) if hasattr(value, "uuid") else str(value)
    return value


def _convert(column: Column, value: Any) -> Any:
    if column.shape == "scalar":
        return _atom(column.atom, value)
    if column.shape == "optional":
        items = list(value) if isinstance(value, list | tuple | set) else [value]
        return _atom(column.atom, items[0]) if items else None
    if column.shape == "set":
        return frozenset(_atom(column.atom, v) for v in value)
    assert column.value_atom is not None
    return tuple(
        sorted((_atom(column.atom, k), _atom(column.value_atom, v)) for k, v in value.items())
    )


def _json_converter(column: Column) -> Callable[[Any], Any] | None:
    """How `column`'s OVSDB JSON value becomes its engine value (None: unchanged)."""
    if column.shape == "scalar":
        return atom if column.atom == "uuid" else None
    if column.shape == "optional":
        return optional
    if column.shape == "set":
        return _json_frozenset
    return map_pairs


def _json_frozenset(value: Any) -> frozenset[Any]:
    return frozenset(atoms(value))
