"""Daemon supervision: start, readiness, stop reaps, kill -9, a daemon that never gets ready."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loom_common.procs import Daemon, DaemonError

SLEEPER = [sys.executable, "-c", "import time, sys; print('up', flush=True); time.sleep(600)"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_ready_stop_reaps(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path)
    log = tmp_path / "sleeper.log"
    daemon.start(ready=lambda: log.exists() and "up" in log.read_text(), timeout=10)
    pid = daemon.pid
    assert pid is not None
    assert _alive(pid)
    assert daemon.stop() == -15
    assert not daemon.running
    assert not _alive(pid)


def test_kill9(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path).start()
    pid = daemon.pid
    assert pid is not None
    daemon.kill9()
    assert not _alive(pid)
    assert daemon.stop() == -9


def test_never_ready_times_out_and_is_stopped(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path)
    with pytest.raises(DaemonError, match=r"not ready after 0\.3s"):
        daemon.start(ready=lambda: False, timeout=0.3)
    assert not daemon.running


def test_exit_before_ready_is_reported_with_log(tmp_path: Path) -> None:
    failing = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    daemon = Daemon("failing", failing, tmp_path)
    with pytest.raises(DaemonError, match=r"exited with 3 before it was ready(.|\n)*boom"):
        daemon.start(ready=lambda: False, timeout=30)
