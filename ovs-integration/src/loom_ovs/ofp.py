"""OpenFlow 1.5 wire encoding of flows written in `ovs-ofctl` syntax.

Loom's rules emit flows as `ovs-ofctl` text (readable, diffable, what the goldens show).
Pushing them through `ovs-ofctl` costs a process, a connection and a handshake per push,
whatever the push carries; on a kept connection a bundle costs its bytes.
This module turns a flow's text into the `OFPT_FLOW_MOD` OVS would build from it, for the
vocabulary the rules use:

- match fields: `in_port`, `metadata`, `reg0`..`reg15`, `xreg0`..`xreg7`,
  `xxreg0`..`xxreg3`, `tun_id`, `tun_src`, `tun_dst`, `tun_ipv6_src`, `tun_ipv6_dst`,
  `tun_metadata0` (mapped to `TUN_METADATA_BYTES` bytes by
  the TLV map Loom installs),
  `dl_src`/`dl_dst`/`dl_type`, `vlan_tci`, `dl_vlan`, `ip_dscp`, `nw_src`/`nw_dst` (ARP's SPA/TPA in
  an ARP flow), `nw_proto`, `nw_ttl`, `ipv6_src`/`ipv6_dst`, `tp_src`/`tp_dst` (TCP, UDP
  or SCTP by the protocol), `icmp_type`/`icmp_code` (ICMPv4 or v6 by the EtherType),
  `arp_*`, `nd_*`, `ct_state`, `ct_zone`, `ct_mark`, `conj_id`, `pkt_mark`, and the
  protocol shorthands (`ip`, `arp`, `tcp6`, ...), with masks and prefixes;
- actions: `output`, `resubmit`, `set_field` (masked too), `move`, `clone`, `ct` (with
  `commit`, `zone`, `table`, `nat`), `ct_clear`, `dec_ttl`, `push_vlan`, `pop_vlan`/
  `strip_vlan`, `bundle`, `conjunction`, `drop`.

Anything else raises `FlowSyntaxError`: the caller pushes that flow with `ovs-ofctl`
instead, so an unknown construct costs speed, never correctness. Match fields are emitted
in prerequisite order (EtherType, IP protocol, ICMP type, then the rest), as OVS checks
prerequisites entry by entry, and within each rank by code point: the same match written
in another order is the same bytes. Which bytes OVS would send is checked by the tests: every
flow of the snapshot scenarios, encoded here, installed on a real `ovs-vswitchd` and dumped,
equals the same flow installed by `ovs-ofctl`.

The other messages Loom exchanges with a switch are here too, both ways (the channel
sends requests; the stand-in nodes of `loom_lab.standin` answer them): HELLO, roles,
bundles, barriers, errors, the aggregate and flow statistics of OpenFlow 1.5 (OXS), and
Nicira's TLV table messages (`NXT_TLV_TABLE_MOD`/`REQUEST`/`REPLY`).

Numbers are the ones OVS documents (`ovs-fields(7)`: OXM/NXM code points; the Nicira
extension structures of `nicira-ext.h` and `ofp-actions.c`; message layouts of
`openflow-1.5.h`, error codes of `ofp-errors.h`, OXS of `ox-stat.c`).
"""

from __future__ import annotations

import ipaddress
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from loom_common.errors import LoomError

VERSION = 0x06
"""OpenFlow 1.5."""
TUN_METADATA_BYTES = 4
"""The width the TLV map gives `tun_metadata0` (openflow.GENEVE_TLV: len=4)."""

