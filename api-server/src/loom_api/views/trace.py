"""`GET /api/v1/trace?from=PORT&packet=EXPR[&node=NODE][&ct=STATES]`: where a packet from a
port goes, flow by flow (`loom trace`).

The physical controllers hold the flows and the physical rules, so they trace
(`loom_physical.trace`); this route finds the port and describes its packet
(`loom_api.service.trace`), asks a controller at the HTTP endpoint it publishes, and tells
the answer in the configuration's names. Without `node`, through the universal flows on an
ideal node (the logical pipeline, every port of the packet's datapaths there): asked of the
controller that masters the port's node, or of any controller that answers (one holds the
flows of the datapaths its nodes have). With `node` (admin only: a node's table holds every
tenant's flows), through that node's installed table, asked of its master.

`from` may also name a router (id or name) with an L3 gateway service: the packet then
comes from the physical network into the router's uplink (on the ideal node, every gateway
service active there; with `node`, into that node's uplink).

A tenant traces its own ports and routers; the admin any. `TraceQuery` and `Trace` are the
query and the answer as the OpenAPI document describes them.
"""

from __future__ import annotations

import contextlib
import json
import uuid as uuidlib
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, jsonify, request
from pydantic import BaseModel, Field

from loom_api import errors, http
from loom_api.service import crud
from loom_api.service import trace as described
from loom_api.service.nodes import TransportNodes
from loom_api.service.ports import LogicalSwitchPorts
from loom_api.service.routers import LogicalRouters
from loom_api.service.switches import LogicalSwitches
from loom_api.store import ReadView
from loom_api.views.flows import ControllerRefused, ask, node_controller, published_urls
from loom_common.ids import id32

bp = Blueprint("trace", __name__)


class TraceQuery(BaseModel):
    """The query of `GET /trace`."""

    from_: str = Field(
        alias="from",
        description="The port the packet leaves (id or name), or a router with an L3 gateway "
        "service: the packet comes from the physical network into its uplink.",
    )
    packet: str | None = Field(
        None,
        description="Its fields, as ovn-trace takes them: `ip4.dst == 10.0.2.5 && tcp.dst == "
        "22`; the rest from the port.",
    )
    node: str | None = Field(None, description="Trace through this node's installed table.")
    ct: str | None = Field(
        None,
        description="What conntrack answers at each recirculation, separated by `;` (default "
        "`trk,new`).",
    )


class TraceStep(BaseModel):
    """One OpenFlow table the packet was looked up in: its `stage` (a logical stage, or a
    physical table in capitals), the `datapath` the packet was in, the flow that matched
    (`priority`, `match`, `cookie`, `actions`; `match` null: no flow matched, the packet is
    dropped there), the `object` whose universal row made it and the `category` its cookie
    carries."""

    table: int = Field(description="The OpenFlow table.")
    stage: str | None = Field(None, description="Its logical stage or physical table.")
    pipeline: str | None = Field(None, description="`ingress` or `egress` for a stage.")
    datapath: dict[str, Any] | int | None = Field(
        None,
        description="The switch or router the packet was in (`key`, `kind`, `id`, `name`; "
        "a physical controller's own answer gives its key).",
    )
    priority: int | None = None
    match: str | None = Field(None, description="The flow's match; null: none matched.")
    cookie: str | None = None
    source: str | None = Field(
        None, description="The config uuid of the universal row that made the flow."
    )
    object: dict[str, Any] | None = Field(
        None, description="What the flow exists for (`kind`, `id`, `name`)."
    )
    category: str | None = Field(
        None,
        description="The feature the flow's cookie names (its stage's rule file, or a "
        "physical table's); null for a cookie that names none.",
    )
    actions: list[str] = Field(default_factory=list, description="What the flow did.")
    depth: int = Field(0, description="Nesting inside a `clone`.")


class TracePass(BaseModel):
    """One pass through the tables (a recirculation after conntrack starts the next)."""

    ct_state: str | None
    flow: str
    steps: list[TraceStep]
    datapath_actions: str


