"""Security profiles (security groups): stateful allow-rules applied to the ports that use them."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from loom_api import errors
from loom_api.service.common import Body, Owned, owned_api, owned_columns
from loom_api.service.crud import Caller, Resource, describe, first, optional, ref_id, reference
from loom_api.service.types import RULES_MAX, Cidr, Description, Uuid
from loom_api.store import ReadView, WriteView

PROTOCOLS = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "sctp": 132}
_PORTED = {"tcp", "udp", "sctp", "6", "17", "132"}

Port = Annotated[int, Field(strict=True, ge=0, le=65535)]


class SecurityRuleBody(Body):
    """One allow rule; everything it leaves unset matches anything."""

    direction: Literal["ingress", "egress"]
    ethertype: Literal["IPv4", "IPv6"] = "IPv4"
    protocol: Annotated[str, StringConstraints(max_length=16)] | None = None
    port_range_min: Port | None = None
    port_range_max: Port | None = None
    remote_prefix: Cidr | None = None
    remote_profile_id: Uuid | None = None


class SecurityProfileBody(Owned):
    """A security profile and its rules."""

    description: Description = ""
    stateful: bool = True
    rules: list[SecurityRuleBody] = Field(default_factory=list, max_length=RULES_MAX)


def check_rule(rule: SecurityRuleBody, field: str) -> str | None:
    """Validate one rule's internal consistency; return its normalized protocol.

    Raises:
        errors.ValidationFailed: naming `field` and the rule part at fault.
    """
    protocol = rule.protocol.lower() if rule.protocol is not None else None
    numeric = protocol is not None and protocol.isdigit() and 0 <= int(protocol) <= 255
    if protocol is not None and protocol not in PROTOCOLS and not numeric:
        raise errors.ValidationFailed(
            field=f"{field}.protocol",
            detail=f"protocol {rule.protocol!r} is not tcp, udp, icmp, icmpv6, sctp or 0..255",
        )
    low, high = rule.port_range_min, rule.port_range_max
    if (low is not None or high is not None) and protocol not in _PORTED:
        raise errors.ValidationFailed(
            field=f"{field}.port_range_min", detail="port ranges need protocol tcp, udp or sctp"
        )
    if low is not None and high is not None and low > high:
        raise errors.ValidationFailed(
            field=f"{field}.port_range_min",
            detail=f"port_range_min {low} is above port_range_max {high}",
        )
    if rule.remote_prefix is not None and rule.remote_profile_id is not None:
        raise errors.ValidationFailed(
            field=f"{field}.remote_prefix",
            detail="give remote_prefix or remote_profile_id, not both",
        )
    if rule.remote_prefix is not None:
        version = ipaddress.ip_network(rule.remote_prefix).version
        if (version == 4) != (rule.ethertype == "IPv4"):
            raise errors.ValidationFailed(
                field=f"{field}.remote_prefix",
                detail=f"remote_prefix {rule.remote_prefix} is not {rule.ethertype}",
            )
    return protocol


def rule_columns(
    view: WriteView, caller: Caller, rule: SecurityRuleBody, field: str, tenant: str
) -> dict[str, Any]:
    """Validate `rule` and return the columns of its `Security_Rule` row."""
    protocol = check_rule(rule, field)
    remote = reference(
        view,
        SecurityProfiles,
        caller,
        rule.remote_profile_id,
        f"{field}.remote_profile_id",
        tenant=tenant,
    )
    return {
        "direction": rule.direction,
        "ethertype": rule.ethertype,
        "protocol": optional(protocol),
        "port_range_min": optional(rule.port_range_min),
        "port_range_max": optional(rule.port_range_max),
        "remote_prefix": optional(rule.remote_prefix),
        "remote_profile": optional(remote),
    }


def rule_api(rule: Any) -> dict[str, Any]:
    """Return the representation of one `Security_Rule` row."""
    return {
        "id": str(rule.uuid),
        "direction": rule.direction,
        "ethertype": rule.ethertype,
        "protocol": first(rule.protocol),
        "port_range_min": first(rule.port_range_min),
        "port_range_max": first(rule.port_range_max),
        "remote_prefix": first(rule.remote_prefix),
        "remote_profile_id": ref_id(rule.remote_profile),
    }


def _rule_key(rule: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(rule[k]) for k in sorted(rule) if k != "id")


class SecurityProfiles(Resource):
    """`/api/v1/security-profiles`."""

    kind = "security profile"
    table = "Security_Profile"
    model = SecurityProfileBody

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the profile's representation; rules sorted by content."""
        rules = sorted((rule_api(r) for r in row.rules), key=_rule_key)
        return {
            **owned_api(row),
            "description": row.description,
            "stateful": row.stateful,
            "rules": [{k: v for k, v in r.items() if k != "id"} for r in rules],
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Validate every rule and return the columns (rules become new child rows)."""
        cols = owned_columns(caller, body, row)
        rules = [
            view.insert(
                "Security_Rule", **rule_columns(view, caller, rule, f"rules.{i}", cols["tenant"])
            )
            for i, rule in enumerate(body.rules)
        ]
        return {**cols, "description": body.description, "stateful": body.stateful, "rules": rules}

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Ports and other profiles' rules that use the profile block its deletion."""
        ports = [p for p in view.rows("Logical_Switch_Port") if row in p.security_profiles]
        profiles = [
            p
            for p in view.rows(self.table)
            if p.uuid != row.uuid and any(row in r.remote_profile for r in p.rules)
        ]
        return describe("logical switch port", ports) + describe("security profile", profiles)
