"""The pipeline contract: stages, OpenFlow tables, registers and their bits, port keys.

Everything the logical rules, the physical rules and the Python that localizes must agree on
is declared here, once, typed (as antrea's `fields.go`/`pipeline.go` and OVN's DDlog `Stage`
type and `rEGBIT_*()` functions do), and nowhere else:

- the logical pipelines' stages in order, and the OpenFlow table of each (`STAGES`);
- the tables of the physical tier (`Table`), which universal flows reach through
  placeholders (`PLACEHOLDERS`: `resubmit(,@egress)` and its kin), never by number;
- the logical fields (`FIELDS`: each a `Field`, its role, register and bits, meaning) and
  the flag bits (`Flag`), with the text a match or an action spells them with;
- the masked matches the rules share (`MATCHES`), the logical port keys with fixed
  meanings, and the datapath key ranges;
- the categories a flow's cookie carries beside its object (`Category`), and how tools
  name a table (`table_name`).

The rule programs get it as `pipeline.dl`, generated from this module (`make rules`; a test
fails when the generated file is stale): `dl_text()`. There each stage is also a typed value,
`s_ls_in_acl()` and so on, of type `LogicalStage` (its pipeline, name, datapath kind and
table): the logical rules name stages only so, so a misspelt stage does not compile and a
stage cannot be put in the other pipeline; and each field has its helpers
(`match_inport(k)`, `set_outport(k)`, `bits_zone()` ...), so no rule spells a register
(a test checks that no rule nor product module does). `schemas/loom_universal.md` explains
the meaning of each item, its register table generated from `FIELDS` (`register_table`);
this module is what the code obeys.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# ---- stages ---------------------------------------------------------------------------

INGRESS_BASE = 8
"""Table of the first ingress stage (the tables below are the physical classifier's)."""
EGRESS_BASE = 40
"""Table of the first egress stage."""


@dataclass(frozen=True)
class Stage:
    """One stage of a logical pipeline: its name (as universal flows spell it), the kind of
    datapath and the pipeline it belongs to, and its OpenFlow table."""

    name: str
    kind: str
    """"switch" or "router"."""
    pipeline: str
    """"ingress" or "egress"."""
    table: int
    next_table: int
    """The table `@next` means at this stage (0 for its pipeline's last stage)."""


PIPELINES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("switch", "ingress"): (
        "ls_in_port_sec_l2", "ls_in_port_sec_ip", "ls_in_port_sec_nd", "ls_in_pre_acl",
        "ls_in_acl", "ls_in_arp_rsp", "ls_in_nd_rsp", "ls_in_l2_lkup",
    ),
    ("switch", "egress"): (
        "ls_out_pre_acl", "ls_out_acl", "ls_out_port_sec_l2", "ls_out_port_sec_ip",
        "ls_out_deliver",
    ),
    ("router", "ingress"): (
        "lr_in_admission", "lr_in_ip_input", "lr_in_dnat", "lr_in_ip_routing",
        "lr_in_arp_resolve", "lr_in_deliver",
    ),
    ("router", "egress"): ("lr_out_snat", "lr_out_deliver"),
}  # fmt: skip
"""Each pipeline's stages in order. Switch and router stages share table numbers, as OVN's
do: `metadata` says whose flow it is."""


def _stages() -> dict[str, Stage]:
    stages = {}
    for (kind, pipeline), names in PIPELINES.items():
        base = INGRESS_BASE if pipeline == "ingress" else EGRESS_BASE
        for index, name in enumerate(names):
            following = base + index + 1 if index + 1 < len(names) else 0
            stages[name] = Stage(name, kind, pipeline, base + index, following)
    return stages


STAGES: Mapping[str, Stage] = _stages()
"""Stage name -> its `Stage`."""


def table(stage: str) -> int:
    """The OpenFlow table of `stage` (KeyError for an unknown stage)."""
    return STAGES[stage].table


