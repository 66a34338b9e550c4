"""Routers: `Logical_Router` rows; their gateway, interfaces, SNAT and extra routes.

A router IS a logical router (same id). Its Neutron ports are logical router ports, each with
its switch-side peer (which Neutron lists as the port): `neutron:device_owner` on the router
port says `network:router_gateway` or `network:router_interface`.

`external_gateway_info` maps to a router port on the external network's switch, with an
address from that network's subnets (or the one `external_fixed_ips` names); the router's
L3 gateway service becomes the external network's (`provider:physical_network` of an
`l3_ext` network), or, on an external network that names none, the router follows the
deployment's default L3 service (`service.gateways.follow_default`: re-pointed as the
default changes, none while there is none). With `enable_snat` (Neutron's default), each IPv4
interface subnet gets an SNAT rule to the gateway address (`NAT_Rule` type snat, flagged
`neutron:snat=true`), kept in step as interfaces and gateways come and go. `routes` are the
router's static routes. Interfaces are added and removed in `neutron.interfaces`.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Annotated, Any

from pydantic import Field

from loom_api.neutron import errors
from loom_api.neutron.addressing import (
    GATEWAY_OWNER,
    FixedIp,
    assign_addresses,
    gateway_port,
    is_external,
    network_service,
    router_fips,
    router_ports,
    subnet_of,
    used_addresses,
)
from loom_api.neutron.common import (
    Address,
    Body,
    Context,
    Description,
    Name,
    NeutronResource,
    Part,
    Tags,
    bump,
    check_owner_unchanged,
    children,
    ext,
    flag,
    given,
    lookup,
    merged_ids,
    native_insert,
    owner,
    tenant_api,
)
from loom_api.neutron.networks import NETWORKS
from loom_api.service import crud, keys
from loom_api.service.crud import first
from loom_api.service.gateways import (
    FOLLOWS_DEFAULT,
    Uplink,
    check_public_address,
    check_router_addresses,
    follows_default,
)
from loom_api.service.ports import PORT_KEYS, random_mac
from loom_api.service.router_ports import LogicalRouterPorts
from loom_api.service.routers import LogicalRouters, router_nat_rules
from loom_api.service.types import PORT_IPS_MAX, Uuid
from loom_api.store import ReadView, WriteView

#: Neutron's default `max_routes` (extra routes per router).
ROUTES_MAX = 30

_ROUTERS = LogicalRouters()
_ROUTER_PORTS = LogicalRouterPorts()
_RNG = random.Random()


class GatewayInfo(Part):
    """`external_gateway_info`: the external network, SNAT, and optionally the address."""

    network_id: Uuid | None = None
    enable_snat: bool | None = None
    external_fixed_ips: Annotated[list[FixedIp], Field(max_length=PORT_IPS_MAX)] | None = None


class Route(Part):
    """An extra route."""

    destination: Address
    nexthop: Address


class RouterBody(Body):
    """A router (create and update)."""

    name: Name | None = None
    description: Description | None = None
    admin_state_up: bool | None = None
    external_gateway_info: GatewayInfo | None = None
    routes: Annotated[list[Route], Field(max_length=ROUTES_MAX)] | None = None
    tags: Tags | None = None


# ---- the router's ports ------------------------------------------------------------------


def interfaces(view: ReadView, router: Any) -> list[Any]:
    """Return the router's ports other than its gateway."""
    return [p for p in router_ports(view, router) if ext(p, "device_owner") != GATEWAY_OWNER]


def _inserted_peer(view: WriteView, router_port: Any) -> Any:
    """Return the switch-side peer the native code just inserted for `router_port`."""
    for key in reversed(view.inserted_ids):
        row = view.get("Logical_Switch_Port", key)
        if row is not None and router_port in row.router_port:
            return row
    raise AssertionError("the native router port created no peer")


