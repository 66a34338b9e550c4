"""Loom's REST API for cloud managers: the native API and a Neutron v2.0-compatible API.

`create_app` builds the Flask app around a `Store` (the config DB replica). Views are thin
blueprints; validation and database changes live in `loom_api.service`, which imports no
Flask; errors are `loom_api.errors.LoomApiError`s rendered as JSON by one handler.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from loom_api import errors
from loom_api.auth import Tokens
from loom_api.store import Store

LOG = logging.getLogger(__name__)

API_PREFIX = "/api/v1"


def create_app(store: Store, tokens: Tokens, config: Mapping[str, Any] | None = None) -> Flask:
    """Build the API app.

    Args:
        store: a started `Store` on the config DB (the app never starts or stops it).
        tokens: the admin and tenant tokens.
        config: extra Flask configuration (tests); `LOOM_NEUTRON_AUTH` chooses the Neutron
            API's authentication, "token" (the default) or "noauth".

    Returns:
        The WSGI app.

    Raises:
        ValueError: an unknown `LOOM_NEUTRON_AUTH`.
    """
    from loom_api.views import native, neutron, openapi, status

    app = Flask(__name__)
    app.config.update(config or {})
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["loom.store"] = store
    app.extensions["loom.tokens"] = tokens
    app.register_blueprint(status.bp, url_prefix=API_PREFIX)
    app.register_blueprint(openapi.bp, url_prefix=API_PREFIX)
    app.register_blueprint(native.bp, url_prefix=API_PREFIX)
    if app.config.setdefault(neutron.AUTH_CONFIG, "token") not in neutron.AUTH_STRATEGIES:
        raise ValueError(f"{neutron.AUTH_CONFIG} must be one of {neutron.AUTH_STRATEGIES}")
    app.register_blueprint(neutron.bp)  # GET / and /v2.0; its errors are Neutron's

    @app.errorhandler(errors.LoomApiError)
    def api_error(exc: errors.LoomApiError) -> tuple[Response, int]:
        return jsonify(exc.to_dict()), exc.status

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        if neutron.is_neutron_path(request.path):
            return neutron.render_http_error(exc)
        code = (exc.name or "error").lower().replace(" ", "_")
        status = exc.code or 500
        return jsonify({"error": code, "message": exc.description, "field": None}), status

    return app
