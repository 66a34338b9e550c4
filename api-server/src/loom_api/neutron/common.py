"""The Neutron layer's framework: callers, request bodies, external_ids, the generic operations.

A `NeutronResource` describes one `/v2.0` collection the way `service.crud.Resource` does for
the native API: its table, its request model, and hooks (`create`, `update`, `delete`,
`to_api`) that run inside one `Store.write` transaction. The functions here do what every
collection shares: the `{"network": {...}}` envelope, body validation with Neutron's
messages, visibility, `If-Match: revision_number=N`, `?fields=` on a GET, and the read-back
of what a write committed. Lists are `neutron.listing`'s.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from loom_api.neutron import errors
from loom_api.service import crud
from loom_api.service.common import ADMIN_TENANT
from loom_api.service.crud import Caller
from loom_api.service.types import (
    ADDRESS_MAX,
    PRINTABLE_PATTERN,
    TAGS_MAX,
    TEXT_PATTERN,
    Tenant,
    control_character,
)
from loom_api.store import ReadView, Store, WriteView

#: Prefix of the external_ids keys that hold Neutron-only attributes (as OVN does).
PREFIX = "neutron:"

Query = Mapping[str, list[str]]

#: Neutron's limits (neutron-lib's NAME_MAX_LEN, DESCRIPTION_MAX_LEN, the tag extension's
#: MAX_TAG_LEN, the ML2 binding profile's column): what Neutron clients are written for. The
#: number of tags is the native limit (Neutron sets none).
NAME_MAX = 255
DESCRIPTION_MAX = 255
TAG_MAX = 60
BINDING_PROFILE_MAX = 4095


def _printable(value: Any) -> Any:
    if isinstance(value, str) and (bad := control_character(value)) is not None:
        raise ValueError(f"must not contain a {bad}")
    return value


def _printable_text(value: Any) -> Any:
    if isinstance(value, str) and (bad := control_character(value, text=True)) is not None:
        raise ValueError(f"must not contain a {bad}")
    return value


Name = Annotated[
    str,
    StringConstraints(max_length=NAME_MAX, pattern=PRINTABLE_PATTERN),
    BeforeValidator(_printable),
]
"""A Neutron name (or device id, owner, host): at most 255 characters, no control characters."""

Description = Annotated[
    str,
    StringConstraints(max_length=DESCRIPTION_MAX, pattern=TEXT_PATTERN),
    BeforeValidator(_printable_text),
]
"""A Neutron description: at most 255 characters; tab and line breaks, no other controls."""

Tag = Annotated[
    str,
    StringConstraints(min_length=1, max_length=TAG_MAX, pattern=PRINTABLE_PATTERN),
    BeforeValidator(_printable),
]
"""One Neutron tag: 1 to 60 characters, no control characters."""

Tags = Annotated[list[Tag], Field(max_length=TAGS_MAX)]
"""Neutron's tags (standard-attr-tag): at most 64."""

Address = Annotated[str, StringConstraints(max_length=ADDRESS_MAX)]
"""An address or prefix as text, parsed (with Neutron's messages) where it is used."""


@dataclass(frozen=True)
class Context:
    """Who is calling: the native `Caller` (the admin, or one project's token)."""

    caller: Caller

    @property
    def is_admin(self) -> bool:
        """True for the admin token and for every request under `noauth`."""
        return self.caller.is_admin

    @property
    def tenant(self) -> str | None:
        """The caller's project, None for the admin."""
        return self.caller.tenant


@dataclass(frozen=True)
class Result:
    """A response body and, after a change, the configuration generation it produced."""

    body: dict[str, Any] | None
    generation: int | None = None