def next_table(stage: str) -> int:
    """The table `@next` means at `stage`.

    Raises:
        KeyError: an unknown stage.
        ValueError: `stage` is the last of its pipeline (it has no next).
    """
    following = STAGES[stage].next_table
    if following == 0:
        raise ValueError(f"{stage} is the last stage of its pipeline: no @next")
    return following


# ---- the physical tier's tables --------------------------------------------------------


class Table(enum.IntEnum):
    """The OpenFlow tables of the physical tier (the logical stages sit at 8..63).

    Every node-specific detail lives in these tables, so that the logical stages' flows
    are the same bytes on every node that has their datapath.
    """

    CLASSIFIER = 0
    """A packet's way in: a VIF's enters its switch's ingress pipeline (with the port's
    key and conntrack zone); a tunnel's enters the egress pipeline or the flood table."""
    FLOOD = 64
    """A switch's flood group on this node: a copy through `OUTPUT` for each local port,
    and the copies to the other nodes with ports on the switch (`FLOOD_REMOTE`), or one
    to its service node."""
    NEXT_HOP_LEARN = 65
    """An L3 uplink's next-hop MAC, learned from ARP replies (`learn`)."""
    NEXT_HOP_CHECK = 66
    """Out of the uplink once the next hop's MAC is learned."""
    FLOOD_REMOTE = 67
    """A switch's copies to every node with ports on it, each by tunnel: one flow for the
    switch, the same bytes on every node that has it (the tunnel tables drop the copy a
    node addresses to itself)."""
    OUTPUT = 70
    """To the egress port's node (`@egress`, the port in `reg15`): a port here runs the
    egress pipeline here (its zone loaded); a port elsewhere goes by tunnel to its node.
    The remote flows are the same on every node; a node's own ports override them."""
    DELIVER = 71
    """Out of the egress port's attachment on this node (`@deliver`): a VIF's ofport, a
    gateway port's uplink."""
    ZONE = 72
    """The conntrack zone of the router in `metadata` on this node, into `reg13` (`@zone`)."""
    TUNNEL_GENEVE = 73
    """Out of this node's flow-based Geneve port (`tun_dst` set before; a copy with this
    node's own address is dropped)."""
    TUNNEL_VXLAN = 74
    """Out of this node's flow-based VXLAN port."""
    TUNNEL_STT = 75
    """Out of this node's flow-based STT port."""


TUNNEL_TABLES: Mapping[str, Table] = {
    "geneve": Table.TUNNEL_GENEVE,
    "vxlan": Table.TUNNEL_VXLAN,
    "stt": Table.TUNNEL_STT,
}
"""Encapsulation -> the table whose one flow outputs to this node's port for it."""

PLACEHOLDERS: Mapping[str, Table] = {
    "@egress": Table.OUTPUT,
    "@deliver": Table.DELIVER,
    "@flood": Table.FLOOD,
    "@zone": Table.ZONE,
}
"""What a universal flow says instead of a node-specific action (`resubmit(,@egress)`)."""


def at_table(table: int, kind: str) -> Stage | Table | None:
    """What OpenFlow table `table` is, for a packet of a `kind` ("switch" or "router")
    datapath: a stage of its logical pipelines, a physical table, or None (Loom uses no
    such table). Switch and router stages share table numbers; `kind` says whose."""
    stage = _BY_TABLE.get((table, kind))
    if stage is not None:
        return stage
    try:
        return Table(table)
    except ValueError:
        return None


_BY_TABLE: Mapping[tuple[int, str], Stage] = {(s.table, s.kind): s for s in STAGES.values()}


