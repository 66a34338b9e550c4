"""Logical switch ports: a MAC and addresses on a switch, and what the port is attached to."""

from __future__ import annotations

import random
from typing import Annotated, Any, Literal

from pydantic import Field

from loom_api import errors
from loom_api.service import keys
from loom_api.service.common import Body, Owned, Reply, owned_api, owned_columns
from loom_api.service.crud import (
    Caller,
    Resource,
    describe,
    first,
    optional,
    ref_id,
    reference,
)
from loom_api.service.subnets import check_port_addresses
from loom_api.service.switches import LogicalSwitches
from loom_api.service.types import (
    PORT_IPS_MAX,
    SECURITY_PROFILES_MAX,
    Description,
    HostAddress,
    Identifier,
    MacAddress,
    Uuid,
    Vlan,
)
from loom_api.store import ReadView, WriteView

#: Port keys within one switch (the logical ingress/egress port in the pipeline; 0xff00 and
#: above are the pipeline's fixed keys: the flood group, the uplink, the Hoverboards).
PORT_KEYS = (1, 0xFEFF)


class NoAttachment(Body):
    """The port is attached to nothing (its flows exist; nothing sends or receives)."""

    type: Literal["none"]


class VifAttachment(Body):
    """A VM interface: the hypervisor's OVS Interface with `external_ids:iface-id` = vif_id."""

    type: Literal["vif"]
    vif_id: Identifier


class L2GatewayAttachment(Body):
    """The switch is bridged to `vlan` by the active node of L2 gateway service."""

    type: Literal["l2-gateway"]
    gateway_service_id: Uuid
    vlan: Vlan


class RouterAttachment(Body):
    """The switch side of a logical router port (made by creating the router port)."""

    type: Literal["router"]
    router_port_id: Uuid


Attachment = Annotated[
    NoAttachment | VifAttachment | L2GatewayAttachment | RouterAttachment,
    Field(discriminator="type"),
]


class LogicalSwitchPortBody(Owned):
    """A logical switch port."""

    description: Description = ""
    mac: MacAddress | None = None
    ips: list[HostAddress] = Field(default_factory=list, max_length=PORT_IPS_MAX)
    port_security: bool = True
    admin_state_up: bool = True
    qos_queue_id: Uuid | None = None
    security_profile_ids: list[Uuid] = Field(default_factory=list, max_length=SECURITY_PROFILES_MAX)
    attachment: Attachment = NoAttachment(type="none")


def random_mac(rng: random.Random) -> str:
    """Return a random locally administered unicast MAC (02:xx:...)."""
    return "02:" + ":".join(f"{rng.randrange(256):02x}" for _ in range(5))


def attachment_api(row: Any) -> dict[str, Any]:
    """Return the `attachment` object of a port row."""
    kind = row.attachment_type
    if kind == "vif":
        return {"type": "vif", "vif_id": first(row.vif_id)}
    if kind == "l2-gateway":
        return {
            "type": "l2-gateway",
            "gateway_service_id": ref_id(row.gateway_service),
            "vlan": first(row.vlan),
        }
    if kind == "router":
        return {"type": "router", "router_port_id": ref_id(row.router_port)}
    return {"type": "none"}


