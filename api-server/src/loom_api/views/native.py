"""The native API's collections under /api/v1: one set of routes per `Resource`.

Every collection gets the same five routes (list, create, get, replace/patch, delete); the
table below says where each resource lives. Views only translate HTTP to service calls.
Two read-only status routes (a port's, a transport node's) sit beside their objects. Only a
list takes query parameters (`LIST_PARAMETERS`); any other, or any on another route, is
refused (400) rather than ignored. `LogicalSwitchPortStatus` and `TransportNodeStatus` are the
status routes' answers as the OpenAPI document describes them.
"""

from __future__ import annotations

import uuid
from typing import Any

from flask import Blueprint, Response, jsonify, request, url_for
from pydantic import Field

from loom_api import errors, http
from loom_api.service import crud
from loom_api.service.gateways import GatewayServices
from loom_api.service.nat import NatRules
from loom_api.service.nodes import NodeStatus, TransportNodes, node_status
from loom_api.service.ports import LogicalSwitchPorts, PortStatus, port_status
from loom_api.service.profiles import SecurityProfiles
from loom_api.service.qos import QosQueues
from loom_api.service.router_ports import LogicalRouterPorts
from loom_api.service.routers import LogicalRouters
from loom_api.service.routes import StaticRoutes
from loom_api.service.subnets import Subnets
from loom_api.service.switches import LogicalSwitches
from loom_api.service.types import Uuid
from loom_api.service.zones import TransportZones
from loom_api.store import ReadView

bp = Blueprint("native", __name__)

#: (URL of the collection, resource). `<parent_id>` marks nested collections.
COLLECTIONS: list[tuple[str, crud.Resource]] = [
    ("/transport-zones", TransportZones()),
    ("/transport-nodes", TransportNodes()),
    ("/logical-switches", LogicalSwitches()),
    ("/logical-switches/<parent_id>/ports", LogicalSwitchPorts()),
    ("/logical-switches/<parent_id>/subnets", Subnets()),
    ("/logical-routers", LogicalRouters()),
    ("/logical-routers/<parent_id>/ports", LogicalRouterPorts()),
    ("/logical-routers/<parent_id>/routes", StaticRoutes()),
    ("/logical-routers/<parent_id>/nat-rules", NatRules()),
    ("/security-profiles", SecurityProfiles()),
    ("/gateway-services", GatewayServices()),
    ("/qos-queues", QosQueues()),
]


#: The query parameters of a list; no other route of a collection takes any.
LIST_PARAMETERS = ("tenant", "name", "tag", "limit", "cursor")


def _filters() -> crud.Filters:
    args = request.args
    return crud.Filters(tenant=args.get("tenant"), name=args.get("name"), tag=args.get("tag"))


def _limit() -> int:
    raw = request.args.get("limit", str(crud.DEFAULT_LIMIT))
    try:
        return int(raw)
    except ValueError:
        raise errors.ValidationFailed(field="limit", detail="limit must be an integer") from None


def _cursor() -> str | None:
    """Return the list's cursor in canonical form: an object id (a previous `next_cursor`)."""
    raw = request.args.get("cursor")
    if raw is None:
        return None
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        raise errors.ValidationFailed(
            field="cursor", detail="cursor must be an object id (the next_cursor of a list)"
        ) from None


