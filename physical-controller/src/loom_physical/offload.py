"""Offload: which destinations a host reaches directly instead of through the Hoverboards.

On a hoverboard-mode switch a host holds only what its own ports need and sends the rest to
the Hoverboard nodes, which know every port's place (Andromeda, NSDI'18 §3.3). The control
plane watches what each *sending* host sends to each destination — never the Hoverboards'
own reports: an overloaded Hoverboard may not send them — and gives a pair whose rate passes
a threshold (Andromeda's 20 kbps) a direct *offload* flow on the sending host; one that goes
quiet goes back to the Hoverboards. Traffic is skewed enough that a few offloads carry most
of it (§5.3: 84% of VM pairs never talk, 98% of flows peak under 20 kbps).

Each host has a budget of offload flows, kept as VNToR keeps a switch's small hardware table
(SoCC'16 §4.3, Algorithm 1): every pair has an exponentially smoothed weight,

    weight = rate * (1 - h) + weight_h * h

(`weight_h`, the history, is set to `weight` every `history_s`), and on each poll the
lightest offloaded pair is swapped for the heaviest candidate if that one is heavier — one
swap per poll, so a burst of new heavy pairs cannot churn the table.

Hysteresis keeps a pair near the threshold from flapping: a candidate is offloaded once its
weight reaches `threshold_bps`, an offloaded pair returned only once its weight falls below
`threshold_bps * release` or it has sent nothing for `idle_s`, and a swap needs the
candidate heavier than the pair it evicts by `swap_margin`.

This module decides; it does not read counters or write flows. `HostOffload.observe` takes
one poll of a host's counters (bytes per destination, read by its master from the host's
switch: the learned usage flows of its Hoverboard path and its offload flows' own) and the
time of the read, and returns the `Moves` of the host's offloaded set, which the physical
controller gives its engine as input rows; the rules make the flows. Pure: no clock is read
here, no I/O module imported.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

FORGOTTEN_BPS = 1.0
"""A silent pair whose weight fell below this is no longer kept."""

Destination = tuple[int, str]
"""A destination as a host's usage counters key it: the datapath's key and the Ethernet
address the packet is sent to."""


@dataclass(frozen=True)
class OffloadPolicy:
    """How a host's offload flows are chosen (one for the deployment)."""

    threshold_bps: float = 20_000.0
    """A pair is offloaded once its weight reaches this (bits per second)."""
    release: float = 0.5
    """An offloaded pair goes back below `threshold_bps * release`."""
    budget: int = 1024
    """Offload flows per host at most."""
    history: float = 0.5
    """`h`: how much the smoothed past counts, in [0, 1)."""
    history_s: float = 1.0
    """Seconds between updates of a pair's history (`weight_h`)."""
    idle_s: float = 10.0
    """An offloaded pair that sent nothing for this long goes back."""
    swap_margin: float = 1.25
    """A candidate evicts the lightest offloaded pair only when heavier by this factor."""

    def __post_init__(self) -> None:
        if not 0 <= self.history < 1:
            raise ValueError(f"history must be in [0, 1), not {self.history}")
        if not 0 < self.release <= 1:
            raise ValueError(f"release must be in (0, 1], not {self.release}")
        if self.budget < 0 or self.threshold_bps <= 0 or self.swap_margin < 1:
            raise ValueError("budget >= 0, threshold_bps > 0 and swap_margin >= 1 are needed")


@dataclass(frozen=True)
class Moves:
    """What one poll changed in a host's offloaded set."""

    offload: tuple[Destination, ...] = ()
    """Destinations that get a direct flow now."""
    restore: tuple[Destination, ...] = ()
    """Destinations that go back to the Hoverboards."""

    def __bool__(self) -> bool:
        return bool(self.offload or self.restore)


@dataclass
class _Pair:
    """A destination's state on one host (VNToR's `swTbl` entry)."""

    counter: int
    read_at: float
    weight: float = 0.0
    weight_h: float = 0.0
    history_at: float = 0.0
    last_sent: float = 0.0


