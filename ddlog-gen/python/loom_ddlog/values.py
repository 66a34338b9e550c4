"""Python representation of rule-language struct and union values."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NoReturn


class Struct:
    """An immutable, hashable struct or union value: a constructor name and named fields.

    Engine outputs use it for every struct/union column; inputs accept it, or a plain
    ``dict`` of fields when the type has one constructor (or the keys name exactly one
    constructor's fields). Fields read as attributes or items::

        a = Struct("Output", port=3)
        a.ctor, a.port, a["port"], dict(a.fields)
    """

    __slots__ = ("_ctor", "_fields", "_hash")

    _ctor: str
    _fields: Mapping[str, Any]
    _hash: int | None

    def __init__(
        self, ctor: str, fields: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> None:
        """Build a value of constructor `ctor` from `fields` and/or keyword fields."""
        merged = dict(fields or {})
        merged.update(kwargs)
        object.__setattr__(self, "_ctor", ctor)
        object.__setattr__(self, "_fields", MappingProxyType(merged))
        object.__setattr__(self, "_hash", None)

    @property
    def ctor(self) -> str:
        """The constructor name (the type name for a plain struct)."""
        return self._ctor

    @property
    def fields(self) -> Mapping[str, Any]:
        """The fields, read-only, in declaration order for engine outputs."""
        return self._fields

    def __getattr__(self, name: str) -> Any:
        """Return field `name`."""
        if name in Struct.__slots__:  # not yet initialised (copy/pickle protocols)
            raise AttributeError(name)
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(f"{self._ctor} has no field {name!r}") from None

    def __getitem__(self, name: str) -> Any:
        """Return field `name`."""
        return self._fields[name]

    def __setattr__(self, name: str, value: object) -> NoReturn:
        """Refuse mutation: values are immutable."""
        raise AttributeError("Struct values are immutable")

    def __delattr__(self, name: str) -> NoReturn:
        """Refuse mutation: values are immutable."""
        raise AttributeError("Struct values are immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Struct):
            return NotImplemented
        return self._ctor == other._ctor and dict(self._fields) == dict(other._fields)

    def __hash__(self) -> int:
        if self._hash is None:
            h = hash((self._ctor, frozenset(self._fields.items())))
            object.__setattr__(self, "_hash", h)
            return h
        return self._hash

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self._fields.items())
        return f"Struct({self._ctor!r}{args})"

    def __reduce__(self) -> tuple[type[Struct], tuple[str, dict[str, Any]]]:
        return (Struct, (self._ctor, dict(self._fields)))
