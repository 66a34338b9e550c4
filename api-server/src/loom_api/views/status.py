"""Health, realization and status endpoints under /api/v1.

`/health` (for probes) takes and ignores any query; the others refuse unknown parameters.
The models below are the answers (and the realization query) as the OpenAPI document
describes them (`loom_api.openapi`); the views build their answers with them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from flask import Blueprint, Response, jsonify, request
from pydantic import BaseModel, Field

from loom_api import errors, http
from loom_api.service.common import Reply
from loom_api.store import ReadView

bp = Blueprint("status", __name__)

Generation = Annotated[int, Field(ge=0)]


class Health(Reply):
    """Whether the API reaches the configuration database."""

    status: Literal["ok", "degraded"]
    database: Literal["connected", "unreachable"]


class RealizationQuery(BaseModel):
    """The query of `GET /realization`."""

    generation: Generation | None = Field(
        None, description="The generation to ask about; the newest by default."
    )


class Realization(Reply):
    """Whether a configuration generation is realized."""

    generation: Generation = Field(description="The generation asked about.")
    config_generation: Generation = Field(description="The newest generation.")
    realized_generation: Generation = Field(
        description="The newest generation realized on the transport nodes."
    )
    realized: bool
    logical_generation: Generation = Field(
        description="The newest generation whose universal flows are written."
    )
    logically_realized: bool


class StatusWarning(Reply):
    """A problem a logical controller found in the configuration."""

    source: str = Field(description="The id of the object at fault.")
    kind: str
    message: str


class Status(Reply):
    """The configuration and realized generations, and the controllers' warnings."""

    config_generation: Generation
    realized_generation: Generation
    logical_generation: Generation
    warnings: list[StatusWarning] = Field(
        description="Problems the logical controllers found in the configuration."
    )
    database: Literal["connected"]


@bp.get("/health")
def health() -> tuple[Response, int]:
    """Answer 200 when the API can reach the config DB, 503 when it cannot (no auth)."""
    if http.store().connected:
        return jsonify(Health(status="ok", database="connected").model_dump()), 200
    return jsonify(Health(status="degraded", database="unreachable").model_dump()), 503


@bp.get("/realization")
def realization() -> Response:
    """Say whether configuration generation `generation` is realized on the transport nodes.

    `X-Loom-Wait-For-Realization: <seconds>` waits up to that long for it. Until physical
    controllers report realization, `realized` stays false: nothing has been pushed to any
    node. `logically_realized` says whether the logical controllers have written the
    generation's universal flows.
    """
    http.caller()
    http.check_query(http.parameters(RealizationQuery))
    raw = request.args.get("generation")
    try:
        generation = int(raw) if raw is not None else None
    except ValueError:
        raise errors.ValidationFailed(
            field="generation", detail="generation must be an integer"
        ) from None
    store = http.store()

    def read(view: ReadView) -> tuple[int, int, int]:
        return view.generation(), view.realized_generation(), view.logical_generation()

    current, realized, logical = store.read(read)
    wanted = current if generation is None else generation
    if generation is not None and generation < 0:
        raise errors.ValidationFailed(field="generation", detail="generation must be >= 0")
    seconds = http.wait_seconds()
    if seconds is not None and realized < wanted:
        realized = store.wait_realized(wanted, seconds)
    answer = Realization(
        generation=wanted,
        config_generation=current,
        realized_generation=realized,
        realized=realized >= wanted,
        logical_generation=logical,
        logically_realized=logical >= wanted,
    )
    return jsonify(answer.model_dump())


@bp.get("/status")
def status() -> Response:
    """Return the generations, the logical controllers' warnings and the DB connection.

    Tenants see only the warnings about their own objects.
    """
    caller = http.caller()
    http.check_query()

    def read(view: ReadView) -> Status:
        warnings = [
            StatusWarning(source=w.source, kind=w.kind, message=w.message)
            for w in view.rows("Warning")
            if caller.is_admin or view.owner_tenant(w.source) == caller.tenant
        ]
        return Status(
            config_generation=view.generation(),
            realized_generation=view.realized_generation(),
            logical_generation=view.logical_generation(),
            warnings=sorted(warnings, key=lambda w: (w.kind, w.source, w.message)),
            database="connected",
        )

    return jsonify(http.store().read(read).model_dump())
