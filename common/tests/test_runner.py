"""`run_until_stopped`: the exit code follows the controller (a stand-in), and the controller
is stopped whatever happens."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import FrameType

import pytest

from loom_common.runner import run_passes, run_until_stopped

log = logging.getLogger("test-runner")


class FakeController:
    def __init__(self) -> None:
        self.failure: str | None = None
        self.stopped = 0

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped += 1


Handlers = dict[int, Callable[[int, FrameType | None], None]]


def _install(handlers: Handlers) -> Callable[[int, Callable[[int, FrameType | None], None]], None]:
    def install(signum: int, handler: Callable[[int, FrameType | None], None]) -> None:
        handlers[signum] = handler

    return install


def test_a_signal_stops_the_controller_with_exit_code_0() -> None:
    controller = FakeController()
    handlers: Handlers = {}
    stopped = threading.Event()
    timer = threading.Timer(0.1, lambda: handlers[15](15, None))  # SIGTERM, from "outside"
    timer.start()
    try:
        code = run_until_stopped(lambda: controller, log, install=_install(handlers),
                                 stopped=stopped)  # fmt: skip
    finally:
        timer.cancel()
    assert code == 0
    assert controller.stopped == 1
    assert stopped.is_set()


def test_a_controller_that_gives_up_ends_the_process_with_exit_code_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller = FakeController()
    controller.failure = "5 passes failed in a row"
    handlers: Handlers = {}
    code = run_until_stopped(lambda: controller, log, install=_install(handlers))
    assert code == 1
    assert controller.stopped == 1
    assert "exiting: 5 passes failed in a row" in caplog.text
    assert set(handlers) == {2, 15}


def test_a_controller_that_cannot_start_gives_exit_code_1(caplog: pytest.LogCaptureFixture) -> None:
    def start() -> FakeController:
        raise OSError("address in use")

    assert run_until_stopped(start, log, install=_install({})) == 1
    assert "cannot start: address in use" in caplog.text


def test_passes_retry_with_backoff_then_give_up() -> None:
    calls: list[str] = []
    waits: list[float] = []
    reasons: list[str] = []

    class Stopped(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return False

    def one_pass() -> None:
        calls.append("pass")
        passes = calls.count("pass")
        if passes != 2:  # the second pass works: the count of failures starts again
            raise RuntimeError(f"pass {passes}")

    run_passes(one_pass, stopped=Stopped(), retry_delays=(0.1, 0.2), give_up=reasons.append,
               recover=lambda: calls.append("recover"), what="test", log=log)  # fmt: skip
    assert calls == ["pass", "recover", "pass", "pass", "recover", "pass", "recover", "pass"]
    assert waits == [0.1, 0.1, 0.2]
    assert reasons == ["3 passes failed in a row, the last: RuntimeError('pass 5')"]
