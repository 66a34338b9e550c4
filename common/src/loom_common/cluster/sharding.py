"""Shard assignment: a master and a hot standby per shard, balanced, with minimal churn.

Pure functions, no I/O. A shard is anything a controller cluster divides among its members
(a logical datapath, a transport node); a member is a controller's id. Given the members,
the shards and the previous assignment, `assign()` returns the new one:

- every shard has exactly one master, and a standby that is another member whenever there
  are at least two members (None with one);
- balanced: master loads differ by at most one, and so do standby loads;
- minimal churn: a shard keeps its master while that member is alive and not above its
  fair share, so adding a member moves only the shards the newcomer takes (at most
  ceil(S / (n + 1)) of S shards) and removing one moves only the shards it mastered;
- failover is hot: a shard whose master left (or gave it up) goes to its standby when the
  standby has room, and a master that gives up a shard becomes its standby when it has room;
  both already hold the shard's computed state. Each master's standbys are spread over the
  other members, so a failed member's shards fit within the survivors' shares: about 96% of
  them go to their standby (balance forbids the rest; see the tests);
- deterministic: the result depends only on the inputs, never on their iteration order.

How: each member's target load is S // n, plus one for S % n of them; the extra slots go to
the members that already hold the most (for standbys: preferably members without an extra
master, which keeps a distinct standby always possible). Shards are kept where targets allow,
and the rest go to members below target.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Owners:
    """Who serves one shard: the master writes, the standby computes the same state."""

    master: str
    standby: str | None = None


Assignment = Mapping[str, Owners]
"""Shard id -> its owners."""


def assign(
    members: Iterable[str], shards: Iterable[str], previous: Assignment | None = None
) -> dict[str, Owners]:
    """Return a balanced assignment of every shard that changes `previous` as little as it can.

    Args:
        members: the live members (duplicates are ignored).
        shards: every shard to assign (duplicates are ignored).
        previous: the assignment in force; owners that are no longer members, and shards
            that no longer exist, are ignored.

    Returns:
        Shard -> owners for every shard; empty when there are no members.
    """
    alive = sorted(set(members))
    wanted = sorted(set(shards))
    if not alive or not wanted:
        return {}
    prev = previous or {}
    masters = _assign_masters(alive, wanted, prev)
    if len(alive) == 1:
        return {shard: Owners(masters[shard]) for shard in wanted}
    standbys = _assign_standbys(alive, wanted, prev, masters)
    return {shard: Owners(masters[shard], standbys[shard]) for shard in wanted}


def _targets(
    members: list[str],
    total: int,
    held: Counter[str],
    *,
    avoid: Collection[str] = (),
    then_by: Counter[str] | None = None,
) -> dict[str, int]:
    """Return each member's fair share of `total`; extra slots to the most-held members.

    Args:
        members: sorted member ids.
        total: the number of slots to share.
        held: how many each member already holds validly (kept if targets allow).
        avoid: members ranked last for the extra slots.
        then_by: the tie-breaker among members holding equally many (more ranks first);
            the smallest id breaks the remaining ties.
    """
    base, extra = divmod(total, len(members))
    second = then_by or Counter()
    ranked = sorted(members, key=lambda m: (m in avoid, -held[m], -second[m], m))
    return {member: base + (1 if rank < extra else 0) for rank, member in enumerate(ranked)}


def _assign_masters(members: list[str], shards: list[str], prev: Assignment) -> dict[str, str]:
    """Return shard -> master: previous masters kept within targets, the rest to deficits."""
    alive = set(members)
    kept_candidates = {
        shard: prev[shard].master
        for shard in shards
        if shard in prev and prev[shard].master in alive
    }
    # Among members that hold equally many, the extra slots go to the standbys of orphaned
    # shards first, so that more of those fail over hot.
    orphans_held: Counter[str] = Counter(
        prev[shard].standby or ""
        for shard in shards
        if shard in prev and shard not in kept_candidates
    )
    targets = _targets(
        members, len(shards), Counter(kept_candidates.values()), then_by=orphans_held
    )
    load: Counter[str] = Counter()
    result: dict[str, str] = {}
    pool = []
    for shard in shards:
        master = kept_candidates.get(shard)
        if master is not None and load[master] < targets[master]:
            result[shard] = master
            load[master] += 1
        else:
            pool.append(shard)
    for shard in pool:
        standby = prev[shard].standby if shard in prev else None
        if standby in alive and load[standby] < targets[standby]:
            chosen = standby
        else:
            chosen = _most_room(members, targets, load)
        result[shard] = chosen
        load[chosen] += 1
    return result


def _assign_standbys(
    members: list[str], shards: list[str], prev: Assignment, masters: Mapping[str, str]
) -> dict[str, str]:
    """Return shard -> standby (never the shard's master); needs at least two members."""
    alive = set(members)
    base = len(shards) // len(members)
    extra_masters = {m for m, n in Counter(masters.values()).items() if n > base}
    kept_candidates = {}
    for shard in shards:
        if shard not in prev:
            continue
        # A master that gave the shard up holds its state, like the old standby does.
        for candidate in (prev[shard].master, prev[shard].standby):
            if candidate is not None and candidate in alive and candidate != masters[shard]:
                kept_candidates[shard] = candidate
                break
    targets = _targets(members, len(shards), Counter(kept_candidates.values()), avoid=extra_masters)
    load: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()  # (master, standby) -> shards
    result: dict[str, str] = {}
    pool = []
    for shard in shards:
        standby = kept_candidates.get(shard)
        if standby is not None and load[standby] < targets[standby]:
            result[shard] = standby
            load[standby] += 1
            pairs[masters[shard], standby] += 1
        else:
            pool.append(shard)
    kept = set(result)
    stuck = []
    for shard in pool:
        master = masters[shard]
        # Spread each master's standbys over the other members, so that when it fails
        # each of them takes about an equal part of its shards, hot, within its share.
        room = [m for m in members if m != master and load[m] < targets[m]]
        if not room:
            stuck.append(shard)
            continue
        chosen = min(room, key=lambda m: (pairs[master, m], load[m] - targets[m], m))
        result[shard] = chosen
        load[chosen] += 1
        pairs[master, chosen] += 1
    for shard in stuck:
        _swap_in(shard, shards, masters, result, kept)
    return result


def _most_room(members: list[str], targets: Mapping[str, int], load: Mapping[str, int]) -> str:
    """Return the member furthest below its target (ties: smallest id); one must be below."""
    return min(members, key=lambda m: (load[m] - targets[m], m))


def _swap_in(
    shard: str,
    shards: list[str],
    masters: Mapping[str, str],
    result: dict[str, str],
    kept: set[str],
) -> None:
    """Give `shard` a standby when the only member below target is its own master `m`.

    Take a shard s2 that `m` does not master and whose standby x is not `m`: `m` becomes
    s2's standby and x becomes `shard`'s. Loads stay the same except `m`, which gains one.
    One always exists: `m` is below target, and the targets leave `m` at most
    S - masters(m) standby slots. Standbys that were newly chosen are swapped before kept
    ones.
    """
    master = masters[shard]
    candidates = [
        other
        for other in shards
        if other in result and masters[other] != master and result[other] != master
    ]
    candidates.sort(key=lambda other: (other in kept, other))
    other = candidates[0]
    result[shard] = result[other]
    result[other] = master
    kept.discard(other)


def masters_of(assignment: Assignment, member: str) -> frozenset[str]:
    """Return the shards `member` masters."""
    return frozenset(shard for shard, owners in assignment.items() if owners.master == member)


def standbys_of(assignment: Assignment, member: str) -> frozenset[str]:
    """Return the shards for which `member` is the hot standby."""
    return frozenset(shard for shard, owners in assignment.items() if owners.standby == member)


def master_loads(assignment: Assignment, members: Iterable[str]) -> dict[str, int]:
    """Return how many shards each of `members` masters (zero included)."""
    loads = dict.fromkeys(members, 0)
    for owners in assignment.values():
        loads[owners.master] = loads.get(owners.master, 0) + 1
    return loads


def moved_masters(before: Assignment, after: Assignment) -> frozenset[str]:
    """Return the shards present in both whose master differs."""
    return frozenset(
        shard for shard, owners in after.items()
        if shard in before and before[shard].master != owners.master
    )  # fmt: skip
