"""Gateway services: L2 (switch <-> VLAN bridging) and L3 (uplink) on a set of gateway nodes.

An L3 service's uplink is one network: its `uplink_ip`'s prefix on its `uplink_vlan` (or
untagged). Every router using the service answers ARP on that network for the external
addresses of its NAT rules (SNAT addresses, DNAT external addresses, floating IPs), so an
external address belongs to one router per uplink network: two routers claiming it, on one
service or on two services whose uplinks are one network (the same VLAN, overlapping
prefixes), would both answer for it. `check_public_address` refuses that (409, naming the
rule in the way), and an external address that is the uplink's next hop. Within one router,
`service.nat` decides which rules may share an address.
"""

from __future__ import annotations

import ipaddress
import uuid as uuidlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from loom_api import errors
from loom_api.service.common import Body, admin_api, require_unique_name
from loom_api.service.crud import Caller, Resource, describe, first, optional, reference
from loom_api.service.nodes import TransportNodes
from loom_api.service.types import (
    GATEWAY_NODES_MAX,
    Description,
    HostAddress,
    HostInterface,
    Name,
    Tags,
    Uuid,
    Vlan,
)
from loom_api.store import ReadView, WriteView


class GatewayServiceBody(Body):
    """A gateway service; L3 services need `uplink_ip` and `uplink_next_hop`."""

    name: Name
    description: Description = ""
    type: Literal["l2", "l3"]
    gateway_node_ids: Annotated[list[Uuid], Field(max_length=GATEWAY_NODES_MAX)]
    uplink_ip: HostInterface | None = None
    uplink_next_hop: HostAddress | None = None
    uplink_vlan: Vlan | None = None
    tags: Tags = Field(default_factory=list)


IpNet = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Uplink:
    """Where an L3 gateway service's uplink is: its network, VLAN and next hop."""

    service: uuidlib.UUID
    network: IpNet | None
    vlan: int | None
    next_hop: str | None

    @classmethod
    def of(cls, service: Any) -> Uplink:
        """Return the uplink of a `Gateway_Service` row (no network for an L2 service)."""
        uplink_ip = first(service.uplink_ip)
        return cls(
            service=service.uuid,
            network=ipaddress.ip_interface(uplink_ip).network if uplink_ip else None,
            vlan=first(service.uplink_vlan),
            next_hop=first(service.uplink_next_hop),
        )

    def shares(self, other: Uplink) -> bool:
        """Return whether the two uplinks are one network (one service, or one VLAN and
        overlapping prefixes)."""
        if self.service == other.service:
            return True
        if self.network is None or other.network is None or self.vlan != other.vlan:
            return False
        return self.network.version == other.network.version and self.network.overlaps(
            other.network
        )


#: External address -> the (NAT rule, its router, the router's gateway service) claiming it.
PublicIndex = dict[str, list[tuple[Any, Any, Any]]]


def public_index(view: ReadView) -> PublicIndex:
    """Return every NAT rule's external address with its rule, router and gateway service
    (rules whose router has no gateway service claim nothing on any uplink)."""
    index: PublicIndex = {}
    for rule in view.rows("NAT_Rule"):
        router = first(rule.logical_router)
        service = first(router.gateway_service) if router is not None else None
        if service is not None:
            index.setdefault(rule.external_ip, []).append((rule, router, service))
    return index


def check_public_address(
    view: ReadView,
    uplink: Uplink,
    address: str,
    *,
    router: Any,
    field: str,
    rule: Any | None = None,
    index: PublicIndex | None = None,
) -> None:
    """Refuse (409) external address `address` for a NAT rule of `router` on `uplink`.

    Args:
        view: the replica.
        uplink: the uplink of the router's gateway service (as it will be).
        address: the external address, in canonical form.
        router: the router that would have the rule (its own rules are not checked here).
        field: the request field to name.
        rule: the rule being replaced (it does not clash with itself), or None.
        index: `public_index(view)`, when many addresses are checked in one transaction.

    Raises:
        errors.Conflict: the address is the uplink's next hop, or the external address of
            another router's rule on the same uplink network (naming the rule, its router
            and its gateway service).
    """
    if address == uplink.next_hop:
        raise errors.Conflict(
            field=field,
            detail=f"{address} is the next hop of gateway service {uplink.service}'s uplink",
        )
    claims = (index if index is not None else public_index(view)).get(address, [])
    for other, other_router, service in claims:
        if other_router.uuid == router.uuid or (rule is not None and other.uuid == rule.uuid):
            continue
        if not uplink.shares(Uplink.of(service)):
            continue
        where = (
            "on the same gateway service"
            if service.uuid == uplink.service
            else f"on gateway service {service.uuid}, whose uplink is the same network"
        )
        raise errors.Conflict(
            field=field,
            detail=f"external address {address} is taken by {other.type} rule {other.uuid} of "
            f"logical router {other_router.uuid} {where}",
        )


