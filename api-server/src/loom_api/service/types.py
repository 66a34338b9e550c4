"""Field types shared by the request models: MAC and IP forms, VLANs, names, tags.

Each is a pydantic `Annotated` type so a bad value fails validation with the field's name,
and each serializes to the canonical string stored in the config DB.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def _require_str(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def _mac(value: str) -> str:
    if not _MAC.match(value):
        raise ValueError(f"{value!r} is not a MAC address (xx:xx:xx:xx:xx:xx)")
    if int(value[:2], 16) & 1:
        raise ValueError(f"{value!r} is a multicast MAC address; a port needs a unicast one")
    return value.lower()


def _ip(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 or IPv6 address") from None


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a network prefix (CIDR): {exc}") from None


def _interface(value: str) -> str:
    if "/" not in value:
        raise ValueError(f"{value!r} needs a prefix length (address/len)")
    try:
        return str(ipaddress.ip_interface(value))
    except ValueError:
        raise ValueError(f"{value!r} is not an address with a prefix length") from None


MacAddress = Annotated[str, BeforeValidator(_require_str), AfterValidator(_mac)]
"""A unicast Ethernet address, stored lower-case."""

IpAddress = Annotated[str, BeforeValidator(_require_str), AfterValidator(_ip)]
"""An IPv4 or IPv6 address, stored in its compressed form."""

Cidr = Annotated[str, BeforeValidator(_require_str), AfterValidator(_cidr)]
"""A network prefix with no host bits set, like 10.0.0.0/24."""

IpInterface = Annotated[str, BeforeValidator(_require_str), AfterValidator(_interface)]
"""An address with its prefix length, like 10.0.0.1/24 (a router port's address)."""

Vlan = Annotated[int, Field(strict=True, ge=0, le=4095)]
"""An 802.1Q VLAN id, 0-4095."""

Name = Annotated[str, StringConstraints(max_length=255)]
"""A display name."""

Tenant = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[\w.@-]+$")]
"""A tenant (project) id."""

Tags = Annotated[list[Annotated[str, StringConstraints(min_length=1, max_length=255)]], Field()]
"""Free-form labels; `?tag=` filters on them."""

Uuid = Annotated[
    str,
    StringConstraints(
        pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    ),
]
"""The id of another object."""

Rate = Annotated[int, Field(strict=True, ge=0, le=2**53)]
"""A rate in kilobits per second."""