# message types
OFPT_HELLO, OFPT_ERROR, OFPT_ECHO_REQUEST, OFPT_ECHO_REPLY = 0, 1, 2, 3
OFPT_EXPERIMENTER, OFPT_FEATURES_REQUEST, OFPT_FEATURES_REPLY = 4, 5, 6
OFPT_GET_CONFIG_REQUEST, OFPT_GET_CONFIG_REPLY, OFPT_SET_CONFIG = 7, 8, 9
OFPT_PACKET_OUT, OFPT_FLOW_MOD = 13, 14
OFPT_MULTIPART_REQUEST, OFPT_MULTIPART_REPLY = 18, 19
OFPT_BARRIER_REQUEST, OFPT_BARRIER_REPLY = 20, 21
OFPT_ROLE_REQUEST, OFPT_ROLE_REPLY = 24, 25
OFPT_ROLE_STATUS = 30
OFPCR_ROLE_NOCHANGE, OFPCR_ROLE_EQUAL, OFPCR_ROLE_MASTER, OFPCR_ROLE_SLAVE = 0, 1, 2, 3
OFPT_BUNDLE_CONTROL, OFPT_BUNDLE_ADD_MESSAGE = 33, 34
# error types and codes (openflow-1.5.h; Nicira's in nicira-ext.h / ofp-errors.h)
OFPET_HELLO_FAILED, OFPHFC_INCOMPATIBLE = 0, 0
OFPET_BAD_REQUEST = 1
OFPBRC_BAD_TYPE, OFPBRC_BAD_MULTIPART, OFPBRC_BAD_EXPERIMENTER = 1, 2, 3
OFPBRC_BAD_EXP_TYPE, OFPBRC_BAD_LEN, OFPBRC_IS_SLAVE = 4, 6, 10
OFPET_FLOW_MOD_FAILED, OFPFMFC_BAD_TABLE_ID, OFPFMFC_BAD_COMMAND = 5, 2, 6
OFPET_ROLE_REQUEST_FAILED, OFPRRFC_STALE, OFPRRFC_BAD_ROLE = 11, 0, 2
OFPET_BUNDLE_FAILED = 17
OFPBFC_BAD_ID, OFPBFC_BUNDLE_CLOSED, OFPBFC_BAD_TYPE, OFPBFC_BAD_FLAGS = 2, 4, 6, 7
OFPBFC_MSG_BAD_LEN, OFPBFC_MSG_BAD_XID, OFPBFC_MSG_UNSUP, OFPBFC_MSG_FAILED = 8, 9, 10, 13
OFPET_EXPERIMENTER = 0xFFFF
NXTTMFC_ALREADY_MAPPED, NXTTMFC_DUP_ENTRY = 20, 21
"""Nicira experimenter error codes of a TLV table mod (NX1.2+ numbering): the index is
mapped already (to anything), the option is mapped to another index."""
NXBFC_BAD_VERSION = 22
"""Nicira's error for a bundled message whose version differs from the bundle's."""
# flow_mod commands
OFPFC_ADD, OFPFC_MODIFY, OFPFC_MODIFY_STRICT, OFPFC_DELETE, OFPFC_DELETE_STRICT = 0, 1, 2, 3, 4
# bundle control types and flags
OFPBCT_OPEN_REQUEST, OFPBCT_OPEN_REPLY = 0, 1
OFPBCT_CLOSE_REQUEST, OFPBCT_CLOSE_REPLY = 2, 3
OFPBCT_COMMIT_REQUEST, OFPBCT_COMMIT_REPLY = 4, 5
OFPBCT_DISCARD_REQUEST, OFPBCT_DISCARD_REPLY = 6, 7
OFPBF_ATOMIC, OFPBF_ORDERED = 1, 2
# multipart types and flags
OFPMP_DESC, OFPMP_FLOW_DESC, OFPMP_AGGREGATE_STATS = 0, 1, 2
OFPMPF_REPLY_MORE = 1
OFPTT_ALL = 0xFF
# Nicira extension messages (an OFPT_EXPERIMENTER with NX_VENDOR and a subtype)
NX_VENDOR = 0x00002320
NXT_TLV_TABLE_MOD, NXT_TLV_TABLE_REQUEST, NXT_TLV_TABLE_REPLY = 24, 25, 26
NXTTMC_ADD = 0
# OXS statistics (OpenFlow 1.5 aggregate and flow replies): class 0x8002, field, length
OXS_PACKET_COUNT, OXS_BYTE_COUNT, OXS_FLOW_COUNT = 0x80020808, 0x80020A08, 0x80020604

_NO_BUFFER = 0xFFFFFFFF
_ANY = 0xFFFFFFFF
_NXM_OF_IN_PORT = 0x00000002
"""NXM_OF_IN_PORT's header: what `bundle` names its members by ("ofport")."""
_PORTS = {"in_port": 0xFFFFFFF8, "local": 0xFFFFFFFE, "controller": 0xFFFFFFFD,
          "normal": 0xFFFFFFFA, "flood": 0xFFFFFFFB, "all": 0xFFFFFFFC}  # fmt: skip


class FlowSyntaxError(LoomError):
    """A flow uses syntax this encoder does not know."""

    message = "cannot encode %(what)r: %(why)s"


# ---- fields ----


@dataclass(frozen=True)
class Field:
    """One OXM/NXM field: its code point, width and value syntax."""

    name: str
    oxm_class: int
    code: int
    nbytes: int
    kind: str = "int"
    """How values are written: int, mac, ipv4, ipv6, ct_state."""
    header_bytes: int = 0
    """The length an action's field reference carries (variable-length fields), else
    `nbytes`."""
    nx_name: str = ""
    """The NXM_*/OXM_* name `move` and `bundle` use for it."""

    def header(self, masked: bool = False, nbytes: int | None = None) -> int:
        """The 32-bit OXM/NXM header for a value of `nbytes` (the field's width)."""
        width = nbytes if nbytes is not None else self.nbytes
        return (self.oxm_class << 16 | self.code << 9 | int(masked) << 8
                | width * (2 if masked else 1))  # fmt: skip

    def ref_header(self) -> int:
        """The 32-bit header naming this field in an action (`move`, `bundle`, `ct`)."""
        return self.header(nbytes=self.header_bytes or self.nbytes)

    @property
    def bits(self) -> int:
        """The field's width in bits."""
        return self.nbytes * 8


_OXM, _NXM0, _NXM1, _PKT_REG, _ERIC = 0x8000, 0x0000, 0x0001, 0x8001, 0x1000


