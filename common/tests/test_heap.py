"""`loom_common.heap`: what `settle` does besides freezing."""

from __future__ import annotations

import gc
import threading

from loom_common import heap, procstat


def test_trim_gives_back_what_a_thread_freed_amid_live_memory() -> None:
    """Chunks freed below a live one stay resident in the thread's malloc arena until
    `trim` (what a controller's pass thread leaves after a cold start)."""
    held: list[bytes] = []

    def churn() -> None:
        chunks = [bytes(2000) + bytes([i % 256]) for i in range(100_000)]  # ~200 MB
        held.append(chunks[-1])  # the arena's top stays in use: no automatic trim

    worker = threading.Thread(target=churn)
    worker.start()
    worker.join()
    before = procstat.rss_mib()
    assert heap.trim()
    after = procstat.rss_mib()
    assert before - after > 100, (before, after)
    assert held


def test_settle_freezes_what_is_alive() -> None:
    alive: list[list[int]] = [[] for _ in range(1000)]  # (lists: the collector tracks them)
    assert all(gc.is_tracked(one) for one in alive)
    before = gc.get_freeze_count()
    try:
        heap.settle()
        assert gc.get_freeze_count() >= before + len(alive)
    finally:
        gc.unfreeze()
