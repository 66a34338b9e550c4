"""Field types shared by the request models: MAC and IP forms, VLANs, names, tags, limits.

Each is a pydantic `Annotated` type so a bad value fails validation with the field's name,
and each serializes to the canonical string stored in the config DB. The size limits below
appear in the OpenAPI document (`maxLength`, `maxItems`) because the models carry them.

Why these limits (each bounds what one object can make the API, the database and the
controllers store and carry, and each is above what a real configuration uses):

- `NAME_MAX` = 255 characters: Neutron's and OVN's limit on names, and a VIF id or an OVS
  `system-id` is an interface or host name (at most 255 in OVS too).
- `DESCRIPTION_MAX` = 1024 characters: free text for people. A description is copied into
  every read of its object and every replica; 1 KiB holds a paragraph (Neutron allows
  255, which the `/v2.0` side keeps).
- `TAG_MAX` = 255 characters and `TAGS_MAX` = 64 tags: tags are labels for lookups
  (`?tag=`), not storage; 64 is above any tagging scheme seen in practice (Neutron sets no
  count, AWS allows 50 per resource).
- `PORT_IPS_MAX` = 16 addresses per port: an IPv4 address and several IPv6 ones (Neutron's
  old `max_fixed_ips_per_port` was 5); every address becomes ARP/ND and port-security flows.
- `SECURITY_PROFILES_MAX` = 32 profiles per port: each multiplies the port's ACL flows.
- `RULES_MAX` = 1000 rules per security profile: Neutron's default quota is 100 rules per
  project; rules times ports is what the controllers compute.
- `GATEWAY_NODES_MAX` = 32 nodes per gateway service, `TRANSPORT_ZONES_MAX` = 64 zones per
  node: beyond any failover group or zone layout; each is a tunnel and BFD mesh input.
- `TUNNEL_ENDPOINTS_MAX` = 3: one per encapsulation (geneve, vxlan, stt).
- `POOLS_MAX` = 64 allocation pools per subnet; `DNS_NAMESERVERS_MAX` = 5 (Neutron's
  `max_dns_nameservers` default; resolvers use at most 3).
- `ADDRESS_MAX` = 64 characters for an address or prefix in text (the longest IPv6 prefix,
  IPv4-mapped and uncompressed, is 49): a longer string is no address, and is not echoed.

Text may not hold control characters: C0 (U+0000-U+001F), DEL (U+007F) and C1
(U+0080-U+009F), ESC and the one-character CSI among them, which a terminal reading a log or
a CLI's table would obey. Descriptions may hold tab, newline and carriage return (free text
has lines); names, tags and ids may not.

Nor may it hold Unicode's explicit bidirectional formatting characters — the embeddings and
overrides U+202A-U+202E and the isolates U+2066-U+2069 — which make text display in
another order than it is stored (the "Trojan Source" characters): a name shown in a list,
a log or a terminal would read as something else. Names, tags and ids also may not hold
the invisible direction marks (U+200E LRM, U+200F RLM, U+061C ALM): a mark changes how
the neutral characters around it are laid out and is invisible, so two names differing by
one look alike. Descriptions keep the marks, which right-to-left prose uses to place
punctuation and numbers.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

NAME_MAX = 255
DESCRIPTION_MAX = 1024
TAG_MAX = 255
TAGS_MAX = 64
PORT_IPS_MAX = 16
SECURITY_PROFILES_MAX = 32
RULES_MAX = 1000
GATEWAY_NODES_MAX = 32
TRANSPORT_ZONES_MAX = 64
TUNNEL_ENDPOINTS_MAX = 3
POOLS_MAX = 64
DNS_NAMESERVERS_MAX = 5
ADDRESS_MAX = 64

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
#: Bidirectional embeddings, overrides and isolates (regex class ranges; the escapes mean
#: the same to Python's `re`, pydantic's Rust regex and JSON Schema's ECMA-262).
_BIDI_FORMATTING = r"\u202a-\u202e\u2066-\u2069"
#: The invisible direction marks: ALM, LRM, RLM.
_BIDI_MARKS = r"\u061c\u200e\u200f"
#: Characters no name, tag or id may hold: C0 controls, DEL, C1 controls, bidi formatting.
_NAME_REFUSED = rf"\x00-\x1f\x7f-\x9f{_BIDI_FORMATTING}{_BIDI_MARKS}"
#: ... and what a description may not hold: the same but tab, newline, carriage return and
#: the direction marks.
_TEXT_REFUSED = rf"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI_FORMATTING}"
_CONTROL = re.compile(f"[{_NAME_REFUSED}]")
_TEXT_CONTROL = re.compile(f"[{_TEXT_REFUSED}]")
_BIDI = re.compile(f"[{_BIDI_FORMATTING}{_BIDI_MARKS}]")
#: The same two sets as JSON Schema patterns (documented, and checked by pydantic too).
PRINTABLE_PATTERN = f"^[^{_NAME_REFUSED}]*$"
TEXT_PATTERN = f"^[^{_TEXT_REFUSED}]*$"


def shown(value: str, limit: int = 64) -> str:
    """Return `value` quoted for an error message, cut after `limit` characters."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def control_character(value: str, *, text: bool = False) -> str | None:
    """Return a description of the first character `value` may not hold, or None.

    Those are control characters and bidirectional formatting characters (module docstring).

    Args:
        value: the string to check.
        text: free text (a description): tab, newline, carriage return and the direction
            marks are allowed.
    """
    found = (_TEXT_CONTROL if text else _CONTROL).search(value)
    if found is None:
        return None
    char = found.group()
    if _BIDI.match(char):
        return (
            f"bidirectional formatting character U+{ord(char):04X} "
            f"({unicodedata.name(char)}) at position {found.start()}"
        )
    return f"control character U+{ord(char):04X} at position {found.start()}"


