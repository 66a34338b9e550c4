"""`loom_physical.offload`: which destinations a host reaches directly (pure, no daemon)."""

from __future__ import annotations

import random

import pytest

from loom_physical.offload import Destination, HostOffload, Moves, OffloadPolicy

A: Destination = (1, "50:54:00:00:00:0a")
B: Destination = (1, "50:54:00:00:00:0b")
C: Destination = (2, "50:54:00:00:00:0c")


class Host:
    """A host whose destinations send at given rates, polled every `period` seconds."""

    def __init__(self, policy: OffloadPolicy, period: float = 0.5) -> None:
        self.offload = HostOffload(policy)
        self.period = period
        self.now = 0.0
        self.bytes: dict[Destination, int] = {}

    def poll(self, rates_bps: dict[Destination, float]) -> Moves:
        """`period` seconds at `rates_bps` (a destination not named sends nothing and its
        learned counter is gone), then one poll."""
        self.now += self.period
        for d, rate in rates_bps.items():
            self.bytes[d] = self.bytes.get(d, 0) + int(rate * self.period / 8)
        for d in set(self.bytes) - set(rates_bps):
            del self.bytes[d]
        return self.offload.observe(dict(self.bytes), self.now)

    def polls(self, count: int, rates_bps: dict[Destination, float]) -> list[Moves]:
        return [self.poll(rates_bps) for _ in range(count)]


def test_a_pair_over_the_threshold_is_offloaded_and_a_quiet_one_returned() -> None:
    host = Host(OffloadPolicy(threshold_bps=20_000, history=0.5, history_s=0.5))
    assert host.poll({A: 100_000, B: 1_000}) == Moves()  # (first sight: no rate yet)
    moves = host.polls(5, {A: 100_000, B: 1_000})
    assert [m.offload for m in moves if m.offload] == [(A,)]
    assert host.offload.offloaded == {A}
    assert host.offload.weight(A) == pytest.approx(100_000, rel=0.05)
    moves = host.polls(6, {A: 500, B: 1_000})
    assert [m.restore for m in moves if m.restore] == [(A,)]
    assert host.offload.offloaded == set()


def test_a_pair_between_release_and_threshold_keeps_its_way() -> None:
    """Hysteresis: 15 kbps neither offloads a pair nor returns an offloaded one."""
    host = Host(OffloadPolicy(threshold_bps=20_000, release=0.5))
    host.polls(8, {A: 15_000, B: 40_000})
    assert host.offload.offloaded == {B}
    moves = host.polls(20, {A: 15_000, B: 15_000})
    assert not any(moves), "a pair near the threshold flapped"
    assert host.offload.offloaded == {B}


def test_an_idle_pair_goes_back_and_is_then_forgotten() -> None:
    host = Host(OffloadPolicy(idle_s=2.0, release=0.01, history=0.5, history_s=0.5))
    host.polls(8, {A: 200_000})
    assert host.offload.offloaded == {A}
    moves = host.polls(4, {})
    assert not any(moves[:3])
    assert moves[3] == Moves(restore=(A,)), "not at 2 s idle"
    assert host.offload.weight(A) > 200, "returned by its weight, not by being idle"
    host.polls(40, {})
    assert host.offload.weight(A) == 0.0, "a silent pair is kept forever"


def test_a_counter_made_anew_counts_from_zero() -> None:
    offload = HostOffload(OffloadPolicy(history=0.0))
    offload.observe({A: 1_000_000}, 1.0)
    offload.observe({A: 1_250_000}, 2.0)
    assert offload.weight(A) == pytest.approx(2_000_000)
    offload.observe({A: 5_000}, 3.0)  # (expired and learned again: 5 kB since)
    assert offload.weight(A) == pytest.approx(40_000)


def test_the_budget_holds_with_more_heavy_pairs_than_it_allows() -> None:
    """Budget 3, 8 pairs over the threshold: the 3 heaviest are taken first; a heavier
    newcomer gets in by one swap per poll, in place of the lightest."""
    policy = OffloadPolicy(budget=3, history=0.0)
    host = Host(policy)
    heavy = {(1, f"50:54:00:00:01:{i:02x}"): 30_000.0 + 10_000 * i for i in range(8)}
    host.poll(heavy)
    first = host.poll(heavy)
    top3 = sorted(heavy, key=heavy.__getitem__)[-3:]
    assert set(first.offload) == set(top3)
    assert host.offload.offloaded == set(top3)
    assert not any(host.polls(5, heavy)), "swaps among pairs whose order did not change"
    burst = {**heavy, **{(3, f"50:54:00:00:02:{i:02x}"): 500_000.0 + i for i in range(3)}}
    host.poll(burst)  # (first sight of the newcomers)
    swaps = [m for m in host.polls(6, burst) if m]
    assert [len(m.offload) for m in swaps] == [1, 1, 1], "more than one swap in a poll"
    assert len(host.offload.offloaded) == 3
    assert host.offload.offloaded == {d for d in burst if d[0] == 3}


def test_a_swap_needs_the_margin() -> None:
    host = Host(OffloadPolicy(budget=1, history=0.0, swap_margin=1.25))
    host.polls(3, {A: 100_000})
    assert host.offload.offloaded == {A}
    assert not any(host.polls(4, {A: 100_000, B: 120_000}))
    moves = host.polls(2, {A: 100_000, B: 130_000})
    assert moves[0] == Moves(offload=(B,), restore=(A,))


def test_forgotten_destinations_are_restored() -> None:
    host = Host(OffloadPolicy(history=0.0))
    host.polls(3, {A: 100_000, C: 100_000})
    assert host.offload.offloaded == {A, C}
    assert host.offload.forget([C, B]) == Moves(restore=(C,))
    assert host.offload.offloaded == {A}


def test_the_offloaded_set_is_the_same_for_the_same_polls() -> None:
    rng = random.Random(7)
    dests = [(1, f"50:54:00:00:03:{i:02x}") for i in range(60)]
    rounds = [{d: rng.paretovariate(1.2) * 5_000 for d in rng.sample(dests, 30)} for _ in range(40)]
    runs = []
    for _ in range(2):
        host = Host(OffloadPolicy(budget=8))
        runs.append([host.poll(r) for r in rounds])
    assert runs[0] == runs[1]
    assert any(runs[0])


@pytest.mark.parametrize(
    "bad",
    [
        {"history": 1.0},
        {"release": 0.0},
        {"budget": -1},
        {"threshold_bps": 0},
        {"swap_margin": 0.5},
    ],
)
def test_a_policy_out_of_range_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"must be|are needed"):
        OffloadPolicy(**bad)  # type: ignore[arg-type]
