"""Conntrack zones on one node (pure: no I/O).

A stateful port's and a router's connections are tracked in a zone of their own on each
node that has them; the rules ask for one (`NeedZone`) and read the number given (`Zone`).
A zone must stay the same while it is needed, including across a change of master: the
node records the zones given (`br-int` external_ids, `loom_ovs.manager.NodeSession.
save_zones`) before any flow that uses them goes to it, and a new master adopts what the
node records. A zone released goes back to the pool only after the flows that used it are
gone from the node and its record is removed.

Only a node's master gives zones. A standby (it computes the node's flows, to take over at
once) waits for the master's record and takes the zones from there: had it given zones of
its own, they would be given in the order its own passes met the owners, not the
master's, and nearly every one renumbered when the record came (at the NVP workload's
scale 0.1, 2,844 and 2,830 zones moved in the two controllers after a cold start, each
move a change of the node's flows folded for nothing). A standby that takes over gives the
owners still waiting their zones then.

`NodeZones` decides; the controller sends what `take_record()` returns and feeds the
engine what `take_changes()` returns.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

ZONES = (1, 65535)
"""The zones handed out: [first, last)."""

ZoneRow = tuple[str, str, int]
"""The `Zone` input row: (node, owner, zone)."""


@dataclass
class NodeZones:
    """The zones of one node: given, recorded on the node, and waiting to be."""

    node: str
    master: bool = True
    """Gives zones (the node's master); a standby waits for its master's record."""
    zones: dict[str, int] = field(default_factory=dict)
    """Logical port or router -> its zone (stable while needed)."""
    free: list[int] = field(default_factory=list)
    next_zone: int = ZONES[0]
    recorded: dict[str, int] = field(default_factory=dict)
    """The zones the node itself records (adopted from there)."""
    recorded_used: set[int] = field(default_factory=set)
    unsaved: dict[str, int] = field(default_factory=dict)
    """Given here and not recorded on the node yet (recorded before the next push)."""
    released: set[str] = field(default_factory=set)
    """Owners whose zones are no longer needed and still recorded on the node."""
    speculative: set[str] = field(default_factory=set)
    """Owners given a zone before the rules asked (a new VIF's port), not asked yet."""
    waiting: set[str] = field(default_factory=set)
    """Owners that need a zone the master has not recorded yet (a standby's)."""
    changes: list[tuple[int, ZoneRow]] = field(default_factory=list)
    """`Zone` rows given (+1) or taken back (-1) since the engine was last fed."""
    held: dict[int, int] = field(default_factory=dict)
    """Zone -> how many owners hold it (one, but for the moment `adopt` moves owners): a
    zone released and taken again from a record is held, though it is in `free`."""

    def need(self, owner: str) -> None:
        """Give `owner` a zone: the one the node records if any (a previous master chose
        it), else a free one, to be recorded on the node before the flows using it — or,
        on a standby, none until its master records one."""
        zone = self.zones.get(owner) or self.recorded.get(owner)
        if zone is None and not self.master:
            self.waiting.add(owner)
            return
        self.waiting.discard(owner)
        if zone is None:
            zone = self._allocate()
            if zone is None:
                log.warning("node %s: no conntrack zone left for %s", self.node, owner)
                return
            self.unsaved[owner] = zone
        if self.zones.get(owner) != zone:
            self._hold(owner, zone)
            self.released.discard(owner)
            self.changes.append((1, (self.node, owner, zone)))

    def speculate(self, owner: str) -> None:
        """Give `owner` a zone before the rules ask (they will, unless `release_unasked`
        finds they did not). An owner given one or waiting for one (a standby's: the
        rules asked already) is left as it is: released as unasked, it would be lost."""
        if owner not in self.zones and owner not in self.waiting:
            self.need(owner)
            self.speculative.add(owner)

    def asked(self, owner: str) -> None:
        """The rules asked for `owner`'s zone (`NeedZone` inserted)."""
        self.speculative.discard(owner)
        self.need(owner)

    def release(self, owner: str) -> None:
        """`owner` needs no zone any more."""
        self.waiting.discard(owner)
        if owner in self.zones:
            zone = self._drop(owner)
            self.free.append(zone)
            self.unsaved.pop(owner, None)
            self.released.add(owner)
            self.changes.append((-1, (self.node, owner, zone)))

    def release_unasked(self) -> None:
        """Release the zones given beforehand that the rules did not ask for."""
        for owner in sorted(self.speculative):
            self.release(owner)
        self.speculative = set()

    def set_master(self, master: bool) -> None:
        """This controller became the node's master (it gives the owners still waiting
        their zones) or its standby."""
        self.master = master
        if master:
            # What a standby holds and the node does not record (taken from a record
            # since removed) is the master's to record now, before flows use it.
            for owner, zone in self.zones.items():
                if self.recorded.get(owner) != zone:
                    self.unsaved.setdefault(owner, zone)
            for owner in sorted(self.waiting):
                self.need(owner)

    def adopt(self, recorded: Mapping[str, int]) -> None:
        """The node records `recorded` (owner -> zone; another master may have chosen
        them): take them as they are — also over a zone given here and not recorded yet
        (given before the record was read: kept, a takeover would move the node's ports to
        other zones, and its connections with them) — give another zone to an owner of
        ours, not recorded, whose number the node records for another, and the owners
        waiting for the record theirs. An owner of ours the node no longer records, whose
        number it now records for another (its master released it, then gave the number
        again), is given another zone here if this controller masters the node, else waits
        for the record: two owners never share a zone."""
        self.recorded, self.recorded_used = dict(recorded), set(recorded.values())
        if recorded:
            self.next_zone = max(self.next_zone, max(recorded.values()) + 1)
        for owner, zone in recorded.items():
            current = self.zones.get(owner)
            if current is None:
                continue
            if current != zone:
                self._move(owner, zone)
                if self.unsaved.get(owner) == current:
                    self.free.append(current)  # ours, never recorded: free again
            self.unsaved.pop(owner, None)
        for owner, zone in sorted(self.unsaved.items()):
            if zone in self.recorded_used:
                self._renumber(owner)
        for owner, zone in sorted(self.zones.items()):
            if owner not in recorded and owner not in self.unsaved and zone in self.recorded_used:
                self._stale(owner)
        for owner in sorted(self.waiting & recorded.keys()):
            self.need(owner)

    def _stale(self, owner: str) -> None:
        """`owner` holds a zone from a record since removed, which the node now records for
        another owner: a master gives it another (to be recorded); a standby gives its
        zone back and waits for the record to give it one."""
        if self.master:
            self._renumber(owner)
        else:
            self.changes.append((-1, (self.node, owner, self._drop(owner))))
            self.waiting.add(owner)

    def _renumber(self, owner: str) -> None:
        """Give `owner` another zone, to be recorded (none left: it is released)."""
        new = self._allocate()
        if new is None:
            log.warning("node %s: no conntrack zone left for %s", self.node, owner)
            self.release(owner)
            return
        self._move(owner, new)
        self.unsaved[owner] = new

    def _move(self, owner: str, zone: int) -> None:
        """`owner`'s zone is `zone` now (fed to the engine as a change)."""
        self.changes.append((-1, (self.node, owner, self.zones[owner])))
        self.changes.append((1, (self.node, owner, zone)))
        self._hold(owner, zone)

    def _hold(self, owner: str, zone: int) -> None:
        """`owner` holds `zone` now (instead of the one it held, if any)."""
        if owner in self.zones:
            self._drop(owner)
        self.zones[owner] = zone
        self.held[zone] = self.held.get(zone, 0) + 1

    def _drop(self, owner: str) -> int:
        """`owner` holds no zone now; the one it held."""
        zone = self.zones.pop(owner)
        if self.held[zone] == 1:
            del self.held[zone]
        else:
            self.held[zone] -= 1
        return zone

    def take_changes(self) -> list[tuple[int, ZoneRow]]:
        """The `Zone` rows to feed the engine (+1 insert, -1 delete), once."""
        changes, self.changes = self.changes, []
        return changes

    def take_record(self) -> tuple[dict[str, int], set[str]]:
        """The zones to record on the node and the owners whose records to remove, once."""
        record = (self.unsaved, self.released)
        self.unsaved, self.released = {}, set()
        return record

    def unsend(self, zones: dict[str, int], released: set[str]) -> None:
        """A record taken (`take_record`) was never sent: it is due again (a zone given
        or released since wins over the record's)."""
        self.unsaved = {owner: zone for owner, zone in zones.items()
                        if self.zones.get(owner) == zone} | self.unsaved  # fmt: skip
        self.released |= {owner for owner in released if owner not in self.zones}

    def record_lost(self) -> None:
        """A record sent was refused or lost: every zone given is to be recorded again."""
        self.unsaved = {**self.zones, **self.unsaved}

    def rows(self) -> set[ZoneRow]:
        """Every `Zone` row of the node as given now (to feed a new engine)."""
        return {(self.node, owner, zone) for owner, zone in self.zones.items()}

    def _allocate(self) -> int | None:
        """A zone neither recorded nor held (a number released here may since have been
        taken again from a record)."""
        used, held = self.recorded_used, self.held
        while self.free and (self.free[-1] in used or self.free[-1] in held):
            self.free.pop()
        if self.free:
            return self.free.pop()
        while self.next_zone < ZONES[1]:
            candidate = self.next_zone
            self.next_zone += 1
            if candidate not in used and candidate not in held:
                return candidate
        return None
