"""Daemon supervision: start, readiness, stop reaps, kill -9, a daemon that never gets ready."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from loom_common.procs import Daemon, DaemonError, listens_on, pid_exists

SLEEPER = [sys.executable, "-c", "import time, sys; print('up', flush=True); time.sleep(600)"]
# Ignores SIGTERM, as a wedged daemon would; only SIGKILL stops it.
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(600)",
]


def _says_up(log: Path) -> bool:
    return log.exists() and "up" in log.read_text()


def test_start_ready_stop_reaps(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path)
    daemon.start(ready=lambda: _says_up(daemon.log_path), timeout=10)
    pid = daemon.pid
    assert pid is not None
    assert pid_exists(pid)
    assert daemon.log_path == tmp_path / "sleeper.log"
    assert daemon.pid_path.read_text() == f"{pid}\n"
    assert daemon.stop() == -15
    assert not daemon.running
    assert daemon.pid is None
    assert not pid_exists(pid)
    assert not daemon.pid_path.exists()


def test_stop_escalates_to_sigkill_after_grace(tmp_path: Path) -> None:
    daemon = Daemon("stubborn", STUBBORN, tmp_path)
    daemon.start(ready=lambda: _says_up(daemon.log_path), timeout=10)
    pid = daemon.pid
    assert pid is not None
    assert daemon.stop(grace=0.2) == -9
    assert not pid_exists(pid)


def test_kill9_reaps_and_leaves_pid_file_like_a_crash(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path).start()
    pid = daemon.pid
    assert pid is not None
    daemon.kill9()
    assert not daemon.running
    assert not pid_exists(pid)
    assert daemon.pid_path.read_text() == f"{pid}\n"
    assert daemon.stop() == -9
    assert not daemon.pid_path.exists()


def test_start_twice_is_refused(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path).start()
    try:
        with pytest.raises(DaemonError, match="already running"):
            daemon.start()
    finally:
        daemon.stop()


def test_never_ready_times_out_and_is_stopped(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path)
    with pytest.raises(DaemonError, match=r"sleeper: not ready after 0\.3s; see .*sleeper\.log"):
        daemon.start(ready=lambda: False, timeout=0.3)
    assert not daemon.running


def test_a_wait_for_ready_interrupted_stops_the_daemon(tmp_path: Path) -> None:
    """SIGTERM or Ctrl-C while a daemon gets ready (a benchmark stopped at that moment)
    leaves no process behind."""
    daemon = Daemon("sleeper", SLEEPER, tmp_path)

    def interrupted() -> bool:
        if _says_up(daemon.log_path):
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        daemon.start(ready=interrupted, timeout=10)
    assert not daemon.running


def test_timeout_follows_the_injected_clock(tmp_path: Path) -> None:
    """A fake clock and sleep: 30 s of polling pass without waiting 30 s."""
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    daemon = Daemon("sleeper", SLEEPER, tmp_path, clock=lambda: now[0], sleep=sleep)
    with pytest.raises(DaemonError, match=r"not ready after 30s"):
        daemon.start(ready=lambda: False, timeout=30)
    assert now[0] >= 30
    assert slept[0] == 0.01
    assert max(slept) == 0.2  # backoff is capped
    assert not daemon.running


def test_exit_before_ready_is_reported_with_log(tmp_path: Path) -> None:
    failing = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    daemon = Daemon("failing", failing, tmp_path)
    with pytest.raises(DaemonError, match=r"exited with 3 before it was ready(.|\n)*boom"):
        daemon.start(ready=lambda: False, timeout=30)


def test_listens_on_sees_only_the_owning_process(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert not listens_on(os.getpid(), port)  # bound, not yet listening
        sock.listen()
        assert listens_on(os.getpid(), port)
        other = Daemon("sleeper", SLEEPER, tmp_path).start()
        try:
            assert other.pid is not None
            assert not listens_on(other.pid, port)
        finally:
            other.stop()
    assert not listens_on(os.getpid(), port)


def test_start_without_waiting_then_wait_ready(tmp_path: Path) -> None:
    """Several daemons started together, each waited for after; a restart waits again."""
    daemon = Daemon("sleeper", SLEEPER, tmp_path)
    daemon.start(ready=lambda: _says_up(daemon.log_path), timeout=10, wait=False)
    try:
        assert daemon.running
        daemon.wait_ready()
        assert _says_up(daemon.log_path)
        first = daemon.pid
        daemon.restart()
        assert daemon.pid != first
    finally:
        daemon.stop()


def test_wait_ready_stops_a_daemon_that_never_gets_ready(tmp_path: Path) -> None:
    daemon = Daemon("sleeper", SLEEPER, tmp_path)
    daemon.start(ready=lambda: False, timeout=0.3, wait=False)
    pid = daemon.pid
    assert pid is not None
    with pytest.raises(DaemonError, match=r"not ready after 0\.3s"):
        daemon.wait_ready()
    assert not daemon.running
    assert not pid_exists(pid)
