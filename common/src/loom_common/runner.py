"""A controller's passes and its daemon's main thread: no exception ends a controller's
work silently.

Both controllers run their passes in a thread of their own (`run_passes`): a pass that
raises is logged and retried with backoff; when passes keep failing, the controller gives
up — it records why (`failure`) and leaves its ZooKeeper cluster at once
(`leave_cluster`), so that a standby takes over without waiting for a session to expire.
The process must not outlive that thread as a zombie that holds its membership and
realizes nothing: `run_until_stopped` exits non-zero, with the reason logged, as soon as the
controller has given up.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, Protocol

POLL = 0.5
"""Seconds between the main thread's looks at the controller."""


class Controller(Protocol):
    """What the main thread needs of a running controller."""

    @property
    def failure(self) -> str | None:
        """Why it gave up (None while it runs)."""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop it and close its connections."""


def run_passes(
    one_pass: Callable[[], None],
    *,
    stopped: threading.Event,
    retry_delays: Sequence[float],
    give_up: Callable[[str], None],
    recover: Callable[[], None] = lambda: None,
    what: str,
    log: logging.Logger,
) -> None:
    """Run `one_pass` until `stopped` is set. No exception ends the loop unseen: a failed
    pass is logged, then after `retry_delays[k]` (the k+1-th failure in a row) `recover()`
    runs and passes go on; one failure more than `retry_delays` has waits, or anything that
    would end the thread (a `BaseException`), calls `give_up(reason)` and ends it.

    Args:
        one_pass: one pass of the controller's work (it waits for work itself).
        stopped: set when the controller stops.
        retry_delays: seconds to wait after the 1st, 2nd, ... failed pass in a row.
        give_up: records why the controller cannot go on (and leaves its cluster).
        recover: makes the next pass start from a known state (an exception there is
            logged; the next pass tries anyway).
        what: the controller, in log lines ("physical controller").
        log: where to log.
    """
    failures = 0
    try:
        while not stopped.is_set():
            try:
                one_pass()
                failures = 0
            except Exception as exc:
                failures += 1
                log.exception("%s pass failed (%d in a row)", what, failures)
                if failures > len(retry_delays):
                    give_up(f"{failures} passes failed in a row, the last: {exc!r}")
                    return
                stopped.wait(retry_delays[failures - 1])
                try:
                    recover()
                except Exception:
                    log.exception("%s: recovering failed; the next pass tries anyway", what)
    except BaseException as exc:
        give_up(f"its loop ended: {exc!r}")
        raise


def leave_cluster(member: Any, log: logging.Logger) -> None:
    """Leave a controller cluster (a `loom_common.cluster.membership.Member`, or None when
    there is none) at once, so that a standby takes over now, not after the session times
    out; a failure to leave is logged (the session expires instead)."""
    if member is None:
        return
    try:
        member.stop()
    except Exception:
        log.exception("leaving the cluster failed (the session expires instead)")


def run_until_stopped(
    start: Callable[[], Controller],
    log: logging.Logger,
    *,
    install: Callable[[int, Callable[[int, FrameType | None], None]], object] = signal.signal,
    stopped: threading.Event | None = None,
) -> int:
    """Start a controller and run it until SIGTERM/SIGINT (exit code 0) or until it gives up
    (exit code 1, the reason logged); stop it either way.

    Args:
        start: builds and starts the controller (an exception there is logged: exit 1).
        log: the daemon's logger.
        install: `signal.signal`, or a stand-in for tests.
        stopped: set by the signal handler (tests pass their own, to stop the run).

    Returns:
        The process exit code.
    """
    stop = stopped or threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    install(signal.SIGTERM, on_signal)
    install(signal.SIGINT, on_signal)
    try:
        controller = start()
    except Exception as exc:
        log.exception("cannot start: %s", exc)
        return 1
    code = 0
    try:
        while not stop.wait(POLL):
            if controller.failure is not None:
                log.error("exiting: %s", controller.failure)
                code = 1
                break
    finally:
        controller.stop()
    return code
