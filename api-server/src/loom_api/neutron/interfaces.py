"""`add_router_interface` and `remove_router_interface`: router ports on tenant networks.

With `subnet_id`, the router gets a port at the subnet's gateway address (the native router
port code also creates its switch-side peer, which is the Neutron port). With `port_id`, an
unused Neutron port with one fixed IP becomes the peer of a new router port at that address.
Removing an interface deletes the router port and its peer, and refuses while floating IPs
or extra routes still need it. The router's SNAT rules follow (see `neutron.routers`).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from loom_api.neutron import errors
from loom_api.neutron.addressing import GATEWAY_OWNER, INTERFACE_OWNER, router_fips, subnet_of
from loom_api.neutron.common import Context, Part, Result, bump, ext, lookup, parse, tenant_api
from loom_api.neutron.ports import PORTS
from loom_api.neutron.routers import (
    ROUTERS,
    add_router_port,
    interfaces,
    remove_router_port,
    sync_snat,
)
from loom_api.neutron.subnets import SUBNETS
from loom_api.service.crud import first
from loom_api.service.router_ports import peer_port
from loom_api.service.types import Uuid
from loom_api.store import ReadView, Store, WriteView


class InterfaceBody(Part):
    """The body of add/remove_router_interface: a subnet or a port."""

    subnet_id: Uuid | None = None
    port_id: Uuid | None = None


def _parse(data: Any, *, adding: bool) -> InterfaceBody:
    body: InterfaceBody = parse(InterfaceBody, data)
    if body.subnet_id is None and body.port_id is None:
        raise errors.BadRequest(detail="Either subnet_id or port_id must be specified")
    if adding and body.subnet_id is not None and body.port_id is not None:
        raise errors.BadRequest(detail="Cannot specify both subnet-id and port-id")
    return body


def _info(router: Any, subnet: Any, port_id: str | None = None) -> dict[str, Any]:
    """Return the response body (`port_id` is filled in once a new port's id is known)."""
    return {
        "id": str(router.uuid),
        "subnet_id": str(subnet.uuid),
        "subnet_ids": [str(subnet.uuid)],
        "network_id": str(subnet.logical_switch.uuid),
        "port_id": port_id,
        **tenant_api(router.tenant),
    }


def add_interface(store: Store, ctx: Context, router_id: str, data: Any) -> Result:
    """Connect a router to a subnet (at its gateway address) or through an existing port."""
    body = _parse(data, adding=True)

    def write(view: WriteView) -> tuple[dict[str, Any], Any]:
        router = lookup(view, ROUTERS, ctx, router_id)
        if body.subnet_id is not None:
            subnet = lookup(view, SUBNETS, ctx, body.subnet_id)
            gateway = first(subnet.gateway_ip)
            if gateway is None:
                raise errors.BadRouterRequest(
                    detail=f"Subnet {subnet.uuid} for router interface must have a gateway IP"
                )
            prefixlen = ipaddress.ip_network(subnet.cidr).prefixlen
            peer = add_router_port(
                view, router, subnet.logical_switch, gateway, prefixlen, INTERFACE_OWNER
            )
        else:
            assert body.port_id is not None
            subnet, peer = _adopt_port(view, ctx, router, body.port_id)
        sync_snat(view, router, admin=ctx.is_admin)
        bump(view, router)
        return _info(router, subnet), peer

    committed = store.write(write)
    info, peer = committed.result
    info["port_id"] = str(committed.real_id(peer))
    return Result(info, committed.generation)


def _adopt_port(view: WriteView, ctx: Context, router: Any, port_id: str) -> tuple[Any, Any]:
    """Make Neutron port `port_id` the switch side of a new interface of `router`."""
    port = lookup(view, PORTS, ctx, port_id)
    device = ext(port, "device_id")
    if port.router_port or device:
        owner = str(port.router_port[0].logical_router.uuid) if port.router_port else device
        raise errors.PortInUse(id=port_id, net_id=str(port.logical_switch.uuid), device_id=owner)
    if len(port.ips) != 1:
        raise errors.BadRouterRequest(
            detail=f"Router port {port_id} must have exactly one fixed IP"
        )
    address = port.ips[0]
    subnet = subnet_of(view, port.logical_switch, address)
    if subnet is None:
        raise errors.BadRouterRequest(
            detail=f"Fixed IP {address} of port {port_id} is in no subnet"
        )
    if any(port in nat.logical_port for nat in view.rows("NAT_Rule")):
        raise errors.PortInUse(
            id=port_id, net_id=str(port.logical_switch.uuid), device_id="a floating IP"
        )
    prefixlen = ipaddress.ip_network(subnet.cidr).prefixlen
    peer = add_router_port(
        view, router, port.logical_switch, address, prefixlen, INTERFACE_OWNER, existing=port
    )
    return subnet, peer


def remove_interface(store: Store, ctx: Context, router_id: str, data: Any) -> Result:
    """Disconnect a router from a subnet or port; the router port and its peer go."""
    body = _parse(data, adding=False)

    def write(view: WriteView) -> dict[str, Any]:
        router = lookup(view, ROUTERS, ctx, router_id)
        router_port = _find(view, ctx, router, body)
        peer = peer_port(view, router_port)
        address = str(ipaddress.ip_interface(router_port.ip_prefix).ip)
        subnet = subnet_of(view, router_port.logical_switch, address)
        subnet_id = str(subnet.uuid) if subnet is not None else body.subnet_id or ""
        network = ipaddress.ip_interface(router_port.ip_prefix).network
        fips = [
            f
            for f in router_fips(view, router)
            if f.logical_port and f.logical_port[0].logical_switch == router_port.logical_switch
        ]
        if fips:
            raise errors.RouterInterfaceInUseByFloatingIP(subnet_id=subnet_id, router_id=router_id)
        routes = [
            r
            for r in view.children("Static_Route", "logical_router", router)
            if _in(r.next_hop, network)
        ]
        if routes:
            raise errors.Conflict(
                detail=f"Router interface for subnet {subnet_id} on router {router_id} cannot "
                f"be deleted, as it is required by one or more routes (next hop "
                f"{routes[0].next_hop})"
            )
        info = {
            "id": router_id,
            "subnet_id": subnet_id,
            "subnet_ids": [subnet_id],
            "network_id": str(router_port.logical_switch.uuid),
            "port_id": str(peer.uuid) if peer is not None else None,
            **tenant_api(router.tenant),
        }
        remove_router_port(view, router_port)
        sync_snat(view, router, admin=ctx.is_admin)
        bump(view, router)
        return info

    committed = store.write(write)
    return Result(committed.result, committed.generation)


def _find(view: ReadView, ctx: Context, router: Any, body: InterfaceBody) -> Any:
    """Return the interface (router port) of `router` that `body` names.

    Raises:
        errors.SubnetNotFound, errors.PortNotFound: no such subnet or port.
        errors.RouterInterfaceNotFoundForSubnet, errors.RouterInterfaceNotFound: the router
            has no interface there.
    """
    router_id = str(router.uuid)
    if body.port_id is not None:
        port = lookup(view, PORTS, ctx, body.port_id)
        router_port = port.router_port[0] if port.router_port else None
        if (
            router_port is None
            or router_port.logical_router != router
            or ext(router_port, "device_owner") == GATEWAY_OWNER
        ):
            raise errors.RouterInterfaceNotFound(router_id=router_id, port_id=body.port_id)
        if body.subnet_id is not None:
            subnet = lookup(view, SUBNETS, ctx, body.subnet_id)
            if not _in(str(ipaddress.ip_interface(router_port.ip_prefix).ip), _net(subnet)):
                raise errors.RouterInterfaceNotFoundForSubnet(
                    router_id=router_id, subnet_id=body.subnet_id
                )
        return router_port
    assert body.subnet_id is not None
    subnet = lookup(view, SUBNETS, ctx, body.subnet_id)
    for router_port in interfaces(view, router):
        address = str(ipaddress.ip_interface(router_port.ip_prefix).ip)
        if router_port.logical_switch == subnet.logical_switch and _in(address, _net(subnet)):
            return router_port
    raise errors.RouterInterfaceNotFoundForSubnet(router_id=router_id, subnet_id=body.subnet_id)


def _net(subnet: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(subnet.cidr)


def _in(address: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        return ipaddress.ip_address(address) in network
    except ValueError:
        return False