class TraceVerdict(BaseModel):
    """Where the packet ended: delivered to ports, out of the uplink, tunneled, dropped."""

    outcome: str
    delivered: list[dict[str, Any]]
    uplink: bool
    uplink_source: str | None = None
    tunneled: list[dict[str, Any]]
    ended_at: dict[str, Any] | None


class Trace(BaseModel):
    """Where a packet from a port goes, flow by flow."""

    from_: str = Field(alias="from")
    packet: str
    controller: str = Field(description="The physical controller asked.")
    node: str | None = Field(description="The node whose table was traced; null: the ideal node.")
    port: str = Field(description="The port's id.")
    flow: str = Field(description="The packet as `ofproto/trace` took it.")
    ct: list[str]
    passes: list[TracePass]
    verdict: TraceVerdict
    trace: str = Field(description="`ofproto/trace`'s own text.")
    described: str = Field(
        "",
        description="The packet in words (`IPv4 protocol 0, no transport header, ...` for one "
        "naming no transport).",
    )
    datapaths_read: list[int] = Field(
        default_factory=list,
        description="The datapaths whose universal flows the controller read for this trace "
        "(it does not follow them).",
    )
    stand_in_next_hops: list[str] = Field(
        default_factory=list,
        description="L3 next hops the ideal node resolved at a stand-in MAC (learned by ARP on "
        "the active gateway node).",
    )


TRACE_TIMEOUT_S = 60.0
"""The longest a controller may take (an ideal node's computation, then the trace)."""
NAMED_TABLES = (
    ("Logical_Switch_Port", "port"), ("Logical_Router_Port", "router port"),
    ("Logical_Switch", "switch"), ("Logical_Router", "router"),
    ("Static_Route", "static route"), ("NAT_Rule", "NAT rule"),
    ("Security_Profile", "security profile"), ("Gateway_Service", "gateway service"),
    ("QoS_Queue", "QoS queue"), ("Transport_Node", "transport node"),
)  # fmt: skip
"""Where an object a universal row exists for may be, and what to call its kind."""
MAX_REF = 255
"""The longest port or node reference taken (a name's limit)."""


@bp.get("/trace")
def trace_view() -> Response:
    """Trace a packet (see the module docstring)."""
    caller = http.caller()
    http.check_query(http.parameters(TraceQuery))
    port_ref = _bounded("from", request.args.get("from"), "the port the packet leaves")
    node_ref = request.args.get("node")
    if node_ref is not None:
        node_ref = _bounded("node", node_ref, "the transport node to trace through")
        if not caller.is_admin:
            raise errors.Forbidden(detail="node: only the admin traces through a node's table")
    expression = request.args.get("packet", "")
    packet = described.parse_packet(expression)
    states = described.ct_states(request.args.get("ct"))

    def read(view: ReadView) -> tuple[dict[str, Any], list[tuple[str, str]], str]:
        port, router = _source(view, caller, port_ref)
        query: dict[str, Any]
        if router is not None:
            summary = described.summary(*described.uplink_filled(packet))
            query = {"port": f"{router.uuid}-uplink", "flow": described.uplink_microflow(packet)}
            if node_ref is None:
                if not caller.is_admin:
                    keys = _tenant_datapaths(view, caller, router, LogicalRouters)
                    query["datapaths"] = ",".join(str(k) for k in sorted(keys))
                return query, _candidates(view, None), summary
        else:
            switch = view.get("Logical_Switch", port.logical_switch.uuid)
            nearby = [described.Neighbour(p.mac, tuple(p.ips), p.attachment_type == "router")
                      for p in view.children("Logical_Switch_Port", "logical_switch", switch)
                      if p.uuid != port.uuid and p.mac]  # fmt: skip
            summary = described.summary(*described.filled(packet, port.mac, port.ips, nearby))
            query = {"port": str(port.uuid),
                     "flow": described.microflow(packet, port.mac, port.ips, nearby)}  # fmt: skip
            if node_ref is None:
                if not caller.is_admin:  # (its own datapaths only: not past a shared network)
                    keys = _tenant_datapaths(view, caller, switch)
                    query["datapaths"] = ",".join(str(k) for k in sorted(keys))
                return query, _candidates(view, port), summary
        node = (crud.lookup(view, TransportNodes, caller, node_ref) if _is_uuid(node_ref)
                else _node_named(view, node_ref))  # fmt: skip
        query["node"] = str(node.system_id)
        return query, [node_controller(view, node)], summary

    query, controllers, summary = http.store().read(read)
    if states:
        query["ct"] = states
    body = _ask_first(controllers, query)
    named = http.store().read(lambda view: _describe(view, caller, body))
    return jsonify({**named, "packet": expression, "from": port_ref, "described": summary})


