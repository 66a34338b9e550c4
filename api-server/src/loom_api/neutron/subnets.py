"""Subnets: `Subnet` rows of the network's logical switch.

A subnet IS a native subnet (same id), checked by the native rules (gateway inside the prefix,
pools inside it and apart, no overlap on the switch). Neutron's defaults are applied first:
the gateway is the prefix's first address unless `gateway_ip` is given (null: none).
`description`, `host_routes` and the IPv6 modes live in `external_ids`.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Annotated, Any, Literal

from pydantic import Field

from loom_api import errors as native_errors
from loom_api.neutron import errors
from loom_api.neutron.addressing import network_fips
from loom_api.neutron.common import (
    Address,
    Body,
    Context,
    Description,
    Name,
    NeutronResource,
    Part,
    Tags,
    check_owner_unchanged,
    ext,
    given,
    lookup,
    merged_ids,
    native_insert,
    native_update,
    refuse_changes,
    requested_tenant,
    require,
    tenant_api,
)
from loom_api.neutron.networks import NETWORKS
from loom_api.service import crud
from loom_api.service.subnets import Subnets
from loom_api.service.types import DNS_NAMESERVERS_MAX, POOLS_MAX, Uuid
from loom_api.store import ReadView, WriteView

_SUBNETS = Subnets()

Ipv6Mode = Literal["slaac", "dhcpv6-stateful", "dhcpv6-stateless"]

#: Neutron's default `max_subnet_host_routes`.
HOST_ROUTES_MAX = 20


class Pool(Part):
    """An allocation pool."""

    start: Address
    end: Address


class HostRoute(Part):
    """A route handed to hosts by DHCP."""

    destination: Address
    nexthop: Address


class SubnetBody(Body):
    """A subnet (create and update)."""

    network_id: Uuid | None = None
    cidr: Address | None = None
    ip_version: Literal[4, 6] | None = None
    name: Name | None = None
    description: Description | None = None
    gateway_ip: Address | None = None
    allocation_pools: Annotated[list[Pool], Field(max_length=POOLS_MAX)] | None = None
    enable_dhcp: bool | None = None
    dns_nameservers: Annotated[list[Address], Field(max_length=DNS_NAMESERVERS_MAX)] | None = None
    host_routes: Annotated[list[HostRoute], Field(max_length=HOST_ROUTES_MAX)] | None = None
    ipv6_ra_mode: Ipv6Mode | None = None
    ipv6_address_mode: Ipv6Mode | None = None
    tags: Tags | None = None


def _default_gateway(cidr: str) -> str | None:
    """Return Neutron's default gateway of `cidr`: its first address (none for tiny ones)."""
    try:
        network = ipaddress.ip_network(cidr)
    except ValueError:
        return None  # the native check reports the bad prefix
    if network.num_addresses <= 2:
        return None
    return str(network.network_address + 1)


def _native_error(exc: native_errors.LoomApiError, network_id: str) -> errors.NeutronError:
    """Return a native subnet error as Neutron words it (an overlap is Neutron's 400; other
    conflicts, such as ports whose addresses the subnet would leave invalid, stay 409)."""
    if isinstance(exc, native_errors.Conflict) and exc.kw.get("overlaps"):
        return errors.InvalidInput(
            field="cidr",
            detail=f"Requested subnet overlaps with another subnet of network {network_id} "
            f"({exc.text})",
        )
    if isinstance(exc, native_errors.Conflict):
        return errors.Conflict(field=exc.field, detail=exc.text)
    return errors.BadRequest(field=exc.field, detail=exc.text)