# ---- registers -------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One logical field: bits `start..end` (inclusive) of an OpenFlow field, and what it
    carries."""

    role: str
    """Its logical name (`inport`): the rules' helpers are named after it (`match_inport`,
    `set_inport`, ...)."""
    name: str
    """Its OpenFlow field's name in `ovs-ofctl` match and `set_field` syntax (`reg14`)."""
    nxm: str
    """Its OpenFlow field's name in `move`/`load` syntax (`NXM_NX_REG14`)."""
    start: int
    end: int
    meaning: str
    """What it carries (the register table of `schemas/loom_universal.md`)."""
    decimal: bool = False
    """Values are spelt in decimal (a conntrack zone), not 0x-prefixed hex (keys)."""

    @property
    def bits(self) -> str:
        """`NXM_NX_REG14[0..15]`: the field's bits in `move` and `ct(zone=...)` syntax."""
        return f"{self.nxm}[{self.start}..{self.end}]"

    @property
    def whole(self) -> str:
        """`NXM_NX_REG14[]`: the whole OpenFlow field, in `move` syntax."""
        return f"{self.nxm}[]"

    @property
    def mask(self) -> int:
        """The field's bits as a mask of its OpenFlow field."""
        return ((1 << (self.end - self.start + 1)) - 1) << self.start

    def of(self, word: int) -> int:
        """The field's value in `word`, its OpenFlow field's whole value (a trace's Geneve
        option)."""
        return (word & self.mask) >> self.start

    def spell(self, value: int) -> str:
        """`value` as a match or `set_field` spells it for this field."""
        return str(value) if self.decimal else f"{value:#x}"

    def match(self, value: int) -> str:
        """The match text for the field equal to `value`: `reg14=0x3`."""
        return f"{self.name}={self.spell(value)}"

    def match_bits(self, value: int, mask: int | None = None) -> str:
        """The masked match text for the field's bits (or `mask` of them) equal to
        `value`: `tun_metadata0=0xffff/0xffff`, `metadata=0/0x800000`."""
        bits = self.mask if mask is None else mask << self.start
        shifted = value << self.start
        return f"{self.name}={shifted:#x}/{bits:#x}" if shifted else f"{self.name}=0/{bits:#x}"

    def load(self, value: int) -> str:
        """The action text that sets the field to `value`: `set_field:0x3->reg14`."""
        return f"set_field:{self.spell(value)}->{self.name}"


DATAPATH = Field(
    "datapath",
    "metadata",
    "OXM_OF_METADATA",
    0,
    23,
    "the logical datapath key (switches 1..2^23-1, routers 2^23..2^24-1)",
)
"""The logical datapath key."""
INPORT = Field(
    "inport",
    "reg14",
    "NXM_NX_REG14",
    0,
    15,
    "the logical ingress port key (0xfffe: a router's uplink)",
)
"""The logical ingress port key."""
OUTPORT = Field(
    "outport",
    "reg15",
    "NXM_NX_REG15",
    0,
    15,
    "the logical egress port key (0xffff: the flood group; 0xfffe: the uplink; 0xfffd: "
    "the Hoverboards)",
)
"""The logical egress port key."""
ZONE = Field(
    "zone",
    "reg13",
    "NXM_NX_REG13",
    0,
    15,
    "the conntrack zone of the port (or router) whose stage runs (set where a "
    "port's packets enter and reach it, a router's by `@zone`)",
    decimal=True,
)
"""The conntrack zone of the port (or router) whose stage runs."""
NEXT_HOP = Field(
    "next_hop",
    "reg0",
    "NXM_NX_REG0",
    0,
    31,
    "routers: the next hop's IPv4 address (`lr_in_ip_routing` to `lr_in_arp_resolve`)",
)
"""Routers: the next hop's IPv4 address (`lr_in_ip_routing` to `lr_in_arp_resolve`)."""
FLAGS = Field("flags", "reg10", "NXM_NX_REG10", 0, 31, "one-bit flags (below)")
"""One-bit flags (`Flag`)."""
TUN_KEY = Field(
    "tun_key", "tun_id", "NXM_NX_TUN_ID", 0, 23, "Geneve / VXLAN VNI = the datapath key"
)
"""The tunnel key: the datapath key."""
TUN_INPORT = Field(
    "tun_inport",
    "tun_metadata0",
    "NXM_NX_TUN_METADATA0",
    16,
    31,
    "Geneve option (class 0x0102, type 0x80): the ingress port key",
)
"""The Geneve option's ingress port key."""
TUN_OUTPORT = Field(
    "tun_outport",
    "tun_metadata0",
    "NXM_NX_TUN_METADATA0",
    0,
    15,
    "Geneve option: the egress port key",
)
"""The Geneve option's egress port key."""

