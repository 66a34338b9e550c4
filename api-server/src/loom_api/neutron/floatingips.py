"""Floating IPs: `NAT_Rule` rows of type floating-ip.

A floating IP IS a floating-ip NAT rule (same id). Its address is allocated from the
external network's subnets like a port's (and counts as taken on that network); the network
is kept in `neutron:floating_network_id`. An unassociated floating IP has no router, no
internal address and no port. Associating it with a port finds, as Neutron does, the router
that has an interface on the port's subnet and its gateway on the floating IP's network,
and sets the rule's router, internal address (the port's fixed IP) and logical port.

As in Neutron, association needs only such a router (else
`ExternalGatewayForFloatingIPNotFound`, 404). What translates the address is the router's
L3 gateway service: the external network's (`l3_ext`), or the deployment's default one for
an external network that names none (`service.gateways.follow_default` keeps the router on
whichever is the default). While the router has a service, the floating IP's address must
be free on the uplink network behind it (no other router's NAT rule has it, and it is not
the uplink's own address or next hop; 409).

`status` says whether the address is translated: ACTIVE only when the floating IP has a
router whose gateway service has an IPv4 uplink, its addresses are IPv4 (the rules
translate IPv4), and the logical controllers report no warning about it; otherwise DOWN,
with the reason in the extension attribute `loom:status_reason` (null when ACTIVE). The
status is computed when read, so it follows the router's service as defaults come and go.
"""

from __future__ import annotations

import ipaddress
import uuid as uuidlib
from collections.abc import Iterable
from typing import Any

from loom_api.neutron import errors
from loom_api.neutron.addressing import (
    GATEWAY_OWNER,
    FixedIp,
    assign_addresses,
    fip_rows,
    floating_network,
    gateway_port,
    is_external,
    router_fips,
    subnet_of,
)
from loom_api.neutron.common import (
    Address,
    Body,
    Context,
    Description,
    NeutronResource,
    Tags,
    bump,
    check_owner_unchanged,
    ext,
    given,
    lookup,
    merged_ids,
    owner,
    refuse_changes,
    require,
    tenant_api,
)
from loom_api.neutron.networks import NETWORKS
from loom_api.neutron.ports import PORTS
from loom_api.service.crud import first
from loom_api.service.gateways import Uplink, check_public_address, follows_default
from loom_api.service.types import Uuid
from loom_api.store import ReadView, WriteView

#: The extension attribute that says why a floating IP is DOWN (null when ACTIVE).
STATUS_REASON = "loom:status_reason"


class FloatingIpBody(Body):
    """A floating IP (create and update)."""

    floating_network_id: Uuid | None = None
    floating_ip_address: Address | None = None
    subnet_id: Uuid | None = None
    port_id: Uuid | None = None
    fixed_ip_address: Address | None = None
    description: Description | None = None
    tags: Tags | None = None


def _router_for(view: ReadView, port: Any, fixed_ip: str, network: Any) -> Any | None:
    """Return the router joining the subnet of `fixed_ip` to the external `network` (one
    with a gateway service, when several do)."""
    address = ipaddress.ip_address(fixed_ip)
    found = []
    for router_port in view.rows("Logical_Router_Port"):
        if router_port.logical_switch != port.logical_switch:
            continue
        if ext(router_port, "device_owner") == GATEWAY_OWNER:
            continue
        if address not in ipaddress.ip_interface(router_port.ip_prefix).network:
            continue
        router = router_port.logical_router
        gateway = gateway_port(view, router)
        if gateway is not None and gateway.logical_switch == network:
            found.append(router)
    return min(found, key=lambda r: (not r.gateway_service, str(r.uuid)), default=None)


def fip_status(row: Any, warnings: list[str]) -> tuple[str, str | None]:
    """Return a floating IP's Neutron `status` and the reason it is DOWN (None when ACTIVE).

    Args:
        row: the floating IP's `NAT_Rule`.
        warnings: the logical controllers' warnings about it (`Warning` rows' messages).
    """
    router = first(row.logical_router)
    if router is None:
        return "DOWN", "not associated with a port"
    service = first(router.gateway_service)
    if service is None and follows_default(router):
        return "DOWN", (
            f"router {router.uuid} has no L3 gateway service: its external network names "
            "none, and the deployment has no default one (exactly one L3 gateway service, "
            "or one marked default), so nothing translates the address"
        )
    if service is None:
        return "DOWN", f"router {router.uuid} has no L3 gateway service to translate it"
    uplink = Uplink.of(service)
    if service.type != "l3" or uplink.network is None or uplink.network.version != 4:
        return "DOWN", f"gateway service {service.uuid} of router {router.uuid} has no IPv4 uplink"
    addresses = [row.external_ip, *row.internal_ip]
    if any(ipaddress.ip_address(a).version != 4 for a in addresses):
        return "DOWN", "only IPv4 addresses are translated"
    if warnings:
        return "DOWN", "; ".join(sorted(warnings))
    return "ACTIVE", None


