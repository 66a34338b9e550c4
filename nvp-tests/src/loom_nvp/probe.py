"""Pings between many VMs in rounds, from one process: who reached whom, and when.

NVP judged its controller by the share of pings between VMs that had the expected outcome
over time. `Prober` sends, every `period` seconds, one ICMP echo for each (source,
destination) pair from the source VM's network namespace and notes the pairs answered
within `timeout`: a round. It needs no process per VM: a raw ICMP socket is opened inside
each source VM's namespace (the opening thread enters the namespace with `setns(2)` and
leaves it; a socket keeps the namespace it was made in), and one thread sends and receives
on all of them. Each echo carries the pair's index as its ICMP id and the round as its
sequence number, so a late reply is never counted for a later round. Root only (raw
sockets, `setns`).
"""

from __future__ import annotations

import contextlib
import ctypes
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the block in network namespace `name` (this thread only), then come back."""
    with open("/proc/thread-self/ns/net", "rb") as home, open(NETNS_DIR / name, "rb") as ns:
        if _libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
        try:
            yield
        finally:
            if _libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int) -> bytes:
    """An ICMP echo request with `ident` and `seq` (and a fixed payload)."""
    payload = b"loom-nvp-probe!!"
    head = struct.pack("!BBHHH", 8, 0, 0, ident & 0xFFFF, seq & 0xFFFF)
    return struct.pack("!BBHHH", 8, 0, _checksum(head + payload), ident & 0xFFFF,
                       seq & 0xFFFF) + payload  # fmt: skip


def parse_reply(packet: bytes) -> tuple[int, int] | None:
    """(ident, seq) of an ICMP echo reply in an IPv4 packet (a raw socket's read), else
    None."""
    if len(packet) < 20:
        return None
    header = (packet[0] & 0x0F) * 4
    if len(packet) < header + 8 or packet[header] != 0:  # type 0: echo reply
        return None
    ident, seq = struct.unpack("!HH", packet[header + 4 : header + 8])
    return ident, seq


@dataclass
class Round:
    """One round: when it was sent, the pairs answered, and those answered too late (after
    the timeout: their echo or reply was held up, not lost)."""

    at: float
    answered: set[int] = field(default_factory=set)
    late: set[int] = field(default_factory=set)


class Prober:
    """See the module docstring."""

    def __init__(
        self,
        netns: Mapping[str, str],
        addresses: Mapping[str, str],
        pairs: Sequence[tuple[str, str]],
        *,
        period: float = 0.25,
        timeout: float = 1.0,
    ) -> None:
        """Probe `pairs` of VMs.

        Args:
            netns: VM -> its network namespace.
            addresses: VM -> its IPv4 address.
            pairs: (source VM, destination VM), in a fixed order (a pair's index is its id).
            period: seconds between rounds.
            timeout: how long a round's echoes wait for their replies.
        """
        if len(pairs) > 0xFFFF:
            raise ValueError("at most 65,535 pairs (the ICMP id)")
        self.pairs = list(pairs)
        self.period = period
        self.timeout = timeout
        self._dst = [addresses[dst] for _, dst in self.pairs]
        self._sockets: dict[str, socket.socket] = {}
        for src in sorted({src for src, _ in self.pairs}):
            with in_netns(netns[src]):
                self._sockets[src] = socket.socket(socket.AF_INET, socket.SOCK_RAW,
                                                   socket.IPPROTO_ICMP)  # fmt: skip
            self._sockets[src].setblocking(False)
        self._by_fd = {s.fileno(): s for s in self._sockets.values()}
        self.rounds: list[Round] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prober", daemon=True)

    def start(self) -> Prober:
        """Start the rounds."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the rounds and close the sockets."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=30)
        for sock in self._sockets.values():
            sock.close()

    def _run(self) -> None:
        next_round = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_round:
                self._send(len(self.rounds), now)
                next_round += self.period
                if next_round < now:  # (fell behind: do not send bursts)
                    next_round = now + self.period
            self._receive(max(0.0, min(next_round - time.monotonic(), 0.05)))

    def _send(self, number: int, now: float) -> None:
        with self._lock:
            self.rounds.append(Round(now))
        for i, (src, _) in enumerate(self.pairs):
            with contextlib.suppress(OSError):  # unreachable: no route, no neighbour
                self._sockets[src].sendto(echo_request(i, number), (self._dst[i], 0))

    def _receive(self, wait: float) -> None:
        ready, _, _ = select.select(list(self._by_fd), [], [], wait)
        now = time.monotonic()
        for fd in ready:
            sock = self._by_fd[fd]
            while True:
                try:
                    packet = sock.recv(2048)
                except BlockingIOError:
                    break
                got = parse_reply(packet)
                if got is None:
                    continue
                pair, number = got
                with self._lock:
                    if number < len(self.rounds) and pair < len(self.pairs):
                        sent = self.rounds[number]
                        if now - sent.at <= self.timeout:
                            sent.answered.add(pair)
                        else:
                            sent.late.add(pair)

    def settled(self) -> list[Round]:
        """The rounds whose replies can no longer come (older than `timeout`)."""
        now = time.monotonic()
        with self._lock:
            return [r for r in self.rounds if now - r.at > self.timeout]


def score(answered: Round, expected: Sequence[bool]) -> float:
    """% of pairs whose outcome in round `answered` was `expected[pair]`."""
    good = sum((i in answered.answered) == want for i, want in enumerate(expected))
    return 100.0 * good / len(expected)
