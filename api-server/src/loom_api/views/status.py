"""Health, realization and status endpoints under /api/v1.

`/health` (for probes) takes and ignores any query; the others refuse unknown parameters.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from loom_api import errors, http
from loom_api.store import ReadView

bp = Blueprint("status", __name__)


@bp.get("/health")
def health() -> tuple[Response, int]:
    """Answer 200 when the API can reach the config DB, 503 when it cannot (no auth)."""
    if http.store().connected:
        return jsonify({"status": "ok", "database": "connected"}), 200
    return jsonify({"status": "degraded", "database": "unreachable"}), 503


@bp.get("/realization")
def realization() -> Response:
    """Say whether configuration generation `generation` is realized on the transport nodes.

    `X-Loom-Wait-For-Realization: <seconds>` waits up to that long for it. Until physical
    controllers report realization, `realized` stays false: nothing has been pushed to any
    node. `logically_realized` says whether the logical controllers have written the
    generation's universal flows.
    """
    http.caller()
    http.check_query(("generation",))
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
    return jsonify(
        {
            "generation": wanted,
            "config_generation": current,
            "realized_generation": realized,
            "realized": realized >= wanted,
            "logical_generation": logical,
            "logically_realized": logical >= wanted,
        }
    )


@bp.get("/status")
def status() -> Response:
    """Return the generations, the logical controllers' warnings and the DB connection.

    Tenants see only the warnings about their own objects.
    """
    caller = http.caller()
    http.check_query()

    def read(view: ReadView) -> dict[str, object]:
        warnings = [
            {"source": w.source, "kind": w.kind, "message": w.message}
            for w in view.rows("Warning")
            if caller.is_admin or view.owner_tenant(w.source) == caller.tenant
        ]
        return {
            "config_generation": view.generation(),
            "realized_generation": view.realized_generation(),
            "logical_generation": view.logical_generation(),
            "warnings": sorted(warnings, key=lambda w: (w["kind"], w["source"], w["message"])),
        }

    body = http.store().read(read)
    body["database"] = "connected"
    return jsonify(body)