def _warnings(view: ReadView) -> dict[str, list[str]]:
    """Return the logical controllers' warnings by the id of the object they are about."""
    found: dict[str, list[str]] = {}
    for warning in view.rows("Warning"):
        found.setdefault(warning.source, []).append(warning.message)
    return found


def _fixed_ip(port: Any, requested: str | None, version: int) -> str:
    """Return the port address a floating IP of IP `version` translates to.

    Raises:
        errors.BadRequest: the port lacks the requested address, or has none of `version`.
    """
    if requested is not None:
        try:
            wanted = str(ipaddress.ip_address(requested))
        except ValueError:
            wanted = requested
        if wanted not in port.ips:
            raise errors.BadRequest(
                field="fixed_ip_address",
                detail=f"Bad floatingip request: Port {port.uuid} does not have fixed ip "
                f"{requested}.",
            )
        if ipaddress.ip_address(wanted).version != version:
            raise errors.BadRequest(
                field="fixed_ip_address",
                detail=f"Bad floatingip request: fixed ip {wanted} is not IPv{version}.",
            )
        return wanted
    for address in sorted(port.ips):
        if ipaddress.ip_address(address).version == version:
            return str(address)
    raise errors.BadRequest(
        field="port_id",
        detail=f"Bad floatingip request: Port {port.uuid} does not have any IPv{version} address.",
    )


def associate(
    view: WriteView, ctx: Context, fip: Any, network: Any, port_id: str, fixed: str | None
) -> None:
    """Point `fip` at port `port_id` through the router that connects it to `network`.

    Raises:
        errors.PortNotFound: no such port visible to the caller.
        errors.BadRequest: a port of another project, a router's own port, no such fixed IP.
        errors.ExternalGatewayForFloatingIPNotFound: no router connects the two.
        errors.FloatingIPPortAlreadyAssociated: the fixed IP has a floating IP already.
        loom_api.errors.Conflict: another router's NAT rule has the floating IP's address on
            the uplink network behind the router's gateway service, or it is the uplink's
            own address or next hop (rendered as Neutron's Conflict, 409).
    """
    port = lookup(view, PORTS, ctx, port_id)
    if port.tenant != fip.tenant:
        raise errors.BadRequest(
            field="port_id",
            detail=f"Cannot create floating IP and bind it to Port {port_id}, since that port "
            "is owned by a different project.",
        )
    if port.router_port:
        raise errors.BadRequest(
            field="port_id",
            detail=f"Port {port_id} is a router port; it cannot have a floating IP.",
        )
    fixed_ip = _fixed_ip(port, fixed, ipaddress.ip_address(fip.external_ip).version)
    router = _router_for(view, port, fixed_ip, network)
    subnet = subnet_of(view, port.logical_switch, fixed_ip)
    subnet_id = str(subnet.uuid) if subnet else ""
    if router is None:
        raise errors.ExternalGatewayForFloatingIPNotFound(
            field="port_id", net_id=str(network.uuid), subnet_id=subnet_id, port_id=port_id
        )
    for other in router_fips(view, router):
        if other.uuid != fip.uuid and fixed_ip in other.internal_ip:
            raise errors.FloatingIPPortAlreadyAssociated(
                floating_ip_address=fip.external_ip,
                fip_id=str(fip.uuid),
                port_id=port_id,
                fixed_ip=fixed_ip,
                net_id=str(network.uuid),
            )
    service = first(router.gateway_service)
    if service is not None:
        check_public_address(
            view, Uplink.of(service), fip.external_ip, kind="floating-ip", router=router,
            field="floating_ip_address", rule=fip, admin=ctx.is_admin,
        )  # fmt: skip
    view.update(fip, logical_router=[router], internal_ip=[fixed_ip], logical_port=[port])


