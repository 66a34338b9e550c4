"""Whether the universal DB equals what a fresh start computes from the configuration.

After a fault, the universal DB the controllers kept writing must hold what a logical
controller started from nothing would compute from the configuration as it now is: no row
lost, duplicated or stale. `compare` starts such a controller (in this process, with no
ZooKeeper: it owns every shard) against the site's config DB and a scratch universal DB,
waits until it has written `generation`, and compares every row of the tables the logical
tier owns, without their uuids and without the columns physical controllers write
(`Port_Binding.chassis` and `up`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loom_common.ovsdb import OvsdbServer, RawConnection
from loom_logical.controller import LogicalController
from loom_schemas import UNIVERSAL_SCHEMA, schema_path

TABLES = ("Datapath", "Universal_Flow", "Port_Binding", "Replication_Set", "Tunnel",
          "Node_Endpoint", "Gateway_Assignment", "Warning")  # fmt: skip
"""The universal DB's tables the logical controllers write whole."""
SKIPPED = {"_uuid", "_version", "chassis", "up"}
"""Columns not compared: row identities, and what physical controllers write."""


def rows(remote: str) -> dict[str, list[str]]:
    """Every row of `TABLES`, as sorted canonical texts, by table."""
    conn = RawConnection(remote)
    try:
        results = conn.transact("Loom_Universal", [
            {"op": "select", "table": table, "where": []} for table in TABLES])  # fmt: skip
    finally:
        conn.close()
    return {table: sorted(_canonical(row) for row in result["rows"])
            for table, result in zip(TABLES, results, strict=True)}  # fmt: skip


def _canonical(row: dict[str, Any]) -> str:
    return repr(sorted((k, _value(v)) for k, v in row.items() if k not in SKIPPED))


def _value(value: Any) -> Any:
    if isinstance(value, list) and value and value[0] == "set":
        return ("set", tuple(sorted(map(repr, value[1]))))
    if isinstance(value, list) and value and value[0] == "map":
        return ("map", tuple(sorted(map(repr, value[1]))))
    return repr(value)


def compare(config_remote: str, universal_remote: str, generation: int,
            scratch: Path, timeout: float = 120.0) -> dict[str, Any]:  # fmt: skip
    """Compute the configuration afresh; what differs from `universal_remote` (see the
    module docstring): {"equal": bool, "differences": {table: (only here, only fresh)}}."""
    server = OvsdbServer(scratch, schema_path(UNIVERSAL_SCHEMA), name="fresh")
    server.start()
    try:
        controller = LogicalController(config_remote, server.remote, name="fresh").start()
        try:
            written = controller.wait_generation(generation, timeout)
            assert written >= generation, f"the fresh controller wrote {written} < {generation}"
        finally:
            controller.stop()
        fresh, kept = rows(server.remote), rows(universal_remote)
    finally:
        server.stop()
    differences = {}
    for table in TABLES:
        here, there = set(kept[table]), set(fresh[table])
        if here != there or len(kept[table]) != len(fresh[table]):
            differences[table] = (len(here - there), len(there - here))
    return {"equal": not differences, "differences": differences}
