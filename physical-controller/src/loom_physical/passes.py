"""A physical controller's passes: what each took, by phase (for the metrics and the pass
log), and the gate through which other threads look at the state between passes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from loom_common import metrics, procstat
from loom_common.passlog import PassLog
from loom_ddlog import allocator_memory

log = logging.getLogger(__name__)

T = TypeVar("T")

LONG_PASS = 0.5
"""Seconds after which a pass counts as long (logged; `heap.settle` follows)."""
LOGGED_PASS = 0.05
"""Seconds after which a pass that pushed nothing is written to the pass log all the same."""
HANDOFF = 0.05
"""Seconds the loop waits at most, after a pass's first pushes, for `PassGate.wait`
callers to look."""


class PassRecord:
    """The phases of the pass running (`timed`), and its record once done (`finish`)."""

    def __init__(self, name: str, pass_log: Path | None) -> None:
        self._name = name
        self._log = PassLog(pass_log) if pass_log is not None else None
        self.phases: dict[str, float] = {}
        """Seconds by phase of the pass running."""
        self.pushed = 0
        self.computed = False

    def begin(self) -> None:
        """A pass begins."""
        self.phases, self.pushed, self.computed = {}, 0, False

    def add(self, phase: str, seconds: float) -> None:
        """`seconds` more spent in `phase`."""
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def timed(self, phase: str, do: Callable[..., T], *args: Any) -> T:
        """`do(*args)`, its time added to `phase`."""
        began = time.perf_counter()
        try:
            return do(*args)
        finally:
            self.add(phase, time.perf_counter() - began)

    def finish(self, wall: float, took: float, *, nodes: int, masters: int,
               generation: int) -> None:  # fmt: skip
        """A pass that computed or pushed something, or took long, in the metrics and the
        pass log (idle passes are not)."""
        if took >= LONG_PASS:
            log.info("long pass %.1f s: %s", took, procstat.memory_text(allocator_memory()))
        if not (self.pushed or self.computed or took >= LOGGED_PASS):
            return
        metrics.observe_pass("physical", self._name, {**self.phases, "total": took}, generation)
        if self._log is not None:
            self._log.write(wall, took, self.phases, pushed=self.pushed, nodes=nodes,
                            masters=masters, generation=generation)  # fmt: skip


class PassGate:
    """The lock the loop holds while it changes what `wait` callers read, and the
    hand-off that lets them look between a pass's first pushes and the rest."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        """Held by the loop while it changes state (`wait`'s predicates run under it)."""
        self.passes = 0
        self._waiters = 0
        """Threads in `wait`."""
        self._looked = 0
        """Predicate evaluations since the last pass's first pushes."""

    def wait(self, predicate: Callable[[], bool], timeout: float, *,
             alive: Callable[[], bool], wake: Callable[[], None] | None) -> bool:  # fmt: skip
        """Wait until `predicate()` holds after a pass; False on timeout or once the loop
        is not `alive()`. With `wake`, each check asks for a pass."""
        deadline = time.monotonic() + timeout
        with self.lock:
            self._waiters += 1
            try:
                while not self._looked_at(predicate):
                    left = deadline - time.monotonic()
                    if left <= 0 or not alive():
                        return False
                    if wake is not None:
                        wake()
                    self.lock.wait(min(left, 0.5))
            finally:
                self._waiters -= 1
        return True

    def _looked_at(self, predicate: Callable[[], bool]) -> bool:
        """`predicate()`, counted as a look for `let_waiters_look` (lock held)."""
        try:
            return predicate()
        finally:
            self._looked += 1
            self.lock.notify_all()

    def first_pushes_done(self) -> None:
        """After a pass's first pushes (lock held), let the `wait` callers look before the
        loop takes the lock again for the rest: it would otherwise win the lock back at
        once, and they would see the pass only after the other nodes' pushes. Bounded by
        `HANDOFF`; nothing to do when nobody waits."""
        self._looked = 0
        self.lock.notify_all()
        deadline = time.monotonic() + HANDOFF
        while self._looked < self._waiters and (left := deadline - time.monotonic()) > 0:
            self.lock.wait(left)

    def passed(self) -> None:
        """A pass ended (or failed): count it, wake the waiters."""
        with self.lock:
            self.passes += 1
            self.lock.notify_all()