def _register(path: str, resource: crud.Resource) -> None:
    """Add the collection's routes: one view per method, so a HEAD (Flask serves it with the
    GET view, without the body) can never reach a write."""
    endpoint = path.strip("/").replace("/", "_").replace("<parent_id>", "p").replace("-", "_")

    def list_items(parent_id: str | None = None) -> Response:
        caller = http.caller()
        http.check_query(LIST_PARAMETERS)
        page = crud.list_page(
            http.store(),
            resource,
            caller,
            parent_id=parent_id,
            filters=_filters(),
            limit=_limit(),
            cursor=_cursor(),
        )
        return jsonify({"items": page.items, "next_cursor": page.next_cursor})

    def create(parent_id: str | None = None) -> Response:
        caller = http.caller()
        http.check_query()
        http.wait_seconds()  # a bad header is refused before anything is written
        result = crud.create(http.store(), resource, caller, http.json_body(), parent_id=parent_id)
        assert result.item is not None
        location = url_for(
            f".{endpoint}_item", ident=result.item["id"], parent_id=parent_id, _external=False
        )
        return http.written(result, 201, location=location)

    def get(ident: str, parent_id: str | None = None) -> Response:
        caller = http.caller()
        http.check_query()
        return http.item(crud.get_one(http.store(), resource, caller, ident, parent_id=parent_id))

    def update(ident: str, parent_id: str | None = None) -> Response:
        caller = http.caller()
        http.check_query()
        http.wait_seconds()
        result = crud.update(
            http.store(),
            resource,
            caller,
            ident,
            http.json_body(),
            partial=request.method == "PATCH",
            if_match=request.headers.get("If-Match"),
            parent_id=parent_id,
        )
        return http.written(result, 200)

    def delete(ident: str, parent_id: str | None = None) -> Response:
        caller = http.caller()
        http.check_query()
        http.wait_seconds()
        result = crud.delete(
            http.store(),
            resource,
            caller,
            ident,
            if_match=request.headers.get("If-Match"),
            parent_id=parent_id,
        )
        return http.written(result, 204)

    item = f"{path}/<ident>"
    bp.add_url_rule(path, f"{endpoint}_list", list_items, methods=["GET"])
    bp.add_url_rule(path, f"{endpoint}_create", create, methods=["POST"])
    bp.add_url_rule(item, f"{endpoint}_item", get, methods=["GET"])
    bp.add_url_rule(item, f"{endpoint}_update", update, methods=["PUT", "PATCH"])
    bp.add_url_rule(item, f"{endpoint}_delete", delete, methods=["DELETE"])


for _path, _resource in COLLECTIONS:
    _register(_path, _resource)


class LogicalSwitchPortStatus(PortStatus):
    """A logical switch port's status, with its id."""

    id: Uuid = Field(
        description="The logical switch port's id.", json_schema_extra={"format": "uuid"}
    )


class TransportNodeStatus(NodeStatus):
    """A transport node's status, with its id."""

    id: Uuid = Field(description="The transport node's id.", json_schema_extra={"format": "uuid"})


@bp.get("/logical-switches/<switch_id>/ports/<port_id>/status")
def port_status_view(switch_id: str, port_id: str) -> Response:
    """Return a logical switch port's status: down and not realized until controllers say so."""
    caller = http.caller()
    http.check_query()

    def read(view: ReadView) -> dict[str, Any]:
        switch = crud.lookup(view, LogicalSwitches, caller, switch_id)
        port = crud.lookup(view, LogicalSwitchPorts, caller, port_id)
        if port.logical_switch.uuid != switch.uuid:
            raise errors.NotFound(kind=LogicalSwitchPorts.kind, id=port_id)
        return {"id": str(port.uuid), **port_status(view, port)}

    return jsonify(http.store().read(read))


@bp.get("/transport-nodes/<node_id>/status")
def node_status_view(node_id: str) -> Response:
    """Return a transport node's status: disconnected until a physical controller says so."""
    caller = http.caller()
    http.check_query()

    def read(view: ReadView) -> dict[str, Any]:
        node = crud.lookup(view, TransportNodes, caller, node_id)
        return {"id": str(node.uuid), **node_status(view, node)}

    return jsonify(http.store().read(read))


def collections() -> list[tuple[str, crud.Resource]]:
    """Return the collection table (the OpenAPI generator reads it)."""
    return list(COLLECTIONS)


def _unused(*_: Any) -> None:  # pragma: no cover - keeps the import of errors explicit
    raise errors.NotFound(kind="route", id="")
