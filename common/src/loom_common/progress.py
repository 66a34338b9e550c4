"""Progress of long work (`loom up`'s start-up, the benchmarks' set-up): on a terminal a
live status line (`rich`) and one line per finished step with its time; elsewhere (a log,
a pipe, CI) one plain line per step as it starts, and one when all is done.

    with Steps("loom up") as steps:
        steps.step("config DB")
        ...

`Reporter` is the same for work that reports milestones as it reaches them (the
benchmarks): on a terminal each with the time since the start, elsewhere a plain line.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

from rich.console import Console


class Steps:
    """Named steps one after another (see the module docstring)."""

    def __init__(self, title: str, stream: TextIO | None = None, *,
                 live: bool | None = None) -> None:  # fmt: skip
        """Args:
        title: what the steps make up (`loom up`).
        stream: where to write (default stderr).
        live: a live status line (default: when `stream` is a terminal).
        """
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.console = Console(file=self.stream, highlight=False)
        self._status: Any = None
        self._current: str | None = None
        self._began = self._step_began = time.monotonic()
        self.done: list[tuple[str, float]] = []
        """(step, seconds) of every finished step."""

    def __enter__(self) -> Steps:
        if self.live:
            self._status = self.console.status(f"{self.title}: starting")
            self._status.start()
        return self

    def step(self, text: str) -> None:
        """A new step begins (the one before it is done)."""
        self._finish()
        self._current, self._step_began = text, time.monotonic()
        if self._status is not None:
            self._status.update(f"{self.title}: {text}")
        else:
            print(f"{self.title}: {text}", file=self.stream, flush=True)

    def _finish(self) -> None:
        if self._current is None:
            return
        took = time.monotonic() - self._step_began
        self.done.append((self._current, took))
        if self._status is not None:
            self.console.print(f"[green]✓[/green] {self._current} ({took:.1f} s)")
        self._current = None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        failed = kind is not None
        if not failed:
            self._finish()
        if self._status is not None:
            self._status.stop()
        total = time.monotonic() - self._began
        if not failed:
            line = f"{self.title}: ready in {total:.1f} s"
            if self._status is not None:
                self.console.print(line)
            else:
                print(line, file=self.stream, flush=True)


class Reporter:
    """Milestones of a long run, as they are reached (see the module docstring)."""

    def __init__(self, prefix: str, stream: TextIO | None = None, *,
                 live: bool | None = None) -> None:  # fmt: skip
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.console = Console(file=self.stream, highlight=False)
        self.began = time.monotonic()

    def __call__(self, text: str) -> None:
        """Report one milestone."""
        if self.live:
            elapsed = time.monotonic() - self.began
            self.console.print(f"[dim]{elapsed:7.1f} s[/dim] [bold]{self.prefix}[/bold]: {text}")
        else:
            print(f"{self.prefix}: {text}", file=self.stream, flush=True)
