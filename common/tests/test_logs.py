"""Daemons' JSON logs: one object per line, with the ids a call passes."""

from __future__ import annotations

import json
import logging

import pytest

from loom_common import logs


def test_a_record_is_one_json_object_with_its_ids(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logs.setup("physical", "json")
    try:
        log = logging.getLogger("loom_physical.controller")
        log.info("node %s pushed", "hv1", extra={"node": "hv1", "generation": 7})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("pass failed")
        logging.getLogger("file").info("python-ovs's mirror: dropped")
    finally:  # (pytest's own handlers back)
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert len(lines) == 2, lines
    first, second = lines
    assert first["time"].endswith("Z")
    assert {k: first[k] for k in ("level", "component", "logger", "message", "node",
                                  "generation")} == {
        "level": "INFO", "component": "physical", "logger": "loom_physical.controller",
        "message": "node hv1 pushed", "node": "hv1", "generation": 7,
    }  # fmt: skip
    assert second["level"] == "ERROR"
    assert "ValueError: boom" in second["exception"]


def test_a_python_ovs_line_is_formatted_once(capsys: pytest.CaptureFixture[str]) -> None:
    """python-ovs formats its own lines (time, number, module, level) before `logging`
    does: in a JSON log its line is a record of logger `ovs.MODULE` with the bare message."""
    import ovs.reconnect
    import ovs.vlog

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logs.setup("api", "json")
    ovs.vlog.Vlog.init(None)
    console = logging.getLogger("console")
    console_handlers = list(console.handlers)
    for handler in console_handlers:  # (vlog's own stderr handler, as the API's store does)
        console.removeHandler(handler)
    try:
        ovs.reconnect.vlog.info("tcp:127.0.0.1:6641: connected | at last")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for handler in console_handlers:
            console.addHandler(handler)
    (line,) = [json.loads(text) for text in capsys.readouterr().err.splitlines()]
    assert line["logger"] == "ovs.reconnect"
    assert line["message"] == "tcp:127.0.0.1:6641: connected | at last"
    assert line["level"] == "INFO"
