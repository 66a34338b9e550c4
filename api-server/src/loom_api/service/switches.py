"""Logical switches: L2 broadcast domains, each a logical datapath with a tunnel key."""

from __future__ import annotations

from typing import Any, Literal

from loom_api.service import keys
from loom_api.service.common import Owned, owned_api, owned_columns
from loom_api.service.crud import Caller, Resource, describe, first, optional, ref_id, reference
from loom_api.service.types import Description, Uuid
from loom_api.service.zones import TransportZones
from loom_api.store import ReadView, WriteView

#: Switch tunnel keys (Geneve VNI / VXLAN VNI); routers use the range above (schema).
SWITCH_KEYS = (1, 8388607)


class LogicalSwitchBody(Owned):
    """A logical switch."""

    description: Description = ""
    transport_zone_id: Uuid | None = None
    replication_mode: Literal["service-node", "source"] | None = None
    """None: the default, decided by the logical controllers (service nodes where the
    switch's transport zone has some, else source replication), so it follows service nodes
    added or removed later."""
    programming_model: Literal["preprogrammed", "hoverboard", "auto"] | None = None
    """How nodes learn the way to its ports (`schemas/loom_config.md`); None: the
    deployment's default."""
    admin_state_up: bool = True


class LogicalSwitches(Resource):
    """`/api/v1/logical-switches`."""

    kind = "logical switch"
    table = "Logical_Switch"
    model = LogicalSwitchBody
    read_only = frozenset({"id", "revision", "tunnel_key"})

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the switch's representation."""
        return {
            **owned_api(row),
            "description": row.description,
            "transport_zone_id": ref_id(row.transport_zone),
            "replication_mode": first(row.replication_mode),
            "programming_model": first(row.programming_model),
            "admin_state_up": row.admin_state_up,
            "tunnel_key": row.tunnel_key,
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Resolve the transport zone and return the columns."""
        zone = reference(view, TransportZones, caller, body.transport_zone_id, "transport_zone_id")
        return {
            **owned_columns(caller, body, row),
            "description": body.description,
            "transport_zone": optional(zone),
            "replication_mode": optional(body.replication_mode),
            "programming_model": optional(body.programming_model),
            "admin_state_up": body.admin_state_up,
        }

    def on_create(self, view: WriteView, row: Any, parent: Any) -> None:
        """Allocate the switch's tunnel key."""
        used = (s.tunnel_key for s in view.rows(self.table) if s.uuid != row.uuid)
        row.tunnel_key = keys.allocate(used, *SWITCH_KEYS, "logical switch tunnel key")

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Ports, subnets and router ports on the switch block its deletion."""
        ports = [
            p
            for p in view.children("Logical_Switch_Port", "logical_switch", row)
            if not first(p.router_port)
        ]
        router_ports = [p for p in view.rows("Logical_Router_Port") if p.logical_switch == row]
        subnets = view.children("Subnet", "logical_switch", row)
        return (
            describe("logical switch port", ports)
            + describe("logical router port", router_ports)
            + describe("subnet", subnets)
        )
