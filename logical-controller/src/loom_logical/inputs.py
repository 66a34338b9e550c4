"""The engine's input relations, derived from the config schema (as DDlog's ovsdb2ddlog does).

Every table of `Loom_Config` but `Loom_Global` becomes one input relation of the same name,
keyed by `_uuid`, with the columns the rules read. Columns that never change forwarding
(`tags`, `revision`, `external_ids`, `status`, `description`) are left out, so an update of
only those is an empty engine transaction.

Types map as ovsdb2ddlog maps them: a uuid (reference or not) is its text, `integer` is
`bit<64>` (every integer column of the schema has `minInteger` >= 0; a signed one would be
`signed<64>`), `boolean` is `bool`; a column of at most one value is `Option<T>`, a set
`Set<T>`, a map `Map<K, V>`.

`rules/logical/config.dl` is generated from this module (`python -m loom_logical.inputs >
rules/logical/config.dl`; `make rules`), and a test keeps the committed file current.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loom_schemas import CONFIG_SCHEMA, schema_path

SKIPPED_TABLES = frozenset({"Loom_Global", "Warning"})
"""Tables that are not configuration: generations, and what controllers report back."""
SKIPPED_COLUMNS = frozenset({"tags", "revision", "external_ids", "status", "description"})


@dataclass(frozen=True)
class Column:
    """One input column: its name, engine type, and how a Python value converts."""

    name: str
    engine_type: str
    shape: str  # "scalar" | "optional" | "set" | "map"
    atom: str  # "uuid" | "string" | "integer" | "boolean"
    value_atom: str | None = None  # maps only


@dataclass(frozen=True)
class InputTable:
    """One config table as an engine input relation."""

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
        converts 275,859 rows (0.85 s with the choice made per value)."""
        return tuple((c.name, _json_converter(c)) for c in self.columns)

    @property
    def column_names(self) -> list[str]:
        """The config columns this relation reads."""
        return [c.name for c in self.columns]

    def declaration(self) -> str:
        """The `input relation` declaration of this table."""
        fields = ", ".join(["_uuid: string"] + [f"{c.name}: {c.engine_type}" for c in self.columns])
        return f"input relation {self.name}({fields})\n    primary key (r) r._uuid\n"


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
    raise ValueError(f"config column type {kind!r} has no engine mapping")


def _column(name: str, spec: Mapping[str, Any]) -> Column:
    ctype = spec["type"]
    if isinstance(ctype, str):
        atom, engine = _atom_type(ctype)
        return Column(name, engine, "scalar", atom)
    atom, engine = _atom_type(ctype["key"])
    lo, hi = ctype.get("min", 1), ctype.get("max", 1)
    if "value" in ctype:
        vatom, vengine = _atom_type(ctype["value"])
        return Column(name, f"Map<{engine}, {vengine}>", "map", atom, vatom)
    if lo == 1 and hi == 1:
        return Column(name, engine, "scalar", atom)
    if lo == 0 and hi == 1:
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


def _json_atom(value: Any) -> Any:
    """An OVSDB JSON atom: `["uuid", text]` is the uuid's text, others are themselves."""
    if isinstance(value, list) and len(value) == 2 and value[0] in ("uuid", "named-uuid"):
        return value[1]
    return value


def _json_set(value: Any) -> list[Any]:
    """An OVSDB JSON set (a one-element set may come as the bare atom)."""
    if isinstance(value, list) and len(value) == 2 and value[0] == "set":
        return [_json_atom(v) for v in value[1]]
    return [_json_atom(value)]


def _json_converter(column: Column) -> Callable[[Any], Any] | None:
    """How `column`'s OVSDB JSON value becomes its engine value (None: unchanged)."""
    if column.shape == "scalar":
        return _json_atom if column.atom == "uuid" else None
    if column.shape == "optional":
        return _json_optional
    if column.shape == "set":
        return _json_frozenset
    return _json_map


def _json_optional(value: Any) -> Any:
    items = _json_set(value)
    return items[0] if items else None


def _json_frozenset(value: Any) -> frozenset[Any]:
    return frozenset(_json_set(value))


def _json_map(value: Any) -> tuple[tuple[Any, Any], ...]:
    assert value[0] == "map", value
    return tuple(sorted((_json_atom(k), _json_atom(v)) for k, v in value[1]))


def input_tables(schema_file: Path | None = None) -> dict[str, InputTable]:
    """Return the input relations of the config schema, by table name."""
    schema = json.loads((schema_file or schema_path(CONFIG_SCHEMA)).read_text())
    tables = {}
    for name, spec in schema["tables"].items():
        if name in SKIPPED_TABLES:
            continue
        columns = tuple(
            _column(column, cspec)
            for column, cspec in spec["columns"].items()
            if column not in SKIPPED_COLUMNS
        )
        tables[name] = InputTable(name, columns)
    return tables


def declarations() -> str:
    """The text of `rules/logical/config.dl`."""
    out = [
        "/* The configuration database's tables as input relations: one row per config row,\n"
        " * keyed by its uuid, with the columns that shape forwarding.\n"
        " *\n"
        " * GENERATED by `python -m loom_logical.inputs` from schemas/loom_config.ovsschema;\n"
        " * do not edit (`make rules` regenerates it; a test keeps it current). The meaning of\n"
        " * every column is in schemas/loom_config.md. */\n"
    ]
    for table in input_tables().values():
        out.append(f"\n/* Each row is one row of config table {table.name}. */\n")
        out.append(table.declaration())
    return "".join(out)


if __name__ == "__main__":
    print(declarations(), end="")
