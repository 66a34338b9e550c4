"""Ports: `Logical_Switch_Port` rows, with fixed IPs allocated from the network's subnets.

A port IS a logical switch port (same id). `mac_address` is the port's MAC (a random locally
administered one when absent), `fixed_ips` its addresses (each in a subnet of the network;
when the request names none, one address per IP version from the first subnet with a free
one, via `service.subnets.next_free_address`), `security_groups` its security profiles (the
project's default group unless the request says otherwise), `port_security_enabled` its port
security. A Neutron port is attached as a VIF whose id is the port's id (the `iface-id` Nova
gives the hypervisor's interface), so the row is inserted under a uuid chosen beforehand.
`device_id`, `device_owner`, `binding:host_id`, `binding:vnic_type` and `binding:profile`
live in `external_ids`. The switch side of a router port is a port too: its device is the
router, its owner `network:router_interface` or `network:router_gateway`.
"""

from __future__ import annotations

import json
import random
import uuid as uuidlib
from typing import Annotated, Any, Literal

from pydantic import Field

from loom_api.neutron import errors
from loom_api.neutron.addressing import FixedIp, assign_addresses, ip_key, subnet_of
from loom_api.neutron.common import (
    BINDING_PROFILE_MAX,
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
    owner,
    refuse_changes,
    require,
    tenant_api,
)
from loom_api.neutron.networks import NETWORKS
from loom_api.neutron.security_groups import ensure_default_group, security_group_rows
from loom_api.service import crud, keys
from loom_api.service.ports import PORT_KEYS, port_status, random_mac
from loom_api.service.types import (
    PORT_IPS_MAX,
    SECURITY_PROFILES_MAX,
    MacAddress,
    Uuid,
    control_character,
)
from loom_api.store import ReadView, WriteView

VnicType = Literal[
    "normal", "direct", "macvtap", "baremetal", "direct-physical", "virtio-forwarder",
    "smart-nic", "remote-managed", "vdpa",
]  # fmt: skip

#: Neutron's default `max_allowed_address_pair` (Loom supports none; the list is bounded).
ADDRESS_PAIRS_MAX = 10

#: Attributes that stay changeable on the switch side of a router port.
_ROUTER_SIDE_CHANGEABLE = frozenset({"name", "description", "admin_state_up", "tags"})


class AddressPair(Part):
    """An allowed address pair (only the empty list is supported)."""

    ip_address: Address
    mac_address: Address | None = None


class PortBody(Body):
    """A port (create and update)."""

    network_id: Uuid | None = None
    name: Name | None = None
    description: Description | None = None
    admin_state_up: bool | None = None
    mac_address: MacAddress | None = None
    fixed_ips: Annotated[list[FixedIp], Field(max_length=PORT_IPS_MAX)] | None = None
    device_id: Name | None = None
    device_owner: Name | None = None
    binding_host_id: Name | None = Field(None, alias="binding:host_id")
    binding_vnic_type: VnicType | None = Field(None, alias="binding:vnic_type")
    binding_profile: dict[str, Any] | None = Field(None, alias="binding:profile")
    security_groups: Annotated[list[Uuid], Field(max_length=SECURITY_PROFILES_MAX)] | None = None
    port_security_enabled: bool | None = None
    allowed_address_pairs: (
        Annotated[list[AddressPair], Field(max_length=ADDRESS_PAIRS_MAX)] | None
    ) = None
    tags: Tags | None = None


def _check_mac(view: ReadView, network: Any, mac: str, port: Any | None) -> None:
    for other in children(view, "Logical_Switch_Port", "logical_switch", network):
        if other.mac == mac and (port is None or other.uuid != port.uuid):
            raise errors.MacAddressInUse(field="mac_address", net_id=str(network.uuid), mac=mac)


def _refuse_address_pairs(body: Any) -> None:
    if body.allowed_address_pairs:
        raise errors.BadRequest(
            field="allowed_address_pairs",
            detail="allowed_address_pairs are not supported (Loom's port security allows the "
            "port's own MAC and fixed IPs)",
        )


