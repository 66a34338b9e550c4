"""Keeping CPython's cyclic garbage collector from stalling a controller.

A controller holds millions of long-lived objects (each node's flow table, the engine's
inputs, the replicas' rows). A full (generation 2) collection walks every one of them with
the GIL held, and every thread of the process (pushes, OVSDB replies) waits meanwhile.

`settle()` moves every object alive out of the collector's sight (`gc.freeze`, which costs
no traversal): they are still freed by reference counting when dropped; only a reference
cycle among them would outlive its use, and the controllers' long-lived state holds none to
speak of. A controller settles after a pass that loaded a bulk of state (a cold start, a
node's whole table), so that later collections walk only what changed since. On
`loom-physical-bench` a full collection during the port changes, walking a cold start's
objects, was the slowest change.

`settle()` also gives back to the system the memory C's allocator holds free (glibc's
`malloc_trim`, where there is one): objects over 512 bytes (big strings, dicts' tables) come
from malloc, not Python's own allocator, and a long pass frees many of them: a cold start's
JSON and transaction texts, the parsed rows once packed. glibc keeps freed chunks amid live
ones resident, in every thread's arena (a physical controller's work runs on its own
thread, its pushes on sixteen more), until trimmed; after a cold start each controller gives
back a part of its RSS so.

`GcWatch` times the collector's passes (`gc.callbacks`), logs the long ones, and keeps the
figures benchmarks report.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

LONG_PAUSE = 0.1
"""A collection longer than this (seconds) is logged."""


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


_TRIM = _malloc_trim()


def settle() -> None:
    """Take every object alive out of the cyclic collector's sight, and give the memory
    malloc holds free back to the system (see the module doc)."""
    gc.freeze()
    trim()


def trim() -> bool:
    """Give back the memory the C allocator holds free (`malloc_trim`); False where it
    cannot (no glibc)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


@dataclass
class GcWatch:
    """Times the collector's passes while installed (`start`/`stop`, or `with`)."""

    pauses: list[tuple[float, int, float]] = field(default_factory=list)
    """(when it began, perf_counter; generation; seconds) of each collection over
    `LONG_PAUSE`, in order."""
    collections: int = 0
    total: float = 0.0
    longest: float = 0.0
    _began: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._began = now
            return
        took = now - self._began
        with self._lock:
            self.collections += 1
            self.total += took
            self.longest = max(self.longest, took)
            if took > LONG_PAUSE:
                self.pauses.append((self._began, info["generation"], took))
                log.warning("garbage collection (generation %d) held the process %.0f ms",
                            info["generation"], took * 1000)  # fmt: skip

    def start(self) -> GcWatch:
        """Begin timing collections."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        """Stop timing collections."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def __enter__(self) -> GcWatch:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def figures(self) -> dict[str, float]:
        """Collections, their total and longest time (ms), and how many were long."""
        return {"collections": self.collections, "total_ms": round(self.total * 1000, 1),
                "longest_ms": round(self.longest * 1000, 1), "long": len(self.pauses)}  # fmt: skip
