"""How Loom's daemons log: `--log-format text` (the default: one readable line) or `json`
(one object per line, for a log pipeline), and `--verbose` for DEBUG.

A JSON line has `time` (UTC, ISO 8601 with milliseconds), `level`, `component` (the
daemon: `api`, `logical`, `physical`), `logger`, `message`, and the ids a call passed in
`extra` (`node`, `generation`, `tenant`, `controller`, ...: any field of `IDS`), and, for
an exception, `exception` (its traceback).

    {"time": "2026-11-28T02:05:00.123Z", "level": "INFO", "component": "api",
     "logger": "loom.audit", "message": "admin POST /api/v1/logical-switches -> 201, ..."}

python-ovs mirrors each of its lines to three loggers (`console`, `file`, `syslog`); only
`console` is kept, so no line is logged twice. It also formats each line itself (its own
time, sequence number, module and level, `|`-separated) before handing it to `logging`; its
pattern is cut to the module and the message, which `OvsLines` makes the record's logger
(`ovs.reconnect`) and message, so its lines are formatted once, as every other line is.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
from typing import Any

IDS = ("node", "generation", "tenant", "controller", "shard", "object", "peer")
"""Record attributes (from `extra=`) a JSON line carries when a call sets them."""

FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON object."""
        when = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        line: dict[str, Any] = {
            "time": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "component": self.component,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in IDS:
            value = record.__dict__.get(key)
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


OVS_PATTERN = "%c|%m"
"""python-ovs's console pattern here: its module, then the message (see `OvsLines`)."""


class OvsLines(logging.Filter):
    """Make a python-ovs line (`OVS_PATTERN`) an ordinary record: logger `ovs.MODULE`, the
    message alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; keep it."""
        module, sep, message = record.getMessage().partition("|")
        if sep:
            record.name, record.msg, record.args = f"ovs.{module.strip()}", message.strip(), ()
        return True


def _plain_ovs_lines() -> None:
    """python-ovs's lines as `OvsLines` reads them (nothing to do without python-ovs)."""
    try:
        from ovs.vlog import Vlog  # (optional: not every daemon has python-ovs)
    except ImportError:
        return
    Vlog.set_pattern("console", OVS_PATTERN)
    console = logging.getLogger("console")
    if not any(isinstance(f, OvsLines) for f in console.filters):
        console.addFilter(OvsLines())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A daemon's `--log-format` and `--verbose`."""
    parser.add_argument("--log-format", choices=FORMATS, default="text",
                        help="text lines (default) or one JSON object per line")  # fmt: skip
    parser.add_argument("--verbose", action="store_true", help="log at DEBUG")


def setup(component: str, log_format: str = "text", *, verbose: bool = False) -> None:
    """Configure the root logger of daemon `component` (on stderr)."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter(component))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for duplicate in ("file", "syslog"):  # python-ovs's vlog mirrors each line to these
        logging.getLogger(duplicate).disabled = True
    _plain_ovs_lines()


def setup_from_arguments(component: str, args: argparse.Namespace) -> None:
    """`setup` as `add_arguments`' options say."""
    setup(component, args.log_format, verbose=args.verbose)
