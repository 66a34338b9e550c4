"""The nodes' desired OpenFlow tables, as parts that nodes share (pure: no I/O).

NVP computes "a single image for a single ideal transport node"; Loom keeps that below
the logical tier. A node's table is the disjoint union of its parts:

- `("dp", D)`: datapath D's flows, the same bytes on every node that has D — its
  universal `flows` (every `Universal_Flow` row of D, translated once by
  `loom_physical.translate`) and the rules' `DpFlow`s (the way to each port of D on
  another node). Datapath 0 (`translate.ALL_SWITCHES`) holds what every switch shares.
- `("port", P)`: port P's universal `local_flows` (its own stages), on the node P is
  bound on: a `LocalPart`, kept as its rows and translated when a node takes it.
- In a switch D programmed by Hoverboards, a port P's universal `flows` (its lookups:
  `set_lookups`) are not D's: `("look", P)` holds them for the nodes that look at P (a
  `LocalPart` of those rows' `flows`: the node P is bound on, a host that offloads traffic
  to P), and `("lookups", D)`, with the rules' `HoverboardFlow`s (the way to each port),
  every port's for D's Hoverboards.
- `("node", N)`: node N's own flows (`NodeFlow`: classifier, flood, output, delivery,
  zones, tunnels).

So a datapath's flows are computed and encoded once (`encoded`: a whole part's bundle
messages, for every node that gets it whole) whatever the number of nodes that
have it, and the work of a change grows with the flows it changes times the nodes that
have them, never with the nodes' whole tables. Parts never share a key (the rules match
a datapath in every flow of `dp` and `port` parts, a port's key in its `port` part's, and
keep the node's own flows in tables of their own), so the union needs no merging.

`Images` holds every part and what changed in it since the last `settle()`; a node's push
is `mods(installed_parts, desired_parts)`: the changes of its kept parts, the whole of its
new ones (`changes` gives those apart, to be sent as their `encoded` bytes), the removal
of those it lost.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from loom_ovs.flows import Flow, FlowTable, Key, Mod, bulk_adds, cookie
from loom_ovs.ofp import FlowSyntaxError
from loom_physical.flowtexts import FlowTexts, unpack
from loom_physical.translate import Unbound, UniversalFlow, physical, physical_text

log = logging.getLogger(__name__)

PartKey = tuple[str, Any]
"""("dp", datapath key), ("port", logical port), ("node", system-id), ("look", logical
port), ("lookups", datapath key)."""

SHARED = frozenset({"dp", "lookups"})
"""The kinds of part many nodes take whole: their bytes are made once (`Part.encoded`)."""


@dataclass
class Part:
    """The flows of one part, and the keys changed since the last `Images.settle()`."""

    table: FlowTable = field(default_factory=FlowTable)
    before: dict[Key, Flow | None] = field(default_factory=dict)
    """Key -> the flow it had at the last settle (None: none), for each key changed since:
    what the nodes that have the part hold."""
    _encoded: bytes | None = field(default=None, repr=False, compare=False)
    _unencodable: bool = field(default=False, repr=False, compare=False)

    def add(self, flow: Flow) -> None:
        """Want `flow` (once more) in this part."""
        self._remember(flow.key)
        self.table.add(flow)
        self._encoded, self._unencodable = None, False

    def remove(self, flow: Flow) -> None:
        """Want `flow` once less."""
        self._remember(flow.key)
        self.table.remove(flow)
        self._encoded, self._unencodable = None, False

    def encoded(self, *, keep: bool = True) -> bytes | None:
        """The part's flows as they are now, as `bulk_adds`; None if a flow uses syntax the
        encoder does not know. `keep`: made once for every node that gets the part whole
        (until it changes); else made for this one node and not kept."""
        if self._encoded is not None or self._unencodable:
            return self._encoded
        try:
            encoded = bulk_adds(self.table)
        except FlowSyntaxError:
            self._unencodable = True
            return None
        if keep:
            self._encoded = encoded
        return encoded

    def _remember(self, key: Key) -> None:
        if key not in self.before:
            self.before[key] = self.table.get(key)

    def held(self) -> Iterator[Flow]:
        """The flows as nodes that have the part hold them (as of the last settle)."""
        for flow in self.table:
            if flow.key not in self.before:
                yield flow
        for old in self.before.values():
            if old is not None:
                yield old

    def changes(self) -> list[Mod]:
        """What nodes that keep the part must change: its flows since the last settle."""
        mods: list[Mod] = []
        for key in sorted(self.before):
            old, new = self.before[key], self.table.get(key)
            if new == old:
                continue
            if new is None:
                assert old is not None
                mods.append(("delete", old))
            else:
                mods.append(("add", new))
        return mods

    def __len__(self) -> int:
        return len(self.table)

    def touched(self) -> bool:
        """Changed since the last settle."""
        return bool(self.before)

    def conflict_count(self) -> int:
        """How many of its keys are wanted with different actions."""
        return self.table.conflict_count()


class LocalPart:
    """A port's part: the universal `local_flows` of its rows (one, but for a moment when
    a port's row is replaced), on the one node the port is bound on (or, as `("look", P)`,
    their `flows`: its lookups, on the few nodes that look at it).

    Kept as those rows -- their texts are the universal replica's, held anyway -- and
    translated each time a node takes the part (`table`: its master's push), not when the
    rows arrive: the ports' own flows were 1.15M of a controller's 1.85M at S=1.0, each a
    `FlowTable` entry, and kept for the nodes this controller masters and those it stands
    by for alike; a push translates the ~20 flows of each of its ports
    once. What a node holds of the part is its translation as of the last settle: taken
    (`_held`) before the first change after it, with the bindings it had."""

    __slots__ = ("_conflicts", "_count", "_held", "_translate", "rows")

    def __init__(self, translate: Callable[[Mapping[str, Row]], FlowTable]) -> None:
        self.rows: dict[str, Row] = {}
        """Universal_Flow uuid -> the row whose `local_flows` are this part's."""
        self._translate = translate
        self._held: FlowTable | None = None
        """The part's flows as of the last settle, taken at its first change since (None:
        unchanged)."""
        self._count: int | None = None
        self._conflicts = 0
        """Its flows and conflicted keys, as of its last translation (None: none since the
        rows changed)."""

    @property
    def table(self) -> FlowTable:
        """The part's flows as they are now (translated anew each time)."""
        table = self._translate(self.rows)
        self._count, self._conflicts = len(table), table.conflict_count()
        return table

    def set_row(self, uuid: str, row: Row | None) -> None:
        """Row `uuid`'s local flows are now `row`'s (None: it has none here any more)."""
        if self._held is None:
            self._held = self.table if self.rows else _NO_FLOWS
        if row is None:
            self.rows.pop(uuid, None)
        else:
            self.rows[uuid] = row
        self._count = None

    def touched(self) -> bool:
        """Changed since the last settle."""
        return self._held is not None

    def settle(self) -> None:
        """Nodes that hold the part hold it as it is."""
        self._held = None

    def encoded(self, *, keep: bool = False) -> bytes | None:
        """The part's flows as `bulk_adds` (never kept: it is on one node); None if a flow
        uses syntax the encoder does not know."""
        try:
            return bulk_adds(self.table)
        except FlowSyntaxError:
            return None

    def held(self) -> Iterator[Flow]:
        """The flows as nodes that have the part hold them (as of the last settle)."""
        return iter(self._held if self._held is not None else self.table)

    def changes(self) -> list[Mod]:
        """What nodes that keep the part must change: its flows since the last settle."""
        if self._held is None:
            return []
        return _difference(self._held, self.table)

    def conflict_count(self) -> int:
        """How many of its keys are wanted with different actions."""
        if self._count is None:
            self.table  # noqa: B018 (translated for its counts)
        return self._conflicts

    def __len__(self) -> int:
        if self._count is None:
            self.table  # noqa: B018 (translated for its counts)
        assert self._count is not None
        return self._count


_NO_FLOWS = FlowTable()
"""What a new port's part held (never changed)."""


def _difference(old: FlowTable, new: FlowTable) -> list[Mod]:
    """The mods that turn a node holding `old` into one holding `new`, by key."""
    mods: list[Mod] = []
    held = {flow.key: flow for flow in old}
    for flow in new:
        before = held.pop(flow.key, None)
        if before != flow:
            mods.append(("add", flow))
    mods += [("delete", flow) for flow in held.values()]
    return sorted(mods, key=lambda mod: mod[1].key)


@dataclass(frozen=True)
class Row:
    """One `Universal_Flow` row, parsed: its datapath, object cookie and flows."""

    dp: int
    source: str
    cookie: int
    flows: FlowTexts | AbstractSet[str]
    local_flows: FlowTexts | AbstractSet[str]
    """(Both as the replica holds them, packed -- `universal.pack` --, or sets.)"""


class Images:
    """Every part of every node's table (see the module docstring)."""

    def __init__(self) -> None:
        self.parts: dict[PartKey, Part | LocalPart] = {}
        self.bindings: dict[str, str] = {}
        """`${ident}` -> its value on every node (`GlobalBind`)."""
        self._rows: dict[str, Row] = {}
        """Universal_Flow uuid -> the row as placed."""
        self._waiting: dict[str, set[str]] = defaultdict(set)
        """Identifier -> the rows with a flow that names it (translated again when its
        value changes)."""
        self.malformed = 0
        """Universal flows that could not be translated (logged once each)."""
        self._touched: set[PartKey] = set()
        """The parts added to or removed from since the last settle."""
        self._logged: set[str] = set()
        """The rows with a malformed local flow, logged (a port's part is translated at
        each push)."""
        self.lookups: dict[str, int] = {}
        """Port -> the switch programmed by Hoverboards whose port it is (`Lookups`): its
        rows' `flows` there are its lookups."""
        self._as_lookups: set[str] = set()
        """The rows placed as lookups."""
        self._by_source: dict[str, set[str]] = defaultdict(set)
        """Source (a port, for the rows that matter) -> its rows' uuids."""

    # ---- inputs ----

    def set_row(self, uuid: str, row: Row | None) -> None:
        """A `Universal_Flow` row was inserted or changed (`row`), or deleted (None)."""
        self._unplace(uuid)
        old = self._rows.pop(uuid, None)
        if old is not None:
            same_source = self._by_source[old.source]
            same_source.discard(uuid)
            if not same_source:
                del self._by_source[old.source]
        if row is None:
            return
        self._rows[uuid] = row
        self._by_source[row.source].add(uuid)
        self._place(uuid, row)

    def set_lookups(self, dp: int, port: str, lookups: bool) -> None:
        """Port `port`'s rows in switch `dp` are its lookups (`lookups`) or, again, the
        datapath's: placed again where that says."""
        if lookups:
            self.lookups[port] = dp
        elif self.lookups.get(port) == dp:
            del self.lookups[port]
        else:
            return
        for uuid in sorted(self._by_source.get(port, ())):
            row = self._rows[uuid]
            if row.dp == dp and (uuid in self._as_lookups) != lookups:
                self._unplace(uuid)
                self._place(uuid, row)

    def set_binding(self, ident: str, text: str | None) -> None:
        """Identifier `ident` now means `text` everywhere (None: nothing)."""
        if self.bindings.get(ident) == text:
            return
        waiting = sorted(self._waiting.get(ident, ()))
        for uuid in waiting:  # translated as placed: with the value they were placed with
            self._unplace(uuid)
        if text is None:
            self.bindings.pop(ident, None)
        else:
            self.bindings[ident] = text
        for uuid in waiting:
            self._place(uuid, self._rows[uuid])

    def add(self, key: PartKey, flow: Flow) -> None:
        """Want `flow` in part `key` (the rules' `DpFlow` and `NodeFlow` rows)."""
        self._part(key).add(flow)
        self._touched.add(key)

    def remove(self, key: PartKey, flow: Flow) -> None:
        """Want `flow` in part `key` once less."""
        part = self.parts.get(key)
        if isinstance(part, Part):
            part.remove(flow)
            self._touched.add(key)

    def _part(self, key: PartKey) -> Part:
        """Part `key` (a datapath's or a node's), made empty if it did not exist. A node's
        flows recur on other nodes: its table shares their strings (`FlowTable(shared=)`)."""
        part = self.parts.get(key)
        if part is None:
            part = self.parts[key] = Part(FlowTable(shared=key[0] == "node"))
        assert isinstance(part, Part), key
        return part

    def _local(self, key: PartKey) -> LocalPart:
        """Port part `key` (`("port", P)` or `("look", P)`), made empty if it did not
        exist."""
        part = self.parts.get(key)
        if part is None:
            part = self.parts[key] = LocalPart(partial(self._local_table, look=key[0] == "look"))
        assert isinstance(part, LocalPart), key
        return part

    # ---- a node's table ----

    def flows(self, keys: Iterable[PartKey]) -> Iterator[Flow]:
        """Every flow of the parts `keys`, as they are now (a whole-table push)."""
        for key in keys:
            part = self.parts.get(key)
            if part is not None:
                yield from part.table

    def encoded(self, keys: Iterable[PartKey]) -> list[bytes] | None:
        """Every flow of the parts `keys` as they are now, as pre-encoded bundle messages
        (`Switch.load`); None if one uses syntax the encoder does not know."""
        chunks = []
        for key in keys:
            part = self.parts.get(key)
            if part is not None:
                # (only a datapath's part is on many nodes: a port's or a node's is on one,
                # and its bytes kept would be every controller's whole table again -- most of
                # what every part's bytes are)
                chunk = part.encoded(keep=key[0] in SHARED)
                if chunk is None:
                    return None
                if chunk:
                    chunks.append(chunk)
        return chunks

    def size(self, keys: Iterable[PartKey]) -> int:
        """How many flows the parts `keys` hold."""
        return sum(len(self.parts[k]) for k in keys if k in self.parts)

    def mods(
        self, installed: set[PartKey], desired: set[PartKey], *, settled: bool = True
    ) -> list[Mod]:
        """What turns a node that holds parts `installed` into one that holds `desired` as
        they are now: `installed` as of the last settle, or (`settled` False: the node was
        pushed since) as they are now."""
        mods, new = self.changes(installed, desired, settled=settled)
        return [*mods, *(("add", flow) for flow in self.flows(new))]

    def changes(
        self, installed: set[PartKey], desired: set[PartKey], *, settled: bool = True
    ) -> tuple[list[Mod], list[PartKey]]:
        """`mods` as the changes of the parts the node keeps and loses, and the parts it
        gains, which it gets whole (`encoded`)."""
        mods: list[Mod] = []
        for key in sorted(installed - desired, key=repr):
            part = self.parts.get(key)
            if part is not None:
                held = part.held() if settled else iter(part.table)
                mods += [("delete", flow) for flow in held]
        if settled:
            for key in sorted(installed & desired, key=repr):
                part = self.parts.get(key)
                if part is not None and part.touched():
                    mods += part.changes()
        new = [key for key in sorted(desired - installed, key=repr) if key in self.parts]
        return mods, new

    def changed(self) -> set[PartKey]:
        """The parts changed since the last settle."""
        return {key for key in self._touched if key in self.parts and self.parts[key].touched()}

    def settle(self) -> None:
        """Every node that holds a part now holds it as it is: forget the changes; drop
        the parts that are empty. (Its cost is the parts changed, not all.)"""
        for key in self._touched:
            part = self.parts.get(key)
            if isinstance(part, LocalPart):
                part.settle()
                if not part.rows:
                    del self.parts[key]
            elif part is not None:
                part.before = {}
                if not len(part):
                    del self.parts[key]
        self._touched = set()

    # ---- placing universal rows ----

    # A row's flows are not kept apart from the parts they went into: a row leaves by
    # being translated again (the same bindings: `set_binding` takes the rows that name
    # an identifier out before it changes), which costs a change a little CPU per flow and
    # saves the memory of a copy of every flow placed (1.45M at S=1.0, in each controller).
    # Its local flows go to its port's part untranslated (`LocalPart`).

    def _place(self, uuid: str, row: Row) -> None:
        self._wait_for(uuid, row.flows)
        lookups = self.lookups.get(row.source) == row.dp
        shared: PartKey = ("lookups" if lookups else "dp", row.dp)
        for flow in self._translated(uuid, row.dp, row.cookie, row.flows, placing=True):
            self.add(shared, flow)
        if lookups:
            self._as_lookups.add(uuid)
            self._set_local(("look", row.source), uuid, row)
        if row.local_flows:
            self._wait_for(uuid, row.local_flows)
            self._set_local(("port", row.source), uuid, row)

    def _set_local(self, key: PartKey, uuid: str, row: Row | None) -> None:
        """Row `uuid` is `row` (None: none) in port part `key`."""
        if row is not None:
            self._local(key).set_row(uuid, row)
        elif isinstance(part := self.parts.get(key), LocalPart) and uuid in part.rows:
            part.set_row(uuid, None)
        else:
            return
        self._touched.add(key)

    def _unplace(self, uuid: str) -> None:
        row = self._rows.get(uuid)
        if row is not None:
            lookups = uuid in self._as_lookups
            shared: PartKey = ("lookups" if lookups else "dp", row.dp)
            for flow in self._translated(uuid, row.dp, row.cookie, row.flows, placing=False):
                self.remove(shared, flow)
            if lookups:
                self._as_lookups.discard(uuid)
                self._set_local(("look", row.source), uuid, None)
            self._set_local(("port", row.source), uuid, None)
        self._logged.discard(uuid)  # (placed again: logged once more if still malformed)
        for rows in self._waiting.values():
            rows.discard(uuid)

    def _wait_for(self, uuid: str, texts: FlowTexts | AbstractSet[str]) -> None:
        """Row `uuid` is translated again when an identifier its `texts` name changes."""
        if isinstance(texts, bytes) or (isinstance(texts, str) and "${" not in texts):
            return  # (nearly every row; `pack` deflates only texts that name none)
        for text in unpack(texts):
            if "${" in text:
                try:
                    flow = UniversalFlow.parse(text)
                except ValueError:
                    continue  # (counted when translated)
                for ident in flow.identifiers:
                    self._waiting[ident].add(uuid)

    def _local_table(self, rows: Mapping[str, Row], *, look: bool) -> FlowTable:
        """The local flows of `rows`, translated (a `("port", P)` part's table), or with
        `look` their `flows` (a `("look", P)` part's: malformed ones were counted as the rows
        were placed in their `lookups` part)."""
        table = FlowTable()
        for uuid, row in rows.items():
            malformed = self.malformed
            texts = row.flows if look else row.local_flows
            placing = not look and uuid not in self._logged
            for flow in self._translated(uuid, row.dp, row.cookie, texts, placing=placing):
                table.add(flow)
            if self.malformed > malformed:
                self._logged.add(uuid)
        return table

    def _translated(
        self, uuid: str, dp: int, row_cookie: int, texts: FlowTexts | AbstractSet[str], *,
        placing: bool,
    ) -> Iterator[Flow]:  # fmt: skip
        """The flows of `texts` (row `uuid`'s, in datapath `dp`), translated. `placing`: a
        malformed one is counted and logged (once a row: `_logged`). (The identifiers they
        name are waited for when the row is placed: `_wait_for`.)"""
        flow_cookie = cookie(row_cookie)
        for text in unpack(texts):
            try:
                if "${" not in text:  # (nearly every flow)
                    yield physical_text(dp, text, flow_cookie)
                    continue
                yield physical(dp, UniversalFlow.parse(text), row_cookie, self.bindings)
            except Unbound:
                continue
            except ValueError as exc:
                if placing:
                    self.malformed += 1
                    log.warning("universal flow of row %s in datapath %d not installed: %s",
                                uuid, dp, exc)  # fmt: skip


def node_parts(
    node: str, datapaths: Iterable[int], ports: Iterable[str],
    looks: Iterable[str] = (), hoverboard: Iterable[int] = (),
) -> set[PartKey]:  # fmt: skip
    """The parts of node `node`'s table: its own, its datapaths' (with the switches'
    shared part when it has a switch), its bound ports', the lookups of the ports it looks
    at, and every port's lookups of the switches it is a Hoverboard of."""
    parts: set[PartKey] = {("node", node)}
    parts.update(("dp", dp) for dp in datapaths)
    parts.update(("port", port) for port in ports)
    parts.update(("look", port) for port in looks)
    parts.update(("lookups", dp) for dp in hoverboard)
    if any(key[0] == "dp" and 0 < key[1] < 1 << 23 for key in parts):
        parts.add(("dp", 0))
    return parts


def dp_rows(rows: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[str, Row]]:
    """`Universal_Flow` rows (the replica's, `flows` and `local_flows` as sets) as `Row`s."""
    for uuid, row in rows.items():
        yield uuid, to_row(row)


def to_row(row: Mapping[str, Any]) -> Row:
    """One replica row as a `Row`."""
    return Row(int(row["datapath"]), str(row["source"]), int(row["cookie"]),
               _texts(row.get("flows")), _texts(row.get("local_flows")))  # fmt: skip


def _texts(value: Any) -> FlowTexts | AbstractSet[str]:
    """A `flows` column as the replica holds it (packed), or a set as it is; else (None,
    a list) as a frozenset."""
    if isinstance(value, (str, bytes, tuple, set, frozenset)):
        return value
    return frozenset(value or ())