def _printable(value: Any) -> Any:
    if isinstance(value, str) and (bad := control_character(value)) is not None:
        raise ValueError(f"must not contain a {bad}")
    return value


def _printable_text(value: Any) -> Any:
    if isinstance(value, str) and (bad := control_character(value, text=True)) is not None:
        raise ValueError(f"must not contain a {bad}")
    return value


def _require_str(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def _mac(value: str) -> str:
    if not _MAC.match(value):
        raise ValueError(f"{shown(value)} is not a MAC address (xx:xx:xx:xx:xx:xx)")
    if int(value[:2], 16) & 1:
        raise ValueError(f"{value!r} is a multicast MAC address; a port needs a unicast one")
    if int(value.replace(":", ""), 16) == 0:
        raise ValueError(f"{value!r} is the zero MAC address; a port needs a unicast one")
    return value.lower()


def _no_zone(value: str) -> None:
    if "%" in value:
        raise ValueError(
            f"{shown(value)} has a zone index (%...); zone indexes name an interface of one "
            "host and cannot be configured"
        )


def _ip(value: str) -> str:
    _no_zone(value)
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ValueError(f"{shown(value)} is not an IPv4 or IPv6 address") from None


def _cidr(value: str) -> str:
    _no_zone(value)
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"{shown(value)} is not a network prefix (CIDR): {exc}") from None


def _interface(value: str) -> str:
    _no_zone(value)
    if "/" not in value:
        raise ValueError(f"{shown(value)} needs a prefix length (address/len)")
    try:
        return str(ipaddress.ip_interface(value))
    except ValueError:
        raise ValueError(f"{shown(value)} is not an address with a prefix length") from None


def unusable_host(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Return why `ip` can never be one host's address, or None when it can be.

    The unspecified address, loopback, multicast and IPv4's limited broadcast address
    (255.255.255.255) are never an interface's address on a network.
    """
    if ip.is_unspecified:
        return "the unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.version == 4 and int(ip) == 0xFFFFFFFF:
        return "the limited broadcast address"
    return None


def _host(value: str) -> str:
    reason = unusable_host(ipaddress.ip_interface(value).ip)
    if reason is not None:
        raise ValueError(f"{value} is {reason}; it cannot be a host's address")
    return value


MacAddress = Annotated[str, BeforeValidator(_require_str), AfterValidator(_mac)]
"""A unicast Ethernet address other than 00:00:00:00:00:00, stored lower-case."""

IpAddress = Annotated[str, BeforeValidator(_require_str), AfterValidator(_ip)]
"""An IPv4 or IPv6 address (no zone index), stored in its compressed form."""

HostAddress = Annotated[IpAddress, AfterValidator(_host)]
"""An address one host can have: not unspecified, loopback, multicast or 255.255.255.255."""

Cidr = Annotated[str, BeforeValidator(_require_str), AfterValidator(_cidr)]
"""A network prefix with no host bits set, like 10.0.0.0/24."""

IpInterface = Annotated[str, BeforeValidator(_require_str), AfterValidator(_interface)]
"""An address with its prefix length, like 10.0.0.1/24."""

HostInterface = Annotated[IpInterface, AfterValidator(_host)]
"""A host's address with its prefix length (a router port's, an uplink's)."""

Vlan = Annotated[int, Field(strict=True, ge=0, le=4095)]
"""An 802.1Q VLAN id, 0-4095."""

Name = Annotated[
    str,
    StringConstraints(max_length=NAME_MAX, pattern=PRINTABLE_PATTERN),
    BeforeValidator(_printable),
]
"""A display name: at most 255 characters, no control or bidirectional formatting
characters."""

Identifier = Annotated[
    str,
    StringConstraints(min_length=1, max_length=NAME_MAX, pattern=PRINTABLE_PATTERN),
    BeforeValidator(_printable),
]
"""A non-empty name another system gives (an OVS system-id, a VIF id): 1-255 characters."""

Description = Annotated[
    str,
    StringConstraints(max_length=DESCRIPTION_MAX, pattern=TEXT_PATTERN),
    BeforeValidator(_printable_text),
]
"""Free text: at most 1024 characters; tab and line breaks but no other control characters."""

Tenant = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[\w.@-]+$")]
"""A tenant (project) id."""

Tag = Annotated[
    str,
    StringConstraints(min_length=1, max_length=TAG_MAX, pattern=PRINTABLE_PATTERN),
    BeforeValidator(_printable),
]
"""One label: 1-255 characters, no control characters."""

Tags = Annotated[list[Tag], Field(max_length=TAGS_MAX)]
"""Free-form labels (at most 64); `?tag=` filters on them."""

Uuid = Annotated[
    str,
    StringConstraints(
        pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    ),
]
"""The id of another object."""

Rate = Annotated[int, Field(strict=True, ge=0, le=2**53)]
"""A rate in kilobits per second."""