def add_router_port(
    view: WriteView,
    router: Any,
    switch: Any,
    address: str,
    prefixlen: int,
    device_owner: str,
    *,
    existing: Any = None,
) -> Any:
    """Connect `router` to `switch` at `address`; return the switch-side port.

    Without `existing`, the native router-port code creates the switch-side peer; with it,
    that port (a Neutron port given to add_router_interface) becomes the peer.

    Raises:
        errors.BadRouterRequest: the router is on the switch already, or the prefix
            overlaps one of its other ports'.
        errors.IpAddressInUse: another port or floating IP holds `address`.
    """
    network = ipaddress.ip_network(f"{address}/{prefixlen}", strict=False)
    for other in router_ports(view, router):
        if other.logical_switch == switch:
            raise errors.BadRouterRequest(
                detail=f"Router {router.uuid} already has a port on network {switch.uuid}"
            )
        other_network = ipaddress.ip_interface(other.ip_prefix).network
        if other_network.version == network.version and network.overlaps(other_network):
            raise errors.BadRouterRequest(
                detail=f"Cidr {network} overlaps with cidr {other_network} of another "
                f"interface of router {router.uuid}"
            )
    if address in used_addresses(view, switch, skip=existing):
        raise errors.IpAddressInUse(net_id=str(switch.uuid), ip=address)
    router_port = view.insert(
        "Logical_Router_Port",
        revision=1,
        logical_router=router,
        tenant=router.tenant,
        name="",
        mac=existing.mac if existing is not None else random_mac(_RNG),
        ip_prefix=f"{address}/{prefixlen}",
        logical_switch=switch,
        tags=[],
        external_ids=merged_ids(None, device_owner=device_owner),
    )
    if existing is None:
        _ROUTER_PORTS.on_create(view, router_port, router)
        return _inserted_peer(view, router_port)
    used = (p.port_key for p in router_ports(view, router) if p.uuid != router_port.uuid)
    router_port.port_key = keys.allocate(used, *PORT_KEYS, "port key on this router")
    bump(
        view,
        existing,
        attachment_type="router",
        router_port=[router_port],
        vif_id=[],
        ips=[address],
        port_security=False,
        security_profiles=[],
        external_ids=merged_ids(existing, device_owner=None, device_id=None),
    )
    return existing


def remove_router_port(view: WriteView, router_port: Any) -> None:
    """Delete a router port and its switch-side peer.

    Raises:
        errors.Conflict: static routes still leave through the port.
    """
    users = _ROUTER_PORTS.users(view, router_port)
    if users:
        raise errors.Conflict(
            detail=f"Router port {router_port.uuid} is used by {', '.join(users)}"
        )
    _ROUTER_PORTS.on_delete(view, router_port)
    view.delete(router_port)


def sync_snat(view: WriteView, router: Any, *, admin: bool = False) -> None:
    """Make the router's Neutron SNAT rules match its gateway and IPv4 interfaces.

    `admin`: the caller is the admin (a 409 names another tenant's rule in the way).

    Raises:
        loom_api.errors.Conflict: a new rule's address (the gateway's) is another router's
            NAT address on the uplink network of this router's gateway service.
    """
    wanted: set[tuple[str, str]] = set()
    gateway = gateway_port(view, router)
    if gateway is not None and flag(router, "enable_snat", True):
        outside = ipaddress.ip_interface(gateway.ip_prefix)
        for port in interfaces(view, router):
            inside = ipaddress.ip_interface(port.ip_prefix).network
            if outside.version == inside.version == 4:
                wanted.add((str(outside.ip), str(inside)))
    for nat in list(view.rows("NAT_Rule")):
        if nat.type != "snat" or router not in nat.logical_router or not flag(nat, "snat"):
            continue
        key = (nat.external_ip, nat.internal_ip[0] if nat.internal_ip else "")
        if key in wanted:
            wanted.discard(key)
        else:
            view.delete(nat)
    service = first(router.gateway_service)
    for external, internal in sorted(wanted):
        if service is not None:
            check_public_address(
                view,
                Uplink.of(service),
                external,
                kind="snat",
                router=router,
                field="external_gateway_info",
                admin=admin,
            )
        view.insert(
            "NAT_Rule",
            revision=1,
            logical_router=[router],
            tenant=router.tenant,
            type="snat",
            external_ip=external,
            internal_ip=[internal],
            logical_port=[],
            tags=[],
            external_ids=merged_ids(None, snat=True),
        )


# ---- the gateway -------------------------------------------------------------------------


def _same_address(view: ReadView, port: Any, wanted: list[FixedIp]) -> bool:
    """Return whether `wanted` (external_fixed_ips) describes the gateway's current address."""
    current = ipaddress.ip_interface(port.ip_prefix).ip
    if len(wanted) != 1:
        return False
    entry = wanted[0]
    try:
        if entry.ip_address is not None and ipaddress.ip_address(entry.ip_address) != current:
            return False
    except ValueError:
        return False  # assign_addresses reports it
    if entry.subnet_id is not None:
        subnet = subnet_of(view, port.logical_switch, str(current))
        return subnet is not None and str(subnet.uuid) == entry.subnet_id
    return True


