"""A controller daemon's main thread: run until a signal, or until the controller gives up.

Both controllers run their work in a thread of their own and never let an exception end it
(`failure` says when they gave up instead). The process must not outlive that thread as a
zombie that holds its ZooKeeper membership and realizes nothing: `run_until_stopped` exits
non-zero, with the reason logged, as soon as the controller has given up.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Protocol

POLL = 0.5
"""Seconds between the main thread's looks at the controller."""


class Controller(Protocol):
    """What the main thread needs of a running controller."""

    @property
    def failure(self) -> str | None:
        """Why it gave up (None while it runs)."""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop it and close its connections."""


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