def _fields() -> dict[str, Field]:
    table = [
        Field("in_port", _OXM, 0, 4, nx_name="OXM_OF_IN_PORT"),
        Field("metadata", _OXM, 2, 8, nx_name="OXM_OF_METADATA"),
        Field("eth_dst", _OXM, 3, 6, "mac", nx_name="NXM_OF_ETH_DST"),
        Field("eth_src", _OXM, 4, 6, "mac", nx_name="NXM_OF_ETH_SRC"),
        Field("eth_type", _OXM, 5, 2, nx_name="NXM_OF_ETH_TYPE"),
        Field("vlan_vid", _OXM, 6, 2, nx_name="OXM_OF_VLAN_VID"),
        Field("vlan_pcp", _OXM, 7, 1, nx_name="OXM_OF_VLAN_PCP"),
        Field("ip_dscp", _OXM, 8, 1, nx_name="OXM_OF_IP_DSCP"),
        Field("ip_proto", _OXM, 10, 1, nx_name="NXM_OF_IP_PROTO"),
        Field("ip_src", _OXM, 11, 4, "ipv4", nx_name="NXM_OF_IP_SRC"),
        Field("ip_dst", _OXM, 12, 4, "ipv4", nx_name="NXM_OF_IP_DST"),
        Field("tcp_src", _OXM, 13, 2, nx_name="NXM_OF_TCP_SRC"),
        Field("tcp_dst", _OXM, 14, 2, nx_name="NXM_OF_TCP_DST"),
        Field("udp_src", _OXM, 15, 2, nx_name="NXM_OF_UDP_SRC"),
        Field("udp_dst", _OXM, 16, 2, nx_name="NXM_OF_UDP_DST"),
        Field("sctp_src", _OXM, 17, 2, nx_name="OXM_OF_SCTP_SRC"),
        Field("sctp_dst", _OXM, 18, 2, nx_name="OXM_OF_SCTP_DST"),
        Field("icmp_type", _OXM, 19, 1, nx_name="NXM_OF_ICMP_TYPE"),
        Field("icmp_code", _OXM, 20, 1, nx_name="NXM_OF_ICMP_CODE"),
        Field("arp_op", _OXM, 21, 2, nx_name="NXM_OF_ARP_OP"),
        Field("arp_spa", _OXM, 22, 4, "ipv4", nx_name="NXM_OF_ARP_SPA"),
        Field("arp_tpa", _OXM, 23, 4, "ipv4", nx_name="NXM_OF_ARP_TPA"),
        Field("arp_sha", _OXM, 24, 6, "mac", nx_name="NXM_NX_ARP_SHA"),
        Field("arp_tha", _OXM, 25, 6, "mac", nx_name="NXM_NX_ARP_THA"),
        Field("ipv6_src", _OXM, 26, 16, "ipv6", nx_name="NXM_NX_IPV6_SRC"),
        Field("ipv6_dst", _OXM, 27, 16, "ipv6", nx_name="NXM_NX_IPV6_DST"),
        Field("icmpv6_type", _OXM, 29, 1, nx_name="NXM_NX_ICMPV6_TYPE"),
        Field("icmpv6_code", _OXM, 30, 1, nx_name="NXM_NX_ICMPV6_CODE"),
        Field("nd_target", _OXM, 31, 16, "ipv6", nx_name="NXM_NX_ND_TARGET"),
        Field("nd_sll", _OXM, 32, 6, "mac", nx_name="NXM_NX_ND_SLL"),
        Field("nd_tll", _OXM, 33, 6, "mac", nx_name="NXM_NX_ND_TLL"),
        Field("tun_id", _OXM, 38, 8, nx_name="NXM_NX_TUN_ID"),
        Field("tun_src", _NXM1, 31, 4, "ipv4", nx_name="NXM_NX_TUN_IPV4_SRC"),
        Field("tun_dst", _NXM1, 32, 4, "ipv4", nx_name="NXM_NX_TUN_IPV4_DST"),
        Field("tun_ipv6_src", _NXM1, 109, 16, "ipv6", nx_name="NXM_NX_TUN_IPV6_SRC"),
        Field("tun_ipv6_dst", _NXM1, 110, 16, "ipv6", nx_name="NXM_NX_TUN_IPV6_DST"),
        Field("vlan_tci", _NXM0, 4, 2, nx_name="NXM_OF_VLAN_TCI"),
        Field("nw_ttl", _NXM1, 29, 1, nx_name="NXM_NX_IP_TTL"),
        Field("conj_id", _NXM1, 37, 4, nx_name="NXM_NX_CONJ_ID"),
        Field("pkt_mark", _NXM1, 33, 4, nx_name="NXM_NX_PKT_MARK"),
        Field("tun_metadata0", _NXM1, 40, TUN_METADATA_BYTES, header_bytes=124,
              nx_name="NXM_NX_TUN_METADATA0"),
        Field("ct_state", _NXM1, 105, 4, "ct_state", nx_name="NXM_NX_CT_STATE"),
        Field("ct_zone", _NXM1, 106, 2, nx_name="NXM_NX_CT_ZONE"),
        Field("ct_mark", _NXM1, 107, 4, nx_name="NXM_NX_CT_MARK"),
        Field("nd_reserved", _ERIC, 1, 4, nx_name="ERICOXM_OF_ICMPV6_ND_RESERVED"),
        Field("nd_options_type", _ERIC, 2, 1, nx_name="ERICOXM_OF_ICMPV6_ND_OPTIONS_TYPE"),
    ]  # fmt: skip
    table += [Field(f"reg{i}", _NXM1, i, 4, nx_name=f"NXM_NX_REG{i}") for i in range(16)]
    table += [Field(f"xreg{i}", _PKT_REG, i, 8, nx_name=f"OXM_OF_PKT_REG{i}") for i in range(8)]
    table += [Field(f"xxreg{i}", _NXM1, 111 + i, 16, nx_name=f"NXM_NX_XXREG{i}") for i in range(4)]
    by_name = {f.name: f for f in table}
    aliases = {"dl_dst": "eth_dst", "dl_src": "eth_src", "dl_type": "eth_type",
               "nw_src": "ip_src", "nw_dst": "ip_dst", "nw_proto": "ip_proto",
               "icmpv4_type": "icmp_type", "icmpv4_code": "icmp_code"}  # fmt: skip
    by_name |= {alias: by_name[name] for alias, name in aliases.items()}
    by_name |= {f.nx_name.lower(): f for f in table}
    return by_name


FIELDS = _fields()
_NX_IN_PORT = Field("in_port", _NXM0, 0, 2, nx_name="NXM_OF_IN_PORT")

