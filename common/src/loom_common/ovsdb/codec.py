"""OVSDB values as JSON (RFC 7047 section 5.1) to Python and back: the one codec (pure).

On the wire an atom is itself (`"x"`, `1`, `true`) except a uuid, `["uuid", "<text>"]`
(`["named-uuid", "<name>"]` for a row a transaction inserts); a set is `["set", [atom,
...]]`, and one of exactly one element may come as that bare atom; a map is `["map",
[[key, value], ...]]`; an optional column is a set of at most one.

Reading (`atom`, `atoms`, `elements`, `optional`, `optional_text`, `omap`, `map_pairs`)
takes what a monitor or a `select` gives; writing (`to_uuid`, `to_named_uuid`, `to_set`,
`to_map`, `to_optional`, `to_json`) gives what a transaction's rows, conditions and
mutations take. `ColumnType` does both for one column, from the schema's type of it, and
applies `update2`'s diffs (`monitor_cond`).

Nothing here does I/O (a test checks that no socket, thread or TLS module is imported).
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Json = Any
"""An OVSDB JSON value (an atom, `["set", ...]`, `["map", ...]`, `["uuid", ...]`)."""

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
ATOM_DEFAULTS: dict[str, Json] = {
    "integer": 0, "real": 0.0, "boolean": False, "string": "", "uuid": ["uuid", ZERO_UUID],
}  # fmt: skip
"""An atomic type's default value (RFC 7047: a column left out of a new row has it)."""


# ---- reading ----


def atom(value: Json) -> Any:
    """An atom as Python: a uuid (or named uuid) is its text, any other atom itself."""
    if isinstance(value, list) and len(value) == 2 and value[0] in ("uuid", "named-uuid"):
        return value[1]
    return value


def elements(value: Json) -> list[Json]:
    """A set's elements as JSON atoms (a bare atom is a set of one)."""
    if isinstance(value, list) and value and value[0] == "set":
        elements: list[Json] = value[1]
        return elements
    return [value]


def atoms(value: Json) -> list[Any]:
    """A set's elements as Python (`atom`; a bare atom is a set of one)."""
    if isinstance(value, list) and value and value[0] == "set":
        return [atom(a) for a in value[1]]
    return [atom(value)]


def optional(value: Json, default: Any = None) -> Any:
    """An optional column's value as Python (`atom`), or `default` when it is empty."""
    if isinstance(value, list) and value and value[0] == "set":
        return atom(value[1][0]) if value[1] else default
    return atom(value)


def optional_text(value: Json) -> str:
    """An optional string column's text ("" when empty)."""
    return str(optional(value, ""))


def omap(value: Json) -> dict[Any, Any]:
    """A map as a dict (keys and values `atom`); anything else as an empty one."""
    if isinstance(value, list) and value and value[0] == "map":
        return {atom(k): atom(v) for k, v in value[1]}
    return {}


def map_pairs(value: Json) -> tuple[tuple[Any, Any], ...]:
    """A map as its (key, value) pairs (`atom`s), sorted."""
    assert value[0] == "map", value
    return tuple(sorted((atom(k), atom(v)) for k, v in value[1]))


# ---- writing ----


def to_uuid(text: str) -> Json:
    """A reference to the row `text` names."""
    return ["uuid", text]


def to_named_uuid(name: str) -> Json:
    """A reference to the row the same transaction inserts with `uuid-name` `name`."""
    return ["named-uuid", name]


def to_set(items: Iterable[Json]) -> Json:
    """A set of `items` (JSON atoms: a reference is `to_uuid`'s)."""
    return ["set", list(items)]


def to_map(items: Mapping[Any, Json] | Iterable[tuple[Any, Json]], *, sort: bool = True) -> Json:
    """A map of `items` (a mapping, or pairs), sorted by key unless `sort` is False (the
    server orders a map itself: sorting a large one here costs time for nothing)."""
    pairs = items.items() if isinstance(items, Mapping) else items
    return ["map", [[k, v] for k, v in (sorted(pairs) if sort else pairs)]]


def to_optional(value: Json | None) -> Json:
    """An optional column's value: `value`, or the empty set for None."""
    return ["set", []] if value is None else value


def to_json(value: Any) -> Json:
    """A Python value as OVSDB JSON: a dict is a map, a list, tuple or set a set, anything
    else an atom. (Unsorted: the server orders sets and maps itself.)"""
    if isinstance(value, dict):
        return ["map", [[k, v] for k, v in value.items()]]
    if isinstance(value, list | tuple | set | frozenset):
        return ["set", list(value)]
    return value


