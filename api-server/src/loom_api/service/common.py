"""Pieces every resource shares: the base request and reply models, tenant ownership, common
columns."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loom_api import errors
from loom_api.service.crud import Caller
from loom_api.service.types import Name, Tags, Tenant
from loom_api.store import ReadView

#: Tenant given to objects the admin creates without naming one.
ADMIN_TENANT = "admin"


class Body(BaseModel):
    """Base of request models: unknown fields are errors, strings are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Reply(BaseModel):
    """Base of response models (the OpenAPI document's): exactly these fields are answered."""

    model_config = ConfigDict(extra="forbid")


class Owned(Body):
    """Fields of tenant-owned objects."""

    tenant: Tenant | None = None
    name: Name = ""
    tags: Tags = Field(default_factory=list)


def owner(caller: Caller, requested: str | None, row: Any | None) -> str:
    """Return the tenant that owns the object being written.

    The admin may name any tenant; a tenant token writes only its own. On replace, the
    tenant is fixed.

    Raises:
        errors.Forbidden: a tenant token names another tenant.
        errors.ValidationFailed: a replace changes the tenant.
    """
    if row is not None:
        if requested is not None and requested != row.tenant:
            raise errors.ValidationFailed(field="tenant", detail="tenant cannot be changed")
        return str(row.tenant)
    if caller.is_admin:
        return requested or ADMIN_TENANT
    if requested is not None and requested != caller.tenant:
        raise errors.Forbidden(
            field="tenant", detail="a tenant token cannot act for another tenant"
        )
    return str(caller.tenant)


def owned_columns(caller: Caller, body: Owned, row: Any | None) -> dict[str, Any]:
    """Return the `tenant`, `name` and `tags` columns of an `Owned` body."""
    return {"tenant": owner(caller, body.tenant, row), "name": body.name, "tags": list(body.tags)}


def owned_api(row: Any) -> dict[str, Any]:
    """Return `id`, `revision`, `tenant`, `name` and `tags` of a tenant-owned row."""
    return {
        "id": str(row.uuid),
        "revision": row.revision,
        "tenant": row.tenant,
        "name": row.name,
        "tags": sorted(row.tags),
    }


def admin_api(row: Any) -> dict[str, Any]:
    """Return `id`, `revision`, `name`, `description` and `tags` of an admin-owned row."""
    return {
        "id": str(row.uuid),
        "revision": row.revision,
        "name": row.name,
        "description": row.description,
        "tags": sorted(row.tags),
    }


def require_unique_name(view: ReadView, table: str, kind: str, name: str, row: Any) -> None:
    """Refuse (409 on `name`) a name another row of `table` already has.

    Args:
        view: the replica.
        table: the table whose names are unique.
        kind: the object kind, for the message.
        name: the requested name.
        row: the row being replaced (it may keep its own name), or None on create.
    """
    for other in view.rows(table):
        if other.name == name and (row is None or other.uuid != row.uuid):
            raise errors.Conflict(field="name", detail=f"{kind} {name!r} exists")