class FloatingIps(NeutronResource):
    """`/v2.0/floatingips`."""

    collection = "floatingips"
    member = "floatingip"
    table = "NAT_Rule"
    create_model = FloatingIpBody
    update_model = FloatingIpBody
    not_found = errors.FloatingIPNotFound

    def rows(self, view: ReadView) -> Iterable[Any]:
        """Only the floating-ip NAT rules."""
        return fip_rows(view)

    def row(self, view: ReadView, key: uuidlib.UUID) -> Any | None:
        """The NAT rule `key` if it is a floating IP."""
        row = view.get(self.table, key)
        return row if row is not None and row.type == "floating-ip" else None

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the floating IP, with its status as `fip_status` decides it."""
        warnings = [w.message for w in view.rows("Warning") if w.source == str(row.uuid)]
        return self._api(view, row, warnings)

    def represent(self, view: ReadView, ctx: Context) -> list[dict[str, Any]]:
        """Return every visible floating IP (the warnings read once for all)."""
        warnings = _warnings(view)
        return [
            self._api(view, row, warnings.get(str(row.uuid), []))
            for row in self.rows(view)
            if self.visible(ctx, view, row)
        ]

    def _api(self, view: ReadView, row: Any, warnings: list[str]) -> dict[str, Any]:
        status, reason = fip_status(row, warnings)
        network = floating_network(view, row)
        router = row.logical_router[0] if row.logical_router else None
        port = row.logical_port[0] if row.logical_port else None
        return {
            "id": str(row.uuid),
            "floating_ip_address": row.external_ip,
            "floating_network_id": str(network.uuid) if network is not None else None,
            "router_id": str(router.uuid) if router is not None else None,
            "port_id": str(port.uuid) if port is not None else None,
            "fixed_ip_address": row.internal_ip[0] if row.internal_ip else None,
            "status": status,
            STATUS_REASON: reason,
            "description": ext(row, "description"),
            "port_forwardings": [],
            "tags": sorted(row.tags),
            "revision_number": row.revision,
            **tenant_api(row.tenant),
        }

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Allocate the address on the external network; associate it if a port is named."""
        require(body, "floating_network_id")
        network = lookup(view, NETWORKS, ctx, body.floating_network_id)
        if not is_external(network):
            raise errors.ExternalNetworkRequired(
                field="floating_network_id", net_id=body.floating_network_id
            )
        tenant = owner(ctx, body)
        wanted = None
        if body.floating_ip_address is not None or body.subnet_id is not None:
            wanted = [FixedIp(subnet_id=body.subnet_id, ip_address=body.floating_ip_address)]
        addresses = assign_addresses(view, network, wanted, None)
        if not addresses:
            raise errors.IpAddressGenerationFailure(net_id=str(network.uuid))
        row = view.insert(
            self.table,
            revision=1,
            tenant=tenant,
            type="floating-ip",
            external_ip=addresses[0],
            internal_ip=[],
            logical_port=[],
            logical_router=[],
            tags=list(body.tags or []),
            external_ids=merged_ids(
                None,
                floating_network_id=str(network.uuid),
                description=body.description or None,
            ),
        )
        if body.port_id is not None:
            associate(view, ctx, row, network, body.port_id, body.fixed_ip_address)
        elif body.fixed_ip_address is not None:
            raise errors.BadRequest(
                field="fixed_ip_address", detail="fixed_ip_address needs a port_id"
            )
        return row

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Associate (`port_id`), disassociate (`port_id: null`), describe, retag."""
        check_owner_unchanged(body, row)
        refuse_changes(body, ("floating_network_id", "floating_ip_address", "subnet_id"))
        if given(body, "port_id"):
            if body.port_id is None:
                view.update(row, logical_router=[], internal_ip=[], logical_port=[])
            else:
                network = floating_network(view, row)
                if network is None:
                    raise errors.BadRequest(
                        field="port_id",
                        detail=f"Floating IP {row.uuid} belongs to no external network",
                    )
                associate(view, ctx, row, network, body.port_id, body.fixed_ip_address)
        elif given(body, "fixed_ip_address"):
            raise errors.BadRequest(
                field="fixed_ip_address", detail="fixed_ip_address needs a port_id"
            )
        changes: dict[str, Any] = {}
        if given(body, "tags"):
            changes["tags"] = list(body.tags or [])
        if given(body, "description"):
            changes["external_ids"] = merged_ids(row, description=body.description or None)
        bump(view, row, **changes)

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Release the floating IP."""
        view.delete(row)


FLOATING_IPS = FloatingIps()
