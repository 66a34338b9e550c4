"""Gateway services: L2 (switch <-> VLAN bridging) and L3 (uplink) on a set of gateway nodes."""

from __future__ import annotations

import ipaddress
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
        """Check the nodes are gateways, the name is unique, and L3 uplinks are complete."""
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

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Routers and L2-gateway ports using the service block its deletion."""
        routers = [r for r in view.rows("Logical_Router") if row in r.gateway_service]
        ports = [p for p in view.rows("Logical_Switch_Port") if row in p.gateway_service]
        return describe("logical router", routers) + describe("logical switch port", ports)
