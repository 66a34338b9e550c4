"""Where Loom's OVSDB schemas and OpenAPI document live, and their version checks.

The files themselves sit at the top of `schemas/` (they are data, reviewed as data); this
package finds them both in the source tree (editable installs, tests) and in a built wheel.
"""

from __future__ import annotations

from loom_schemas.cksum import SchemaInfo, compute_cksum, schema_info
from loom_schemas.paths import CONFIG_SCHEMA, OPENAPI_DOCUMENT, UNIVERSAL_SCHEMA, schema_path

__all__ = [
    "CONFIG_SCHEMA",
    "OPENAPI_DOCUMENT",
    "UNIVERSAL_SCHEMA",
    "SchemaInfo",
    "compute_cksum",
    "schema_info",
    "schema_path",
]