FIELDS: tuple[Field, ...] = (DATAPATH, INPORT, OUTPORT, FLAGS, ZONE, NEXT_HOP, TUN_KEY,
                             TUN_INPORT, TUN_OUTPORT)  # fmt: skip
"""Every logical field, in the register table's order. Nothing else in Loom spells a
register: the rules call `pipeline.dl`'s helpers, the Python side these `Field`s."""


class Flag(enum.IntEnum):
    """The bits of `FLAGS` (their meanings: `FLAG_MEANINGS`). A flag set by a port's own
    flow lets one flow per datapath act for every port that set it: the ingress
    pipeline's speak of the ingress port (`INPORT`), the egress pipeline's of the egress
    port (`OUTPORT`)."""

    FROM_TUNNEL = 0
    LOOPBACK = 1
    IN_SECURED = 2
    ND_REPLY = 3
    IN_ACL = 4
    IN_CT = 5
    OUT_SECURED = 6
    OUT_ACL = 7
    OUT_CT = 8
    HOP_LEARNED = 9

    @property
    def mask(self) -> str:
        """`0x4`: the flag's bit as a hex mask."""
        return f"{1 << self.value:#x}"

    def match(self, on: bool = True) -> str:
        """The match text for the flag set (or clear): `reg10=0x4/0x4`, `reg10=0/0x4`."""
        return f"{FLAGS.name}={self.mask if on else '0'}/{self.mask}"

    def set(self) -> str:
        """The action text that sets the flag: `set_field:0x4/0x4->reg10`."""
        return f"set_field:{self.mask}/{self.mask}->{FLAGS.name}"


FLAG_MEANINGS: Mapping[Flag, str] = {
    Flag.FROM_TUNNEL: "came from a tunnel (set by the physical classifier)",
    Flag.LOOPBACK: "loopback allowed: a responder sends the packet back out of its ingress port",
    Flag.IN_SECURED: "ingress: the ingress port has port security (set in `ls_in_port_sec_l2`)",
    Flag.ND_REPLY: "an ND reply under construction (`ls_in_arp_rsp` to `ls_in_nd_rsp`)",
    Flag.IN_ACL: "ingress: the ingress port has a security profile (set in `ls_in_pre_acl`)",
    Flag.IN_CT: "ingress: ... a stateful one; conntrack ran in its zone (`ls_in_pre_acl`)",
    Flag.OUT_SECURED: "egress: the egress port has port security (set in `ls_out_port_sec_l2`)",
    Flag.OUT_ACL: "egress: the egress port has a security profile (set in `ls_out_pre_acl`)",
    Flag.OUT_CT: "egress: ... a stateful one; conntrack ran in its zone (`ls_out_pre_acl`)",
    Flag.HOP_LEARNED: "gateway node: the L3 uplink's next-hop MAC is learned and set "
    "(table 65, physical)",
}
"""What each flag says when set."""

FLOOD_KEY = 0xFFFF
"""The logical port key of the flood group (`OUTPORT`)."""
UPLINK_KEY = 0xFFFE
"""A router's uplink port key."""
HOVERBOARD_KEY = 0xFFFD
"""The egress port key of a hoverboard-model switch's Hoverboards: a host sends what its
own lookups do not know there, and a Hoverboard looks it up (`docs/physical.md`)."""
ROUTER_KEYS = (1 << 23, (1 << 24) - 1)
"""Router datapath keys; switches have 1..2^23-1 (so bit 23 of the datapath key says
which)."""

ALL_SWITCHES_MATCH = DATAPATH.match_bits(0, ROUTER_KEYS[0])
"""`metadata=0/0x800000`: every switch datapath (the router bit of the key clear)."""

