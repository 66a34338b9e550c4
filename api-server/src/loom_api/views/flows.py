"""`GET /api/v1/transport-nodes/<id>/flows` (admin): a node's table as Loom computes it, as
the node holds it, and the difference (what a reconciliation would change).

The physical controller that masters the node knows both (`loom_physical.flowsview`); it
publishes where it answers (`Loom_Global.external_ids:http:<controller>`, written with its
heartbeat), and this route asks it there on the operator's behalf, so an operator needs
only the API and its token. `?tables=true` adds both whole tables. A node no live
controller masters, or a controller that does not answer, is a 503 saying which.
`FlowsQuery` and `NodeFlows` are the query and the answer as the OpenAPI document describes
them; the answer is the controller's, passed on.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Annotated, Any, Literal
from urllib.parse import quote

from flask import Blueprint, Response, jsonify, request
from pydantic import BaseModel, Field

from loom_api import errors, http
from loom_api.service import crud
from loom_api.service.common import Reply
from loom_api.service.nodes import TransportNodes, node_status
from loom_api.store import ReadView
from loom_common.liveness import HTTP

bp = Blueprint("flows", __name__)


class FlowsQuery(BaseModel):
    """The query of `GET /transport-nodes/{id}/flows`."""

    tables: Literal["true", "false"] | None = Field(None, description="Include both whole tables.")


class FlowChange(Reply):
    """One flow a reconciliation would add, modify or delete."""

    op: Literal["add", "modify", "delete"]
    flow: str


class NodeFlows(Reply):
    """A node's computed and installed OpenFlow tables, compared."""

    node: str = Field(description="The node's system-id.")
    controller: str = Field(description="The physical controller asked.")
    computed_flows: Annotated[int, Field(ge=0)]
    installed_flows: Annotated[int, Field(ge=0)]
    in_sync: bool
    changes: list[FlowChange] = Field(description="What a reconciliation would change.")
    learned: list[str] = Field(
        description="Installed flows the node's datapath learned itself (a gateway's next-hop "
        "MAC): no change, a reconciliation leaves them."
    )
    computed: list[str] = Field(default_factory=list, description="With `tables=true`.")
    installed: list[str] = Field(default_factory=list, description="With `tables=true`.")


class ControllerRefused(Exception):
    """The controller answered a 4xx: what it said (JSON text) and the status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


ASK_TIMEOUT_S = 30.0
"""The longest the controller may take (it dumps and compares the node's whole table)."""


@bp.get("/transport-nodes/<node_id>/flows")
def node_flows_view(node_id: str) -> Response:
    """The node's computed and installed tables and their difference (see the module)."""
    caller = http.caller()
    http.check_query(http.parameters(FlowsQuery))
    tables = request.args.get("tables", "false")
    if tables not in ("true", "false"):
        raise errors.ValidationFailed(field="tables", detail="tables must be true or false")

    def read(view: ReadView) -> tuple[str, str, str]:
        node = crud.lookup(view, TransportNodes, caller, node_id)
        return (str(node.system_id), *node_controller(view, node))

    system_id, controller, url = http.store().read(read)
    try:
        return jsonify(ask(f"{url}/nodes/{quote(system_id, safe='')}/flows?tables={tables}",
                           controller))  # fmt: skip
    except ControllerRefused as exc:  # (the node left it between the read and the ask)
        raise errors.ControllerUnavailable(
            detail=f"physical controller {controller} answered {exc.status}: {exc.detail}"
        ) from None


def node_controller(view: ReadView, node: Any) -> tuple[str, str]:
    """The physical controller that masters `node` (a `Transport_Node` row) and where its
    HTTP endpoint answers.

    Raises:
        errors.ControllerUnavailable: none masters it, or its master serves no endpoint.
    """
    status = node_status(view, node)
    controller = status["controller"] if status["connected"] else None
    if controller is None:
        raise errors.ControllerUnavailable(detail=f"no physical controller masters node "
                                           f"{node.system_id} now")  # fmt: skip
    url = published_urls(view).get(controller)
    if url is None:
        raise errors.ControllerUnavailable(detail=f"physical controller {controller} serves "
                                           "no HTTP endpoint (its --metrics)")  # fmt: skip
    return controller, url


def published_urls(view: ReadView) -> dict[str, str]:
    """Physical controller -> where its HTTP endpoint answers, as published."""
    glob = view.global_row()
    published = dict(glob.external_ids) if glob is not None else {}
    return {k[len(HTTP) :]: str(v) for k, v in published.items() if k.startswith(HTTP)}


def ask(url: str, controller: str, timeout: float = ASK_TIMEOUT_S) -> Any:
    """The controller's answer (a 503 naming it if it gives none; its own 4xx answers are
    passed on as `ControllerRefused`)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        with exc:
            detail = exc.read().decode(errors="replace")[:500]
        if 400 <= exc.code < 500:
            raise ControllerRefused(exc.code, detail) from None
        raise errors.ControllerUnavailable(
            detail=f"physical controller {controller} answered {exc.code}: {detail}"
        ) from None
    except (OSError, ValueError) as exc:
        raise errors.ControllerUnavailable(
            detail=f"physical controller {controller} at {url}: {exc}"
        ) from None
