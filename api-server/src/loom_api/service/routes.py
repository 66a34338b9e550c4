"""Static routes of a logical router: a destination prefix, a next hop, an optional output port."""

from __future__ import annotations

import ipaddress
from typing import Any

from loom_api import errors
from loom_api.service.crud import Caller, Resource, optional, parse_id, ref_id
from loom_api.service.routers import LogicalRouters, RouterChildBody, child_api, child_columns
from loom_api.service.types import Cidr, HostAddress, Uuid
from loom_api.store import ReadView, WriteView


class StaticRouteBody(RouterChildBody):
    """A static route: traffic to `prefix` goes to `next_hop` (through `output_port_id`)."""

    prefix: Cidr
    next_hop: HostAddress
    output_port_id: Uuid | None = None


def router_port_of(view: ReadView, router: Any, ident: str | None, field: str) -> Any | None:
    """Resolve the id of a port of `router` given in a request body; None stays None.

    Raises:
        errors.MissingReference: no such router port, or it belongs to another router.
    """
    if ident is None:
        return None
    try:
        port = view.get("Logical_Router_Port", parse_id(ident, "logical router port"))
    except errors.NotFound:
        port = None
    if port is None or port.logical_router.uuid != router.uuid:
        raise errors.MissingReference(
            field=field, kind="logical router port on this router", id=ident
        )
    return port


class StaticRoutes(Resource):
    """`/api/v1/logical-routers/{id}/routes`."""

    kind = "static route"
    table = "Static_Route"
    model = StaticRouteBody
    read_only = frozenset({"id", "revision", "logical_router_id"})
    parent_column = "logical_router"
    parent = LogicalRouters

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the route's representation."""
        return {
            **child_api(row),
            "prefix": row.prefix,
            "next_hop": row.next_hop,
            "output_port_id": ref_id(row.output_port),
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the next hop's family, the output port and that the prefix is new here.

        Raises:
            errors.ValidationFailed: the next hop is not of the prefix's IP version, or the
                output port has no address of that version.
            errors.MissingReference: the output port is not a port of this router.
            errors.Conflict: the router already has a route to `prefix`.
        """
        network = ipaddress.ip_network(body.prefix)
        next_hop = ipaddress.ip_address(body.next_hop)
        if next_hop.version != network.version:
            raise errors.ValidationFailed(
                field="next_hop",
                detail=f"next hop {next_hop} is IPv{next_hop.version}; "
                f"prefix {network} is IPv{network.version}",
            )
        port = router_port_of(view, parent, body.output_port_id, "output_port_id")
        if port is not None and next_hop.version != ipaddress.ip_interface(port.ip_prefix).version:
            raise errors.ValidationFailed(
                field="output_port_id",
                detail=f"router port {port.uuid} has no IPv{next_hop.version} address",
            )
        for other in view.children(self.table, "logical_router", parent):
            if other.prefix == body.prefix and (row is None or other.uuid != row.uuid):
                raise errors.Conflict(
                    field="prefix",
                    detail=f"static route {other.uuid} of this router already routes {network}",
                )
        return {
            **child_columns(caller, body, parent, row),
            "prefix": body.prefix,
            "next_hop": body.next_hop,
            "output_port": optional(port),
        }
