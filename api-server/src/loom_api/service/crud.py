"""Generic operations on resources: list, get, create, replace, patch, delete.

A `Resource` describes one collection: its table, its request model (pydantic, unknown fields
forbidden), which fields are fixed at creation, its parent collection if it is nested, and
hooks for the rules only it has (key allocation, cross-object checks, what blocks a delete).
The functions here do everything common to all of them — tenant scoping, ETags, pagination,
reference lookups, error mapping — inside one `Store.write` transaction, so a request either
commits whole or writes nothing.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic

from loom_api import errors
from loom_api.store import ReadView, Store, WriteView

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@dataclass(frozen=True)
class Caller:
    """Who is asking: the admin (`tenant` None) or one tenant."""

    tenant: str | None

    @property
    def is_admin(self) -> bool:
        """True for the operator's admin token."""
        return self.tenant is None


ADMIN = Caller(tenant=None)


@dataclass(frozen=True)
class Filters:
    """List filters from the query string; None means "any"."""

    tenant: str | None = None
    name: str | None = None
    tag: str | None = None


@dataclass(frozen=True)
class Page:
    """One page of a list: its items and the cursor of the next page (None at the end)."""

    items: list[dict[str, Any]]
    next_cursor: str | None


@dataclass(frozen=True)
class Written:
    """The result of a change: the object's representation (None after a delete) and generation."""

    item: dict[str, Any] | None
    generation: int


