"""Gateway services: L2 (switch <-> VLAN bridging) and L3 (uplink) on a set of gateway nodes.

An L3 service's uplink is one network: its `uplink_ip`'s prefix on its `uplink_vlan` (or
untagged). Every router using the service answers ARP on that network for the external
addresses of its NAT rules (SNAT addresses, DNAT external addresses, floating IPs), so an
external address belongs to one router per uplink network: two routers claiming it, on one
service or on two services whose uplinks are one network (the same VLAN, overlapping
prefixes), would both answer for it. `check_public_address` refuses that (409, naming the
rule in the way), and an external address that is the uplink's next hop. Within one router,
`service.nat` decides which rules may share an address. Nor may an external address be
the uplink's next hop (the router sends to it), nor, for a DNAT rule or floating IP, the
uplink's own address: the rule would take every packet to the uplink for one internal host.
An SNAT rule may translate to it (a router masquerading behind its uplink; replies to it
are untranslated, and what is not a reply still reaches the uplink).

The deployment's default L3 service (`default_service`) is the one marked `default`, else the
only L3 service: it serves routers that follow it (`FOLLOWS_DEFAULT`; the Neutron layer marks
a router whose gateway is on an external network that names no service), re-pointed by
`follow_default` whenever the services change, so what such a router translates is always
what the current default's uplink carries.

A tenant token reads services (to name them), not where they are: `to_api` leaves the
uplink, the nodes and the status out for tenants (`redacted`), and a 409 for an address
another tenant's rule has says it is taken without naming that rule or router.
"""

from __future__ import annotations

import ipaddress
import uuid as uuidlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from loom_api import errors
from loom_api.service.common import Body, Reply, admin_api, require_unique_name
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
    default: bool = False
    tags: Tags = Field(default_factory=list)


#: `Gateway_Service.external_ids` key marking the deployment's default L3 service ("true").
DEFAULT_KEY = "loom:default"
#: `Logical_Router.external_ids` key of a router that follows the default L3 service
#: (value "default").
FOLLOWS_DEFAULT = "loom:gateway_service"


IpNet = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Uplink:
    """Where an L3 gateway service's uplink is: its network, VLAN and next hop."""

    service: uuidlib.UUID
    network: IpNet | None
    vlan: int | None
    next_hop: str | None
    address: str | None = None

    @classmethod
    def of(cls, service: Any) -> Uplink:
        """Return the uplink of a `Gateway_Service` row (no network for an L2 service)."""
        return cls.parse(
            service.uuid,
            first(service.uplink_ip),
            first(service.uplink_vlan),
            first(service.uplink_next_hop),
        )

    @classmethod
    def parse(
        cls, service: uuidlib.UUID, uplink_ip: str | None, vlan: int | None, next_hop: str | None
    ) -> Uplink:
        """Return the uplink of service `service` with `uplink_ip` (address/prefix)."""
        interface = ipaddress.ip_interface(uplink_ip) if uplink_ip else None
        return cls(
            service=service,
            network=interface.network if interface is not None else None,
            vlan=vlan,
            next_hop=next_hop,
            address=str(interface.ip) if interface is not None else None,
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
    kind: str,
    router: Any,
    field: str,
    rule: Any | None = None,
    index: PublicIndex | None = None,
    admin: bool = False,
) -> None:
    """Refuse (409) external address `address` for a NAT rule of `router` on `uplink`.

    Args:
        view: the replica.
        uplink: the uplink of the router's gateway service (as it will be).
        address: the external address, in canonical form.
        kind: the rule's type (`snat`, `dnat`, `floating-ip`).
        router: the router that would have the rule (its own rules are not checked here).
        field: the request field to name.
        rule: the rule being replaced (it does not clash with itself), or None.
        index: `public_index(view)`, when many addresses are checked in one transaction.
        admin: the caller is the admin, who is told which rule of another tenant has it.

    Raises:
        errors.Conflict: the address is the uplink's next hop, or (not for SNAT) its own
            address, or the
            external address of another router's rule on the same uplink network (naming
            the rule, its router and its gateway service when they are the router's
            tenant's or the caller is the admin).
    """
    if address == uplink.address and kind != "snat":
        raise errors.Conflict(
            field=field,
            detail=f"{address} is the address of gateway service {uplink.service}'s uplink",
        )
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
        if not admin and other_router.tenant != router.tenant:
            raise errors.Conflict(
                field=field,
                detail=f"external address {address} is taken on the uplink network of "
                f"gateway service {uplink.service}",
            )
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
    view: ReadView,
    router: Any,
    rules: Iterable[Any],
    uplink: Uplink,
    field: str,
    *,
    admin: bool = False,
) -> None:
    """Refuse (409 on `field`) putting `router`'s NAT `rules` on `uplink` (a new or changed
    gateway service) when one of their external addresses is taken there (`admin`: as
    `check_public_address`)."""
    index = public_index(view)
    for rule in rules:
        check_public_address(
            view,
            uplink,
            rule.external_ip,
            kind=rule.type,
            router=router,
            field=field,
            rule=rule,
            index=index,
            admin=admin,
        )


def is_default(service: Any) -> bool:
    """Return whether `service` is marked the deployment's default L3 service."""
    return bool(service.external_ids.get(DEFAULT_KEY) == "true")


