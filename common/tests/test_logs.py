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
