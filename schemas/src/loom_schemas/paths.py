"""Paths of the schema files, in the source tree or inside an installed wheel."""

from __future__ import annotations

from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parents[2]
_WHEEL_DATA = Path(__file__).resolve().parent / "data"

CONFIG_SCHEMA = "loom_config.ovsschema"
UNIVERSAL_SCHEMA = "loom_universal.ovsschema"
OPENAPI_DOCUMENT = "api/openapi.json"


def schema_path(name: str) -> Path:
    """Return the path of schema file `name` (relative to `schemas/`).

    Args:
        name: a file name such as `CONFIG_SCHEMA` or `OPENAPI_DOCUMENT`.

    Returns:
        The source-tree file when it exists (editable installs), else the wheel's copy.

    Raises:
        FileNotFoundError: neither exists.
    """
    for candidate in (_SOURCE_ROOT / name, _WHEEL_DATA / Path(name).name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"schema file {name!r} not found under {_SOURCE_ROOT} or {_WHEEL_DATA}")