# ---- matches the rules share -----------------------------------------------------------

MATCHES: Mapping[str, str] = {
    "vlan_tagged": "vlan_tci=0x1000/0x1000",
    "untagged": "vlan_tci=0x0000/0x1000",
    "mcast_src": "dl_src=01:00:00:00:00:00/01:00:00:00:00:00",
    "mcast_dst": "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
    "ucast_dst": "dl_dst=00:00:00:00:00:00/01:00:00:00:00:00",
}
"""Masked matches of packet fields, by name (`m_vlan_tagged()` in the rules): a frame with
a VLAN tag (the tag-present bit of its TCI), one without, a multicast (or broadcast) source
or destination MAC (the group bit of its first octet), a unicast destination."""

# ---- cookies ---------------------------------------------------------------------------


class Category(enum.IntEnum):
    """What a flow is for: bits `CATEGORY_SHIFT`.. of its cookie, beside the object's 32
    bits above them and Loom's mark below (`cookie`). A logical stage's flows have its
    stage's (`STAGE_CATEGORIES`); the physical tier's tables theirs (`TABLE_CATEGORIES`)."""

    NONE = 0
    """Not said (a flow of the physical tier written without one)."""
    PORT_SECURITY = 1
    """Admin state and port security (rules/logical/port_security.dl)."""
    ACL = 2
    """Security profiles (rules/logical/acl.dl)."""
    L2 = 3
    """The L2 switch: responders, the MAC lookup, flooding, delivery (switch.dl)."""
    ROUTER = 4
    """The distributed router (router.dl)."""
    NAT = 5
    """NAT on an L3 gateway (nat.dl)."""
    CLASSIFIER = 8
    """The physical classifier (rules/physical/classifier.dl, gateways.dl)."""
    FLOOD = 9
    """A switch's flood copies on a node (flooding.dl)."""
    OUTPUT = 10
    """To the egress port's node, out of its attachment, by tunnel (binding.dl)."""
    NEXT_HOP = 11
    """An L3 uplink's next hop (nexthops.dl)."""

    @property
    def label(self) -> str:
        """`port_security`: how tools show it."""
        return self.name.lower()


CATEGORY_SHIFT = 16
"""The cookie's category bits start here (8 of them), between the object and the mark."""

STAGE_CATEGORIES: Mapping[str, Category] = {
    "ls_in_port_sec_l2": Category.PORT_SECURITY,
    "ls_in_port_sec_ip": Category.PORT_SECURITY,
    "ls_in_port_sec_nd": Category.PORT_SECURITY,
    "ls_in_pre_acl": Category.ACL,
    "ls_in_acl": Category.ACL,
    "ls_in_arp_rsp": Category.L2,
    "ls_in_nd_rsp": Category.L2,
    "ls_in_l2_lkup": Category.L2,
    "ls_out_pre_acl": Category.ACL,
    "ls_out_acl": Category.ACL,
    "ls_out_port_sec_l2": Category.PORT_SECURITY,
    "ls_out_port_sec_ip": Category.PORT_SECURITY,
    "ls_out_deliver": Category.L2,
    "lr_in_admission": Category.ROUTER,
    "lr_in_ip_input": Category.ROUTER,
    "lr_in_dnat": Category.NAT,
    "lr_in_ip_routing": Category.ROUTER,
    "lr_in_arp_resolve": Category.ROUTER,
    "lr_in_deliver": Category.ROUTER,
    "lr_out_snat": Category.NAT,
    "lr_out_deliver": Category.ROUTER,
}
"""Each stage's category: the feature whose rules fill it."""

