"""The OVSDB schema as a stand-in node's database uses it: column types (atoms, sets,
maps, their constraints and defaults), root tables, indexes and references, read from an
`.ovsschema` file; and the canonical JSON form of values (a set of one element is the bare
atom, sets sorted, maps sorted by key: equal values are equal JSON, and a monitor update
is the value as stored). Pure.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

Row = dict[str, Any]
"""A row: column -> canonical JSON value, only the columns that differ from the default."""

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
INF = math.inf
"""An unlimited set size or integer bound."""


class OvsdbFailure(Exception):
    """An operation or a commit failed: `tag` is ovsdb-server's error string."""

    def __init__(self, tag: str, details: str) -> None:
        super().__init__(f"{tag}: {details}")
        self.tag = tag
        self.details = details

    def to_json(self) -> dict[str, str]:
        """The error as a transaction result element."""
        return {"error": self.tag, "details": self.details}


def syntax_error(details: str) -> OvsdbFailure:
    """A "syntax error" failure (a malformed operation or value)."""
    return OvsdbFailure("syntax error", details)


def new_uuid() -> str:
    """A random (version 4) UUID, as ovsdb-server gives rows (cheaper than `uuid.uuid4`)."""
    bits = random.getrandbits(128) & ~(0xF000 << 64 | 0xC000 << 48) | 0x4000 << 64 | 0x8000 << 48
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def atom_key(atom: Any) -> Any:
    """A hashable stand-in for an atom (uuids are lists)."""
    return atom[1] if isinstance(atom, list) else atom


# ---- schema ----


@dataclass(frozen=True)
class BaseType:
    """The type of a column's keys or values: an atomic type and its constraints."""

    kind: str
    """integer, real, boolean, string or uuid."""
    enum: frozenset[Any] | None = None
    low: float = -INF
    high: float = INF
    ref_table: str | None = None
    strong: bool = True

    @classmethod
    def from_json(cls, spec: Any) -> BaseType:
        """Parse a schema's base type (a type name, or an object with constraints)."""
        if isinstance(spec, str):
            return cls(spec)
        kind = spec["type"]
        enum = None
        if "enum" in spec:
            raw = spec["enum"]
            values = raw[1] if isinstance(raw, list) and raw and raw[0] == "set" else [raw]
            enum = frozenset(values)
        low = spec.get("minInteger", spec.get("minReal", -INF))
        high = spec.get("maxInteger", spec.get("maxReal", INF))
        return cls(kind, enum, low, high, spec.get("refTable"), spec.get("refType") != "weak")

    @property
    def default(self) -> Any:
        """The atom a column of this type has when nothing was written."""
        return {"integer": 0, "real": 0.0, "boolean": False, "string": "",
                "uuid": ["uuid", ZERO_UUID]}[self.kind]  # fmt: skip

    def atom(self, value: Any, names: dict[str, str]) -> Any:
        """`value` (JSON) as a canonical atom of this type; a `named-uuid` is resolved
        through `names` (one not declared gets a fresh uuid, as in ovsdb-server: it then
        refers to no row)."""
        kind = self.kind
        if kind == "string":
            ok = isinstance(value, str)
        elif kind == "integer":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "real":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif kind == "boolean":
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)
            if ok and value[0] == "named-uuid":
                value = ["uuid", names.setdefault(value[1], new_uuid())]
            elif ok and value[0] == "uuid":
                value = ["uuid", value[1]]
            else:
                ok = False
        if not ok:
            raise syntax_error(f"{json.dumps(value)} is not a valid {kind}")
        if self.enum is not None and value not in self.enum:
            raise OvsdbFailure(
                "constraint violation", f"{value!r} is not one of the allowed values"
            )
        if kind in ("integer", "real") and not self.low <= value <= self.high:
            raise OvsdbFailure(
                "constraint violation", f"{value} is not in [{self.low}, {self.high}]"
            )
        return value