class Resource:
    """One collection of the native API. Subclasses set the class attributes and hooks."""

    #: Human name used in messages ("logical switch").
    kind: ClassVar[str]
    #: Config DB table.
    table: ClassVar[str]
    #: The request body of POST and PUT (and of PATCH after merging).
    model: ClassVar[type[pydantic.BaseModel]]
    #: Fields that may be given at creation but never changed afterwards.
    immutable: ClassVar[frozenset[str]] = frozenset()
    #: Fields that appear in responses only (they are accepted back unchanged in PUT).
    read_only: ClassVar[frozenset[str]] = frozenset({"id", "revision"})
    #: For nested collections: the column pointing at the parent, and the parent resource.
    parent_column: ClassVar[str | None] = None
    parent: ClassVar[type[Resource] | None] = None
    #: Whether rows carry a `tenant` column that scopes them.
    tenant_owned: ClassVar[bool] = True
    #: Only the admin may create, change or delete (tenants may still read).
    admin_writes_only: ClassVar[bool] = False
    #: Tenants may list and read these objects.
    tenant_readable: ClassVar[bool] = True
    #: Fields left out of what tenants read (where the admin's infrastructure is).
    redacted: ClassVar[frozenset[str]] = frozenset()

    # ---- hooks ---------------------------------------------------------------------------

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the JSON representation of `row` (including `id` and `revision`)."""
        raise NotImplementedError

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Validate `body` against the stored configuration and return the columns to write.

        `row` is None on create, else the row being replaced. Raise `LoomApiError`s naming the
        field at fault.
        """
        raise NotImplementedError

    def on_create(self, view: WriteView, row: Any, parent: Any) -> None:
        """Finish a new row inside its transaction (allocate keys, create companions)."""

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Return descriptions of the objects that still reference `row` (they block delete)."""
        return []

    def on_delete(self, view: WriteView, row: Any) -> None:
        """Delete what belongs to `row` (companion rows) before `row` itself goes."""

    def matches(self, row: Any, filters: Filters) -> bool:
        """Return whether `row` passes the list `filters`."""
        if filters.tenant is not None and getattr(row, "tenant", None) != filters.tenant:
            return False
        if filters.name is not None and getattr(row, "name", None) != filters.name:
            return False
        return filters.tag is None or filters.tag in getattr(row, "tags", ())


# ---- helpers shared by resources ---------------------------------------------------------


def parse_id(value: str, kind: str) -> uuidlib.UUID:
    """Parse an object id from a URL; an unparsable id is simply not found."""
    try:
        return uuidlib.UUID(value)
    except ValueError:
        raise errors.NotFound(kind=kind, id=value) from None


def visible(resource: type[Resource] | Resource, caller: Caller, row: Any) -> bool:
    """Return whether `caller` may see `row` of `resource`."""
    if caller.is_admin:
        return True
    if not resource.tenant_readable:
        return False
    return not resource.tenant_owned or row.tenant == caller.tenant


def shown(resource: Resource, caller: Caller, item: dict[str, Any]) -> dict[str, Any]:
    """Return representation `item` as `caller` may read it (without `redacted` fields)."""
    if caller.is_admin or not resource.redacted:
        return item
    return {k: v for k, v in item.items() if k not in resource.redacted}


def lookup(view: ReadView, resource: type[Resource] | Resource, caller: Caller, ident: str) -> Any:
    """Return the row `ident` of `resource` visible to `caller`, or raise NotFound."""
    row = view.get(resource.table, parse_id(ident, resource.kind))
    if row is None or not visible(resource, caller, row):
        raise errors.NotFound(kind=resource.kind, id=ident)
    return row


def reference(
    view: ReadView,
    resource: type[Resource],
    caller: Caller,
    ident: str | None,
    field: str,
    *,
    tenant: str | None = None,
) -> Any:
    """Resolve a reference given in a request body; None stays None.

    Args:
        view: the replica.
        resource: the referenced collection.
        caller: who is asking (tenants reference only what they can see).
        ident: the id from the body.
        field: the body field, named in the error.
        tenant: when set, the referenced object must belong to this tenant (objects of one
            tenant never point into another's).

    Raises:
        errors.MissingReference: no such object visible to the caller (or in `tenant`).
    """
    if ident is None:
        return None
    try:
        key = uuidlib.UUID(ident)
    except ValueError:
        raise errors.MissingReference(field=field, kind=resource.kind, id=ident) from None
    row = view.get(resource.table, key)
    if row is None or not visible(resource, caller, row):
        raise errors.MissingReference(field=field, kind=resource.kind, id=ident)
    if tenant is not None and resource.tenant_owned and row.tenant != tenant:
        raise errors.MissingReference(field=field, kind=resource.kind, id=ident)
    return row


def optional(value: Any) -> list[Any]:
    """Return an optional column's value: `[]` for None, else `[value]`."""
    return [] if value is None else [value]


def first(column: list[Any]) -> Any | None:
    """Return the value of an optional (0..1) column, or None."""
    return column[0] if column else None


def ref_id(column: Any) -> str | None:
    """Return the id of the row in a reference column (a Row or a 0..1 list), or None."""
    if isinstance(column, list):
        column = first(column)
    return None if column is None else str(column.uuid)


def etag(row: Any) -> str:
    """Return the strong ETag of `row`: its revision, quoted."""
    return f'"{row.revision}"'


def _etag_matches(row: Any, if_match: str) -> bool:
    for tag in (t.strip() for t in if_match.split(",")):
        if tag == "*" or tag.removeprefix("W/") == etag(row):
            return True
    return False


def validate(resource: Resource, data: Mapping[str, Any]) -> Any:
    """Validate request `data` with `resource.model`, mapping the first error to a 4xx.

    Raises:
        errors.UnknownField: a field the resource does not have.
        errors.ValidationFailed: a wrong type or an invalid value, naming the field.
    """
    return validate_model(resource.model, data)


def validate_model(model: type[pydantic.BaseModel], data: Mapping[str, Any]) -> Any:
    """Validate request `data` with `model` (`validate`'s errors)."""
    try:
        return model.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = _field_path(err["loc"], data) or None
        if err["type"] == "extra_forbidden":
            raise errors.UnknownField(field=field, name=field) from None
        if err["type"] == "missing":
            raise errors.ValidationFailed(field=field, detail=f"{field} is required") from None
        message = str(err["msg"]).removeprefix("Value error, ")
        raise errors.ValidationFailed(field=field, detail=f"{field}: {message}") from None


def _field_path(loc: tuple[int | str, ...], data: Any) -> str:
    """Return the dotted request field of a pydantic error location.

    pydantic puts the tag of a discriminated union into the location
    (`attachment.l2-gateway.vlan`); the client's field is `attachment.vlan`, so a location
    part that names nothing in the body, and is not the last part, is left out.
    """
    parts: list[str] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part not in node and i < len(loc) - 1:
            continue
        parts.append(str(part))
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return ".".join(parts)


def _require_object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise errors.MalformedJson(detail="the body must be a JSON object")
    return data


# ---- the operations ----------------------------------------------------------------------


def _parent_row(view: ReadView, resource: Resource, caller: Caller, parent_id: str | None) -> Any:
    if resource.parent is None:
        return None
    if parent_id is None:
        raise errors.BadRequest(detail=f"{resource.kind} needs a parent")
    return lookup(view, resource.parent, caller, parent_id)


def _in_parent(resource: Resource, row: Any, parent: Any) -> bool:
    if parent is None or resource.parent_column is None:
        return True
    value = getattr(row, resource.parent_column)
    if isinstance(value, list):
        value = first(value)
    return value is not None and value.uuid == parent.uuid


def list_page(
    store: Store,
    resource: Resource,
    caller: Caller,
    *,
    parent_id: str | None = None,
    filters: Filters = Filters(),
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page:
    """Return one page of the objects of `resource` visible to `caller`, ordered by id."""
    if not 1 <= limit <= MAX_LIMIT:
        raise errors.ValidationFailed(field="limit", detail=f"limit must be 1..{MAX_LIMIT}")

    def read(view: ReadView) -> Page:
        parent = _parent_row(view, resource, caller, parent_id)
        rows = sorted(
            (
                (str(row.uuid), row)
                for row in view.rows(resource.table)
                if visible(resource, caller, row)
                and _in_parent(resource, row, parent)
                and resource.matches(row, filters)
            ),
            key=lambda pair: pair[0],
        )
        start = 0
        if cursor:
            start = next((i for i, (ident, _) in enumerate(rows) if ident > cursor), len(rows))
        chosen = rows[start : start + limit]
        more = start + limit < len(rows)
        return Page(
            items=[shown(resource, caller, resource.to_api(view, row)) for _, row in chosen],
            next_cursor=chosen[-1][0] if more and chosen else None,
        )

    return store.read(read)


def get_one(
    store: Store, resource: Resource, caller: Caller, ident: str, *, parent_id: str | None = None
) -> dict[str, Any]:
    """Return the representation of object `ident`."""

    def read(view: ReadView) -> dict[str, Any]:
        parent = _parent_row(view, resource, caller, parent_id)
        row = lookup(view, resource, caller, ident)
        if not _in_parent(resource, row, parent):
            raise errors.NotFound(kind=resource.kind, id=ident)
        return shown(resource, caller, resource.to_api(view, row))

    return store.read(read)


def _check_writer(resource: Resource, caller: Caller) -> None:
    if resource.admin_writes_only and not caller.is_admin:
        raise errors.Forbidden(detail=f"only the admin may change {resource.kind}s")


def _strip_read_only(
    resource: Resource, data: dict[str, Any], current: dict[str, Any] | None
) -> dict[str, Any]:
    """Remove read-only fields: refused on create, accepted back unchanged on replace."""
    body = dict(data)
    for name in sorted(resource.read_only & body.keys()):
        if current is None or body[name] != current.get(name):
            raise errors.ValidationFailed(field=name, detail=f"{name} is read-only")
        del body[name]
    return body


def create(
    store: Store,
    resource: Resource,
    caller: Caller,
    data: Any,
    *,
    parent_id: str | None = None,
    extra: Callable[[WriteView, Any], None] | None = None,
) -> Written:
    """Create an object from request body `data`; return it and the new generation.

    `extra` runs in the same transaction after the row exists (the Neutron layer uses it to
    write its own attributes).
    """
    _check_writer(resource, caller)
    body = validate(resource, _strip_read_only(resource, _require_object(data), None))

    def write(view: WriteView) -> dict[str, Any]:
        parent = _parent_row(view, resource, caller, parent_id)
        cols = resource.columns(view, caller, body, parent, None)
        row = view.insert(resource.table, revision=1, **cols)
        resource.on_create(view, row, parent)
        if extra is not None:
            extra(view, row)
        return {"row": row}

    committed = store.write(write)
    key = committed.real_id(committed.result["row"])
    return Written(item=read_back(store, resource, key), generation=committed.generation)


def read_back(store: Store, resource: Resource, key: uuidlib.UUID) -> dict[str, Any]:
    """Return the committed representation of row `key`, written by a just-committed change."""

    def read(view: ReadView) -> dict[str, Any]:
        committed = view.get(resource.table, key)
        if committed is None:  # deleted by someone else right after our commit
            raise errors.NotFound(kind=resource.kind, id=str(key))
        return resource.to_api(view, committed)

    return store.read(read)


def update(
    store: Store,
    resource: Resource,
    caller: Caller,
    ident: str,
    data: Any,
    *,
    partial: bool,
    if_match: str | None = None,
    parent_id: str | None = None,
    extra: Callable[[WriteView, Any], None] | None = None,
) -> Written:
    """Replace (PUT) or patch (PATCH) object `ident` with request body `data`.

    PATCH merges `data` onto the current representation and validates the whole result, so
    one model checks both. Fields fixed at creation may be repeated unchanged, not changed.
    """
    _check_writer(resource, caller)
    data = _require_object(data)

    def write(view: WriteView) -> None:
        parent = _parent_row(view, resource, caller, parent_id)
        row = lookup(view, resource, caller, ident)
        if not _in_parent(resource, row, parent):
            raise errors.NotFound(kind=resource.kind, id=ident)
        view.verify(row, "revision")
        if if_match is not None and not _etag_matches(row, if_match):
            raise errors.PreconditionFailed(
                kind=resource.kind, id=ident, given=if_match, current=etag(row)
            )
        current = resource.to_api(view, row)
        body = _strip_read_only(resource, data, current)
        if partial:
            merged = {k: v for k, v in current.items() if k not in resource.read_only}
            merged.update(body)
            body = merged
        for name in resource.immutable:
            if name in body and body[name] != current.get(name):
                raise errors.ValidationFailed(field=name, detail=f"{name} cannot be changed")
        model = validate(resource, body)
        cols = resource.columns(view, caller, model, parent, row)
        view.update(row, revision=row.revision + 1, **cols)
        if extra is not None:
            extra(view, row)

    committed = store.write(write)
    item = read_back(store, resource, parse_id(ident, resource.kind))
    return Written(item=item, generation=committed.generation)


def delete(
    store: Store,
    resource: Resource,
    caller: Caller,
    ident: str,
    *,
    if_match: str | None = None,
    parent_id: str | None = None,
) -> Written:
    """Delete object `ident`, refusing (409, naming them) while other objects use it."""
    _check_writer(resource, caller)

    def write(view: WriteView) -> None:
        parent = _parent_row(view, resource, caller, parent_id)
        row = lookup(view, resource, caller, ident)
        if not _in_parent(resource, row, parent):
            raise errors.NotFound(kind=resource.kind, id=ident)
        if if_match is not None and not _etag_matches(row, if_match):
            raise errors.PreconditionFailed(
                kind=resource.kind, id=ident, given=if_match, current=etag(row)
            )
        users = resource.users(view, row)
        if users:
            raise errors.InUse(kind=resource.kind, id=ident, users=", ".join(users))
        resource.on_delete(view, row)
        view.delete(row)

    return Written(item=None, generation=store.write(write).generation)


def describe(kind: str, rows: Iterable[Any], limit: int = 5) -> list[str]:
    """Return "kind <id>" for up to `limit` rows, and "... and N more" past that."""
    ids = [f"{kind} {row.uuid}" for row in rows]
    if len(ids) > limit:
        return [*ids[:limit], f"and {len(ids) - limit} more"]
    return ids