class Part(BaseModel):
    """Base of the objects inside request bodies: unknown attributes are errors, no coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=False)


class Body(Part):
    """Base of the Neutron request bodies: a `Part` that may name its project."""

    project_id: Tenant | None = None
    tenant_id: Tenant | None = None


# ---- bodies ------------------------------------------------------------------------------


def parse(model: type[BaseModel], data: Any) -> Any:
    """Validate one resource body against `model`, with Neutron's messages on failure.

    Raises:
        errors.BadRequest: not an object, an unknown attribute, a missing one, a bad value.
    """
    if not isinstance(data, dict):
        raise errors.BadRequest(detail="Resource body must be a JSON object")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = ".".join(str(part) for part in err["loc"])
        if err["type"] == "extra_forbidden":
            raise errors.BadRequest(
                field=name, detail=f"Unrecognized attribute(s) '{name}'"
            ) from None
        if err["type"] == "missing":
            raise errors.BadRequest(
                field=name,
                detail=f"Failed to parse request. Required attribute '{name}' not specified",
            ) from None
        reason = str(err["msg"]).removeprefix("Value error, ")
        raise errors.BadRequest(
            field=name, detail=f"Invalid input for {name}. Reason: {reason}."
        ) from None


def given(body: BaseModel, name: str) -> bool:
    """Return whether the request set attribute `name` (by its Python name)."""
    return name in body.model_fields_set


def require(body: BaseModel, *names: str) -> None:
    """Refuse a create body that leaves out a required attribute.

    Raises:
        errors.BadRequest: naming the first missing attribute.
    """
    for name in names:
        if getattr(body, name) is None:
            raise errors.BadRequest(
                field=name,
                detail=f"Failed to parse request. Required attribute '{name}' not specified",
            )


def refuse_changes(body: BaseModel, names: Iterable[str]) -> None:
    """Refuse an update body that sets an attribute fixed at creation.

    Raises:
        errors.BadRequest: naming the attribute.
    """
    for name in names:
        if given(body, name):
            alias = type(body).model_fields[name].alias or name
            raise errors.BadRequest(
                field=alias, detail=f"Cannot update read-only attribute {alias}"
            )


def requested_tenant(body: Body) -> str | None:
    """Return the project a body names (`project_id` or `tenant_id`), or None.

    Raises:
        errors.BadRequest: the two name different projects.
    """
    if body.project_id and body.tenant_id and body.project_id != body.tenant_id:
        raise errors.BadRequest(
            field="project_id", detail="'project_id' and 'tenant_id' do not match"
        )
    return body.project_id or body.tenant_id


def owner(ctx: Context, body: Body, default: str | None = None) -> str:
    """Return the project a new object belongs to.

    The admin (and every `noauth` request) may name any project; without one the object
    gets `default`, else the native admin tenant. A project token acts for its project only.

    Raises:
        errors.BadRequest: a project token names another project (Neutron's answer).
    """
    requested = requested_tenant(body)
    if ctx.is_admin:
        return requested or default or ADMIN_TENANT
    if requested is not None and requested != ctx.tenant:
        raise errors.BadRequest(
            field="project_id",
            detail="Specifying 'project_id' or 'tenant_id' other than the authenticated "
            "project in request requires admin privileges",
        )
    return str(ctx.tenant)


def check_owner_unchanged(body: Body, row: Any) -> None:
    """Refuse an update that moves an object to another project.

    Raises:
        errors.BadRequest: the body names a project other than the row's.
    """
    requested = requested_tenant(body)
    if requested is not None and requested != row.tenant:
        raise errors.BadRequest(
            field="project_id", detail="Cannot update read-only attribute project_id"
        )


# ---- external_ids ------------------------------------------------------------------------


def ext(row: Any, key: str, default: str = "") -> str:
    """Return the Neutron attribute `key` kept in `row.external_ids`."""
    value: str = row.external_ids.get(PREFIX + key, default)
    return value


def flag(row: Any, key: str, default: bool = False) -> bool:
    """Return the boolean Neutron attribute `key` kept in `row.external_ids`."""
    value = row.external_ids.get(PREFIX + key)
    return default if value is None else value == "true"


def merged_ids(row: Any | None, **values: str | bool | None) -> dict[str, str]:
    """Return `row.external_ids` with Neutron attributes set (None removes one)."""
    ids = dict(row.external_ids) if row is not None else {}
    for key, value in values.items():
        name = PREFIX + key.replace("__", ":")
        if value is None:
            ids.pop(name, None)
        elif isinstance(value, bool):
            ids[name] = "true" if value else "false"
        else:
            ids[name] = value
    return ids


def tenant_api(tenant: str) -> dict[str, str]:
    """Return the `tenant_id` and `project_id` of an object (Neutron returns both)."""
    return {"tenant_id": tenant, "project_id": tenant}


# ---- resources ---------------------------------------------------------------------------


class NeutronResource:
    """One `/v2.0` collection. Subclasses set the class attributes and the hooks."""

    #: URL collection name and body key of one object ("networks", "network").
    collection: ClassVar[str]
    member: ClassVar[str]
    table: ClassVar[str]
    #: Request models of create and update (update: everything optional).
    create_model: ClassVar[type[Body]]
    update_model: ClassVar[type[Body]]
    not_found: ClassVar[type[errors.NotFound]]
    #: Attributes only the admin reads (Neutron's policy: e.g. a network's `provider:*`).
    admin_only: ClassVar[frozenset[str]] = frozenset()

    def rows(self, view: ReadView) -> Iterable[Any]:
        """Yield the rows that are objects of this collection."""
        return view.rows(self.table)

    def row(self, view: ReadView, key: uuidlib.UUID) -> Any | None:
        """Return the row `key` if it is an object of this collection."""
        return view.get(self.table, key)

    def visible(self, ctx: Context, view: ReadView, row: Any) -> bool:
        """Return whether `ctx` may see `row` (the admin sees all; a project its own)."""
        return ctx.is_admin or row.tenant == ctx.tenant

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the Neutron representation of `row`."""
        raise NotImplementedError

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Write a new object from a validated create body; return its row."""
        raise NotImplementedError

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Apply a validated update body to `row`."""
        raise NotImplementedError

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Delete `row` and what belongs to it, or raise the Neutron InUse error."""
        raise NotImplementedError

    def project(self, view: ReadView, row: Any) -> str:
        """Return the project that owns `row` (only it, or the admin, may change it)."""
        return str(row.tenant)

    def revision(self, row: Any) -> int:
        """Return the row's revision (what `revision_number` and If-Match compare)."""
        return int(row.revision)

    def prepare(self, store: Store, ctx: Context, query: Query) -> None:
        """Run before a list (the security groups create a project's default group here)."""

    def represent(self, view: ReadView, ctx: Context) -> list[dict[str, Any]]:
        """Return the representations of every object visible to `ctx` (a list's input)."""
        return [
            self.shown(ctx, self.to_api(view, row))
            for row in self.rows(view)
            if self.visible(ctx, view, row)
        ]

    def shown(self, ctx: Context, item: dict[str, Any]) -> dict[str, Any]:
        """Return representation `item` as `ctx` may read it (without `admin_only`)."""
        if ctx.is_admin or not self.admin_only:
            return item
        return {k: v for k, v in item.items() if k not in self.admin_only}


def lookup(view: ReadView, res: NeutronResource, ctx: Context, ident: str) -> Any:
    """Return the row `ident` of `res` visible to `ctx`.

    Raises:
        errors.NotFound: `res.not_found`, for an unknown, malformed or invisible id.
    """
    try:
        key = uuidlib.UUID(ident)
    except ValueError:
        raise res.not_found(id=ident) from None
    row = res.row(view, key)
    if row is None or not res.visible(ctx, view, row):
        raise res.not_found(id=ident)
    return row


def check_revision(res: NeutronResource, row: Any, if_match: str | None) -> None:
    """Check Neutron's `If-Match: revision_number=N[, ...]` against `row`.

    Raises:
        errors.BadRequest: a malformed header.
        errors.PreconditionFailed: no listed revision is the current one.
    """
    if if_match is None:
        return
    wanted = []
    for part in if_match.split(","):
        name, sep, value = part.strip().partition("=")
        if name != "revision_number" or not sep or not value.isdigit():
            raise errors.BadRequest(
                field="If-Match", detail="If-Match must be revision_number=<integer>"
            )
        wanted.append(int(value))
    current = res.revision(row)
    if current not in wanted:
        raise errors.PreconditionFailed(given=if_match, current=current)


def check_writer(view: ReadView, res: NeutronResource, ctx: Context, row: Any) -> None:
    """Refuse a change by a project that can see `row` but does not own it.

    A project sees shared and external networks (and their subnets) it does not own.

    Raises:
        errors.PolicyNotAuthorized: the caller is neither the admin nor the owner.
    """
    if not ctx.is_admin and res.project(view, row) != ctx.tenant:
        raise errors.PolicyNotAuthorized(
            detail=f"{res.member} {row.uuid} belongs to another project; only it or an admin "
            "may change it."
        )


# ---- the generic operations --------------------------------------------------------------


def _bodies(res: NeutronResource, data: Any) -> tuple[list[Any], bool]:
    """Return the create bodies of a request (one, or a bulk list) and whether it was bulk."""
    if isinstance(data, dict) and set(data) == {res.collection}:
        items = data[res.collection]
        if not isinstance(items, list) or not items:
            raise errors.BadRequest(detail=f"'{res.collection}' must be a non-empty list")
        return [parse(res.create_model, item) for item in items], True
    return [parse(res.create_model, unwrap(res, data))], False


def unwrap(res: NeutronResource, data: Any) -> Any:
    """Return the object inside `{"<member>": {...}}`.

    Raises:
        errors.BadRequest: the envelope is missing or has other keys.
    """
    if not isinstance(data, dict) or set(data) != {res.member}:
        raise errors.BadRequest(detail=f"Resource body required: {{'{res.member}': {{...}}}}")
    return data[res.member]


def read_back(
    store: Store, res: NeutronResource, ctx: Context, keys: list[uuidlib.UUID]
) -> list[dict[str, Any]]:
    """Return the representations of rows a write just committed, as `ctx` reads them."""

    def read(view: ReadView) -> list[dict[str, Any]]:
        items = []
        for key in keys:
            row = res.row(view, key)
            if row is None:  # deleted by someone else right after the commit
                raise res.not_found(id=str(key))
            items.append(res.shown(ctx, res.to_api(view, row)))
        return items

    return store.read(read)


def create(store: Store, res: NeutronResource, ctx: Context, data: Any) -> Result:
    """Create one object, or several (`{"networks": [...]}`), in one transaction."""
    bodies, bulk = _bodies(res, data)

    def write(view: WriteView) -> list[Any]:
        return [res.create(view, ctx, body) for body in bodies]

    committed = store.write(write)
    items = read_back(store, res, ctx, [committed.real_id(row) for row in committed.result])
    body = {res.collection: items} if bulk else {res.member: items[0]}
    return Result(body, committed.generation)


def show(store: Store, res: NeutronResource, ctx: Context, ident: str, query: Query) -> Result:
    """Return one object (restricted to `?fields=`)."""

    def read(view: ReadView) -> dict[str, Any]:
        return res.shown(ctx, res.to_api(view, lookup(view, res, ctx, ident)))

    return Result({res.member: select_fields(store.read(read), query.get("fields", []))})


def update(
    store: Store,
    res: NeutronResource,
    ctx: Context,
    ident: str,
    data: Any,
    if_match: str | None = None,
) -> Result:
    """Apply an update body to object `ident`."""
    body = parse(res.update_model, unwrap(res, data))
    return change(
        store, res, ctx, ident, lambda view, row: res.update(view, ctx, row, body), if_match
    )


def change(
    store: Store,
    res: NeutronResource,
    ctx: Context,
    ident: str,
    fn: Callable[[WriteView, Any], None],
    if_match: str | None = None,
) -> Result:
    """Run `fn(view, row)` on object `ident` in one transaction; return the object after."""

    def write(view: WriteView) -> uuidlib.UUID:
        row = lookup(view, res, ctx, ident)
        check_writer(view, res, ctx, row)
        check_revision(res, row, if_match)
        fn(view, row)
        key: uuidlib.UUID = row.uuid
        return key

    committed = store.write(write)
    item = read_back(store, res, ctx, [committed.result])[0]
    return Result({res.member: item}, committed.generation)


def delete(
    store: Store, res: NeutronResource, ctx: Context, ident: str, if_match: str | None = None
) -> Result:
    """Delete object `ident` (the resource refuses while it is in use)."""

    def write(view: WriteView) -> None:
        row = lookup(view, res, ctx, ident)
        check_writer(view, res, ctx, row)
        check_revision(res, row, if_match)
        res.delete(view, ctx, row)

    return Result(None, store.write(write).generation)


def set_tags(
    store: Store,
    res: NeutronResource,
    ctx: Context,
    ident: str,
    fn: Callable[[list[str]], list[str]],
) -> Result:
    """Replace object `ident`'s tags with `fn(current tags)` (the tag extension's routes).

    Raises:
        errors.BadRequest: the object would have more than 64 tags.
    """

    def retag(view: WriteView, row: Any) -> None:
        tags = sorted(set(fn(list(row.tags))))
        if len(tags) > TAGS_MAX:
            raise errors.BadRequest(
                field="tags",
                detail=f"Invalid input for tags. Reason: {len(tags)} tags; at most {TAGS_MAX}.",
            )
        bump(view, row, tags=tags)

    return change(store, res, ctx, ident, retag)


def parse_tags(values: list[Any]) -> list[str]:
    """Validate tags from a request (at most 64 strings of 1 to 60 printable characters).

    Raises:
        errors.BadRequest: naming the first bad tag, or too many.
    """
    if len(values) > TAGS_MAX:
        raise errors.BadRequest(
            field="tags",
            detail=f"Invalid input for tags. Reason: {len(values)} tags; at most {TAGS_MAX}.",
        )
    for value in values:
        if not isinstance(value, str) or not 1 <= len(value) <= TAG_MAX:
            shown = repr(value)[:80]
            raise errors.BadRequest(
                field="tags",
                detail=f"Invalid input for tags. Reason: {shown} is not a valid tag "
                f"(1 to {TAG_MAX} characters).",
            )
        bad = control_character(value)
        if bad is not None:
            raise errors.BadRequest(
                field="tags",
                detail=f"Invalid input for tags. Reason: {value!r} holds a {bad}.",
            )
    return [str(v) for v in values]


def without(tags: list[str], tag: str) -> list[str]:
    """Return `tags` without `tag`."""
    return [t for t in tags if t != tag]


def bump(view: WriteView, row: Any, **columns: Any) -> None:
    """Update `row`'s `columns` and its revision (what `revision_number` mirrors)."""
    view.update(row, revision=row.revision + 1, **columns)


# ---- the native model, inside a transaction ----------------------------------------------


def native_insert(
    view: WriteView, resource: crud.Resource, data: dict[str, Any], parent: Any = None
) -> Any:
    """Insert a row the way the native API's POST does (its model, checks, keys); return it.

    The Neutron layer has already decided who owns the object, so the native checks run as
    the admin; `data` names the tenant.
    """
    body = crud.validate(resource, data)
    cols = resource.columns(view, crud.ADMIN, body, parent, None)
    row = view.insert(resource.table, revision=1, **cols)
    resource.on_create(view, row, parent)
    return row


def native_update(
    view: WriteView, resource: crud.Resource, row: Any, changes: dict[str, Any], parent: Any = None
) -> None:
    """Change `row` the way the native API's PATCH does: merge, validate, write, bump."""
    current = resource.to_api(view, row)
    merged = {k: v for k, v in current.items() if k not in resource.read_only}
    merged.update(changes)
    body = crud.validate(resource, merged)
    cols = resource.columns(view, crud.ADMIN, body, parent, row)
    bump(view, row, **cols)


def children(view: ReadView, table: str, column: str, parent: Any) -> list[Any]:
    """Return the rows of `table` whose `column` is `parent`, as the transaction sees them.

    Unlike `ReadView.children`, rows inserted by the current transaction are included and
    rows it deleted are not (Neutron requests often add and look up in one transaction).
    """
    rows = [r for r in view.children(table, column, parent) if view.get(table, r.uuid) is not None]
    if isinstance(view, WriteView):
        for key in view.inserted_ids:
            row = view.get(table, key)
            if row is not None and getattr(row, column) == parent:
                rows.append(row)
    return rows


def select_fields(item: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """Return `item` restricted to `fields` (repeated or comma-separated); all when empty."""
    names = {name for entry in fields for name in entry.split(",") if name}
    if not names:
        return item
    return {key: value for key, value in item.items() if key in names}