def _gateway_address(view: ReadView, network: Any, wanted: list[FixedIp] | None) -> tuple[str, int]:
    """Return the gateway's address on `network` and its subnet's prefix length."""
    if wanted is not None and len(wanted) != 1:
        raise errors.BadRouterRequest(detail="a router gateway takes exactly one external fixed IP")
    addresses = assign_addresses(view, network, wanted, None)
    if not addresses:
        raise errors.BadRouterRequest(
            detail=f"External network {network.uuid} has no subnet to take an address from"
        )
    address = addresses[0]
    subnet = subnet_of(view, network, address)
    assert subnet is not None  # assign_addresses gives addresses of subnets only
    return address, ipaddress.ip_network(subnet.cidr).prefixlen


def _remove_gateway(view: WriteView, router: Any, port: Any) -> None:
    fips = router_fips(view, router)
    if fips:
        raise errors.RouterExternalGatewayInUseByFloatingIp(
            router_id=str(router.uuid), net_id=str(port.logical_switch.uuid)
        )
    service = ext(port.logical_switch, "gateway_service")
    if follows_default(router):
        ids = {k: v for k, v in router.external_ids.items() if k != FOLLOWS_DEFAULT}
        view.update(router, gateway_service=[], external_ids=ids)
    elif router.gateway_service and str(router.gateway_service[0].uuid) == service:
        view.update(router, gateway_service=[])
    remove_router_port(view, port)


def set_gateway(view: WriteView, ctx: Context, router: Any, info: GatewayInfo | None) -> None:
    """Give `router` the gateway `info` describes (none: remove it), with its SNAT rules.

    Raises:
        errors.NetworkNotFound: no such network visible to the caller.
        errors.ExternalNetworkRequired: the network is not external.
        errors.RouterExternalGatewayInUseByFloatingIp: removing or moving a gateway that
            floating IPs use.
        loom_api.errors.Conflict: the router's NAT addresses are taken on the uplink network
            of the new gateway service (Neutron's Conflict, 409).
    """
    current = gateway_port(view, router)
    network = None
    if info is not None and info.network_id is not None:
        network = lookup(view, NETWORKS, ctx, info.network_id)
        if not is_external(network):
            raise errors.ExternalNetworkRequired(
                field="external_gateway_info.network_id", net_id=info.network_id
            )
    if network is None:
        if current is not None:
            _remove_gateway(view, router, current)
        view.update(router, external_ids=merged_ids(router, enable_snat=None))
        sync_snat(view, router)
        return
    assert info is not None
    moving = current is None or current.logical_switch != network
    if not moving and info.external_fixed_ips is not None:
        moving = not _same_address(view, current, info.external_fixed_ips)
    if moving:
        if current is not None:
            _remove_gateway(view, router, current)
        address, prefixlen = _gateway_address(view, network, info.external_fixed_ips)
        add_router_port(view, router, network, address, prefixlen, GATEWAY_OWNER)
        if not ext(network, "gateway_service"):
            view.update(router, external_ids={**router.external_ids, FOLLOWS_DEFAULT: "default"})
        row = network_service(view, network)
        if row is not None and row not in router.gateway_service:
            view.update(router, gateway_service=[row])
            check_router_addresses(
                view,
                router,
                router_nat_rules(view, router),
                Uplink.of(row),
                "external_gateway_info",
                admin=ctx.is_admin,
            )
    snat = info.enable_snat is not False
    view.update(router, external_ids=merged_ids(router, enable_snat=None if snat else False))
    sync_snat(view, router, admin=ctx.is_admin)


def gateway_api(view: ReadView, router: Any) -> dict[str, Any] | None:
    """Return the router's `external_gateway_info` (None without a gateway)."""
    port = gateway_port(view, router)
    if port is None:
        return None
    address = str(ipaddress.ip_interface(port.ip_prefix).ip)
    subnet = subnet_of(view, port.logical_switch, address)
    return {
        "network_id": str(port.logical_switch.uuid),
        "enable_snat": flag(router, "enable_snat", True),
        "external_fixed_ips": [
            {"subnet_id": str(subnet.uuid) if subnet else None, "ip_address": address}
        ],
    }


# ---- extra routes ------------------------------------------------------------------------