def _bounded(field: str, value: str | None, what: str) -> str:
    """A required reference parameter, at most `MAX_REF` characters.

    Raises:
        errors.ValidationFailed: naming `field`.
    """
    if not value:
        raise errors.ValidationFailed(field=field, detail=f"{field}: {what}")
    if len(value) > MAX_REF:
        raise errors.ValidationFailed(field=field, detail=f"{field}: longer than {MAX_REF} "
                                      "characters")  # fmt: skip
    return value


def _source(view: ReadView, caller: crud.Caller, ref: str) -> tuple[Any, Any]:
    """(the VIF port, None) or (None, the router with an uplink) that `ref` names (id or
    name), visible to `caller`.

    Raises:
        errors.NotFound: neither; errors.ValidationFailed (`from`): several, not a VIF, or
            a router with no L3 gateway service.
    """
    if _is_uuid(ref):
        port = view.get("Logical_Switch_Port", uuidlib.UUID(ref))
        if port is not None and crud.visible(LogicalSwitchPorts, caller, port):
            return _port(view, caller, ref), None
        router = crud.lookup(view, LogicalRouters, caller, ref)  # (or 404)
        return None, _with_uplink(view, router, ref)
    ports = [p for p in view.rows("Logical_Switch_Port")
             if p.name == ref and crud.visible(LogicalSwitchPorts, caller, p)]  # fmt: skip
    routers = [r for r in view.rows("Logical_Router")
               if r.name == ref and crud.visible(LogicalRouters, caller, r)]  # fmt: skip
    if ports and routers:
        raise errors.ValidationFailed(field="from", detail=f"from: a port and a router are "
                                      f"named {ref!r}; give the id")  # fmt: skip
    if routers:
        if len(routers) > 1:
            raise errors.ValidationFailed(field="from", detail=f"from: {len(routers)} routers "
                                          f"are named {ref!r}; give the router's id")  # fmt: skip
        return None, _with_uplink(view, routers[0], ref)
    return _port(view, caller, ref), None


def _with_uplink(view: ReadView, router: Any, ref: str) -> Any:
    """`router`, if it has an uplink (an L3 gateway service).

    Raises:
        errors.ValidationFailed (`from`): it has none.
    """
    service = crud.ref_id(router.gateway_service)
    row = view.get("Gateway_Service", uuidlib.UUID(service)) if service is not None else None
    if row is None or row.type != "l3":
        raise errors.ValidationFailed(field="from", detail=f"from: router {ref} has no uplink "
                                      "(no L3 gateway service): a trace from a router starts "
                                      "at its uplink")  # fmt: skip
    return router


def _port(view: ReadView, caller: crud.Caller, ref: str) -> Any:
    """The VIF port `ref` names (id or name), visible to `caller`.

    Raises:
        errors.NotFound: none; errors.ValidationFailed (`from`): several, or not a VIF.
    """
    if _is_uuid(ref):
        port = crud.lookup(view, LogicalSwitchPorts, caller, ref)
    else:
        named = [p for p in view.rows("Logical_Switch_Port")
                 if p.name == ref and crud.visible(LogicalSwitchPorts, caller, p)]  # fmt: skip
        if not named:
            raise errors.NotFound(kind="logical switch port or router", id=ref)
        if len(named) > 1:
            raise errors.ValidationFailed(field="from", detail=f"from: {len(named)} ports are "
                                          f"named {ref!r}; give the port's id")  # fmt: skip
        port = named[0]
    if port.attachment_type != "vif":
        kind = port.attachment_type
        raise errors.ValidationFailed(field="from", detail=f"from: {ref} is a {kind} port; a "
                                      "trace starts at a VIF")  # fmt: skip
    return port


