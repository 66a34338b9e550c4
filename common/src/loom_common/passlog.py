"""A controller's pass log: one JSON line per pass that did something, appended to a file —
an operator's (and the benchmarks') view of where a controller's time goes, pass by pass.

    {"time": 1764000000.1, "seconds": 0.84, "phases": {"engine": 0.5, "write": 0.3},
     "generation": 4, "rss_mib": 812.5, ...}

`time` is the pass's wall-clock start, `seconds` its duration, `phases` its seconds by
phase (each controller names its own: see `loom_physical.controller` and
`loom_logical.controller`), then the controller's own fields and its resident memory.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from loom_common import procstat

log = logging.getLogger(__name__)


class PassLog:
    """Appends pass records to `path` (a file that cannot be written is logged, not fatal:
    a full disk must not stop a controller)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, began: float, seconds: float, phases: dict[str, float], **fields: Any) -> None:
        """Append one pass's line: its wall-clock start, duration and phases, `fields`."""
        record = {
            "time": round(began, 4), "seconds": round(seconds, 4),
            "phases": {k: round(v, 4) for k, v in phases.items()}, **fields,
            "rss_mib": round(procstat.rss_mib(), 1),
        }  # fmt: skip
        try:
            with self.path.open("a") as out:
                out.write(json.dumps(record) + "\n")
        except OSError as exc:
            log.warning("cannot write the pass log %s: %s", self.path, exc)
