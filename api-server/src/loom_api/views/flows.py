"""`GET /api/v1/transport-nodes/<id>/flows` (admin): a node's table as Loom computes it, as
the node holds it, and the difference (what a reconciliation would change).

The physical controller that masters the node knows both (`loom_physical.flowsview`); it
publishes where it answers (`Loom_Global.external_ids:http:<controller>`, written with its
heartbeat), and this route asks it there on the operator's behalf, so an operator needs
only the API and its token. `?tables=true` adds both whole tables. A node no live
controller masters, or a controller that does not answer, is a 503 saying which.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, jsonify, request

from loom_api import errors, http
from loom_api.service import crud
from loom_api.service.nodes import TransportNodes, node_status
from loom_api.store import ReadView
from loom_common.liveness import HTTP

bp = Blueprint("flows", __name__)

ASK_TIMEOUT_S = 30.0
"""The longest the controller may take (it dumps and compares the node's whole table)."""


@bp.get("/transport-nodes/<node_id>/flows")
def node_flows_view(node_id: str) -> Response:
    """The node's computed and installed tables and their difference (see the module)."""
    caller = http.caller()
    http.check_query(("tables",))
    tables = request.args.get("tables", "false")
    if tables not in ("true", "false"):
        raise errors.ValidationFailed(field="tables", detail="tables must be true or false")

    def read(view: ReadView) -> tuple[str, str | None, str | None]:
        node = crud.lookup(view, TransportNodes, caller, node_id)
        status = node_status(view, node)
        controller = status["controller"] if status["connected"] else None
        glob = view.global_row()
        published = dict(glob.external_ids) if glob is not None else {}
        url = published.get(HTTP + controller) if controller else None
        return str(node.system_id), controller, url

    system_id, controller, url = http.store().read(read)
    if controller is None:
        raise errors.ControllerUnavailable(detail=f"no physical controller masters node "
                                           f"{system_id} now")  # fmt: skip
    if url is None:
        raise errors.ControllerUnavailable(detail=f"physical controller {controller} serves "
                                           "no HTTP endpoint (its --metrics)")  # fmt: skip
    return jsonify(_ask(f"{url}/nodes/{quote(system_id, safe='')}/flows?tables={tables}",
                        controller))  # fmt: skip


def _ask(url: str, controller: str) -> Any:
    """The controller's answer (a 503 naming it if it gives none)."""
    try:
        with urllib.request.urlopen(url, timeout=ASK_TIMEOUT_S) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        with exc:
            detail = exc.read().decode(errors="replace")[:500]
        raise errors.ControllerUnavailable(
            detail=f"physical controller {controller} answered {exc.code}: {detail}"
        ) from None
    except (OSError, ValueError) as exc:
        raise errors.ControllerUnavailable(
            detail=f"physical controller {controller} at {url}: {exc}"
        ) from None