_SHORTHANDS = {
    "ip": (0x0800, None), "ipv6": (0x86DD, None), "arp": (0x0806, None),
    "icmp": (0x0800, 1), "icmp6": (0x86DD, 58), "tcp": (0x0800, 6), "tcp6": (0x86DD, 6),
    "udp": (0x0800, 17), "udp6": (0x86DD, 17), "sctp": (0x0800, 132), "sctp6": (0x86DD, 132),
}  # fmt: skip
_L4 = {6: "tcp", 17: "udp", 132: "sctp"}
_CT_STATE = {"new": 0x01, "est": 0x02, "rel": 0x04, "rpl": 0x08, "inv": 0x10, "trk": 0x20,
             "snat": 0x40, "dnat": 0x80}  # fmt: skip


def _value(field: Field, text: str, what: str) -> bytes:
    """`text` (one value, no mask) as `field`'s bytes."""
    try:
        if field.kind == "mac":
            raw = bytes.fromhex(text.replace(":", ""))
            if len(raw) != 6:
                raise ValueError("a MAC has 6 bytes")
            return raw
        if field.kind == "ipv4":
            return ipaddress.IPv4Address(text).packed
        if field.kind == "ipv6":
            return ipaddress.IPv6Address(text).packed
        if field.name == "in_port" and text.lower() in _PORTS:
            return _PORTS[text.lower()].to_bytes(4, "big")
        return int(text, 0).to_bytes(field.nbytes, "big")
    except (ValueError, OverflowError) as exc:
        raise FlowSyntaxError(what=what, why=f"{field.name}: {exc}") from exc


def _value_mask(field: Field, text: str, what: str) -> tuple[bytes, bytes | None]:
    """`VALUE[/MASK]` (or `ADDRESS/PREFIXLEN`, or `ct_state` flags) as bytes."""
    if field.kind == "ct_state":
        return _ct_state(text, what)
    value, _, mask = text.partition("/")
    raw = _value(field, value, what)
    if not mask:
        return raw, None
    if field.kind in ("ipv4", "ipv6") and mask.isdigit():
        bits = int(mask)
        if bits > field.bits:
            raise FlowSyntaxError(what=what, why=f"{field.name}: prefix /{bits} is too long")
        full = (1 << field.bits) - 1
        raw_mask = (full ^ (full >> bits)).to_bytes(field.nbytes, "big")
    else:
        raw_mask = _value(field, mask, what)
    if raw_mask == b"\xff" * field.nbytes:
        return raw, None
    return bytes(a & b for a, b in zip(raw, raw_mask, strict=True)), raw_mask


def _ct_state(text: str, what: str) -> tuple[bytes, bytes | None]:
    if not text.startswith(("+", "-")):
        return _value_mask(FIELDS["ct_mark"], text, what)  # plain VALUE[/MASK], 32 bits
    on = off = 0
    for sign, name in re.findall(r"([+-])([a-z]+)", text):
        bit = _CT_STATE.get(name)
        if bit is None:
            raise FlowSyntaxError(what=what, why=f"ct_state: unknown flag {name!r}")
        if sign == "+":
            on |= bit
        else:
            off |= bit
    return on.to_bytes(4, "big"), (on | off).to_bytes(4, "big")


# ---- match ----


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses.

    By `str.split` and a count of the parentheses in each piece: a character at a time,
    it was half of the encoding of a cold start's tables (an ACL's actions are ~800
    characters)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for piece in text.split(","):
        cur.append(piece)
        if "(" in piece or ")" in piece:
            depth += piece.count("(") - piece.count(")")
        if depth == 0:
            joined = ",".join(cur).strip() if len(cur) > 1 else piece.strip()
            if joined:
                parts.append(joined)
            cur = []
    tail = ",".join(cur).strip()
    if tail:
        parts.append(tail)
    return parts


def _oxm(field: Field, value: bytes, mask: bytes | None) -> bytes:
    return struct.pack("!I", field.header(mask is not None, len(value))) + value + (mask or b"")


@lru_cache(maxsize=65536)
def encode_match(match: str) -> bytes:
    """An `ofp_match` (OXM, padded to 8 bytes) for an `ovs-ofctl` match."""
    eth_type: int | None = None
    proto: int | None = None
    items: list[tuple[str, str]] = []
    for part in match.split(","):  # (a match has no parentheses)
        name, eq, value = part.partition("=")
        name = name.strip().lower()
        if not name:
            continue
        if not eq and name in _SHORTHANDS:
            eth_type, shorthand_proto = _SHORTHANDS[name]
            proto = shorthand_proto if shorthand_proto is not None else proto
            continue
        if not eq:
            raise FlowSyntaxError(what=match, why=f"{part!r} is not FIELD=VALUE")
        try:
            if name in ("dl_type", "eth_type"):
                eth_type = int(value, 0)
                continue
            if name in ("nw_proto", "ip_proto") and eth_type != 0x0806:
                proto = int(value, 0)
                continue
        except ValueError as exc:
            raise FlowSyntaxError(what=match, why=f"{name}: {exc}") from exc
        items.append((name, value.strip()))
    entries: list[tuple[int, bytes]] = []  # (prerequisite rank, OXM entry)
    if eth_type is not None:
        entries.append((0, _oxm(FIELDS["eth_type"], eth_type.to_bytes(2, "big"), None)))
    if proto is not None:
        entries.append((1, _oxm(FIELDS["ip_proto"], proto.to_bytes(1, "big"), None)))
    entries += [_match_entry(name, value, eth_type, proto) for name, value in items]
    # Prerequisites first; then by field (the OXM header): a match's bytes do not depend on
    # the order its text names the fields in, so a flow is the same bytes whether written by
    # the rules or printed by OVS (`ovs-ofctl diff-flows`), which stand-in nodes, keeping
    # flows by their bytes, rely on.
    body = b"".join(entry for _, entry in sorted(entries, key=lambda e: (e[0], e[1][:4])))
    length = 4 + len(body)
    return struct.pack("!HH", 1, length) + body + b"\0" * (-length % 8)


