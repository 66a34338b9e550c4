"""A transport node's OpenFlow flows as Loom wants them, and their encoding (pure: no I/O).

`FlowTable` holds the desired flows of one node as the localization rules produce them.
OpenFlow allows one flow per (table, priority, match); the rules may want the same match
twice (the same flow in two objects' rows, or two objects claiming one match): the table
keeps every candidate and installs one, the smallest by (cookie, actions), so the choice
does not depend on arrival order, and `conflicts()` names the matches wanted with different
actions.

`encode` and `bulk_adds` make the OpenFlow 1.5 messages (`loom_ovs.ofp`, natively where the
native encoder takes the flow: `loom_ddlog._native`); `parse_diff` reads `ovs-ofctl
diff-flows`. `loom_ovs.openflow`'s `Switch` pushes them.

Cookies: the high 32 bits are the universal row's cookie (the object the flow exists for),
bits 16..23 the flow's category (`loom_schemas.pipeline.Category`: what feature made it),
the low 16 bits `MARK`, Loom's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from loom_common.errors import LoomError
from loom_ddlog._native import bulk_adds as native_bulk_adds
from loom_ddlog._native import encode_actions as native_encode_actions
from loom_ddlog._native import flow_mod as native_flow_mod
from loom_ovs import ofp

MARK = 0x4C4D
"""The low 16 bits of every Loom flow's cookie ("LM")."""
GENEVE_TLV = "{class=0x102,type=0x80,len=4}->tun_metadata0"
"""The Geneve option that carries the logical ingress and egress port keys."""
GENEVE_OPTION: ofp.TlvMap = (0x102, 0x80, ofp.TUN_METADATA_BYTES, 0)
"""`GENEVE_TLV` as the TLV table entry the channel sends: (class, type, length, index)."""

Key = tuple[int, int, str]
"""(table, priority, match): what identifies a flow in OpenFlow."""
Mod = tuple[Literal["add", "modify", "delete"], "Flow"]
"""One change of a push: add (or replace) the flow, change the actions of the installed
flow with its key (keeping its age, counters and cookie), or delete the flow with its key."""


class OpenFlowError(LoomError):
    """A push to a node failed (`ovs-ofctl`, or the OpenFlow channel)."""

    message = "%(detail)s"


def cookie(object_cookie: int) -> int:
    """The OpenFlow cookie of a flow that exists for the object with `object_cookie`."""
    return (object_cookie & 0xFFFFFFFF) << 32 | MARK


@dataclass(frozen=True, order=True, slots=True)
class Flow:
    """One OpenFlow flow in `ovs-ofctl` syntax."""

    table: int
    priority: int
    match: str
    actions: str
    cookie: int = MARK

    @property
    def key(self) -> Key:
        """What OpenFlow identifies the flow by."""
        return (self.table, self.priority, self.match)

    def spec(self) -> str:
        """The match part (`table=..,priority=..,MATCH`), as `delete_strict` takes it."""
        head = f"table={self.table},priority={self.priority}"
        return f"{head},{self.match}" if self.match else head

    def text(self) -> str:
        """The whole flow, as `add-flows` and `replace-flows` take it."""
        head = f"table={self.table},priority={self.priority},cookie={self.cookie:#x}"
        match = f",{self.match}" if self.match else ""
        return f"{head}{match} actions={self.actions or 'drop'}"


def _packed(table: int, priority: int, match: str) -> str:
    """A flow's key as one string that sorts as the key does: table and priority in fixed
    width (OpenFlow's are at most 254 and 65535), then the match."""
    return f"{table:03d}{priority:05d}{match}"


def _unpacked(packed: str) -> Key:
    return int(packed[:3]), int(packed[3:8]), packed[8:]


