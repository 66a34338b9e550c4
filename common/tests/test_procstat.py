"""A process's memory as /proc says it, and the log line that splits it."""

from __future__ import annotations

import re

from loom_common.procstat import ProcessUsage, memory_text


def test_memory_text_gives_the_process_and_the_native_allocator() -> None:
    """`memory_text` (the controllers' long-pass log line): this process's resident memory
    now and at its peak, as `ProcessUsage` reads it, and the native allocator's figures
    given, in MiB."""
    text = memory_text((512 * 2**20, 300 * 2**20))
    line = r"RSS (\d+) MiB \(peak (\d+)\), native allocator 512 MiB \(300 in use\)"
    found = re.fullmatch(line, text)
    assert found, text
    rss, peak = map(int, found.groups())
    usage = ProcessUsage.of()
    assert 0 < rss <= peak
    assert abs(rss - usage.rss_mib) < 64
    assert peak <= usage.peak_mib + 1