@lru_cache(maxsize=65536)
def _match_entry(
    name: str, value: str, eth_type: int | None, proto: int | None
) -> tuple[int, bytes]:
    """One match field's OXM entry, and its prerequisite rank (flows share most of their
    fields: a new flow encodes the few that are new)."""
    what = f"{name}={value}"
    field, rank = _match_field(name, eth_type, proto, what)
    if field.name == "vlan_vid":  # dl_vlan=V: a VLAN header with VID V
        try:
            vid = int(value, 0) | 0x1000
        except ValueError as exc:
            raise FlowSyntaxError(what=what, why=str(exc)) from exc
        return rank, _oxm(field, vid.to_bytes(2, "big"), None)
    raw, mask = _value_mask(field, value, what)
    return rank, _oxm(field, raw, mask)


def _match_field(
    name: str, eth_type: int | None, proto: int | None, what: str
) -> tuple[Field, int]:
    """The field a match name means in this flow (`tp_src` in a UDP flow is `udp_src`), and
    its prerequisite rank."""
    if name in ("tp_src", "tp_dst"):
        l4 = _L4.get(proto or -1)
        if l4 is None:
            raise FlowSyntaxError(what=what, why=f"{name} needs tcp, udp or sctp")
        return FIELDS[f"{l4}_{name[3:]}"], 3
    if name in ("icmp_type", "icmp_code"):
        six = eth_type == 0x86DD
        return FIELDS[f"icmpv6_{name[5:]}" if six else name], 2
    if name in ("nw_src", "nw_dst") and eth_type == 0x0806:
        return FIELDS["arp_spa" if name == "nw_src" else "arp_tpa"], 3
    if name == "dl_vlan":
        return FIELDS["vlan_vid"], 3
    field = FIELDS.get(name)
    if field is None or name.startswith(("nxm_", "oxm_")):
        raise FlowSyntaxError(what=what, why=f"unknown match field {name!r}")
    return field, 3


# ---- actions ----


def _nx(subtype: int, body: bytes) -> bytes:
    """A Nicira vendor action: header, subtype, `body`, padded to 8 bytes."""
    length = 10 + len(body)
    pad = -length % 8
    return struct.pack("!HHIH", 0xFFFF, length + pad, NX_VENDOR, subtype) + body + b"\0" * pad


def _subfield(text: str, what: str) -> tuple[Field, int, int]:
    """`NAME[]`, `NAME[BIT]` or `NAME[START..END]` -> (field, offset, bits)."""
    m = re.fullmatch(r"\s*([A-Za-z0-9_]+)\[(?:(\d+)(?:\.\.(\d+))?)?\]\s*", text)
    if m is None:
        raise FlowSyntaxError(what=what, why=f"{text!r} is not a field reference")
    field = FIELDS.get(m.group(1).lower())
    if field is None:
        raise FlowSyntaxError(what=what, why=f"unknown field {m.group(1)!r}")
    if m.group(2) is None:
        return field, 0, field.bits
    start = int(m.group(2))
    end = int(m.group(3)) if m.group(3) is not None else start
    if end < start or end >= field.bits:
        raise FlowSyntaxError(what=what, why=f"{text!r}: bits out of range")
    return field, start, end - start + 1


def _port(text: str, what: str) -> int:
    text = text.strip()
    if text.lower() in _PORTS:
        return _PORTS[text.lower()]
    try:
        port = int(text, 0)
    except ValueError as exc:
        raise FlowSyntaxError(what=what, why=f"{text!r} is not a port number") from exc
    # OpenFlow 1.0 style reserved numbers (0xff00..) as OVS accepts them
    return port + 0xFFFF0000 if 0xFF00 <= port <= 0xFFFF else port


def _output(port: int) -> bytes:
    return struct.pack("!HHIH6x", 0, 16, port, 0xFFE5 if port == _PORTS["controller"] else 0)


def _set_field(text: str, what: str) -> bytes:
    value, arrow, target = text.rpartition("->")
    if not arrow:
        raise FlowSyntaxError(what=what, why=f"set_field:{text}: no '->FIELD'")
    name = target.strip().lower()
    # `in_port` is written as OVS's 16-bit NXM_OF_IN_PORT (OVS refuses OXM_OF_IN_PORT here)
    field = _NX_IN_PORT if name == "in_port" else FIELDS.get(name)
    if field is None:
        raise FlowSyntaxError(what=what, why=f"set_field: unknown field {target!r}")
    raw, mask = _value_mask(field, value.strip(), what)
    oxm = _oxm(field, raw, mask)
    length = 4 + len(oxm)
    return struct.pack("!HH", 25, length + -length % 8) + oxm + b"\0" * (-length % 8)


def _move(text: str, what: str) -> bytes:
    src_text, arrow, dst_text = text.partition("->")
    if not arrow:
        raise FlowSyntaxError(what=what, why=f"move:{text}: no '->'")
    src, src_ofs, src_bits = _subfield(src_text, what)
    dst, dst_ofs, dst_bits = _subfield(dst_text, what)
    if src_bits != dst_bits:
        raise FlowSyntaxError(what=what, why=f"move:{text}: {src_bits} bits to {dst_bits}")
    # OFPAT_COPY_FIELD: OVS takes NXAST_REG_MOVE in OpenFlow 1.0-1.4 only
    return struct.pack("!HHHHH2xII", 28, 24, src_bits, src_ofs, dst_ofs, src.ref_header(),
                       dst.ref_header()) + b"\0" * 4  # fmt: skip