@dataclass(frozen=True)
class ColumnType:
    """A column's type: keys (and values, for a map), and how many elements it holds."""

    key: BaseType
    value: BaseType | None = None
    n_min: int = 1
    n_max: float = 1
    mutable: bool = True

    @classmethod
    def from_json(cls, column: dict[str, Any]) -> ColumnType:
        """Parse a schema's column object."""
        spec = column["type"]
        mutable = column.get("mutable", True)
        if isinstance(spec, str):
            return cls(BaseType.from_json(spec), mutable=mutable)
        value = BaseType.from_json(spec["value"]) if "value" in spec else None
        n_max = spec.get("max", 1)
        return cls(BaseType.from_json(spec["key"]), value, spec.get("min", 1),
                   INF if n_max == "unlimited" else n_max, mutable)  # fmt: skip

    @property
    def is_map(self) -> bool:
        """True for a map column."""
        return self.value is not None

    @property
    def default(self) -> Any:
        """The column's value when nothing was written: empty, or one default element."""
        if self.n_min == 0:
            return ["map", []] if self.value is not None else ["set", []]
        if self.value is not None:
            return ["map", [[self.key.default, self.value.default]]]
        return self.key.default

    def elements(self, value: Any) -> list[Any]:
        """A canonical value's atoms (a map's [key, value] pairs)."""
        if self.value is not None:
            pairs: list[Any] = value[1]
            return pairs
        if isinstance(value, list) and value and value[0] == "set":
            atoms: list[Any] = value[1]
            return atoms
        return [value]

    def pack(self, elements: list[Any]) -> Any:
        """The canonical value of distinct atoms (or pairs with distinct keys): sorted (the
        atoms of a column are of one type, and pairs differ by key: plain comparison)."""
        if self.value is not None:
            return ["map", sorted(elements)]
        if len(elements) == 1:
            return elements[0]
        return ["set", sorted(elements)]

    @cached_property
    def _strings(self) -> bool:
        """A map of strings to strings, without constraints: most of what is written."""
        value = self.value
        return (value is not None and self.key.kind == value.kind == "string"
                and self.key.enum is None and value.enum is None)  # fmt: skip

    def parse(self, value: Any, names: dict[str, str], *, sized: bool = True) -> Any:
        """`value` (JSON) as this column's canonical value; `sized` False accepts any number
        of elements (a mutation's or a condition's argument)."""
        if self.value is None and self.n_max == 1 and not isinstance(value, list):
            return self.key.atom(value, names)  # a bare atom: the usual scalar
        if self._strings:
            pairs = _string_pairs(value)
            if pairs is not None:
                if len({p[0] for p in pairs}) != len(pairs):
                    raise syntax_error(f"map {json.dumps(value)} contains a duplicate key")
                self._check_size(value, len(pairs), sized)
                return ["map", sorted(pairs)]
        if self.value is not None:
            if not (isinstance(value, list) and len(value) == 2 and value[0] == "map"
                    and isinstance(value[1], list)):  # fmt: skip
                raise syntax_error(f"{json.dumps(value)} is not a map")
            found: dict[Any, list[Any]] = {}
            for pair in value[1]:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise syntax_error(f"{json.dumps(pair)} is not a map pair")
                key = self.key.atom(pair[0], names)
                if atom_key(key) in found:
                    raise syntax_error(f"map contains duplicate key {json.dumps(key)}")
                found[atom_key(key)] = [key, self.value.atom(pair[1], names)]
            elements = list(found.values())
        else:
            raw = (value[1] if isinstance(value, list) and len(value) == 2 and value[0] == "set"
                   and isinstance(value[1], list) else [value])  # fmt: skip
            atoms: dict[Any, Any] = {}
            for item in raw:
                atom = self.key.atom(item, names)
                if atom_key(atom) in atoms:
                    raise syntax_error(f"set contains duplicate value {json.dumps(atom)}")
                atoms[atom_key(atom)] = atom
            elements = list(atoms.values())
        self._check_size(value, len(elements), sized)
        return self.pack(elements)

    def _check_size(self, value: Any, count: int, sized: bool) -> None:
        if sized and not self.n_min <= count <= self.n_max:
            raise syntax_error(f"{json.dumps(value)}: {count} elements, not {self.n_min} to"
                               f" {self.n_max}")  # fmt: skip

    def refs(self, value: Any, strong: bool) -> Iterator[tuple[str, str]]:
        """(table, uuid) of each strong (or weak) reference `value` holds."""
        for base, index in ((self.key, 0), (self.value, 1)):
            if base is None or base.ref_table is None or base.strong != strong:
                continue
            for element in self.elements(value):
                atom = element[index] if self.value is not None else element
                yield base.ref_table, atom[1]


def _string_pairs(value: Any) -> list[list[str]] | None:
    """The pairs of a JSON map of strings to strings; None if `value` is not one."""
    if not (isinstance(value, list) and len(value) == 2 and value[0] == "map"
            and isinstance(value[1], list)):  # fmt: skip
        return None
    pairs: list[list[str]] = value[1]
    if all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str)
           for p in pairs):  # fmt: skip
        return pairs
    return None


@dataclass
class TableSchema:
    """A table: its columns, whether it is a root table, its indexes, its row limit."""

    name: str
    columns: dict[str, ColumnType]
    is_root: bool
    indexes: list[tuple[str, ...]]
    max_rows: float
    defaults: dict[str, Any]
    strong_columns: list[str]
    """Columns holding strong references."""
    weak_columns: list[str]


class Schema:
    """A database schema (`.ovsschema`)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.name: str = doc["name"]
        self.tables: dict[str, TableSchema] = {}
        for name, table in doc["tables"].items():
            columns = {c: ColumnType.from_json(spec) for c, spec in table["columns"].items()}
            self.tables[name] = TableSchema(
                name, columns, bool(table.get("isRoot", False)),
                [tuple(index) for index in table.get("indexes", [])],
                table.get("maxRows", INF), {c: t.default for c, t in columns.items()},
                [c for c, t in columns.items() if _refs(t, strong=True)],
                [c for c, t in columns.items() if _refs(t, strong=False)],
            )  # fmt: skip
        self.weakly_referenced = {
            base.ref_table
            for table in self.tables.values()
            for column in table.weak_columns
            for base in (table.columns[column].key, table.columns[column].value)
            if base is not None and base.ref_table is not None and not base.strong
        }

    @classmethod
    def load(cls, path: Path) -> Schema:
        """Read a schema file."""
        doc: dict[str, Any] = json.loads(path.read_text())
        return cls(doc)

    def table(self, name: Any) -> TableSchema:
        """The table `name`; a syntax error if there is none."""
        found = self.tables.get(name) if isinstance(name, str) else None
        if found is None:
            raise syntax_error(f"unknown table {name!r}")
        return found


def _refs(column: ColumnType, *, strong: bool) -> bool:
    return any(base is not None and base.ref_table is not None and base.strong == strong
               for base in (column.key, column.value))  # fmt: skip


def value_of(table: TableSchema, row: Row, column: str) -> Any:
    """A column's value in a stored row."""
    return row.get(column, table.defaults[column])
