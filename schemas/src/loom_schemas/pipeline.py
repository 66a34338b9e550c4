"""The pipeline contract: stages, OpenFlow tables, registers and their bits, port keys.

Everything the logical rules, the physical rules and the Python that localizes must agree on
is declared here, once, typed (as antrea's `fields.go`/`pipeline.go` and OVN's DDlog `Stage`
type and `rEGBIT_*()` functions do), and nowhere else:

- the logical pipelines' stages in order, and the OpenFlow table of each (`STAGES`);
- the tables of the physical tier (`Table`), which universal flows reach through
  placeholders (`PLACEHOLDERS`: `resubmit(,@egress)` and its kin), never by number;
- the registers (`Field`) and the flag bits of `reg10` (`Flag`), with the text a match or an
  action spells them with;
- the logical port keys with fixed meanings, and the datapath key ranges.

The rule programs get it as `pipeline.dl`, generated from this module (`make rules`; a test
fails when the generated file is stale): `dl_text()`. There each stage is also a typed value,
`s_ls_in_acl()` and so on, of type `LogicalStage` (its pipeline, name, datapath kind and
table): the logical rules name stages only so, so a misspelt stage does not compile and a
stage cannot be put in the other pipeline. `schemas/loom_universal.md` explains the meaning
of each item; this module is what the code obeys.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

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
    """Bits `start..end` (inclusive) of an OpenFlow field."""

    name: str
    """Its name in `ovs-ofctl` match syntax (`reg14`, `metadata`)."""
    nxm: str
    """Its name in `move` syntax (`NXM_NX_REG14`, `OXM_OF_METADATA`)."""
    start: int
    end: int

    @property
    def bits(self) -> str:
        """`NXM_NX_REG14[0..15]`: the field's bits in `move` and `ct(zone=...)` syntax."""
        return f"{self.nxm}[{self.start}..{self.end}]"


DATAPATH = Field("metadata", "OXM_OF_METADATA", 0, 23)
"""The logical datapath key."""
INPORT = Field("reg14", "NXM_NX_REG14", 0, 15)
"""The logical ingress port key."""
OUTPORT = Field("reg15", "NXM_NX_REG15", 0, 15)
"""The logical egress port key."""
ZONE = Field("reg13", "NXM_NX_REG13", 0, 15)
"""The conntrack zone of the port (or router) whose stage runs."""
NEXT_HOP = Field("reg0", "NXM_NX_REG0", 0, 31)
"""Routers: the next hop's IPv4 address (`lr_in_ip_routing` to `lr_in_arp_resolve`)."""
FLAGS = Field("reg10", "NXM_NX_REG10", 0, 31)
"""One-bit flags (`Flag`)."""


class Flag(enum.IntEnum):
    """The bits of `reg10`. A flag set by a port's own flow lets one flow per datapath act
    for every port that set it: the ingress pipeline's speak of `reg14`, the egress
    pipeline's of `reg15`."""

    FROM_TUNNEL = 0
    """The packet came from a tunnel (set by the classifier)."""
    LOOPBACK = 1
    """A responder sends the packet back out of its ingress port."""
    IN_SECURED = 2
    """Ingress: the ingress port has port security."""
    ND_REPLY = 3
    """An ND reply under construction."""
    IN_ACL = 4
    """Ingress: the ingress port has a security profile."""
    IN_CT = 5
    """Ingress: ... a stateful one; conntrack ran in its zone."""
    OUT_SECURED = 6
    """Egress: the egress port has port security."""
    OUT_ACL = 7
    """Egress: the egress port has a security profile."""
    OUT_CT = 8
    """Egress: ... a stateful one; conntrack ran in its zone."""
    HOP_LEARNED = 9
    """Gateway node: the L3 uplink's next-hop MAC is learned and set."""

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


FLOOD_KEY = 0xFFFF
"""The logical port key of the flood group (`reg15`)."""
UPLINK_KEY = 0xFFFE
"""A router's uplink port key."""
ROUTER_KEYS = (1 << 23, (1 << 24) - 1)
"""Router datapath keys; switches have 1..2^23-1 (so bit 23 of `metadata` says which)."""


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
        "",
        "/* Logical port keys with fixed meanings: the flood group, a router's uplink. */",
        f"function flood_key(): bit<64> = 64'h{FLOOD_KEY:x}",
        f"function uplink_key(): bit<64> = 64'h{UPLINK_KEY:x}",
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


RULE_FILES = ("rules/logical/pipeline.dl", "rules/physical/pipeline.dl")
"""Where `make rules` writes `dl_text()`, relative to the repository root."""


if __name__ == "__main__":
    print(dl_text(), end="")