@dataclass
class HostOffload:
    """One host's destinations and the set of them it reaches directly."""

    policy: OffloadPolicy = field(default_factory=OffloadPolicy)
    offloaded: set[Destination] = field(default_factory=set)
    _pairs: dict[Destination, _Pair] = field(default_factory=dict)

    def weight(self, destination: Destination) -> float:
        """The destination's smoothed rate (bits per second; 0 if never seen)."""
        pair = self._pairs.get(destination)
        return pair.weight if pair is not None else 0.0

    def observe(self, counters: Mapping[Destination, int], now: float) -> Moves:
        """Take one poll of the host's byte counters (read at `now`, seconds on any
        monotonic clock) and return what changes in its offloaded set.

        A destination missing from `counters` sent nothing (its learned counter expired);
        one whose counter went down was counted again from zero (a counter made anew).
        """
        self._update(counters, now)
        restore = sorted(self._released(now))
        self.offloaded.difference_update(restore)
        offload = self._admit()
        swap = self._swap()
        if swap is not None:
            out, into = swap
            restore.append(out)
            offload.append(into)
        return Moves(tuple(offload), tuple(restore))

    def forget(self, destinations: Iterable[Destination]) -> Moves:
        """Drop destinations that no longer exist (a port deleted, a switch out of
        hoverboard mode); those offloaded are restored."""
        gone = sorted(set(destinations) & self._pairs.keys())
        for destination in gone:
            del self._pairs[destination]
        restore = tuple(d for d in gone if d in self.offloaded)
        self.offloaded.difference_update(restore)
        return Moves(restore=restore)

    # ---- the steps of a poll ---------------------------------------------------------

    def _update(self, counters: Mapping[Destination, int], now: float) -> None:
        """Each pair's rate since its last read, folded into its weight (line 5 of VNToR's
        Algorithm 1); pairs not in this poll sent nothing."""
        h = self.policy.history
        for destination, counter in counters.items():
            pair = self._pairs.get(destination)
            if pair is None:
                self._pairs[destination] = _Pair(counter, now, history_at=now, last_sent=now)
                continue
            elapsed = now - pair.read_at
            if elapsed <= 0:
                continue
            sent = counter - pair.counter if counter >= pair.counter else counter
            if sent > 0:
                pair.last_sent = now
            self._fold(pair, sent * 8 / elapsed, now, h)
            pair.counter, pair.read_at = counter, now
        silent = []
        for destination, pair in self._pairs.items():
            if destination not in counters and now > pair.read_at:
                self._fold(pair, 0.0, now, h)
                pair.counter, pair.read_at = 0, now
                if pair.weight < FORGOTTEN_BPS and destination not in self.offloaded:
                    silent.append(destination)
        for destination in silent:  # (what a host keeps grows with what it sends to, not more)
            del self._pairs[destination]

    def _fold(self, pair: _Pair, rate: float, now: float, h: float) -> None:
        pair.weight = rate * (1 - h) + pair.weight_h * h
        if now - pair.history_at >= self.policy.history_s:
            pair.weight_h, pair.history_at = pair.weight, now

    def _released(self, now: float) -> list[Destination]:
        """Offloaded pairs gone light (below the release weight) or idle."""
        floor = self.policy.threshold_bps * self.policy.release
        return [
            d
            for d in self.offloaded
            if self._pairs[d].weight < floor or now - self._pairs[d].last_sent >= self.policy.idle_s
        ]

    def _admit(self) -> list[Destination]:
        """The heaviest candidates at or over the threshold, while the budget allows."""
        room = self.policy.budget - len(self.offloaded)
        if room <= 0:
            return []
        heavy = [
            (-p.weight, d)
            for d, p in self._pairs.items()
            if d not in self.offloaded and p.weight >= self.policy.threshold_bps
        ]
        taken = [d for _, d in heapq.nsmallest(room, heavy)]
        self.offloaded.update(taken)
        return taken

    def _swap(self) -> tuple[Destination, Destination] | None:
        """With the budget full: the lightest offloaded pair out, the heaviest candidate
        in, if that one is over the threshold and heavier by the margin (lines 8-14)."""
        if not self.offloaded or len(self.offloaded) < self.policy.budget:
            return None
        # (as in `_admit`: the heaviest first, the least destination among equals)
        candidates = [(-p.weight, d) for d, p in self._pairs.items() if d not in self.offloaded]
        if not candidates:
            return None
        minus_w, heaviest = min(candidates)
        heaviest_w = -minus_w
        lightest_w, lightest = min((self._pairs[d].weight, d) for d in self.offloaded)
        if heaviest_w < self.policy.threshold_bps:
            return None
        if heaviest_w <= lightest_w * self.policy.swap_margin:
            return None
        self.offloaded.discard(lightest)
        self.offloaded.add(heaviest)
        return lightest, heaviest