TABLE_CATEGORIES: Mapping[Table, Category] = {
    Table.CLASSIFIER: Category.CLASSIFIER,
    Table.FLOOD: Category.FLOOD,
    Table.FLOOD_REMOTE: Category.FLOOD,
    Table.NEXT_HOP_LEARN: Category.NEXT_HOP,
    Table.NEXT_HOP_CHECK: Category.NEXT_HOP,
    Table.OUTPUT: Category.OUTPUT,
    Table.DELIVER: Category.OUTPUT,
    Table.ZONE: Category.OUTPUT,
    Table.TUNNEL_GENEVE: Category.OUTPUT,
    Table.TUNNEL_VXLAN: Category.OUTPUT,
    Table.TUNNEL_STT: Category.OUTPUT,
}
"""Each physical table's category."""


def with_category(cookie: int, category: Category) -> int:
    """`cookie` (an object's, with Loom's mark) with `category` in its category bits."""
    return cookie & ~(0xFF << CATEGORY_SHIFT) | int(category) << CATEGORY_SHIFT


def category_of(cookie: int) -> Category:
    """The category a flow's `cookie` carries (`Category.NONE` for one that says none, or
    a value this contract does not know)."""
    try:
        return Category(cookie >> CATEGORY_SHIFT & 0xFF)
    except ValueError:
        return Category.NONE


def table_name(table: int, match: str) -> str:
    """How tools name OpenFlow table `table` of a flow with `match`: its logical stage's
    name (`ls_in_acl`; the datapath in `match` says a switch's or a router's), its physical
    table's (`output`), or the number for a table Loom does not use."""
    kind = "router" if _datapath_of(match) >= ROUTER_KEYS[0] else "switch"
    where = at_table(table, kind)
    if isinstance(where, Stage):
        return where.name
    return where.name.lower() if where is not None else str(table)


def table_number(name: str) -> int:
    """The OpenFlow table `table_name` names (a stage's, a physical table's, a number)."""
    if name.isdigit():
        return int(name)
    if name in _stages():
        return table(name)
    return int(Table[name.upper()])


def _datapath_of(match: str) -> int:
    """The datapath key `match` names (0: none, or every switch)."""
    head = f"{DATAPATH.name}="
    for part in match.split(","):
        if part.startswith(head):
            value = part[len(head) :].split("/")[0]
            return int(value, 0)
    return 0


# ---- the rule programs' copy -----------------------------------------------------------