class NeutronSubnets(NeutronResource):
    """`/v2.0/subnets`."""

    collection = "subnets"
    member = "subnet"
    table = "Subnet"
    create_model = SubnetBody
    update_model = SubnetBody
    not_found = errors.SubnetNotFound

    def visible(self, ctx: Context, view: ReadView, row: Any) -> bool:
        """A subnet is visible with its network."""
        return (
            ctx.is_admin
            or row.tenant == ctx.tenant
            or NETWORKS.visible(ctx, view, row.logical_switch)
        )

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the subnet."""
        native = _SUBNETS.to_api(view, row)
        routes = json.loads(ext(row, "host_routes") or "[]")
        return {
            "id": str(row.uuid),
            "name": row.name,
            "description": ext(row, "description"),
            "network_id": str(row.logical_switch.uuid),
            "cidr": row.cidr,
            "ip_version": row.ip_version,
            "gateway_ip": native["gateway_ip"],
            "allocation_pools": native["allocation_pools"],
            "enable_dhcp": row.enable_dhcp,
            "dns_nameservers": native["dns_nameservers"],
            "host_routes": routes,
            "ipv6_ra_mode": ext(row, "ipv6_ra_mode") or None,
            "ipv6_address_mode": ext(row, "ipv6_address_mode") or None,
            "subnetpool_id": None,
            "segment_id": None,
            "service_types": [],
            "tags": native["tags"],
            "revision_number": row.revision,
            **tenant_api(row.tenant),
        }

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Create the subnet on the network's switch, with Neutron's default gateway."""
        require(body, "network_id", "cidr", "ip_version")
        network = lookup(view, NETWORKS, ctx, body.network_id)
        if not ctx.is_admin and network.tenant != ctx.tenant:
            raise errors.PolicyNotAuthorized(
                field="network_id", detail="Only the network's project may add subnets to it."
            )
        requested = requested_tenant(body)
        if requested is not None and requested != network.tenant:
            raise errors.BadRequest(
                field="project_id",
                detail=f"A subnet belongs to its network's project ({network.tenant}).",
            )
        self._check_version(body)
        gateway = body.gateway_ip if given(body, "gateway_ip") else _default_gateway(body.cidr)
        data = {
            "tenant": network.tenant,
            "name": body.name or "",
            "cidr": body.cidr,
            "gateway_ip": gateway,
            "allocation_pools": _pools(body.allocation_pools),
            "enable_dhcp": body.enable_dhcp is not False,
            "dns_nameservers": list(body.dns_nameservers or []),
            "tags": list(body.tags or []),
        }
        try:
            row = native_insert(view, _SUBNETS, data, parent=network)
        except native_errors.LoomApiError as exc:
            raise _native_error(exc, str(network.uuid)) from None
        row.external_ids = merged_ids(None, **self._attributes(body))
        return row

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Change what Neutron lets change: name, gateway, pools, DHCP, DNS, routes, tags."""
        check_owner_unchanged(body, row)
        refuse_changes(body, ("network_id", "cidr", "ip_version"))
        changes: dict[str, Any] = {}
        for name in ("name", "gateway_ip", "enable_dhcp", "dns_nameservers"):
            if given(body, name):
                changes[name] = getattr(body, name)
        if changes.get("name", "") is None:
            changes["name"] = ""
        if changes.get("dns_nameservers", []) is None:
            changes["dns_nameservers"] = []
        if changes.get("enable_dhcp", True) is None:
            changes["enable_dhcp"] = True
        if given(body, "allocation_pools"):
            changes["allocation_pools"] = _pools(body.allocation_pools)
        elif given(body, "gateway_ip"):
            changes["allocation_pools"] = _SUBNETS.to_api(view, row)["allocation_pools"]
        if given(body, "tags"):
            changes["tags"] = list(body.tags or [])
        try:
            native_update(view, _SUBNETS, row, changes, parent=row.logical_switch)
        except native_errors.LoomApiError as exc:
            raise _native_error(exc, str(row.logical_switch.uuid)) from None
        attributes = {k: v for k, v in self._attributes(body).items() if given(body, k)}
        view.update(row, external_ids=merged_ids(row, **attributes))

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Delete the subnet unless a port or floating IP holds one of its addresses."""
        network = ipaddress.ip_network(row.cidr)
        users = [
            user
            for user in _SUBNETS.users(view, row)
            if not user.startswith("and ")  # the native list is capped; the count suffices
        ]
        fips = [
            f
            for f in network_fips(view, row.logical_switch)
            if ipaddress.ip_address(f.external_ip) in network
        ]
        if users or fips:
            described = [u.replace("logical switch port", "port") for u in users]
            described += crud.describe("floating IP", fips)
            raise errors.SubnetInUse(id=str(row.uuid), users=", ".join(described))
        view.delete(row)

    @staticmethod
    def _check_version(body: Any) -> None:
        try:
            version = ipaddress.ip_network(body.cidr, strict=False).version
        except ValueError:
            raise errors.BadRequest(
                field="cidr",
                detail=f"Invalid input for cidr. Reason: '{body.cidr}' is not a valid IP subnet.",
            ) from None
        if version != body.ip_version:
            raise errors.InvalidInput(
                field="ip_version",
                detail=f"Cidr {body.cidr} does not match ip_version {body.ip_version}",
            )

    @staticmethod
    def _attributes(body: Any) -> dict[str, str | bool | None]:
        routes = None
        if body.host_routes:
            routes = json.dumps([_host_route(i, r) for i, r in enumerate(body.host_routes)])
        return {
            "description": body.description or None,
            "host_routes": routes,
            "ipv6_ra_mode": body.ipv6_ra_mode,
            "ipv6_address_mode": body.ipv6_address_mode,
        }


def _host_route(index: int, route: HostRoute) -> dict[str, str]:
    """Return a host route normalized, or raise BadRequest naming it."""
    try:
        if "%" in route.destination or "%" in route.nexthop:
            raise ValueError("a zone index (%...) cannot be configured")
        destination = ipaddress.ip_network(route.destination, strict=False)
        nexthop = ipaddress.ip_address(route.nexthop)
    except ValueError as exc:
        raise errors.BadRequest(
            field=f"host_routes.{index}", detail=f"Invalid input for host_routes. Reason: {exc}."
        ) from None
    return {"destination": str(destination), "nexthop": str(nexthop)}


def _pools(pools: list[Pool] | None) -> list[dict[str, str]] | None:
    return None if pools is None else [p.model_dump() for p in pools]


SUBNETS = NeutronSubnets()
