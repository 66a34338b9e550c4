"""The logical pipelines' stages and tables, as the logical controller's tests use them.

The contract itself is `loom_schemas.pipeline` (declared once, for both rule sets and the
Python that localizes); this module only names what the logical side's tests read of it.
"""

from __future__ import annotations

from collections.abc import Mapping

from loom_schemas.pipeline import EGRESS_BASE, INGRESS_BASE, PIPELINES, STAGES, next_table, table

TABLES: Mapping[str, int] = {name: stage.table for name, stage in STAGES.items()}
"""Stage name -> OpenFlow table."""

__all__ = ["EGRESS_BASE", "INGRESS_BASE", "PIPELINES", "TABLES", "next_table", "table"]