class FlowTable:
    """The desired flows of one table part, one per key: what a key is wanted with, and
    how many times.

    Nearly every key is wanted once, with one (cookie, actions): those are kept as that
    pair alone (`_single`), and only keys wanted more than once in `_multi` — a dict per
    key for every flow held was a large share of a controller's flow memory. A key is kept
    as one string (`_packed`), not a (table, priority, match) tuple: a tuple's header and
    slots less for every flow, of the millions a physical controller holds at S=1.0.

    A `shared` table interns its keys and actions (`sys.intern`: the strings go when their
    last holder does), for tables whose flows recur in others: the nodes' own parts at
    S=1.0 held 330k flows of 143k distinct keys and 63k distinct actions, each copy held
    once per node without it.
    """

    def __init__(self, *, shared: bool = False) -> None:
        self._shared = shared
        self._single: dict[str, tuple[int, str]] = {}
        """Packed key -> the (cookie, actions) it is wanted with, once."""
        self._multi: dict[str, dict[tuple[int, str], int]] = {}
        """Packed key -> {(cookie, actions): how many times wanted}, for keys wanted more
        than once (the same or different actions)."""
        self._conflicted: set[str] = set()
        """Packed keys wanted with more than one set of actions (kept as flows come and go:
        a scan of the whole table per push is a cost per flow, paid at every push)."""

    def _recheck(self, key: str, wanted: dict[tuple[int, str], int] | None) -> None:
        if wanted and len({actions for _, actions in wanted}) > 1:
            self._conflicted.add(key)
        else:
            self._conflicted.discard(key)

    def add(self, flow: Flow) -> None:
        """Want `flow` (once more)."""
        key, actions = _packed(flow.table, flow.priority, flow.match), flow.actions
        if self._shared:
            key, actions = sys.intern(key), sys.intern(actions)
        choice = (flow.cookie, actions)
        wanted = self._multi.get(key)
        if wanted is None:
            other = self._single.get(key)
            if other is None:
                self._single[key] = choice
                return
            del self._single[key]
            wanted = self._multi[key] = {other: 1}
        wanted[choice] = wanted.get(choice, 0) + 1
        self._recheck(key, wanted)

    def remove(self, flow: Flow) -> None:
        """Want `flow` once less."""
        key, choice = _packed(flow.table, flow.priority, flow.match), (flow.cookie, flow.actions)
        if self._single.get(key) == choice:
            del self._single[key]
            return
        wanted = self._multi.get(key)
        if wanted is None or choice not in wanted:
            return
        wanted[choice] -= 1
        if wanted[choice] <= 0:
            del wanted[choice]
        if len(wanted) == 1 and next(iter(wanted.values())) == 1:
            del self._multi[key]
            self._single[key] = next(iter(wanted))
            wanted = None
        elif not wanted:
            del self._multi[key]
        self._recheck(key, wanted)

    def get(self, key: Key) -> Flow | None:
        """The flow installed for `key` (None: no flow)."""
        chosen = self._chosen(_packed(*key))
        return None if chosen is None else Flow(*key, chosen[1], chosen[0])

    def _chosen(self, key: str) -> tuple[int, str] | None:
        """The (cookie, actions) installed for packed `key`: the one it is wanted with, or
        the least of several (None: not wanted)."""
        single = self._single.get(key)
        if single is not None:
            return single
        wanted = self._multi.get(key)
        return min(wanted) if wanted else None

    def candidates(self, key: Key) -> list[tuple[int, str]]:
        """Every (cookie, actions) wanted for `key`, sorted (the first is installed)."""
        packed = _packed(*key)
        single = self._single.get(packed)
        return [single] if single is not None else sorted(self._multi.get(packed, {}))

    def __len__(self) -> int:
        return len(self._single) + len(self._multi)

    def __iter__(self) -> Iterator[Flow]:
        for table, priority, cookie_value, match, actions in self.rows():
            yield Flow(table, priority, match, actions, cookie_value)

    def rows(self) -> Iterator[tuple[int, int, int, str, str]]:
        """The flows as `__iter__` gives them, as (table, priority, cookie, match, actions)
        (no `Flow` made: a whole table's encoding, `bulk_adds`)."""
        for key in sorted([*self._single, *self._multi]):
            chosen = self._chosen(key)
            if chosen is not None:
                table, priority, match = _unpacked(key)
                yield table, priority, chosen[0], match, chosen[1]

    def conflict_count(self) -> int:
        """How many keys are wanted with different actions."""
        return len(self._conflicted)

    def conflicts(self) -> list[tuple[Key, list[str]]]:
        """Keys wanted with different actions, with those actions (the first is installed)."""
        found = []
        for packed in sorted(self._conflicted):
            actions = sorted({a for _, a in self._multi[packed]})
            if len(actions) > 1:
                chosen = self._chosen(packed)
                assert chosen is not None
                actions.remove(chosen[1])
                found.append((_unpacked(packed), [chosen[1], *actions]))
        return found


def bundle_lines(mods: Iterable[Mod]) -> list[str]:
    """`mods` as `ovs-ofctl bundle` lines."""
    return [f"flow delete_strict {flow.spec()}" if op == "delete"
            else f"flow {'add' if op == 'add' else 'modify_strict'} {flow.text()}"
            for op, flow in mods]  # fmt: skip


_COMMANDS = {"add": ofp.OFPFC_ADD, "modify": ofp.OFPFC_MODIFY_STRICT,
             "delete": ofp.OFPFC_DELETE_STRICT}  # fmt: skip


@lru_cache(maxsize=1 << 18)
def encode_actions(actions: str) -> bytes:
    """`ofp.encode_actions`, natively unless the native encoder declines the list (then the
    reference way, which encodes the same bytes or refuses it). Cached: ~10 flows share
    each list; NVP's workload at full scale has 136k distinct lists."""
    try:
        return native_encode_actions(actions)
    except ValueError:
        return ofp.encode_actions(actions)