def _node_named(view: ReadView, ref: str) -> Any:
    """The transport node named `ref` (its name or system-id).

    Raises:
        errors.NotFound: none; errors.ValidationFailed (`node`): several.
    """
    named = [n for n in view.rows("Transport_Node") if ref in (n.name, n.system_id)]
    if not named:
        raise errors.NotFound(kind="transport node", id=ref)
    if len(named) > 1:
        raise errors.ValidationFailed(field="node", detail=f"node: {len(named)} nodes are "
                                      f"named {ref!r}; give the node's id")  # fmt: skip
    return named[0]


def _tenant_datapaths(view: ReadView, caller: crud.Caller, start: Any,
                      kind: type[crud.Resource] = LogicalSwitches) -> set[int]:  # fmt: skip
    """The keys of the switches and routers of `caller`'s tenant (any, for the admin) that
    routers join to `start` (a switch, or a router for `kind` `LogicalRouters`;
    transitively): where its trace may go."""
    routers_of: dict[Any, set[Any]] = {}
    switches_of: dict[Any, set[Any]] = {}
    for rp in view.rows("Logical_Router_Port"):
        routers_of.setdefault(rp.logical_switch.uuid, set()).add(rp.logical_router.uuid)
        switches_of.setdefault(rp.logical_router.uuid, set()).add(rp.logical_switch.uuid)
    keys, seen = set(), {start.uuid}
    todo: list[tuple[type[crud.Resource], Any]] = [(kind, start.uuid)]
    while todo:
        resource, uuid = todo.pop()
        row = view.get(resource.table, uuid)
        if row is None or not crud.visible(resource, caller, row):
            continue
        keys.add(int(row.tunnel_key))
        on_switch = resource is LogicalSwitches
        other = LogicalRouters if on_switch else LogicalSwitches
        for next_uuid in (routers_of if on_switch else switches_of).get(uuid, ()):
            if next_uuid not in seen:
                seen.add(next_uuid)
                todo.append((other, next_uuid))
    return keys


def _candidates(view: ReadView, port: Any) -> list[tuple[str, str]]:
    """The controllers to ask for a logical trace from `port` (None: from an uplink): the
    master of the port's node first, then every other that publishes an endpoint."""
    urls = published_urls(view)
    first: list[tuple[str, str]] = []
    bound = port.status.get("transport_node") if port is not None else None
    for node in view.rows("Transport_Node") if bound else []:
        if node.system_id == bound:
            with contextlib.suppress(errors.ControllerUnavailable):
                first = [node_controller(view, node)]
    rest = [(name, url) for name, url in sorted(urls.items()) if (name, url) not in first]
    if not first and not rest:
        raise errors.ControllerUnavailable(detail="no physical controller serves an HTTP "
                                           "endpoint (their --metrics)")  # fmt: skip
    return first + rest


def _ask_first(controllers: list[tuple[str, str]], query: dict[str, Any]) -> Any:
    """The first answer of `controllers` that knows the port (one that does not hold its
    datapath, 404, or does not answer: the next is asked)."""
    said = []
    for controller, url in controllers:
        try:
            return ask(f"{url}/trace?{urlencode(query, doseq=True)}", controller,
                       TRACE_TIMEOUT_S)  # fmt: skip
        except ControllerRefused as exc:
            refusal = f"physical controller {controller}: {_message(exc.detail)}"
            if exc.status == 400:  # (the flow, as OVS reads it)
                raise errors.BadRequest(detail=refusal) from None
            if exc.status != 404:
                raise errors.Conflict(detail=refusal) from None
            said.append(refusal)
        except errors.ControllerUnavailable as exc:  # (gone: the next may answer)
            said.append(exc.text)
    raise errors.ControllerUnavailable(detail="no physical controller could trace it: "
                                       + "; ".join(said))  # fmt: skip


