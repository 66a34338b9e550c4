"""Serves the committed OpenAPI document (`schemas/api/openapi.json`)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from flask import Blueprint, Response, jsonify

from loom_schemas import OPENAPI_DOCUMENT, schema_path

bp = Blueprint("openapi", __name__)


@cache
def document() -> dict[str, Any]:
    """Return the OpenAPI document (read once)."""
    result: dict[str, Any] = json.loads(schema_path(OPENAPI_DOCUMENT).read_text())
    return result


@bp.get("/openapi.json")
def openapi() -> Response:
    """Return the OpenAPI 3 document of the native API (no auth)."""
    return jsonify(document())