def pack_uuid(uuid: str) -> bytes:
    """`uuid`'s 16 bytes (a new object: not the parsed string, which kept pins the arena of
    the message it was parsed from)."""
    return bytes.fromhex(uuid.replace("-", ""))


def unpack_uuid(packed: bytes) -> str:
    """`pack_uuid`'s inverse: the uuid as OVSDB writes it."""
    return str(uuidlib.UUID(bytes=packed))


# ---- one column ----


def _hashable(value: Json) -> Any:
    return tuple(value) if isinstance(value, list) else value  # ["uuid", "..."]


@dataclass(frozen=True)
class ColumnType:
    """A column's type as its schema gives it (`ColumnType.parse(schema's "type")`)."""

    key: str
    """The atomic type of its elements (of a map: its keys): integer, real, boolean,
    string or uuid."""
    value: str | None = None
    """A map's values' atomic type (None: not a map)."""
    min: int = 1
    max: int | float = 1
    """How many elements it holds (`max` may be infinite)."""

    @classmethod
    def parse(cls, spec: str | Mapping[str, Any]) -> ColumnType:
        """The type of a schema's `"type"` (an atomic type's name, or an object)."""
        if isinstance(spec, str):
            return cls(spec)
        key, value = spec["key"], spec.get("value")
        top = spec.get("max", 1)
        return cls(
            key if isinstance(key, str) else key["type"],
            None if value is None else value if isinstance(value, str) else value["type"],
            spec.get("min", 1),
            float("inf") if top == "unlimited" else top,
        )

    @property
    def kind(self) -> str:
        """The shape of its value: map, set (more than one element), optional (0 or 1) or
        atom (exactly one)."""
        if self.value is not None:
            return "map"
        if self.max != 1:
            return "set"
        return "optional" if self.min == 0 else "atom"

    def default(self) -> Json:
        """The column's value in a new row that leaves it out: empty for a set, map or
        optional value, else its atomic type's default."""
        kind = self.kind
        if kind == "map":
            return ["map", []]
        if kind != "atom":
            return ["set", []]
        return ATOM_DEFAULTS[self.key]

    def decode(self, value: Json) -> Any:
        """The column's JSON value as Python: an atom (`atom`), an optional one or None, a
        frozenset, or a dict."""
        kind = self.kind
        if kind == "atom":
            return atom(value)
        if kind == "optional":
            return optional(value)
        if kind == "set":
            return frozenset(atoms(value))
        return omap(value)

    def encode(self, value: Any) -> Json:
        """`decode`'s inverse for a column of strings, numbers and booleans (a uuid column's
        Python value is its text: it becomes a reference)."""
        ref = to_uuid if self.key == "uuid" else (lambda a: a)
        kind = self.kind
        if kind == "atom":
            return ref(value)
        if kind == "optional":
            return to_optional(None if value is None else ref(value))
        if kind == "set":
            return to_set(ref(a) for a in sorted(value))
        vref = to_uuid if self.value == "uuid" else (lambda a: a)
        return to_map((ref(k), vref(v)) for k, v in sorted(value.items()))

    def apply_diff(self, old: Json, diff: Json) -> Json:
        """The column's new value from `update2`'s `modify` diff of it: for a column of at
        most one element, the new value (what ovsdb-server sends for it, an optional one
        too); for a set, the elements to add or remove; for a map, the pairs to add, to
        remove (the same value) or to change. A set of one is given back as its atom, as
        the `monitor` method (and ovsdb-server) write it."""
        if self.value is None and self.max == 1:
            return diff
        if self.value is None:
            have = {_hashable(a): a for a in elements(old)}
            for element in elements(diff):
                key = _hashable(element)
                if have.pop(key, None) is None:
                    have[key] = element
            ordered = [have[key] for key in sorted(have)]  # in the server's order
            return ordered[0] if len(ordered) == 1 else ["set", ordered]
        pairs = {_hashable(k): [k, v] for k, v in old[1]}
        for k, v in diff[1]:
            key = _hashable(k)
            if key in pairs and pairs[key][1] == v:
                del pairs[key]
            else:
                pairs[key] = [k, v]
        return ["map", [pairs[key] for key in sorted(pairs)]]