def default_service(view: ReadView, *, without: Any | None = None) -> Any | None:
    """Return the deployment's default L3 gateway service: the one marked default, else
    the only L3 service; None when there is none, or several and none marked.

    Args:
        view: the replica.
        without: a service being deleted (it counts as gone).
    """
    services = [
        s
        for s in view.rows("Gateway_Service")
        if s.type == "l3" and (without is None or s.uuid != without.uuid)
    ]
    marked = [s for s in services if is_default(s)]
    if marked:
        return marked[0]  # (columns() lets one service at most be marked)
    return services[0] if len(services) == 1 else None


def follows_default(router: Any) -> bool:
    """Return whether `router` is served by whichever L3 service is the default."""
    return bool(router.external_ids.get(FOLLOWS_DEFAULT) == "default")


def follow_default(view: WriteView, field: str = "default", *, without: Any = None) -> None:
    """Point every router that follows the default L3 service at the current one (none
    when there is no default; `without`: as `default_service`).

    Raises:
        errors.Conflict: the NAT addresses of such a router are taken on the new default's
            uplink (on `field`; the admin changes services, so the rule is named).
    """
    service = default_service(view, without=without)
    for router in view.rows("Logical_Router"):
        if not follows_default(router) or router.gateway_service == optional(service):
            continue
        if service is not None:
            rules = [n for n in view.rows("NAT_Rule") if router in n.logical_router]
            check_router_addresses(view, router, rules, Uplink.of(service), field, admin=True)
        view.update(router, gateway_service=optional(service))


class GatewayServiceStatus(Reply):
    """The gateway node currently active for the service, once one is."""

    active_node: str | None


class GatewayServices(Resource):
    """`/api/v1/gateway-services` (the admin writes them; tenants read them to use them)."""

    kind = "gateway service"
    table = "Gateway_Service"
    model = GatewayServiceBody
    immutable = frozenset({"type"})
    read_only = frozenset({"id", "revision", "status"})
    tenant_owned = False
    admin_writes_only = True
    redacted = frozenset(
        {"gateway_node_ids", "uplink_ip", "uplink_next_hop", "uplink_vlan", "status"}
    )

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the service's representation."""
        return {
            **admin_api(row),
            "type": row.type,
            "gateway_node_ids": sorted(str(n.uuid) for n in row.gateway_nodes),
            "uplink_ip": first(row.uplink_ip),
            "uplink_next_hop": first(row.uplink_next_hop),
            "uplink_vlan": first(row.uplink_vlan),
            "default": is_default(row),
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
            errors.Conflict: the name is taken, another service is the default, or a changed
                uplink or default would put an external address of the service's routers
                where another router has it, or on the uplink's address or next hop.
        """
        require_unique_name(view, self.table, self.kind, body.name, row)
        self._check_default(view, body, row)
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
        ids = dict(row.external_ids) if row is not None else {}
        ids.pop(DEFAULT_KEY, None)
        if body.default:
            ids[DEFAULT_KEY] = "true"
        if row is not None and ids != row.external_ids:
            # (written now, so the routers follow the default as it will be)
            view.update(row, external_ids=ids)
            follow_default(view)
        return {
            "name": body.name,
            "description": body.description,
            "type": body.type,
            "gateway_nodes": nodes,
            "uplink_ip": optional(body.uplink_ip),
            "uplink_next_hop": optional(body.uplink_next_hop),
            "uplink_vlan": optional(body.uplink_vlan),
            "tags": list(body.tags),
            "external_ids": ids,
        }

    @staticmethod
    def _check_default(view: ReadView, body: Any, row: Any | None) -> None:
        if not body.default:
            return
        if body.type != "l3":
            raise errors.ValidationFailed(
                field="default", detail="only an L3 gateway service can be the default"
            )
        for other in view.rows("Gateway_Service"):
            if is_default(other) and (row is None or other.uuid != row.uuid):
                raise errors.Conflict(
                    field="default",
                    detail=f"gateway service {other.uuid} is the default already",
                )

    def on_create(self, view: WriteView, row: Any, parent: Any) -> None:
        """Routers that follow the default get it if this service is the default now."""
        follow_default(view)

    def on_delete(self, view: WriteView, row: Any) -> None:
        """With it gone, routers that follow the default get the one left (if any)."""
        follow_default(view, without=row)

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
        uplink = Uplink.parse(row.uuid, body.uplink_ip, body.uplink_vlan, body.uplink_next_hop)
        if uplink == Uplink.of(row):
            return
        index = public_index(view)
        for rule in view.rows("NAT_Rule"):
            router = first(rule.logical_router)
            if router is None or row not in router.gateway_service:
                continue
            field = "uplink_next_hop" if rule.external_ip == uplink.next_hop else "uplink_ip"
            check_public_address(
                view,
                uplink,
                rule.external_ip,
                kind=rule.type,
                router=router,
                field=field,
                rule=rule,
                index=index,
                admin=True,
            )

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Routers and L2-gateway ports using the service block its deletion."""
        routers = [r for r in view.rows("Logical_Router") if row in r.gateway_service]
        ports = [p for p in view.rows("Logical_Switch_Port") if row in p.gateway_service]
        return describe("logical router", routers) + describe("logical switch port", ports)