def dl_text() -> str:
    """`pipeline.dl`: this contract for the rule programs (generated; never edited)."""
    lines = [
        "/* The pipeline contract (stages, tables, registers, port keys), generated from",
        " * loom_schemas.pipeline by `make rules`: do not edit. */",
        "",
        "/* Stage `name` of a `kind` datapath's `pipeline` is OpenFlow table `table`;",
        " * `@next` there means table `next` (0 after a pipeline's last stage). */",
        "relation Stage(name: string, kind: string, pipeline: string, table: bit<64>,",
        "               next: bit<64>)",
    ]
    lines += [
        f'Stage("{s.name}", "{s.kind}", "{s.pipeline}", {s.table}, {s.next_table}).'
        for s in STAGES.values()
    ]
    lines += [
        "",
        "/* A stage as a value (OVN's `Stage` type): stage `name`, as universal flows spell it,",
        " * of a `kind` datapath's `pipeline`, at OpenFlow table `table`. Rules name a stage",
        " * only by its function, `s_NAME()`, so a misspelt stage does not compile and a stage",
        " * cannot be put in the other pipeline. */",
        "typedef LogicalStage = LogicalStage{pipeline: string, name: string, kind: string,",
        "                                    table: bit<64>}",
    ]
    lines += [
        f"function s_{s.name}(): LogicalStage =\n"
        f'    LogicalStage{{"{s.pipeline}", "{s.name}", "{s.kind}", {s.table}}}'
        for s in STAGES.values()
    ]
    lines += ["", "function ingress_base(): bit<64> = " + str(INGRESS_BASE)]
    lines += ["function egress_base(): bit<64> = " + str(EGRESS_BASE)]
    lines += ["", "/* The physical tier's tables (loom_schemas.pipeline.Table). */"]
    lines += [f"function t_{t.name.lower()}(): bit<64> = {t.value}" for t in Table]
    lines += ["", "/* The flags of reg10, by bit (loom_schemas.pipeline.Flag). */"]
    lines += [f"function f_{f.name.lower()}(): bit<64> = {f.value}" for f in Flag]
    bit = "x${hex(64'd1 << bit)}"
    mask = "x${hex(mask)}"
    lines += [
        "/* Match: flag `bit` is set. */",
        f'function flag(bit: bit<64>): string = "{FLAGS.name}=0{bit}/0{bit}"',
        "/* Match: flag `bit` is clear. */",
        f'function no_flag(bit: bit<64>): string = "{FLAGS.name}=0/0{bit}"',
        "/* Action: set flag `bit`. */",
        f'function set_flag(bit: bit<64>): string = "set_field:0{bit}/0{bit}->{FLAGS.name}"',
        "/* Action: clear flag `bit`. */",
        f'function clear_flag(bit: bit<64>): string = "set_field:0/0{bit}->{FLAGS.name}"',
        "/* The bit of flag `bit`, as a mask (or several, or-ed, for `set_flags`). */",
        "function flag_mask(bit: bit<64>): bit<64> = 64'd1 << bit",
        "/* Action: set every flag of `mask`. */",
        f'function set_flags(mask: bit<64>): string = "set_field:0{mask}/0{mask}->{FLAGS.name}"',
        "/* Action: clear every flag. */",
        f'function clear_flags(): string = "set_field:0->{FLAGS.name}"',
    ]
    lines += [
        "/* In a `learn` action: set flag `bit`. */",
        f'function load_flag(bit: bit<64>): string = "load:1->{FLAGS.nxm}[${{bit}}]"',
    ]
    lines += _field_lines()
    lines += [
        "",
        "/* Every switch datapath (the router bit of the key clear). */",
        f'function match_all_switches(): string = "{ALL_SWITCHES_MATCH}"',
        "/* Masked matches of packet fields (loom_schemas.pipeline.MATCHES). */",
    ]
    lines += [f'function m_{name}(): string = "{text}"' for name, text in MATCHES.items()]
    lines += [
        "",
        "/* Logical port keys with fixed meanings: the flood group, a router's uplink, a",
        " * hoverboard-model switch's Hoverboards. */",
        f"function flood_key(): bit<64> = 64'h{FLOOD_KEY:x}",
        f"function uplink_key(): bit<64> = 64'h{UPLINK_KEY:x}",
        f"function hoverboard_key(): bit<64> = 64'h{HOVERBOARD_KEY:x}",
        "/* The first router datapath key (bit 23 of metadata). */",
        f"function router_key_base(): bit<64> = 64'h{ROUTER_KEYS[0]:x}",
        "",
        "/* `actions` with every `@stage:NAME)` replaced by `TABLE)` (universal flows name a",
        " * stage only as `resubmit(,@stage:NAME)`). */",
        "function resolve_stages(actions: string): string =",
        '    if (not actions.contains("@stage:")) actions else actions',
    ]
    lines += [f'        .replace("@stage:{s.name})", "{s.table})")' for s in STAGES.values()]
    return "\n".join(lines) + "\n"