def check_router_addresses(
    view: ReadView, router: Any, rules: Iterable[Any], uplink: Uplink, field: str
) -> None:
    """Refuse (409 on `field`) putting `router`'s NAT `rules` on `uplink` (a new or changed
    gateway service) when one of their external addresses is taken there."""
    index = public_index(view)
    for rule in rules:
        check_public_address(
            view, uplink, rule.external_ip, router=router, field=field, rule=rule, index=index
        )


class GatewayServices(Resource):
    """`/api/v1/gateway-services` (the admin writes them; tenants read them to use them)."""

    kind = "gateway service"
    table = "Gateway_Service"
    model = GatewayServiceBody
    immutable = frozenset({"type"})
    read_only = frozenset({"id", "revision", "status"})
    tenant_owned = False
    admin_writes_only = True

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the service's representation."""
        return {
            **admin_api(row),
            "type": row.type,
            "gateway_node_ids": sorted(str(n.uuid) for n in row.gateway_nodes),
            "uplink_ip": first(row.uplink_ip),
            "uplink_next_hop": first(row.uplink_next_hop),
            "uplink_vlan": first(row.uplink_vlan),
            "status": {"active_node": row.status.get("active_node")},
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the nodes are gateways, the name is unique, and L3 uplinks are complete.

        Raises:
            errors.ValidationFailed: no node, a node that is not a gateway, an incomplete
                L3 uplink or an uplink on an L2 service.
            errors.MissingReference: no such node.
            errors.Conflict: the name is taken, or a changed uplink would put an external
                address of the service's routers where another router has it, or on the
                next hop.
        """
        require_unique_name(view, self.table, self.kind, body.name, row)
        if not body.gateway_node_ids:
            raise errors.ValidationFailed(
                field="gateway_node_ids", detail="a gateway service needs at least one node"
            )
        nodes = [
            reference(view, TransportNodes, caller, ident, "gateway_node_ids")
            for ident in body.gateway_node_ids
        ]
        for node in nodes:
            if node.node_type != "gateway":
                raise errors.ValidationFailed(
                    field="gateway_node_ids",
                    detail=f"transport node {node.uuid} is a {node.node_type}, not a gateway",
                )
        if body.type == "l3":
            self._check_uplink(body)
            if row is not None:
                self._check_routers(view, row, body)
        elif body.uplink_ip or body.uplink_next_hop or body.uplink_vlan is not None:
            raise errors.ValidationFailed(
                field="uplink_ip", detail="only L3 gateway services have an uplink"
            )
        return {
            "name": body.name,
            "description": body.description,
            "type": body.type,
            "gateway_nodes": nodes,
            "uplink_ip": optional(body.uplink_ip),
            "uplink_next_hop": optional(body.uplink_next_hop),
            "uplink_vlan": optional(body.uplink_vlan),
            "tags": list(body.tags),
        }

    @staticmethod
    def _check_uplink(body: Any) -> None:
        if body.uplink_ip is None:
            raise errors.ValidationFailed(field="uplink_ip", detail="an L3 service needs uplink_ip")
        if body.uplink_next_hop is None:
            raise errors.ValidationFailed(
                field="uplink_next_hop", detail="an L3 service needs uplink_next_hop"
            )
        network = ipaddress.ip_interface(body.uplink_ip).network
        if ipaddress.ip_address(body.uplink_next_hop) not in network:
            raise errors.ValidationFailed(
                field="uplink_next_hop",
                detail=f"next hop {body.uplink_next_hop} is not on the uplink network {network}",
            )

    @staticmethod
    def _check_routers(view: ReadView, row: Any, body: Any) -> None:
        """Check the NAT rules of the routers on `row` against the uplink `body` gives it."""
        uplink = Uplink(
            service=row.uuid,
            network=ipaddress.ip_interface(body.uplink_ip).network,
            vlan=body.uplink_vlan,
            next_hop=body.uplink_next_hop,
        )
        if uplink == Uplink.of(row):
            return
        index = public_index(view)
        for rule in view.rows("NAT_Rule"):
            router = first(rule.logical_router)
            if router is None or row not in router.gateway_service:
                continue
            field = "uplink_next_hop" if rule.external_ip == uplink.next_hop else "uplink_ip"
            check_public_address(
                view, uplink, rule.external_ip, router=router, field=field, rule=rule, index=index
            )

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Routers and L2-gateway ports using the service block its deletion."""
        routers = [r for r in view.rows("Logical_Router") if row in r.gateway_service]
        ports = [p for p in view.rows("Logical_Switch_Port") if row in p.gateway_service]
        return describe("logical router", routers) + describe("logical switch port", ports)
