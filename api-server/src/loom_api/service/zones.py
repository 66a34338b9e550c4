"""Transport zones: the sets of transport nodes a logical switch may span (admin objects)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from loom_api.service.common import Body, admin_api, require_unique_name
from loom_api.service.crud import Caller, Resource, describe
from loom_api.service.types import Description, Name, Tags
from loom_api.store import ReadView, WriteView


class TransportZoneBody(Body):
    """A transport zone: a unique name and the default encapsulation of its tunnels."""

    name: Name
    description: Description = ""
    encap: Literal["geneve", "vxlan", "stt"] = "geneve"
    tags: Tags = Field(default_factory=list)


class TransportZones(Resource):
    """`/api/v1/transport-zones`."""

    kind = "transport zone"
    table = "Transport_Zone"
    model = TransportZoneBody
    tenant_owned = False
    admin_writes_only = True

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the zone's representation."""
        return {**admin_api(row), "encap": row.encap}

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the name is unique and return the columns."""
        require_unique_name(view, self.table, self.kind, body.name, row)
        return {
            "name": body.name,
            "description": body.description,
            "encap": body.encap,
            "tags": list(body.tags),
        }

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Switches and nodes in the zone block its deletion."""
        switches = [s for s in view.rows("Logical_Switch") if row in s.transport_zone]
        nodes = [n for n in view.rows("Transport_Node") if row in n.transport_zones]
        return describe("logical switch", switches) + describe("transport node", nodes)