def _resubmit(args: str, what: str) -> bytes:
    port_text, _, table_text = args.partition(",")
    port = 0xFFF8 if not port_text.strip() else _port(port_text, what) & 0xFFFF
    table = int(table_text, 0) if table_text.strip() else 0xFF
    return _nx(14, struct.pack("!HB3x", port, table))


def _ct(args: str, what: str) -> bytes:
    flags, zone_src, zone, table, alg = 0, 0, 0, 0xFF, 0
    nested = b""
    for part in _split(args):
        key, eq, value = part.partition("=")
        if part == "commit":
            flags |= 1
        elif part == "force":
            flags |= 3
        elif key == "zone" and eq:
            if "[" in value:
                field, ofs, bits = _subfield(value, what)
                zone_src, zone = field.ref_header(), ofs << 6 | (bits - 1)
            else:
                zone = int(value, 0)
        elif key == "table" and eq:
            table = int(value, 0)
        elif key == "alg" and eq:
            alg = {"ftp": 21, "tftp": 69}.get(value) or int(value, 0)
        elif part == "nat" or part.startswith("nat("):
            nested += _nat(part[4:-1] if part.startswith("nat(") else "", what)
        elif part.startswith("exec(") and part.endswith(")"):
            nested += encode_actions(part[5:-1])
        else:
            raise FlowSyntaxError(what=what, why=f"ct: unknown argument {part!r}")
    head = struct.pack("!HIHB3xH", flags, zone_src, zone, table, alg)
    return _nx(35, head + nested)


def _nat(args: str, what: str) -> bytes:
    flags = present = 0
    ranges = {"ipv4": [b"", b""], "ipv6": [b"", b""], "port": [b"", b""]}
    for part in _split(args):
        key, eq, value = part.partition("=")
        if key in ("src", "dst") and eq:
            flags |= 1 if key == "src" else 2
            # ADDR[-ADDR][:PORT[-PORT]], IPv6 addresses in brackets
            m = re.fullmatch(r"\[([^\]]*)\](?::(.*))?|([^:]*)(?::(.*))?", value)
            assert m is not None  # the pattern matches any text
            addrs, ports = (m.group(1), m.group(2)) if m.group(1) is not None else m.group(3, 4)
            try:
                packed = [ipaddress.ip_address(a).packed for a in addrs.split("-", 1)]
                kind = "ipv4" if len(packed[0]) == 4 else "ipv6"
                ranges[kind] = [packed[0], packed[1] if len(packed) > 1 else b""]
                if ports:
                    low, _, high = ports.partition("-")
                    ranges["port"] = [int(low).to_bytes(2, "big"),
                                      int(high).to_bytes(2, "big") if high else b""]  # fmt: skip
            except (ValueError, OverflowError) as exc:
                raise FlowSyntaxError(what=what, why=f"nat: {value!r}: {exc}") from exc
        elif part in ("persistent", "hash", "random"):
            flags |= {"persistent": 4, "hash": 8, "random": 16}[part]
        else:
            raise FlowSyntaxError(what=what, why=f"nat: unknown argument {part!r}")
    body = b""
    for bit, (kind, index) in enumerate(
        [("ipv4", 0), ("ipv4", 1), ("ipv6", 0), ("ipv6", 1), ("port", 0), ("port", 1)]
    ):
        if ranges[kind][index]:
            present |= 1 << bit
            body += ranges[kind][index]
    return _nx(36, struct.pack("!2xHH", flags, present) + body)


def _bundle(args: str, what: str) -> bytes:
    parts = [p.strip() for p in args.split(",", 4)]
    if len(parts) != 5 or not parts[4].startswith("members:") or parts[3] != "ofport":
        raise FlowSyntaxError(
            what=what, why=f"bundle({args}): not FIELDS,BASIS,ALG,ofport,members:"
        )
    fields = {"eth_src": 0, "symmetric_l4": 1, "symmetric_l3l4": 2, "symmetric_l3l4+udp": 3,
              "nw_src": 4, "nw_dst": 5, "symmetric_l3": 6}  # fmt: skip
    algorithms = {"active_backup": 0, "hrw": 1}
    if parts[0] not in fields or parts[2] not in algorithms:
        raise FlowSyntaxError(what=what, why=f"bundle({args}): unknown fields or algorithm")
    members = [_port(p, what) for p in parts[4][len("members:") :].split(",") if p.strip()]
    head = struct.pack(
        "!HHHIHHI4x",
        algorithms[parts[2]],
        fields[parts[0]],
        int(parts[1], 0),
        _NXM_OF_IN_PORT,
        len(members),
        0,
        0,
    )
    return _nx(12, head + b"".join(struct.pack("!H", m & 0xFFFF) for m in members))


def _conjunction(args: str, what: str) -> bytes:
    m = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*/\s*(\d+)\s*", args)
    if m is None:
        raise FlowSyntaxError(what=what, why=f"conjunction({args}): not ID,K/N")
    conj_id, clause, clauses = (int(g) for g in m.groups())
    return _nx(34, struct.pack("!BBI", clause - 1, clauses, conj_id))


def _clone(args: str) -> bytes:
    return _nx(42, b"\0" * 6 + encode_actions(args))


