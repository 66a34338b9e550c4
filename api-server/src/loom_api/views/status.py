"""Health, realization and status endpoints under /api/v1."""

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

    `X-Loom-Wait-For-Realization: <seconds>` waits up to that long for it. Until controllers
    report realization, `realized` stays false: nothing has been pushed to any node.
    """
    http.caller()
    raw = request.args.get("generation")
    try:
        generation = int(raw) if raw is not None else None
    except ValueError:
        raise errors.ValidationFailed(
            field="generation", detail="generation must be an integer"
        ) from None
    store = http.store()

    def read(view: ReadView) -> tuple[int, int]:
        return view.generation(), view.realized_generation()

    current, realized = store.read(read)
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
        }
    )


@bp.get("/status")
def status() -> Response:
    """Return the configuration and realized generations and the database connection."""
    http.caller()

    def read(view: ReadView) -> dict[str, object]:
        return {
            "config_generation": view.generation(),
            "realized_generation": view.realized_generation(),
        }

    body = http.store().read(read)
    body["database"] = "connected"
    return jsonify(body)