def _binding_ids(row: Any | None, body: Any, *, create: bool) -> dict[str, str]:
    """Return external_ids with the device and binding attributes the body sets."""
    values: dict[str, str | bool | None] = {}
    for name, key in (
        ("device_id", "device_id"),
        ("device_owner", "device_owner"),
        ("binding_host_id", "host_id"),
        ("binding_vnic_type", "vnic_type"),
    ):
        if create or given(body, name):
            values[key] = getattr(body, name) or None
    if create or given(body, "binding_profile"):
        profile = body.binding_profile
        text = json.dumps(profile, sort_keys=True) if profile else None
        if text is not None and (len(text) > BINDING_PROFILE_MAX or control_character(text)):
            raise errors.BadRequest(
                field="binding:profile",
                detail="Invalid input for binding:profile. Reason: it must be JSON of at most "
                f"{BINDING_PROFILE_MAX} characters.",
            )
        values["profile"] = text
    return merged_ids(row, **values)


def _is_network_owned(device_owner: str) -> bool:
    return device_owner.startswith("network:")


class Ports(NeutronResource):
    """`/v2.0/ports`."""

    collection = "ports"
    member = "port"
    table = "Logical_Switch_Port"
    create_model = PortBody
    update_model = PortBody
    not_found = errors.PortNotFound

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the port; a router port's switch side reports the router as its device."""
        router_port = row.router_port[0] if row.router_port else None
        if router_port is not None:
            device_id = str(router_port.logical_router.uuid)
            device_owner = ext(router_port, "device_owner") or "network:router_interface"
        else:
            device_id, device_owner = ext(row, "device_id"), ext(row, "device_owner")
        fixed_ips = []
        for address in sorted(row.ips, key=ip_key):
            subnet = subnet_of(view, row.logical_switch, address)
            fixed_ips.append(
                {"subnet_id": str(subnet.uuid) if subnet else None, "ip_address": address}
            )
        host = ext(row, "host_id")
        return {
            "id": str(row.uuid),
            "name": row.name,
            "description": row.description,
            "network_id": str(row.logical_switch.uuid),
            "mac_address": row.mac,
            "fixed_ips": fixed_ips,
            "admin_state_up": row.admin_state_up,
            "status": "ACTIVE" if port_status(view, row)["up"] else "DOWN",
            "device_id": device_id,
            "device_owner": device_owner,
            "binding:host_id": host,
            "binding:vif_type": "ovs" if host else "unbound",
            "binding:vnic_type": ext(row, "vnic_type") or "normal",
            "binding:profile": json.loads(ext(row, "profile") or "{}"),
            "binding:vif_details": {},
            "security_groups": sorted(str(g.uuid) for g in row.security_profiles),
            "port_security_enabled": row.port_security,
            "allowed_address_pairs": [],
            "extra_dhcp_opts": [],
            "tags": sorted(row.tags),
            "revision_number": row.revision,
            **tenant_api(row.tenant),
        }

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Create a VIF port: MAC, fixed IPs, security groups, port key, all in one go."""
        require(body, "network_id")
        network = lookup(view, NETWORKS, ctx, body.network_id)
        tenant = owner(ctx, body, default=network.tenant)
        if not ctx.is_admin and network.tenant != tenant and not flag(network, "shared"):
            raise errors.PolicyNotAuthorized(
                field="network_id", detail=f"Network {network.uuid} is not shared."
            )
        _refuse_address_pairs(body)
        mac = body.mac_address or random_mac(self._rng)
        _check_mac(view, network, mac, None)
        ips = assign_addresses(view, network, body.fixed_ips, None)
        port_security = body.port_security_enabled
        if port_security is None:
            port_security = flag(network, "port_security_enabled", True)
        default = ensure_default_group(view, tenant)
        device_owner = body.device_owner or ""
        if body.security_groups is not None:
            groups = security_group_rows(view, ctx, body.security_groups, tenant)
        elif port_security and not _is_network_owned(device_owner):
            groups = [default]
        else:
            groups = []
        if groups and not port_security:
            raise errors.PortSecurityRequired(field="security_groups")
        used_keys = (p.port_key for p in children(view, self.table, "logical_switch", network))
        port_key = keys.allocate(used_keys, *PORT_KEYS, "port key on this network")
        ident = uuidlib.uuid4()
        return view.insert(
            self.table,
            row_uuid=ident,
            revision=1,
            logical_switch=network,
            tenant=tenant,
            name=body.name or "",
            description=body.description or "",
            mac=mac,
            ips=ips,
            port_security=port_security,
            admin_state_up=body.admin_state_up is not False,
            qos_queue=[],
            security_profiles=groups,
            attachment_type="vif",
            vif_id=[str(ident)],
            gateway_service=[],
            vlan=[],
            router_port=[],
            port_key=port_key,
            status={},
            tags=list(body.tags or []),
            external_ids=_binding_ids(None, body, create=True),
        )

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Change the port; fixed IPs are reallocated as on create (kept where they fit)."""
        check_owner_unchanged(body, row)
        refuse_changes(body, ("network_id",))
        if row.router_port:
            self._check_router_side(body, row)
        _refuse_address_pairs(body)
        network = row.logical_switch
        changes: dict[str, Any] = {}
        for name in ("name", "description", "admin_state_up"):
            if given(body, name):
                value = getattr(body, name)
                changes[name] = (
                    (True if name == "admin_state_up" else "") if value is None else value
                )
        if given(body, "mac_address") and body.mac_address is not None:
            _check_mac(view, network, body.mac_address, row)
            changes["mac"] = body.mac_address
        if given(body, "fixed_ips"):
            ips = assign_addresses(view, network, body.fixed_ips or [], row)
            self._check_floating_ips(view, row, ips)
            changes["ips"] = ips
        port_security = row.port_security
        if given(body, "port_security_enabled") and body.port_security_enabled is not None:
            port_security = body.port_security_enabled
        groups = list(row.security_profiles)
        if given(body, "security_groups"):
            groups = security_group_rows(view, ctx, body.security_groups or [], row.tenant)
        elif groups and not port_security:
            raise errors.PortSecurityPortHasSecurityGroup(field="port_security_enabled")
        if groups and not port_security:
            raise errors.PortSecurityRequired(field="security_groups")
        if given(body, "tags"):
            changes["tags"] = list(body.tags or [])
        bump(
            view,
            row,
            port_security=port_security,
            security_profiles=groups,
            external_ids=_binding_ids(row, body, create=False),
            **changes,
        )

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Delete the port, disassociating its floating IPs (a router's port is refused)."""
        if row.router_port:
            router_port = row.router_port[0]
            raise errors.L3PortInUse(
                id=str(row.uuid),
                device_owner=ext(router_port, "device_owner") or "network:router_interface",
            )
        for nat in list(view.rows("NAT_Rule")):
            if row not in nat.logical_port:
                continue
            if nat.type != "floating-ip":
                raise errors.Conflict(
                    detail=f"Port {row.uuid} is used by {nat.type} NAT rule {nat.uuid}"
                )
            bump(view, nat, logical_port=[], internal_ip=[], logical_router=[])
        view.delete(row)

    @staticmethod
    def _check_router_side(body: Any, row: Any) -> None:
        for name in body.model_fields_set - _ROUTER_SIDE_CHANGEABLE:
            alias = type(body).model_fields[name].alias or name
            raise errors.Conflict(
                field=alias,
                detail=f"Port {row.uuid} is an interface of router "
                f"{row.router_port[0].logical_router.uuid}; {alias} is changed through the "
                "router",
            )

    @staticmethod
    def _check_floating_ips(view: ReadView, row: Any, ips: list[str]) -> None:
        for nat in view.rows("NAT_Rule"):
            if row in nat.logical_port and nat.internal_ip and nat.internal_ip[0] not in ips:
                raise errors.Conflict(
                    field="fixed_ips",
                    detail=f"Fixed IP {nat.internal_ip[0]} of port {row.uuid} is used by "
                    f"floating IP {nat.uuid}; disassociate it first",
                )


def describe_ports(rows: list[Any]) -> str:
    """Return "port <id>, ..." for an error message."""
    return ", ".join(crud.describe("port", rows))


PORTS = Ports()