_CALLS: dict[str, Callable[[str, str], bytes]] = {
    "resubmit": _resubmit,
    "clone": lambda args, _what: _clone(args),
    "ct": _ct,
    "bundle": _bundle,
    "conjunction": _conjunction,
    "output": lambda args, what: _output(_port(args, what)),
}
"""Actions written `NAME(ARGS)`."""
_ASSIGNMENTS: dict[str, Callable[[str, str], bytes]] = {
    "output": lambda port, what: _output(_port(port, what)),
    "set_field": _set_field,
    "move": _move,
    "push_vlan": lambda ethertype, _what: struct.pack("!HHH2x", 17, 8, int(ethertype, 0)),
}
"""Actions written `NAME:ARGS`."""
_WORDS = {
    "pop_vlan": struct.pack("!HH4x", 18, 8),
    "strip_vlan": struct.pack("!HH4x", 18, 8),
    "dec_ttl": struct.pack("!HH4x", 24, 8),  # OFPAT_DEC_NW_TTL
    "ct_clear": _nx(43, b"\0" * 6),
    "drop": b"",
}
"""Actions written as one word."""


@lru_cache(maxsize=65536)
def encode_actions(actions: str) -> bytes:
    """OpenFlow actions (OF1.5 and Nicira extensions) for an `ovs-ofctl` action list (the
    reference: tables and changes go through `openflow.encode_actions`, native)."""
    parts = _split(actions) if "(" in actions else actions.split(",")
    if "drop" in parts and len(parts) > 1:
        raise FlowSyntaxError(what=actions, why="drop must be the only action")
    return b"".join(_action(part.strip()) for part in parts if part.strip())


@lru_cache(maxsize=65536)
def _action(part: str) -> bytes:
    """One action (flows share most of their actions)."""
    call = re.fullmatch(r"([a-z_]+)\((.*)\)", part, re.S)
    name, colon, rest = part.partition(":")
    if call is not None and call.group(1) in _CALLS:
        return _CALLS[call.group(1)](call.group(2), part)
    if colon and name in _ASSIGNMENTS:
        return _ASSIGNMENTS[name](rest, part)
    if part in _WORDS:
        return _WORDS[part]
    if part.isdigit():
        return _output(int(part))
    raise FlowSyntaxError(what=part, why=f"unknown action {part!r}")


# ---- messages ----


def header(msg_type: int, length: int, xid: int) -> bytes:
    """An OpenFlow 1.5 message header."""
    return struct.pack("!BBHI", VERSION, msg_type, length, xid)


def flow_mod(command: int, table: int, priority: int, match: str, actions: str | None,
             cookie: int, xid: int) -> bytes:  # fmt: skip
    """An `OFPT_FLOW_MOD` (ADD, MODIFY_STRICT, or DELETE_STRICT: `actions` None)."""
    body = struct.pack("!QQBBHHHIIIHH", cookie, 0, table, command, 0, 0, priority,
                       _NO_BUFFER, _ANY, _ANY, 0, 0)  # fmt: skip
    body += encode_match(match)
    if actions:
        acts = encode_actions(actions)
        if acts:
            body += struct.pack("!HH4x", 4, 8 + len(acts)) + acts  # OFPIT_APPLY_ACTIONS
    return header(OFPT_FLOW_MOD, 8 + len(body), xid) + body


OFPP_CONTROLLER = 0xFFFFFFFD


def packet_out(data: bytes, actions: str, xid: int) -> bytes:
    """An `OFPT_PACKET_OUT` of the frame `data` (from the controller) with `actions`."""
    acts = encode_actions(actions)
    in_port = struct.pack("!II", 0x80000004, OFPP_CONTROLLER)  # OXM in_port
    match = struct.pack("!HH", 1, 4 + len(in_port)) + in_port + b"\0" * 4
    body = struct.pack("!IH2x", _NO_BUFFER, len(acts)) + match + acts + data
    return header(OFPT_PACKET_OUT, 8 + len(body), xid) + body


def bundle_control(bundle_id: int, ctl_type: int, xid: int) -> bytes:
    """An `OFPT_BUNDLE_CONTROL` of `ctl_type` (OFPBCT_*) for an atomic, ordered bundle."""
    return header(OFPT_BUNDLE_CONTROL, 16, xid) + struct.pack(
        "!IHH", bundle_id, ctl_type, OFPBF_ATOMIC | OFPBF_ORDERED
    )


BULK_BUNDLE = 0
"""The bundle id of pre-encoded adds (`Channel.bundle`'s chunks); other bundles count from 1."""


def bundle_add(bundle_id: int, message: bytes, xid: int) -> bytes:
    """`message` (whose xid must be `xid`) added to bundle `bundle_id`."""
    length = 16 + len(message)
    return (header(OFPT_BUNDLE_ADD_MESSAGE, length + -length % 8, xid)
            + struct.pack("!I2xH", bundle_id, OFPBF_ATOMIC | OFPBF_ORDERED)
            + message + b"\0" * (-length % 8))  # fmt: skip


def role_request(role: int, generation_id: int, xid: int) -> bytes:
    """An `OFPT_ROLE_REQUEST` (`role`, OFPCR_ROLE_*) with a generation id: the switch refuses
    a MASTER or SLAVE request older than the newest it has seen (stale), and makes every
    other master connection a slave."""
    return header(OFPT_ROLE_REQUEST, 24, xid) + struct.pack("!I4xQ", role, generation_id)


def hello(xid: int = 0) -> bytes:
    """HELLO offering OpenFlow 1.5 only (a version bitmap element)."""
    return header(OFPT_HELLO, 16, xid) + struct.pack("!HHI", 1, 8, 1 << VERSION)


# ---- requests and replies besides flow changes ----