class LogicalSwitchPorts(Resource):
    """`/api/v1/logical-switches/{id}/ports`."""

    kind = "logical switch port"
    table = "Logical_Switch_Port"
    model = LogicalSwitchPortBody
    read_only = frozenset({"id", "revision", "port_key", "logical_switch_id", "status"})
    parent_column = "logical_switch"
    parent = LogicalSwitches

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the port's representation, with its status."""
        return {
            **owned_api(row),
            "logical_switch_id": str(row.logical_switch.uuid),
            "description": row.description,
            "mac": row.mac,
            "ips": sorted(row.ips),
            "port_security": row.port_security,
            "admin_state_up": row.admin_state_up,
            "qos_queue_id": ref_id(row.qos_queue),
            "security_profile_ids": sorted(str(p.uuid) for p in row.security_profiles),
            "attachment": attachment_api(row),
            "port_key": row.port_key,
            "status": port_status(view, row),
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check references, the addresses against the switch's subnets, MAC/IP uniqueness on
        the switch, and the attachment.

        Raises:
            errors.ValidationFailed: an address outside the switch's subnets of its IP version
                or reserved in one (field `ips`), or an attachment that cannot be made.
            errors.MissingReference: a QoS queue, profile or gateway service not found.
            errors.Conflict: the MAC or an address is another port's on this switch.
        """
        from loom_api.service.gateways import GatewayServices
        from loom_api.service.profiles import SecurityProfiles
        from loom_api.service.qos import QosQueues

        tenant = parent.tenant
        if body.tenant is not None and body.tenant != tenant:
            raise errors.ValidationFailed(
                field="tenant", detail=f"a port belongs to its switch's tenant ({tenant})"
            )
        cols = owned_columns(caller, body.model_copy(update={"tenant": tenant}), row)
        mac = body.mac or (row.mac if row is not None else random_mac(self._rng))
        check_port_addresses(view, parent, body.ips, "ips")
        self._check_unique(view, parent, row, mac, body.ips)
        queue = reference(view, QosQueues, caller, body.qos_queue_id, "qos_queue_id", tenant=tenant)
        profiles = [
            reference(view, SecurityProfiles, caller, ident, "security_profile_ids", tenant=tenant)
            for ident in body.security_profile_ids
        ]
        cols.update(
            logical_switch=parent,
            description=body.description,
            mac=mac,
            ips=list(body.ips),
            port_security=body.port_security,
            admin_state_up=body.admin_state_up,
            qos_queue=optional(queue),
            security_profiles=profiles,
        )
        att = body.attachment
        current_router = first(row.router_port) if row is not None else None
        if att.type == "router" and (
            current_router is None or str(current_router.uuid) != att.router_port_id
        ):
            raise errors.ValidationFailed(
                field="attachment.type",
                detail="router attachments are made by creating a logical router port",
            )
        if current_router is not None and att.type != "router":
            raise errors.ValidationFailed(
                field="attachment.type",
                detail="this port belongs to a logical router port; delete the router port",
            )
        if (
            current_router is not None
            and row is not None
            and (mac != row.mac or set(body.ips) != set(row.ips))
        ):
            raise errors.ValidationFailed(
                field="mac" if mac != row.mac else "ips",
                detail="this port mirrors a logical router port; change its MAC and address "
                "through the router port",
            )
        gateway = None
        if att.type == "l2-gateway":
            gateway = reference(
                view,
                GatewayServices,
                caller,
                att.gateway_service_id,
                "attachment.gateway_service_id",
            )
            if gateway.type != "l2":
                raise errors.ValidationFailed(
                    field="attachment.gateway_service_id",
                    detail=f"gateway service {att.gateway_service_id} is not an L2 gateway service",
                )
        cols.update(
            attachment_type=att.type,
            vif_id=[att.vif_id] if att.type == "vif" else [],
            gateway_service=optional(gateway),
            vlan=[att.vlan] if att.type == "l2-gateway" else [],
            router_port=optional(current_router),
        )
        return cols

    @staticmethod
    def _check_unique(
        view: ReadView, switch: Any, row: Any | None, mac: str, ips: list[str]
    ) -> None:
        wanted = set(ips)
        for other in view.children("Logical_Switch_Port", "logical_switch", switch):
            if row is not None and other.uuid == row.uuid:
                continue
            if other.mac == mac:
                raise errors.Conflict(
                    field="mac", detail=f"MAC {mac} is used by port {other.uuid} on this switch"
                )
            clash = wanted.intersection(other.ips)
            if clash:
                raise errors.Conflict(
                    field="ips",
                    detail=f"IP {sorted(clash)[0]} is used by port {other.uuid} on this switch",
                )

    def on_create(self, view: WriteView, row: Any, parent: Any) -> None:
        """Allocate the port key within its switch."""
        row.port_key = allocate_port_key(view, parent)

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Floating IPs pointing at the port, and its router port, block its deletion."""
        nats = [n for n in view.rows("NAT_Rule") if row in n.logical_port]
        owners = [first(row.router_port)] if row.router_port else []
        return describe("NAT rule", nats) + describe("logical router port", owners)


def allocate_port_key(view: ReadView, switch: Any) -> int:
    """Return a free port key on `switch` (for a port inserted in the current transaction)."""
    used = (p.port_key for p in view.children("Logical_Switch_Port", "logical_switch", switch))
    return keys.allocate(used, *PORT_KEYS, "port key on this switch")


class PortStatus(Reply):
    """As the controllers report it; down and not realized until they do."""

    up: bool
    realized: bool
    transport_node: str | None


def port_status(view: ReadView, row: Any) -> dict[str, Any]:
    """Return a port's status as the controllers report it (`status` column), honestly.

    Until a controller has written it, the port is down and not realized.
    """
    status = row.status
    return {
        "up": status.get("up") == "true",
        "realized": status.get("realized") == "true",
        "transport_node": status.get("transport_node"),
    }
