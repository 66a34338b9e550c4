"""Loom's REST API for cloud managers: the native API and a Neutron v2.0-compatible API.

`create_app` builds the Flask app around a `Store` (the config DB replica). Views are thin
blueprints; validation and database changes live in `loom_api.service`, which imports no
Flask; errors are `loom_api.errors.LoomApiError`s rendered as JSON by one handler (in
Neutron's form under `/v2.0`). Every request is held to `loom_api.limits.Limits`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from loom_api import errors
from loom_api.auth import Tokens
from loom_api.limits import Limits
from loom_api.store import Store

LOG = logging.getLogger(__name__)

API_PREFIX = "/api/v1"


def create_app(store: Store, tokens: Tokens, config: Mapping[str, Any] | None = None) -> Flask:
    """Build the API app.

    Args:
        store: a started `Store` on the config DB (the app never starts or stops it).
        tokens: the admin and tenant tokens.
        config: extra Flask configuration; `LOOM_NEUTRON_AUTH` chooses the Neutron API's
            authentication, "token" (the default) or "noauth"; `LOOM_MAX_BODY_BYTES`,
            `LOOM_MAX_JSON_DEPTH` and `LOOM_MAX_BULK_ITEMS` set the request limits
            (`loom_api.limits`, 1 MiB, 32 and 500 by default).

    Returns:
        The WSGI app.

    Raises:
        ValueError: an unknown `LOOM_NEUTRON_AUTH`, or a limit out of range.
    """
    from loom_api import metrics
    from loom_api.views import flows, native, neutron, openapi, settings, status, trace, ui

    app = Flask(__name__)
    app.config.update(config or {})
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["loom.store"] = store
    app.extensions["loom.tokens"] = tokens
    limits = Limits.from_config(app.config)
    app.extensions["loom.limits"] = limits
    app.extensions["loom.waits"] = threading.BoundedSemaphore(limits.max_waits)
    # Refused on Content-Length before the body is read, and on a chunked body once it passes
    # the limit (waitress refuses first; this holds under any WSGI server).
    app.config["MAX_CONTENT_LENGTH"] = limits.max_body_bytes
    app.register_blueprint(status.bp, url_prefix=API_PREFIX)
    app.register_blueprint(openapi.bp, url_prefix=API_PREFIX)
    app.register_blueprint(native.bp, url_prefix=API_PREFIX)
    app.register_blueprint(flows.bp, url_prefix=API_PREFIX)
    app.register_blueprint(trace.bp, url_prefix=API_PREFIX)
    app.register_blueprint(settings.bp, url_prefix=API_PREFIX)
    if app.config.setdefault(neutron.AUTH_CONFIG, "token") not in neutron.AUTH_STRATEGIES:
        raise ValueError(f"{neutron.AUTH_CONFIG} must be one of {neutron.AUTH_STRATEGIES}")
    app.register_blueprint(neutron.bp)  # GET / and /v2.0; its errors are Neutron's
    metrics.install(app)
    app.register_blueprint(ui.bp)

    @app.before_request
    def refuse_long_body() -> None:
        # Whatever the method and whether or not the view reads the body.
        length = request.content_length
        if length is not None and length > limits.max_body_bytes:
            raise errors.BodyTooLarge(limit=limits.max_body_bytes)

    @app.errorhandler(errors.LoomApiError)
    def api_error(exc: errors.LoomApiError) -> tuple[Response, int]:
        if neutron.is_neutron_path(request.path):  # raised before the blueprint's handler
            return neutron.render_error(exc)
        response = jsonify(exc.to_dict())
        response.headers.update(exc.headers())
        return response, exc.status

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        if exc.code == 413:
            return api_error(errors.BodyTooLarge(limit=limits.max_body_bytes))
        if neutron.is_neutron_path(request.path):
            response, status = neutron.render_http_error(exc)
        else:
            code = (exc.name or "error").lower().replace(" ", "_")
            body = {"error": code, "message": exc.description, "field": None}
            response, status = jsonify(body), exc.code or 500
        for name, value in exc.get_headers():  # a 405's Allow
            if name.lower() != "content-type":
                response.headers[name] = value
        return response, status

    return app
