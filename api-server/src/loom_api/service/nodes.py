"""Transport nodes: hypervisors, gateways and service nodes, identified by OVS `system-id`.

A node's tunnel endpoints are where the other nodes of its transport zones send tunnels, so
two nodes that share a zone may not have an endpoint at the same address (whatever the
encapsulation: an address is one host); nodes in no common zone never tunnel to each other
and may.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import Field

from loom_api import errors
from loom_api.service.common import Body, Reply, admin_api
from loom_api.service.crud import Caller, Resource, describe, reference
from loom_api.service.types import (
    TRANSPORT_ZONES_MAX,
    TUNNEL_ENDPOINTS_MAX,
    Description,
    HostAddress,
    Identifier,
    Name,
    Tags,
    Uuid,
)
from loom_api.service.zones import TransportZones
from loom_api.store import ReadView, WriteView
from loom_common.liveness import node_view
from loom_common.realized import node_realized


class TunnelEndpoint(Body):
    """Where the node terminates tunnels of one encapsulation."""

    encap: Literal["geneve", "vxlan", "stt"] = "geneve"
    ip: HostAddress


class TransportNodeBody(Body):
    """A transport node."""

    name: Name
    description: Description = ""
    node_type: Literal["hypervisor", "gateway", "service-node", "hoverboard"]
    system_id: Identifier
    transport_zone_ids: list[Uuid] = Field(default_factory=list, max_length=TRANSPORT_ZONES_MAX)
    tunnel_endpoints: list[TunnelEndpoint] = Field(
        default_factory=list, max_length=TUNNEL_ENDPOINTS_MAX
    )
    tags: Tags = Field(default_factory=list)


class NodeStatus(Reply):
    """As the physical controllers report it; disconnected until they do."""

    connected: bool
    controller: str | None
    realized_generation: Annotated[int, Field(ge=0)]
    message: str | None
    bfd: dict[str, Literal["up", "down"]] = Field(
        description="Its BFD sessions (tunnels to and from service and gateway nodes) that have"
        " come up: peer system-id -> up or down. A gateway node no peer reaches is not active."
    )


def node_status(view: ReadView, row: Any) -> dict[str, Any]:
    """Return a node's status as physical controllers report it; disconnected until then,
    and when its controller has gone silent (`loom_common.liveness`)."""
    status = row.status
    if view.liveness is not None:
        status = node_view(status, view.liveness, time.monotonic())
    glob = view.global_row()
    published = dict(glob.external_ids) if glob is not None else {}
    return {
        "connected": status.get("connected") == "true",
        "controller": status.get("controller"),
        "realized_generation": node_realized(status, published),
        "message": status.get("message"),
        # its BFD sessions to other nodes (tunnels to and from service and gateway nodes)
        "bfd": {k[len("bfd:") :]: v for k, v in sorted(status.items()) if k.startswith("bfd:")},
    }


class TransportNodes(Resource):
    """`/api/v1/transport-nodes` (admin only: tenants never see the physical network)."""

    kind = "transport node"
    table = "Transport_Node"
    model = TransportNodeBody
    read_only = frozenset({"id", "revision", "status"})
    tenant_owned = False
    admin_writes_only = True
    tenant_readable = False

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the node's representation with its status."""
        return {
            **admin_api(row),
            "node_type": row.node_type,
            "system_id": row.system_id,
            "transport_zone_ids": sorted(str(z.uuid) for z in row.transport_zones),
            "tunnel_endpoints": [
                {"encap": ep.encap, "ip": ep.ip}
                for ep in sorted(row.tunnel_endpoints, key=lambda e: (e.encap, e.ip))
            ],
            "status": node_status(view, row),
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check name, system-id and endpoints; write the endpoints as new child rows.

        Raises:
            errors.ValidationFailed: two endpoints of one encapsulation.
            errors.MissingReference: no such transport zone.
            errors.Conflict: the name or system-id is another node's, or an endpoint address
                is that of another node in a zone this node is in.
        """
        for other in view.rows(self.table):
            if row is not None and other.uuid == row.uuid:
                continue
            if other.name == body.name:
                raise errors.Conflict(field="name", detail=f"transport node {body.name!r} exists")
            if other.system_id == body.system_id:
                raise errors.Conflict(
                    field="system_id",
                    detail=f"system_id {body.system_id!r} belongs to transport node {other.uuid}",
                )
        seen = set()
        for ep in body.tunnel_endpoints:
            if ep.encap in seen:
                raise errors.ValidationFailed(
                    field="tunnel_endpoints", detail=f"two {ep.encap} endpoints"
                )
            seen.add(ep.encap)
        zones = [
            reference(view, TransportZones, caller, ident, "transport_zone_ids")
            for ident in body.transport_zone_ids
        ]
        self._check_endpoints_unique(view, row, zones, body.tunnel_endpoints)
        endpoints = [
            view.insert("Tunnel_Endpoint", encap=ep.encap, ip=ep.ip) for ep in body.tunnel_endpoints
        ]
        return {
            "name": body.name,
            "description": body.description,
            "node_type": body.node_type,
            "system_id": body.system_id,
            "transport_zones": zones,
            "tunnel_endpoints": endpoints,
            "tags": list(body.tags),
        }

    @staticmethod
    def _check_endpoints_unique(
        view: ReadView, row: Any | None, zones: list[Any], endpoints: list[TunnelEndpoint]
    ) -> None:
        """Refuse (409) an endpoint address another node of one of `zones` has."""
        wanted = {ep.ip: i for i, ep in reversed(list(enumerate(endpoints)))}
        zone_ids = {zone.uuid for zone in zones}
        if not wanted or not zone_ids:
            return
        for other in view.rows("Transport_Node"):
            if row is not None and other.uuid == row.uuid:
                continue
            shared = sorted(str(z.uuid) for z in other.transport_zones if z.uuid in zone_ids)
            if not shared:
                continue
            for endpoint in other.tunnel_endpoints:
                if endpoint.ip in wanted:
                    raise errors.Conflict(
                        field=f"tunnel_endpoints.{wanted[endpoint.ip]}.ip",
                        detail=f"tunnel endpoint {endpoint.ip} is transport node {other.uuid}'s "
                        f"({other.name!r}), which shares transport zone {shared[0]} with this "
                        "node",
                    )

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Gateway services using the node block its deletion."""
        services = [g for g in view.rows("Gateway_Service") if row in g.gateway_nodes]
        return describe("gateway service", services)
