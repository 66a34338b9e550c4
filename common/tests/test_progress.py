"""Progress of long work: plain lines off a terminal, a live line and timed steps on one."""

from __future__ import annotations

import io

import pytest

from loom_common.progress import Steps


def test_off_a_terminal_each_step_is_a_line_and_the_end_one_more() -> None:
    out = io.StringIO()
    with Steps("loom up", out) as steps:
        steps.step("the config DB")
        steps.step("ZooKeeper")
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["loom up: the config DB", "loom up: ZooKeeper"]
    assert lines[2].startswith("loom up: ready in ")
    assert [name for name, _ in steps.done] == ["the config DB", "ZooKeeper"]


def test_on_a_terminal_each_finished_step_is_ticked_with_its_time() -> None:
    out = io.StringIO()
    with Steps("loom up", out, live=True) as steps:
        steps.step("the config DB")
        steps.step("ZooKeeper")
    text = out.getvalue()
    assert "✓ the config DB (" in text
    assert "✓ ZooKeeper (" in text
    assert "loom up: ready in " in text


def test_a_failed_step_is_not_ticked_nor_called_ready() -> None:
    out = io.StringIO()
    steps = Steps("loom up", out)

    def fail() -> None:
        with steps:
            steps.step("the API server")
            raise RuntimeError("port taken")

    with pytest.raises(RuntimeError):
        fail()
    assert "ready" not in out.getvalue()
    assert steps.done == []
