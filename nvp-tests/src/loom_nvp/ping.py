"""A running ping between two VMs, and which of its echoes got no reply.

`ping -i INTERVAL` runs inside the source VM's namespace for as long as a fault lasts; each
reply line names its `icmp_seq`. Stopped after the last reply it waits for, the echoes lost
are the sequence numbers from the first answered (before it, the VMs' ARP and the path's
first upcalls are the set-up's, not a fault's) up to the last answered that got no reply
(an echo sent just before the stop is not counted: its reply may still be on its way).
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time

from loom_ovs.sandbox import Vif

_SEQ = re.compile(r"icmp_seq=(\d+)")


class Pinger:
    """See the module docstring."""

    def __init__(self, src: Vif, dst_ip: str, interval: float = 0.05) -> None:
        assert src.netns is not None, "pinging needs VMs in namespaces (the netdev datapath)"
        self.command = ["ip", "netns", "exec", src.netns, "ping", "-n", "-i", str(interval),
                        dst_ip]  # fmt: skip
        self.replied: set[int] = set()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> Pinger:
        """Start pinging."""
        self._proc = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            m = _SEQ.search(line)
            if m is not None and "bytes from" in line:
                self.replied.add(int(m.group(1)))

    def wait_replies(self, count: int, timeout: float) -> None:
        """Wait until `count` echoes were answered (the path works before a fault)."""
        deadline = time.monotonic() + timeout
        while len(self.replied) < count:
            assert time.monotonic() < deadline, f"{len(self.replied)} of {count} echoes answered"
            time.sleep(0.02)

    def stop(self) -> tuple[int, list[int]]:
        """Stop pinging; (echoes counted, sequence numbers of those lost) from the first
        answered to the last."""
        proc = self._proc
        assert proc is not None
        assert self._reader is not None
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._reader.join(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        if not self.replied:
            return 0, []
        first, last = min(self.replied), max(self.replied)
        return last - first + 1, sorted(set(range(first, last + 1)) - self.replied)
