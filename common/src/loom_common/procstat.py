"""A process's memory and CPU time as Linux's /proc says them (for pass logs and
benchmarks: every Loom process, and every process a benchmark starts, is measured the
same way).

    usage = ProcessUsage.of(pid)   # or ProcessUsage.of() for this process
    usage.rss_mib, usage.peak_mib, usage.cpu_seconds
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcessUsage:
    """One reading of a process's resources."""

    rss_mib: float
    """Resident memory now (VmRSS)."""
    peak_mib: float
    """The most resident memory it has had (VmHWM)."""
    cpu_seconds: float
    """User and system CPU time so far (its threads', not its children's)."""

    @classmethod
    def of(cls, pid: int | None = None) -> ProcessUsage:
        """Read process `pid` (None: this one).

        Raises:
            ProcessLookupError: there is no such process (any more).
        """
        where = Path(f"/proc/{pid if pid is not None else 'self'}")
        try:
            status = (where / "status").read_text()
            stat = (where / "stat").read_text()
        except FileNotFoundError as exc:
            raise ProcessLookupError(pid) from exc
        fields = {}
        for line in status.splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
        # the fields after the command's closing parenthesis: utime, stime are 14th, 15th
        after = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(after[11]) + int(after[12])) / TICKS
        return cls(fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0), cpu)


def rss_mib() -> float:
    """This process's resident memory now, MiB."""
    return ProcessUsage.of().rss_mib


def memory_text(native: tuple[int, int]) -> str:
    """This process's resident memory (now and at its peak) and the native allocator's
    share of it (`native`: the bytes it holds and the bytes of them in use,
    `loom_ddlog.allocator_memory` -- the rule engines' rows and arrangements), for a log
    line."""
    usage = ProcessUsage.of()
    held, used = native
    return (f"RSS {usage.rss_mib:.0f} MiB (peak {usage.peak_mib:.0f}), "
            f"native allocator {held / 2**20:.0f} MiB ({used / 2**20:.0f} in use)")  # fmt: skip
