"""`/api/v1/settings`: the deployment-wide settings (`Loom_Global`'s configuration columns).

`GET` answers them to any caller (they shape every tenant's networks); `PATCH` (the admin
only) changes the fields it names, `null` returning one to its default. Today: the default
programming model of switches that name none, and `auto`'s span (`schemas/loom_config.md`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from flask import Blueprint, Response
from pydantic import Field

from loom_api import errors, http
from loom_api.service import crud
from loom_api.service.common import Body, Reply
from loom_api.store import ReadView, WriteView

bp = Blueprint("settings", __name__)

Model = Literal["preprogrammed", "hoverboard", "auto"]
Span = Annotated[int, Field(ge=1, le=1_000_000)]


class Settings(Reply):
    """The deployment-wide settings, as they are in effect."""

    programming_model: Model = Field(
        description="The programming model of switches that name none."
    )
    hoverboard_span: int = Field(
        description="`auto` programs a switch by Hoverboards once its VIFs are on more than "
        "this many transport nodes."
    )


class SettingsChange(Body):
    """`PATCH /settings`: the fields to change (`null`: back to the default)."""

    programming_model: Model | None = None
    hoverboard_span: Span | None = None


DEFAULTS = Settings(programming_model="preprogrammed", hoverboard_span=64)


def settings(view: ReadView) -> Settings:
    """The settings in effect (the defaults where `Loom_Global` names none)."""
    row = view.global_row()
    model = crud.first(row.programming_model) if row is not None else None
    span = crud.first(row.hoverboard_span) if row is not None else None
    return Settings(programming_model=model or DEFAULTS.programming_model,
                    hoverboard_span=span or DEFAULTS.hoverboard_span)  # fmt: skip


@bp.get("/settings")
def get_settings() -> Response:
    """The settings in effect."""
    http.check_query()
    http.caller()
    return http.item(http.store().read(settings).model_dump())


@bp.patch("/settings")
def patch_settings() -> Response:
    """Change the settings the body names (admin only)."""
    http.check_query()
    if not http.caller().is_admin:
        raise errors.Forbidden(detail="only the admin changes the deployment's settings")
    data = http.json_body()
    if not isinstance(data, dict):
        raise errors.ValidationFailed(detail="the body must be a JSON object")
    change = crud.validate_model(SettingsChange, data)

    store = http.store()
    if store.read(lambda view: view.global_row() is None):
        store.write(lambda view: None)  # (the store makes the row with its first write)

    def write(view: WriteView) -> dict[str, Any]:
        row = view.global_row()
        if row is None:
            raise errors.Unavailable(detail="the configuration database has no Loom_Global row")
        for name in change.model_fields_set:
            value = getattr(change, name)
            view.update(row, **{name: [] if value is None else [value]})
        return settings(view).model_dump()

    committed = store.write(write)
    return http.written(crud.Written(committed.result, committed.generation), 200)
