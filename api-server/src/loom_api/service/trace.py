"""`GET /api/v1/trace`'s decisions (pure): the packet a caller describes, as the flow
`ofproto/trace` takes, and the physical controller's answer told in the configuration's
names.

A packet is described as `ovn-trace` takes one, a conjunction of fields and protocols:

    ip4.dst == 10.0.2.13 && tcp.dst == 22
    arp && arp.tpa == 10.0.1.1
    eth.dst == ff:ff:ff:ff:ff:ff

What it leaves out comes from its port and switch: `eth.src` the port's MAC, `ip4.src` its
first IPv4 address, `ip.ttl` 64, for `icmp4` an echo request (type 8, code 0), a TCP/UDP
source port of 40000, and `eth.dst` the MAC of the port on the same switch that has the
destination address — or, for an address no port of the switch has, of the router port on
the switch (the packet is sent to its gateway, as a VM would). A packet that names no
transport (`ip4.dst == X`) is just that: IPv4 with protocol 0 and no transport header,
which security profiles that allow ICMP or TCP do not let in (`summary` says so).

A packet from the physical network enters at a router's uplink (`uplink_microflow`): it
says its own `ip4.src`; `eth.dst` is the uplink's MAC (the physical controller knows it).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loom_api import errors
from loom_common import ctstate

MAX_EXPRESSION = 1000
"""The longest packet description taken (characters)."""
MAX_CT_STATES = 8
"""The most conntrack answers a trace may be given."""

_MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")
BROADCAST = "ff:ff:ff:ff:ff:ff"


def _mac(value: str) -> str:
    if not _MAC.fullmatch(value):
        raise ValueError("not a MAC address")
    return value.lower()


def _ip4(value: str) -> str:
    return str(ipaddress.IPv4Address(value))


def _ip6(value: str) -> str:
    return str(ipaddress.IPv6Address(value))


def _number(bits: int) -> Callable[[str], str]:
    def parse(value: str) -> str:
        number = int(value, 0)
        if not 0 <= number < 1 << bits:
            raise ValueError(f"not a {bits}-bit number")
        return str(number)

    return parse


@dataclass(frozen=True)
class _Field:
    ovs: str
    """Its name in an `ovs-ofctl` flow."""
    value: Callable[[str], str]
    family: str = ""
    """`ip4`, `ip6` or `arp` when it implies one."""
    transport: str = ""
    """`tcp`, `udp`, `icmp4` when it implies one."""


FIELDS: Mapping[str, _Field] = {
    "eth.src": _Field("dl_src", _mac),
    "eth.dst": _Field("dl_dst", _mac),
    "ip4.src": _Field("nw_src", _ip4, "ip4"),
    "ip4.dst": _Field("nw_dst", _ip4, "ip4"),
    "ip6.src": _Field("ipv6_src", _ip6, "ip6"),
    "ip6.dst": _Field("ipv6_dst", _ip6, "ip6"),
    "ip.ttl": _Field("nw_ttl", _number(8)),
    "tcp.src": _Field("tp_src", _number(16), transport="tcp"),
    "tcp.dst": _Field("tp_dst", _number(16), transport="tcp"),
    "udp.src": _Field("tp_src", _number(16), transport="udp"),
    "udp.dst": _Field("tp_dst", _number(16), transport="udp"),
    "icmp4.type": _Field("icmp_type", _number(8), "ip4", "icmp4"),
    "icmp4.code": _Field("icmp_code", _number(8), "ip4", "icmp4"),
    "arp.op": _Field("arp_op", _number(16), "arp"),
    "arp.spa": _Field("arp_spa", _ip4, "arp"),
    "arp.tpa": _Field("arp_tpa", _ip4, "arp"),
    "arp.sha": _Field("arp_sha", _mac, "arp"),
    "arp.tha": _Field("arp_tha", _mac, "arp"),
}
"""The fields a packet may name (`ovn-trace`'s names)."""
PROTOCOLS: Mapping[str, tuple[str, str]] = {
    "ip4": ("ip4", ""), "ip": ("ip4", ""), "ip6": ("ip6", ""), "arp": ("arp", ""),
    "tcp": ("", "tcp"), "udp": ("", "udp"), "icmp4": ("ip4", "icmp4"), "icmp": ("ip4", "icmp4"),
}  # fmt: skip
"""A protocol word -> the (family, transport) it says."""
HEADS: Mapping[tuple[str, str], str] = {
    ("ip4", ""): "ip", ("ip6", ""): "ipv6", ("arp", ""): "arp", ("ip4", "tcp"): "tcp",
    ("ip4", "udp"): "udp", ("ip4", "icmp4"): "icmp", ("ip6", "tcp"): "tcp6",
    ("ip6", "udp"): "udp6",
}  # fmt: skip
"""(family, transport) -> the protocol word an `ovs-ofctl` flow starts with."""
_TERM = re.compile(r"\s*(?:([a-z0-9.]+)\s*==\s*([^\s&]+)|([a-z0-9]+))\s*(&&|$)")


@dataclass
class Packet:
    """A packet as described: its fields by name, its family and transport."""

    fields: dict[str, str]
    family: str = ""
    transport: str = ""


def parse_packet(text: str) -> Packet:
    """Parse a packet description (see the module docstring).

    Raises:
        errors.ValidationFailed: naming `packet` and the column at fault.
    """
    if len(text) > MAX_EXPRESSION:
        raise _bad(f"longer than {MAX_EXPRESSION} characters")
    packet = Packet({})
    at = 0
    while at < len(text):
        m = _TERM.match(text, at)
        if m is None:
            raise _bad(f"column {at + 1}: expected FIELD == VALUE or a protocol, joined by &&")
        name, value, word = m.group(1), m.group(2), m.group(3)
        column = m.start(1 if name else 3) + 1
        if word is not None:
            if word not in PROTOCOLS:
                raise _bad(f"column {column}: unknown protocol {word!r} (known: "
                           f"{', '.join(sorted(PROTOCOLS))})")  # fmt: skip
            _imply(packet, *PROTOCOLS[word], column)
        else:
            field = FIELDS.get(name)
            if field is None:
                raise _bad(f"column {column}: unknown field {name!r} (known: "
                           f"{', '.join(sorted(FIELDS))})")  # fmt: skip
            if name in packet.fields:
                raise _bad(f"column {column}: {name} given twice")
            try:
                packet.fields[name] = field.value(value)
            except ValueError as exc:
                raise _bad(f"column {m.start(2) + 1}: {name} == {value}: {exc}") from None
            _imply(packet, field.family, field.transport, column)
        at = m.end()
        if m.group(4) == "&&" and at >= len(text.rstrip()):
            raise _bad(f"column {at}: nothing after &&")
    return packet


def _imply(packet: Packet, family: str, transport: str, column: int) -> None:
    """Take `family` and `transport` into `packet`; refuse what contradicts them."""
    if transport == "icmp4":
        family = family or "ip4"
    for attribute, value in (("family", family), ("transport", transport)):
        held = getattr(packet, attribute)
        if value and held and held != value:
            raise _bad(f"column {column}: {value} contradicts {held}")
        if value:
            setattr(packet, attribute, value)
    if packet.family == "arp" and packet.transport:
        raise _bad(f"column {column}: an ARP packet has no {packet.transport}")


def _bad(detail: str) -> errors.ValidationFailed:
    return errors.ValidationFailed(field="packet", detail=f"packet: {detail}")


@dataclass(frozen=True)
class Neighbour:
    """A port on the packet's switch, as the defaults need it."""

    mac: str
    ips: tuple[str, ...]
    router: bool = False


def microflow(packet: Packet, mac: str, ips: Iterable[str],
              neighbours: Iterable[Neighbour]) -> str:  # fmt: skip
    """The packet from a port with `mac` and `ips` on a switch whose other ports are
    `neighbours`, as an `ovs-ofctl` flow (no `in_port`), with the defaults filled in.

    Raises:
        errors.ValidationFailed: `packet`: a field the defaults cannot supply.
    """
    return _flow(*filled(packet, mac, ips, neighbours))


def uplink_microflow(packet: Packet) -> str:
    """The packet arriving from the physical network at a router's uplink, as an
    `ovs-ofctl` flow (no `in_port`; no `eth.dst` unless said: the physical controller gives
    the uplink's MAC).

    Raises:
        errors.ValidationFailed: `packet`: its source address is not said (nothing here
            knows one), or it is not IPv4 or ARP.
    """
    return _flow(*uplink_filled(packet))


def uplink_filled(packet: Packet) -> tuple[str, str, dict[str, str]]:
    """`uplink_microflow`'s (family, transport, fields by name).

    Raises:
        errors.ValidationFailed: as `uplink_microflow`.
    """
    f = dict(packet.fields)
    family = packet.family or ("ip4" if packet.transport or "ip.ttl" in f else "")
    if family == "ip4":
        for name in ("ip4.src", "ip4.dst"):
            if name not in f:
                raise _bad(f"{name}: required for a packet from the uplink")
        f.setdefault("ip.ttl", "64")
    elif family == "arp":
        for name in ("arp.spa", "arp.tpa"):
            if name not in f:
                raise _bad(f"{name}: required for a packet from the uplink")
        f.setdefault("arp.op", "1")
        f.setdefault("eth.dst", BROADCAST)
    else:
        raise _bad("a packet from the uplink is IPv4 or ARP: say ip4.dst, or arp")
    _transport_defaults(packet, f)
    return family, packet.transport, f


def filled(packet: Packet, mac: str, ips: Iterable[str],
           neighbours: Iterable[Neighbour]) -> tuple[str, str, dict[str, str]]:  # fmt: skip
    """`microflow`'s (family, transport, fields by name), the defaults filled in.

    Raises:
        errors.ValidationFailed: as `microflow`.
    """
    f = dict(packet.fields)
    f.setdefault("eth.src", mac)
    own = [ipaddress.ip_address(ip.split("/")[0]) for ip in ips]
    family = packet.family or ("ip4" if packet.transport or "ip.ttl" in f else "")
    if family == "ip6" and packet.transport == "icmp4":
        raise _bad("ICMPv4 over IPv6")
    if family == "ip4":
        _default_from(f, "ip4.src", own, 4)
        f.setdefault("ip.ttl", "64")
    elif family == "ip6":
        _default_from(f, "ip6.src", own, 6)
        f.setdefault("ip.ttl", "64")
    elif family == "arp":
        f.setdefault("arp.op", "1")
        f.setdefault("arp.sha", f["eth.src"])
        _default_from(f, "arp.spa", own, 4)
        f.setdefault("eth.dst", BROADCAST)
    _transport_defaults(packet, f)
    if "eth.dst" not in f:
        f["eth.dst"] = _gateway(f.get("ip4.dst") or f.get("ip6.dst"), neighbours)
    return family, packet.transport, f


def _transport_defaults(packet: Packet, f: dict[str, str]) -> None:
    """An ICMP packet is an echo request; a TCP or UDP one comes from port 40000."""
    if packet.transport == "icmp4":
        f.setdefault("icmp4.type", "8")
        f.setdefault("icmp4.code", "0")
    elif packet.transport in ("tcp", "udp"):
        f.setdefault(f"{packet.transport}.src", "40000")


def _flow(family: str, transport: str, f: Mapping[str, str]) -> str:
    """The fields as an `ovs-ofctl` flow (its protocol word first)."""
    head = HEADS.get((family, transport))
    parts = [head] if head else []
    names = {n: FIELDS[n].ovs for n in f}
    parts += [f"{names[n]}={v}" for n, v in sorted(f.items(), key=lambda i: names[i[0]])]
    return ",".join(parts)


ICMP_TYPES = {"0": "echo reply", "3": "destination unreachable", "8": "echo request",
              "11": "time exceeded"}  # fmt: skip
"""The ICMPv4 types `summary` names."""


def summary(family: str, transport: str, f: Mapping[str, str]) -> str:
    """The packet traced in words: what it is (`IPv4 protocol 0` for one that names no
    transport), its addresses and ports."""
    if family == "arp":
        op = {"1": "request", "2": "reply"}.get(f.get("arp.op", ""), f"op {f.get('arp.op')}")
        return f"ARP {op}: who has {f.get('arp.tpa')}, tell {f.get('arp.spa')}"
    if not family:
        return f"Ethernet to {f.get('eth.dst')}, no IP header"
    version = "IPv4" if family == "ip4" else "IPv6"
    src, dst = f.get(f"{family}.src"), f.get(f"{family}.dst")
    ttl = f", TTL {f['ip.ttl']}" if "ip.ttl" in f else ""
    if transport == "icmp4":
        kind = ICMP_TYPES.get(f.get("icmp4.type", ""), "message")
        what = f"ICMPv4 {kind} (type {f.get('icmp4.type')} code {f.get('icmp4.code')})"
        return f"{what} from {src} to {dst}{ttl}"
    if transport in ("tcp", "udp"):
        word = transport.upper()
        return (f"{word} from {src}:{f.get(f'{transport}.src')} to {dst}:"
                f"{f.get(f'{transport}.dst', 0)}{ttl}")  # fmt: skip
    return f"{version} protocol 0, no transport header, from {src} to {dst}{ttl}"


def _default_from(f: dict[str, str], name: str, own: list[Any], version: int) -> None:
    """`f[name]` defaults to the port's first address of IP `version`."""
    if name in f:
        return
    mine = [str(a) for a in own if a.version == version]
    if not mine:
        raise _bad(f"{name}: the port has no IPv{version} address; say {name}")
    f[name] = mine[0]


def _gateway(dst: str | None, neighbours: Iterable[Neighbour]) -> str:
    """The MAC a VM sends a packet for `dst` to: the switch's port with that address, or
    its router port.

    Raises:
        errors.ValidationFailed: neither exists (or no destination address is given).
    """
    if dst is None:
        raise _bad("eth.dst: required (the packet has no IP destination to find it by)")
    nearby = list(neighbours)
    for n in nearby:
        if any(ip.split("/")[0] == dst for ip in n.ips):
            return n.mac
    for n in nearby:
        if n.router:
            return n.mac
    raise _bad(f"eth.dst: no port of the switch has {dst}, and no router joins it; say "
               "eth.dst")  # fmt: skip


def ct_states(text: str | None) -> list[str]:
    """`ct=trk,est;trk,new`: what conntrack answers at each recirculation, in order
    (`loom_common.ctstate`).

    Raises:
        errors.ValidationFailed: `ct`: too many, or one OVS would not take.
    """
    if not text:
        return []
    states = [s.strip() for s in text.split(";")]
    if len(states) > MAX_CT_STATES:
        raise errors.ValidationFailed(field="ct", detail=f"ct: at most {MAX_CT_STATES} states, "
                                      "separated by ';'")  # fmt: skip
    for state in states:
        try:
            ctstate.check(state)
        except ValueError as exc:
            raise errors.ValidationFailed(field="ct", detail=f"ct: {state!r}: {exc}") from None
    return states


_CONJ_ID = re.compile(r"(?:^|,)conj_id=(\d+)(?:,|$)")


def describe(body: dict[str, Any], name_of: Callable[[str], dict[str, Any] | None],
             datapath_of: Callable[[int], dict[str, Any] | None],
             rule_of: Callable[[int], dict[str, Any] | None]) -> dict[str, Any]:  # fmt: skip
    """The controller's answer (`loom_physical.trace`) with the configuration's names:
    each step's `object` (kind, id, name of its `source`; for a security rule's own flow,
    `conj_id=N`, the rule) and `datapath` (kind, id, name), the verdict's ports and
    tunneled-to ports.

    Args:
        body: the controller's JSON body.
        name_of: config uuid -> {"kind", "id", "name"} (None if unknown).
        datapath_of: datapath key -> {"kind", "id", "name", "key"} (None if unknown).
        rule_of: conjunction id -> the security rule's {"kind", "id", "name"} (None if
            unknown).
    """
    verdict = body.get("verdict", {})
    steps = [step for p in body.get("passes", []) for step in p["steps"]]
    steps += [verdict["ended_at"]] if verdict.get("ended_at") else []
    for step in steps:  # (datapaths first: `rule_of` may look at the switches met)
        dp = step.get("datapath")
        if isinstance(dp, int):
            step["datapath"] = datapath_of(dp) or {"key": dp}
    for step in steps:
        _annotate(step, name_of, rule_of)
    for d in verdict.get("delivered", []):
        d.update(_named(d["port"], name_of))
    for t in verdict.get("tunneled", []):
        if t.get("port") not in (None, "flood") and not str(t["port"]).startswith("key "):
            t["port"] = {"id": t["port"], **_named(t["port"], name_of)}
    return body


def _annotate(step: dict[str, Any], name_of: Callable[[str], dict[str, Any] | None],
              rule_of: Callable[[int], dict[str, Any] | None]) -> None:  # fmt: skip
    """One step's `object` (`describe`)."""
    source = step.get("source")
    conj = _CONJ_ID.search(step.get("match") or "")
    rule = rule_of(int(conj.group(1))) if conj is not None else None
    if rule is not None:
        step["object"] = rule
    elif source == "switches":
        step["object"] = {"kind": "every switch", "id": None, "name": None}
    elif source == "":
        step["object"] = {"kind": "security rules", "id": None, "name": "conjunctions"}
    elif source is not None:
        step["object"] = name_of(source) or {"kind": None, "id": source, "name": None}
    else:
        step["object"] = None


def rule_label(profile: str, rule: Any) -> str:
    """A security rule in words: `web: ingress IPv4 tcp 22` (`rule`: its config row)."""
    words = [rule.direction, rule.ethertype, *rule.protocol]
    low, high = list(rule.port_range_min), list(rule.port_range_max)
    if low:
        words.append(str(low[0]) if not high or high[0] == low[0] else f"{low[0]}-{high[0]}")
    words += [f"from {prefix}" for prefix in rule.remote_prefix]
    return f"{profile}: {' '.join(words)}"


def _named(uuid: str, name_of: Callable[[str], dict[str, Any] | None]) -> dict[str, Any]:
    found = name_of(uuid)
    return {"name": found["name"] if found else None, "kind": found["kind"] if found else None}
