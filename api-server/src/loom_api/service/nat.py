"""NAT rules of a logical router: SNAT (many-to-one), DNAT, and floating IPs (1:1).

NAT happens where the router meets its uplink, so a router needs an L3 gateway service before
it can have NAT rules. `NAT_Rule.logical_router` is optional in the schema (the Neutron layer
keeps unassociated floating IPs there); in the native API a rule always has its router.

External addresses: within one router, DNAT and floating IPs own theirs (one rule each) and
SNAT rules may share one (several prefixes behind one address); across routers, an external
address belongs to one router per uplink network (`gateways.check_public_address`), whatever
the tenants.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import StringConstraints

from loom_api import errors
from loom_api.service.crud import Caller, Resource, first, optional, ref_id, reference
from loom_api.service.gateways import Uplink, check_public_address
from loom_api.service.ports import LogicalSwitchPorts
from loom_api.service.routers import (
    LogicalRouters,
    RouterChildBody,
    child_api,
    child_columns,
    router_nat_rules,
)
from loom_api.service.types import ADDRESS_MAX, HostAddress, Uuid, unusable_host
from loom_api.store import ReadView, WriteView

NatType = Literal["snat", "dnat", "floating-ip"]

#: Rule types that translate one external address to one internal address.
ONE_TO_ONE = frozenset({"dnat", "floating-ip"})


class NatRuleBody(RouterChildBody):
    """A NAT rule; `internal_ip` is a prefix for SNAT and an address otherwise."""

    type: NatType
    external_ip: HostAddress
    internal_ip: Annotated[str, StringConstraints(max_length=ADDRESS_MAX)]
    logical_port_id: Uuid | None = None


def internal_address(kind: str, value: str) -> str:
    """Return `value` normalized as the internal side of a `kind` rule.

    Raises:
        errors.ValidationFailed: a bad prefix (SNAT) or address (DNAT, floating IP), a zone
            index, or an address no host can have.
    """
    what = "a network prefix (CIDR)" if kind == "snat" else "an IPv4 or IPv6 address"
    if "%" in value:
        raise errors.ValidationFailed(
            field="internal_ip", detail=f"internal_ip of a {kind} rule must be {what}, "
            "without a zone index",
        )  # fmt: skip
    try:
        if kind == "snat":
            return str(ipaddress.ip_network(value, strict=True))
        address = ipaddress.ip_address(value)
    except ValueError as exc:
        raise errors.ValidationFailed(
            field="internal_ip", detail=f"internal_ip of a {kind} rule must be {what}: {exc}"
        ) from None
    reason = unusable_host(address)
    if reason is not None:
        raise errors.ValidationFailed(
            field="internal_ip", detail=f"internal_ip {address} is {reason}; no host has it"
        )
    return str(address)


def _version(address: str) -> int:
    return ipaddress.ip_network(address, strict=False).version


class NatRules(Resource):
    """`/api/v1/logical-routers/{id}/nat-rules`."""

    kind = "NAT rule"
    table = "NAT_Rule"
    model = NatRuleBody
    immutable = frozenset({"type"})
    read_only = frozenset({"id", "revision", "logical_router_id"})
    parent_column = "logical_router"
    parent = LogicalRouters

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the rule's representation."""
        return {
            **child_api(row),
            "type": row.type,
            "external_ip": row.external_ip,
            "internal_ip": first(row.internal_ip),
            "logical_port_id": ref_id(row.logical_port),
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the router has an uplink, the addresses, the port and uniqueness.

        Raises:
            errors.ValidationFailed: no gateway service on the router (field `type`), a bad or
                mixed-version internal_ip, or a logical port that cannot take the rule.
            errors.MissingReference: the logical port does not exist in the router's tenant.
            errors.Conflict: the external (DNAT, floating IP) or internal address is taken on
                this router, or the external address by another router on the same uplink
                network (any tenant's), or it is the uplink's next hop, or (DNAT, floating
                IP) its own address.
        """
        if not parent.gateway_service:
            raise errors.ValidationFailed(
                field="type",
                detail=f"logical router {parent.uuid} has no gateway service; NAT needs an "
                "uplink (set the router's gateway_service_id first)",
            )
        internal = internal_address(body.type, body.internal_ip)
        if _version(internal) != _version(body.external_ip):
            raise errors.ValidationFailed(
                field="internal_ip",
                detail=f"internal_ip {internal} and external_ip {body.external_ip} are of "
                "different IP versions",
            )
        port = self._logical_port(view, caller, body, parent, internal)
        self._check_unique(view, body, parent, row, internal)
        check_public_address(
            view,
            Uplink.of(first(parent.gateway_service)),
            body.external_ip,
            kind=body.type,
            router=parent,
            field="external_ip",
            rule=row,
            admin=caller.is_admin,
        )
        cols = child_columns(caller, body, parent, row)
        return {
            **cols,
            "logical_router": [parent],
            "type": body.type,
            "external_ip": body.external_ip,
            "internal_ip": [internal],
            "logical_port": optional(port),
        }

    @staticmethod
    def _logical_port(
        view: ReadView, caller: Caller, body: Any, router: Any, internal: str
    ) -> Any | None:
        if body.logical_port_id is None:
            return None
        if body.type == "snat":
            raise errors.ValidationFailed(
                field="logical_port_id", detail="a snat rule translates a prefix, not a port"
            )
        port = reference(
            view,
            LogicalSwitchPorts,
            caller,
            body.logical_port_id,
            "logical_port_id",
            tenant=router.tenant,
        )
        if port.attachment_type == "router":
            raise errors.ValidationFailed(
                field="logical_port_id", detail=f"port {port.uuid} is a router's own port"
            )
        if internal not in port.ips:
            raise errors.ValidationFailed(
                field="logical_port_id",
                detail=f"port {port.uuid} does not have internal_ip {internal}",
            )
        attached = any(
            p.logical_switch.uuid == port.logical_switch.uuid
            for p in view.children("Logical_Router_Port", "logical_router", router)
        )
        if not attached:
            raise errors.ValidationFailed(
                field="logical_port_id",
                detail=f"port {port.uuid} is on logical switch {port.logical_switch.uuid}, "
                f"which logical router {router.uuid} has no port on",
            )
        return port

    @staticmethod
    def _check_unique(
        view: ReadView, body: Any, router: Any, row: Any | None, internal: str
    ) -> None:
        for other in router_nat_rules(view, router):
            if row is not None and other.uuid == row.uuid:
                continue
            if (
                body.type in ONE_TO_ONE
                and other.type in ONE_TO_ONE
                and other.external_ip == body.external_ip
            ):
                raise errors.Conflict(
                    field="external_ip",
                    detail=f"external_ip {body.external_ip} is used by {other.type} rule "
                    f"{other.uuid} on this router",
                )
            if other.type == body.type != "dnat" and first(other.internal_ip) == internal:
                raise errors.Conflict(
                    field="internal_ip",
                    detail=f"{body.type} rule {other.uuid} on this router already translates "
                    f"{internal}",
                )