@lru_cache(maxsize=1 << 16)
def encode(mod: Mod) -> bytes:
    """`mod` as an OFPT_FLOW_MOD (xid 0); `ofp.FlowSyntaxError` if it uses syntax the
    encoder does not know.

    Cached: a change's flows go to every node with their datapath. Natively (as
    `bulk_adds`, a fraction of Python's cost a flow); what the native encoder declines, the
    reference way. Whole tables do not come this way (`bulk_adds`)."""
    op, flow = mod
    deleting = op == "delete"
    actions = encode_actions(flow.actions) if flow.actions and not deleting else b""
    try:
        return native_flow_mod(_COMMANDS[op], flow.table, flow.priority,
                               0 if deleting else flow.cookie, flow.match, actions)  # fmt: skip
    except (ValueError, OverflowError):
        return _encode(mod)


def bulk_adds(flows: Iterable[Flow]) -> bytes:
    """`flows` added to the bulk bundle (`Channel.bundle_encoded`, `Switch.load`): one
    `ofp.bundle_add` message each, with xid 0, so the bytes are the same for every switch
    and are made once for all; `ofp.FlowSyntaxError` as `encode`.

    The matches are encoded and the messages framed natively (`loom_ddlog._native`: a
    cold start's 1.45M flows per controller at NVP's scale, whose matches nearly never
    repeat); the actions, which flows share, by `encode_actions` (cached). A match the
    native encoder declines sends the flows the reference way (`ofp`), which encodes the
    same bytes or refuses the flow."""
    rows = (list(flows.rows()) if isinstance(flows, FlowTable)
            else [(f.table, f.priority, f.cookie, f.match, f.actions) for f in flows])  # fmt: skip
    actions = encode_actions
    try:
        return native_bulk_adds([(*row[:4], actions(row[4]) if row[4] else b"") for row in rows])
    except (ValueError, OverflowError):
        return b"".join(ofp.bundle_add(ofp.BULK_BUNDLE, _encode(("add", Flow(t, p, m, a, c))), 0)
                        for t, p, c, m, a in rows)  # fmt: skip


def _encode(mod: Mod) -> bytes:
    op, flow = mod
    if op == "delete":
        return ofp.flow_mod(ofp.OFPFC_DELETE_STRICT, flow.table, flow.priority, flow.match,
                            None, 0, 0)  # fmt: skip
    return ofp.flow_mod(_COMMANDS[op], flow.table, flow.priority, flow.match, flow.actions,
                        flow.cookie, 0)  # fmt: skip


def parse_diff(text: str) -> list[Mod]:
    """The changes that turn a table into another, from `ovs-ofctl diff-flows TABLE OTHER`
    output: a `+` line whose key also has a `-` line with the same cookie is a flow to
    modify in place, other `+` lines flows to add, other `-` lines flows to delete. Both
    sides are printed by the same OVS printer, so equal keys are equal text.

    Raises:
        OpenFlowError: a line is not a flow as `ovs-ofctl` prints it.
    """
    gone: dict[Key, tuple[Flow, tuple[str, ...]]] = {}
    came: dict[Key, tuple[Flow, tuple[str, ...]]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        sign, body = line[0], line[1:]
        head, found, actions = body.partition(" actions=")
        if sign not in "+-" or not found:
            raise OpenFlowError(detail=f"diff-flows: not a flow: {line!r}")
        # As OVS prints a flow: [table=N ]MATCH[ cookie=C][ idle_timeout=T ...] (the
        # match, priority first, empty for a catch-all of the default priority).
        tokens = head.split(" ")
        table = 0
        if tokens[0].startswith("table="):
            table = int(tokens.pop(0)[len("table=") :])
        spec = tokens.pop(0) if tokens and not tokens[0].startswith(_ATTRIBUTES) else ""
        cookie_value, attributes = 0, []
        for token in tokens:
            if token.startswith("cookie="):
                cookie_value = int(token[len("cookie=") :], 0)
            elif token:
                attributes.append(token)
        fields = spec.split(",") if spec else []
        priority = 32768  # (OpenFlow's default: printed only when different)
        if fields and fields[0].startswith("priority="):
            priority = int(fields.pop(0)[len("priority=") :])
        flow = Flow(table, priority, ",".join(fields), actions, cookie_value)
        (came if sign == "+" else gone)[flow.key] = (flow, tuple(attributes))
    # A modify keeps the flow's age and counters but (OpenFlow 1.1+) not a new cookie nor
    # other timeouts: such a flow is added again, replacing the installed one atomically,
    # as `ovs-ofctl replace-flows` does.
    mods: list[Mod] = [
        ("modify" if key in gone and gone[key][0].cookie == flow.cookie
         and gone[key][1] == attributes else "add", flow)
        for key, (flow, attributes) in came.items()
    ]  # fmt: skip
    mods += [("delete", flow) for key, (flow, _) in gone.items() if key not in came]
    return mods


_ATTRIBUTES = ("cookie=", "idle_timeout=", "hard_timeout=", "importance=")
"""What OVS prints after a flow's match (besides the flags, which Loom never sets)."""