def _message(detail: str) -> str:
    """A controller's JSON error body's message (the text itself if it is not one)."""
    try:
        return str(json.loads(detail).get("message", detail))
    except (ValueError, AttributeError):
        return detail


def _describe(view: ReadView, caller: crud.Caller, body: dict[str, Any]) -> dict[str, Any]:
    """The controller's answer with the configuration's names that `caller` may see
    (`described.describe`)."""
    names = _Names(view, caller, body)
    return described.describe(body, names.object, names.datapath, names.rule)


class _Names:
    """The configuration's names for what a trace met (looked up once each)."""

    def __init__(self, view: ReadView, caller: crud.Caller, body: dict[str, Any]) -> None:
        self.view, self.caller, self.body = view, caller, body
        self._datapaths: dict[int, dict[str, Any]] | None = None
        self._rules: dict[int, dict[str, Any]] | None = None

    def _sees(self, row: Any) -> bool:
        """May the caller see `row`? (A tenant: its own tenant's rows only.)"""
        return self.caller.is_admin or getattr(row, "tenant", None) == self.caller.tenant

    def datapath(self, key: int) -> dict[str, Any] | None:
        """Datapath `key`'s switch or router."""
        if self._datapaths is None:
            self._datapaths = {}
            for table, kind in (("Logical_Switch", "switch"), ("Logical_Router", "router")):
                for row in filter(self._sees, self.view.rows(table)):
                    self._datapaths[int(row.tunnel_key)] = {
                        "key": int(row.tunnel_key), "kind": kind, "id": str(row.uuid),
                        "name": row.name}  # fmt: skip
        return self._datapaths.get(key)

    def object(self, source: str) -> dict[str, Any] | None:
        """The object a universal row exists for (`source`: its config uuid; a router's
        uplink: `<router>-uplink`)."""
        text, uplink = source.removesuffix("-uplink"), source.endswith("-uplink")
        if not _is_uuid(text):
            return None
        for table, kind in NAMED_TABLES:
            row = self.view.get(table, uuidlib.UUID(text))
            if row is not None and self._sees(row):
                name = next((getattr(row, c) for c in ("name", "prefix", "external_ip")
                             if getattr(row, c, None)), None)  # fmt: skip
                if uplink:
                    return {"kind": "router uplink", "id": source, "name": name}
                return {"kind": kind, "id": text, "name": name}
        return None

    def rule(self, conj_id: int) -> dict[str, Any] | None:
        """The security rule whose conjunction id is `conj_id`, among the rules of the
        profiles of the traced switches' ports."""
        if self._rules is None:
            self._rules = {}
            for profile in self._profiles():
                for rule in profile.rules:
                    self._rules[id32(str(rule.uuid))] = {
                        "kind": "security rule", "id": str(rule.uuid),
                        "name": described.rule_label(profile.name, rule)}  # fmt: skip
        return self._rules.get(conj_id)

    def _profiles(self) -> list[Any]:
        switches = {step["datapath"]["id"] for p in self.body["passes"] for step in p["steps"]
                    if (step.get("datapath") or {}).get("kind") == "switch"}  # fmt: skip
        uuids = {ref.uuid for port in self.view.rows("Logical_Switch_Port")
                 if str(port.logical_switch.uuid) in switches
                 for ref in port.security_profiles}  # fmt: skip
        found = (self.view.get("Security_Profile", uuid) for uuid in uuids)
        return [profile for profile in found if profile is not None and self._sees(profile)]


def _is_uuid(text: str) -> bool:
    try:
        uuidlib.UUID(text)
    except ValueError:
        return False
    return True