def error(err_type: int, code: int, xid: int, data: bytes = b"") -> bytes:
    """An `OFPT_ERROR` of `err_type`/`code` about the message `data` (its first bytes, as
    OVS quotes the request it refuses)."""
    body = struct.pack("!HH", err_type, code) + data
    return header(OFPT_ERROR, 8 + len(body), xid) + body


def experimenter_error(code: int, xid: int, data: bytes = b"", vendor: int = NX_VENDOR) -> bytes:
    """An OpenFlow 1.2+ experimenter `OFPT_ERROR` (how OVS sends Nicira errors)."""
    body = struct.pack("!HHI", OFPET_EXPERIMENTER, code, vendor) + data
    return header(OFPT_ERROR, 8 + len(body), xid) + body


def nx_message(subtype: int, body: bytes, xid: int) -> bytes:
    """A Nicira extension message: `OFPT_EXPERIMENTER`, NX_VENDOR, `subtype`, `body`."""
    return (
        header(OFPT_EXPERIMENTER, 16 + len(body), xid)
        + struct.pack("!II", NX_VENDOR, subtype)
        + body
    )


TlvMap = tuple[int, int, int, int]
"""A TLV table entry: (option class, option type, option length, tun_metadata index)."""


def tlv_table_mod(command: int, maps: list[TlvMap], xid: int) -> bytes:
    """An `NXT_TLV_TABLE_MOD` (`command`: NXTTMC_ADD, ...) of `maps`."""
    body = struct.pack("!H6x", command) + b"".join(
        struct.pack("!HBBH2x", cls, kind, length, index) for cls, kind, length, index in maps
    )
    return nx_message(NXT_TLV_TABLE_MOD, body, xid)


def tlv_table_request(xid: int) -> bytes:
    """An `NXT_TLV_TABLE_REQUEST` (the switch answers with its TLV table)."""
    return nx_message(NXT_TLV_TABLE_REQUEST, b"", xid)


def tlv_table_reply(
    maps: list[TlvMap], xid: int, max_space: int = 256, max_fields: int = 64
) -> bytes:
    """An `NXT_TLV_TABLE_REPLY` listing `maps` (OVS: 256 bytes of option space, 64 fields)."""
    body = struct.pack("!IH10x", max_space, max_fields) + b"".join(
        struct.pack("!HBBH2x", cls, kind, length, index) for cls, kind, length, index in maps
    )
    return nx_message(NXT_TLV_TABLE_REPLY, body, xid)


def parse_tlv_maps(body: bytes, offset: int) -> list[TlvMap]:
    """The `nx_tlv_map` entries of a TLV table mod or reply from `offset` of `body`."""
    return [struct.unpack_from("!HBBH", body, at) for at in range(offset, len(body) - 7, 8)]


def multipart_request(mp_type: int, body: bytes, xid: int) -> bytes:
    """An `OFPT_MULTIPART_REQUEST` of `mp_type` (OFPMP_*)."""
    return (
        header(OFPT_MULTIPART_REQUEST, 16 + len(body), xid)
        + struct.pack("!HH4x", mp_type, 0)
        + body
    )


def multipart_reply(mp_type: int, body: bytes, xid: int, *, more: bool = False) -> bytes:
    """An `OFPT_MULTIPART_REPLY` of `mp_type`; `more`: another part follows."""
    flags = OFPMPF_REPLY_MORE if more else 0
    return (
        header(OFPT_MULTIPART_REPLY, 16 + len(body), xid)
        + struct.pack("!HH4x", mp_type, flags)
        + body
    )


_CATCHALL = struct.pack("!HH4x", 1, 4)
"""An empty OXM match (`ofp_match` type 1, length 4, padded)."""


def flow_stats_request(mp_type: int, xid: int, table: int = OFPTT_ALL) -> bytes:
    """An `OFPMP_FLOW_DESC` or `OFPMP_AGGREGATE_STATS` request for every flow of `table`
    (all tables by default), as `ovs-ofctl dump-flows` / `dump-aggregate` send it."""
    body = struct.pack("!B3xII4xQQ", table, _ANY, _ANY, 0, 0) + _CATCHALL
    return multipart_request(mp_type, body, xid)


def oxs_stats(packets: int, nbytes: int, flows: int | None = None) -> bytes:
    """An `ofp_oxs_stat` block (padded to 8 bytes): packet and byte counts, and a flow
    count if given (OVS's aggregate reply carries all three, a flow's the first two)."""
    entries = struct.pack("!IQIQ", OXS_PACKET_COUNT, packets, OXS_BYTE_COUNT, nbytes)
    if flows is not None:
        entries += struct.pack("!II", OXS_FLOW_COUNT, flows)
    length = 4 + len(entries)
    return struct.pack("!HH", 0, length) + entries + b"\0" * (-length % 8)


def parse_oxs_flow_count(block: bytes) -> int | None:
    """The flow count of an `ofp_oxs_stat` block (an aggregate reply's body), if it has one.

    Raises:
        ValueError: the block is malformed.
    """
    if len(block) < 4:
        raise ValueError("an OXS block has a 4-byte header")
    length = struct.unpack_from("!H", block, 2)[0]
    if length < 4 or length > len(block):
        raise ValueError(f"OXS block length {length} of {len(block)} bytes")
    at = 4
    while at + 4 <= length:
        oxs = struct.unpack_from("!I", block, at)[0]
        size = oxs & 0xFF
        if oxs >> 16 == 0xFFFF:  # experimenter: its id counts in the length
            at += 4 + size
            continue
        if oxs == OXS_FLOW_COUNT:
            count: int = struct.unpack_from("!I", block, at + 4)[0]
            return count
        at += 4 + size
    return None
