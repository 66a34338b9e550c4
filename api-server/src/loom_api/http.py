"""Request and response plumbing shared by the views: JSON bodies, queries, callers, generations."""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

from flask import Response, current_app, g, jsonify, request
from pydantic import BaseModel
from werkzeug.exceptions import RequestEntityTooLarge

from loom_api import errors
from loom_api.auth import Tokens, bearer
from loom_api.limits import Limits, parse_json
from loom_api.service.crud import Caller, Written, etag
from loom_api.store import Store

GENERATION_HEADER = "X-Loom-Config-Generation"
WAIT_HEADER = "X-Loom-Wait-For-Realization"
REALIZED_HEADER = "X-Loom-Realized"
REALIZED_GENERATION_HEADER = "X-Loom-Realized-Generation"
#: The longest a request may ask to wait for realization.
MAX_WAIT_SECONDS = 300.0


def store() -> Store:
    """Return the app's config store."""
    result: Store = current_app.extensions["loom.store"]
    return result


def caller() -> Caller:
    """Return (once per request) who is calling; raises Unauthenticated."""
    if "loom_caller" not in g:
        tokens: Tokens = current_app.extensions["loom.tokens"]
        token = bearer(request.headers.get("Authorization"), request.headers.get("X-Auth-Token"))
        g.loom_caller = tokens.caller(token)
    result: Caller = g.loom_caller
    return result


def limits() -> Limits:
    """Return the app's request limits."""
    result: Limits = current_app.extensions["loom.limits"]
    return result


def json_body() -> Any:
    """Return the request's JSON body, held to the app's limits.

    Raises:
        errors.UnsupportedMediaType: a body of another declared type.
        errors.BodyTooLarge: a body longer than the limit (not read past it).
        errors.MalformedJson: a body that is not JSON.
        errors.JsonTooDeep: a body nested deeper than the limit.
        errors.ValidationFailed: a NUL character in a key or string.
    """
    mimetype = request.mimetype
    if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
        raise errors.UnsupportedMediaType()
    bounds = limits()
    try:
        raw = request.get_data(cache=False)
    except RequestEntityTooLarge:  # a chunked body past MAX_CONTENT_LENGTH
        raise errors.BodyTooLarge(limit=bounds.max_body_bytes) from None
    return parse_json(raw, bounds.max_json_depth)


def check_query(allowed: Collection[str] = ()) -> None:
    """Refuse query parameters the route does not take, and parameters given twice.

    Raises:
        errors.UnknownParameter: naming the first such parameter.
    """
    for name in request.args:
        if name not in allowed:
            takes = ", ".join(sorted(allowed)) if allowed else "none"
            raise errors.UnknownParameter(
                field=name, detail=f"unknown query parameter {name!r} (this path takes {takes})"
            )
        if len(request.args.getlist(name)) > 1:
            raise errors.UnknownParameter(
                field=name, detail=f"query parameter {name!r} is given more than once"
            )


def parameters(model: type[BaseModel]) -> tuple[str, ...]:
    """Return the query parameters a route's query model describes (the OpenAPI document's)."""
    return tuple(field.alias or name for name, field in model.model_fields.items())


def wait_seconds() -> float | None:
    """Return the realization wait the client asked for, or None."""
    raw = request.headers.get(WAIT_HEADER)
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        raise errors.ValidationFailed(
            field=WAIT_HEADER, detail=f"{WAIT_HEADER} must be a number of seconds"
        ) from None
    if not 0 <= seconds <= MAX_WAIT_SECONDS:
        raise errors.ValidationFailed(
            field=WAIT_HEADER, detail=f"{WAIT_HEADER} must be 0..{MAX_WAIT_SECONDS:g}"
        )
    return seconds


def written(result: Written, status: int, *, location: str | None = None) -> Response:
    """Return the response to a change: body, generation, ETag, and realization if asked."""
    response = jsonify(result.item) if result.item is not None else Response(status=204)
    response.status_code = status if result.item is not None else 204
    response.headers[GENERATION_HEADER] = str(result.generation)
    if result.item is not None and "revision" in result.item:
        response.headers["ETag"] = f'"{result.item["revision"]}"'
    if location is not None:
        response.headers["Location"] = location
    seconds = wait_seconds()
    if seconds is not None:
        waits: threading.BoundedSemaphore = current_app.extensions["loom.waits"]
        if waits.acquire(blocking=False):
            try:
                realized = store().wait_realized(result.generation, seconds)
            finally:
                waits.release()
        else:  # every wait is taken (`Limits.max_waits`): answered at once, as a 0 s wait
            realized = store().wait_realized(result.generation, 0.0)
        response.headers[REALIZED_GENERATION_HEADER] = str(realized)
        response.headers[REALIZED_HEADER] = "true" if realized >= result.generation else "false"
    return response


def item(body: dict[str, Any]) -> Response:
    """Return one object with its ETag."""
    response = jsonify(body)
    if "revision" in body:
        response.headers["ETag"] = f'"{body["revision"]}"'
    return response


__all__ = ["etag"]