def set_routes(view: WriteView, router: Any, routes: list[Route]) -> None:
    """Replace the router's static routes with `routes`.

    Raises:
        errors.BadRequest: a bad destination or next hop (a zone index, two IP versions),
            or a next hop on none of the router's networks (Neutron's InvalidRoutes).
    """
    connected = [ipaddress.ip_interface(p.ip_prefix).network for p in router_ports(view, router)]
    rows = []
    for i, route in enumerate(routes):
        try:
            if "%" in route.destination or "%" in route.nexthop:
                raise ValueError("a zone index (%...) cannot be configured")
            destination = ipaddress.ip_network(route.destination, strict=False)
            nexthop = ipaddress.ip_address(route.nexthop)
        except ValueError as exc:
            raise errors.BadRequest(
                field=f"routes.{i}", detail=f"Invalid format for routes: {exc}"
            ) from None
        if destination.version != nexthop.version:
            raise errors.BadRequest(
                field=f"routes.{i}",
                detail=f"Invalid format for routes: the nexthop {nexthop} is not of the IP "
                f"version of destination {destination}",
            )
        if not any(nexthop in network for network in connected):
            raise errors.BadRequest(
                field=f"routes.{i}",
                detail=f"Invalid format for routes: the nexthop {nexthop} is not connected "
                f"with router {router.uuid}",
            )
        rows.append((str(destination), str(nexthop)))
    for old in children(view, "Static_Route", "logical_router", router):
        view.delete(old)
    for prefix, hop in dict.fromkeys(rows):
        view.insert(
            "Static_Route",
            revision=1,
            logical_router=router,
            tenant=router.tenant,
            prefix=prefix,
            next_hop=hop,
            output_port=[],
            tags=[],
            external_ids={},
        )


# ---- the collection ----------------------------------------------------------------------


class Routers(NeutronResource):
    """`/v2.0/routers`."""

    collection = "routers"
    member = "router"
    table = "Logical_Router"
    create_model = RouterBody
    update_model = RouterBody
    not_found = errors.RouterNotFound

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the router with its gateway and routes."""
        routes = sorted(
            ({"destination": r.prefix, "nexthop": r.next_hop}
             for r in view.children("Static_Route", "logical_router", row)),
            key=lambda r: (r["destination"], r["nexthop"]),
        )  # fmt: skip
        return {
            "id": str(row.uuid),
            "name": row.name,
            "description": row.description,
            "admin_state_up": row.admin_state_up,
            "status": "ACTIVE",
            "external_gateway_info": gateway_api(view, row),
            "routes": routes,
            "distributed": True,
            "ha": False,
            "availability_zones": [],
            "availability_zone_hints": [],
            "flavor_id": None,
            "tags": sorted(row.tags),
            "revision_number": row.revision,
            **tenant_api(row.tenant),
        }

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Create the logical router (native checks, tunnel key) and its gateway."""
        tenant = owner(ctx, body)
        if body.routes is not None:
            raise errors.BadRequest(field="routes", detail="Attribute 'routes' not allowed in POST")
        row = native_insert(
            view,
            _ROUTERS,
            {
                "tenant": tenant,
                "name": body.name or "",
                "description": body.description or "",
                "admin_state_up": body.admin_state_up is not False,
                "tags": list(body.tags or []),
            },
        )
        row.external_ids = {}
        if body.external_gateway_info is not None:
            set_gateway(view, ctx, row, body.external_gateway_info)
        return row

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Change the router's columns, gateway and routes as the body says."""
        check_owner_unchanged(body, row)
        changes: dict[str, Any] = {}
        for name in ("name", "description", "admin_state_up"):
            if given(body, name):
                value = getattr(body, name)
                changes[name] = (
                    (True if name == "admin_state_up" else "") if value is None else value
                )
        if given(body, "tags"):
            changes["tags"] = list(body.tags or [])
        bump(view, row, **changes)
        if given(body, "external_gateway_info"):
            set_gateway(view, ctx, row, body.external_gateway_info)
        if given(body, "routes"):
            set_routes(view, row, body.routes or [])

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Delete the router with its gateway, routes and NAT; refuse while it has interfaces."""
        ports = interfaces(view, row)
        if ports:
            raise errors.RouterInUse(
                id=str(row.uuid),
                reason="still has ports: " + ", ".join(crud.describe("router port", ports)),
            )
        for route in children(view, "Static_Route", "logical_router", row):
            view.delete(route)
        for nat in list(view.rows("NAT_Rule")):
            if row in nat.logical_router:
                if nat.type == "floating-ip":
                    bump(view, nat, logical_router=[], internal_ip=[], logical_port=[])
                else:
                    view.delete(nat)
        gateway = gateway_port(view, row)
        if gateway is not None:
            remove_router_port(view, gateway)
        view.delete(row)


ROUTERS = Routers()