def _field_lines() -> list[str]:
    """`pipeline.dl`'s helpers for each logical field (`FIELDS`)."""
    lines = [
        "",
        "/* The logical fields (loom_schemas.pipeline.FIELDS); for field NAME:",
        " *   reg_NAME()          its OpenFlow field, as a match or set_field names it",
        " *   bits_NAME()         its bits, as move and ct(zone=...) name them",
        " *   whole_NAME()        its whole OpenFlow field, in move syntax",
        " *   match_NAME(v)       match: the field is `v`",
        " *   match_NAME_bits(v)  match: its bits (masked) are `v`",
        " *   set_NAME(v)         action: set the field to `v`",
        " *   set_NAME_bits(v)    action: set its bits (masked) to `v`",
        " *   clear_NAME()        action: set the field to 0 */",
        "/* Action: move bits `src` to bits `dst` (bits_*(), whole_*()). */",
        'function move(src: string, dst: string): string = "move:${src}->${dst}"',
    ]
    for f in FIELDS:
        value = "${v}" if f.decimal else "0x${hex(v)}"
        shifted = f"0x${{hex(v << {f.start})}}" if f.start else "0x${hex(v)}"
        lines += [
            *_comment(f"{f.role}: {f.meaning}."),
            f'function reg_{f.role}(): string = "{f.name}"',
            f'function bits_{f.role}(): string = "{f.bits}"',
            f'function whole_{f.role}(): string = "{f.whole}"',
        ]
        if f is FLAGS:  # matched and set by flag (`flag()`, `set_flag()` and their kin)
            continue
        lines += [
            f'function match_{f.role}(v: bit<64>): string = "{f.name}={value}"',
            f"function match_{f.role}_bits(v: bit<64>): string =",
            f'    "{f.name}={shifted}/{f.mask:#x}"',
            f'function set_{f.role}(v: bit<64>): string = "set_field:{value}->{f.name}"',
            f"function set_{f.role}_bits(v: bit<64>): string =",
            f'    "set_field:{shifted}/{f.mask:#x}->{f.name}"',
            f'function clear_{f.role}(): string = "set_field:0->{f.name}"',
        ]
    return lines


def _comment(text: str, width: int = 88) -> list[str]:
    """`text` as a `/* ... */` comment of lines at most `width` long."""
    words, lines, line = text.split(), [], "/*"
    for word in words:
        if len(line) + 1 + len(word) > width - 3:
            lines.append(line)
            line = " *"
        line += " " + word
    lines.append(line + " */")
    return lines


# ---- the register table of schemas/loom_universal.md ----------------------------------

TABLE_BEGIN = "<!-- the register table: generated from loom_schemas.pipeline by `make rules` -->"
TABLE_END = "<!-- end of the register table -->"


def register_table() -> str:
    """The register table of `schemas/loom_universal.md` (Markdown), from `FIELDS` and
    `FLAG_MEANINGS`: what the code obeys is what the document says."""
    lines = ["| field | OpenFlow | bits | carries |", "| --- | --- | --- | --- |"]
    for f in FIELDS:
        lines.append(f"| `{f.role}` | `{f.name}` | {f.start}..{f.end} | {_cell(f.meaning)} |")
        if f is FLAGS:
            lines += [
                f"| `{f.role}.{flag.name.lower()}` | `{f.name}` | bit {flag.value} "
                f"| {_cell(FLAG_MEANINGS[flag])} |"
                for flag in Flag
            ]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def with_register_table(document: str) -> str:
    """`document` with the text between `TABLE_BEGIN` and `TABLE_END` replaced by
    `register_table()`.

    Raises:
        ValueError: the document lacks the markers.
    """
    try:
        head, rest = document.split(TABLE_BEGIN + "\n", 1)
        _, tail = rest.split(TABLE_END, 1)
    except ValueError:
        raise ValueError(f"no {TABLE_BEGIN!r} ... {TABLE_END!r} in the document") from None
    return f"{head}{TABLE_BEGIN}\n{register_table()}{TABLE_END}{tail}"


DOCUMENT = "schemas/loom_universal.md"
"""The document whose register table `make rules` rewrites, relative to the root."""

RULE_FILES = ("rules/logical/pipeline.dl", "rules/physical/pipeline.dl")
"""Where `make rules` writes `dl_text()`, relative to the repository root."""


def main(argv: list[str]) -> None:
    """`python -m loom_schemas.pipeline`: print `pipeline.dl`; with `--document PATH`,
    rewrite the register table of the document at PATH instead."""
    if argv[:1] == ["--document"] and len(argv) == 2:
        path = Path(argv[1])
        path.write_text(with_register_table(path.read_text()))
    elif not argv:
        print(dl_text(), end="")
    else:
        raise SystemExit("usage: python -m loom_schemas.pipeline [--document PATH]")


if __name__ == "__main__":
    main(sys.argv[1:])
