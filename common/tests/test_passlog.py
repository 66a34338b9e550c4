"""`loom_common.passlog`: one JSON line a pass; a file that cannot be written is logged."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from loom_common.passlog import PassLog


def test_each_pass_is_one_line_with_its_phases_and_fields(tmp_path: Path) -> None:
    log = PassLog(tmp_path / "passes.jsonl")
    log.write(1764000000.12345, 0.012345, {"engine": 0.0071234, "write": 0.00049}, generation=4)
    log.write(1764000001.0, 0.5, {"engine": 0.25}, pushed=3, generation=5)
    first, second = (json.loads(line) for line in log.path.read_text().splitlines())
    assert first["time"] == 1764000000.1235
    assert first["seconds"] == 0.0123
    assert first["phases"] == {"engine": 0.0071, "write": 0.0005}
    assert first["generation"] == 4
    assert first["rss_mib"] > 0  # (this process's)
    assert (second["pushed"], second["generation"]) == (3, 5)


def test_a_file_that_cannot_be_written_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = PassLog(tmp_path / "missing-dir" / "passes.jsonl")
    with caplog.at_level(logging.WARNING, logger="loom_common.passlog"):
        log.write(0.0, 0.1, {"engine": 0.1})
    assert "cannot write the pass log" in caplog.text
