"""`loom show|status|list|get|create|set|delete`: an operator's look at Loom, over its API.

Where the API is and who asks: `--url` and `--token-file`, else `LOOM_URL` and
`LOOM_TOKEN` (or `LOOM_TOKEN_FILE`), else the client file `loom up` writes into its state
directory (`STATE-DIR/client.json`: the URL and the admin token's file; `--state-dir`,
default `./run/loom`). A token is never taken from the command line (`ps` shows it).

    loom show [--tenant T]        tenants -> switches -> ports (MAC, IPs, node, up) and
                                  routers -> ports, routes, NAT rules (as `ovn-nbctl show`)
    loom status                   generations (lag), controllers, nodes connected, warnings
    loom list KIND [--parent P] [--tenant T] [--name N]
    loom get KIND ID|NAME [--parent P]
    loom create KIND [--parent P] FIELD=VALUE... [--wait]
    loom set KIND ID|NAME [--parent P] FIELD=VALUE... [--wait]
    loom delete KIND ID|NAME [--parent P] [--wait]
    loom flows NODE [--tables]    the node's computed and installed OpenFlow tables, and
                                  what a reconciliation would change
    loom trace --from PORT PACKET [--on-node NODE] [--ct STATE]...
                                  where a packet from PORT goes, flow by flow (PACKET as
                                  ovn-trace takes it: 'ip4.dst == 10.0.2.5 && tcp.dst == 22')

KIND is one of `KINDS` (singular or plural: `switch`, `switches`, `port`, ...); a port,
subnet, router port, route or NAT rule names its switch or router with `--parent` (id or
name), and so does any reference field (`gateway_service_id=gw-ext`,
`security_profile_ids='["web"]'`: `REFERENCES`); a name that several objects have is refused
with their ids. A VALUE that parses as JSON is that JSON (`ips='["10.0.0.5"]'`, `min_rate=100`),
else a string; `attachment.type=vif` nests. `--wait` waits until every node has realized
the write (as `ovn-nbctl --wait=hv`), at most `--timeout` seconds. `--format json` prints
the API's JSON instead of tables.

Pure parts, tested without a daemon: `kind`, `parse_fields`, `references`, `table`, `show_lines`,
`status_lines`, `flows_lines`, `trace_lines`. The rest is a thin `Client` over
`loom_common.apiclient.Http`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from loom_common.apiclient import Http, Reply
from loom_common.errors import LoomError

CLIENT_FILE = "client.json"
"""In a state directory: where `loom up` leaves the URL and the admin token's file."""


class CtlError(LoomError):
    """A command failed: a usage error, a refusal of the API, an API that is down."""

    message = "%(detail)s"


@dataclass(frozen=True)
class Kind:
    """One native collection, as the CLI names it."""

    name: str
    """Singular name on the command line (`switch`)."""
    path: str
    """The collection, with `{parent}` for a child collection."""
    columns: tuple[str, ...]
    """What a table shows (dotted: `status.transport_node`)."""
    parent: str | None = None
    """The parent's kind for a child collection."""


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("zone", "/transport-zones", ("id", "name")),
    Kind("node", "/transport-nodes", ("id", "name", "node_type", "system_id",
                                      "status.connected", "status.controller")),
    Kind("switch", "/logical-switches", ("id", "name", "tenant", "tunnel_key")),
    Kind("port", "/logical-switches/{parent}/ports",
         ("id", "name", "mac", "ips", "status.transport_node", "status.up"), "switch"),
    Kind("subnet", "/logical-switches/{parent}/subnets",
         ("id", "name", "cidr", "gateway_ip"), "switch"),
    Kind("router", "/logical-routers", ("id", "name", "tenant", "tunnel_key")),
    Kind("router-port", "/logical-routers/{parent}/ports",
         ("id", "name", "mac", "ip_prefix", "logical_switch_id"), "router"),
    Kind("route", "/logical-routers/{parent}/routes", ("id", "prefix", "next_hop"), "router"),
    Kind("nat-rule", "/logical-routers/{parent}/nat-rules",
         ("id", "type", "external_ip", "internal_ip"), "router"),
    Kind("profile", "/security-profiles", ("id", "name", "tenant", "stateful")),
    Kind("gateway-service", "/gateway-services", ("id", "name", "type", "uplink_ip")),
    Kind("qos-queue", "/qos-queues", ("id", "name", "min_rate", "max_rate")),
)}  # fmt: skip


def kind(name: str) -> Kind:
    """The kind `name` means (singular or plural, `_` or `-`).

    Raises:
        CtlError: no such kind (the message lists them).
    """
    key = name.strip().lower().replace("_", "-")
    for candidate in (key, key.removesuffix("es"), key.removesuffix("s")):
        if candidate in KINDS:
            return KINDS[candidate]
    raise CtlError(detail=f"unknown kind {name!r}; one of: {', '.join(KINDS)}")


def parse_fields(pairs: Sequence[str]) -> dict[str, Any]:
    """`FIELD=VALUE` arguments as a JSON body (see the module docstring).

    Raises:
        CtlError: an argument without `=`, or a field given twice.
    """
    body: dict[str, Any] = {}
    for pair in pairs:
        field, sep, text = pair.partition("=")
        if not sep or not field:
            raise CtlError(detail=f"expected FIELD=VALUE, got {pair!r}")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        *outer, last = field.split(".")
        target = body
        for part in outer:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise CtlError(detail=f"{field}: {part} is given a value and fields")
        if last in target:
            raise CtlError(detail=f"{field} given twice")
        target[last] = value
    return body


REFERENCES: dict[str, str] = {
    "gateway_service_id": "gateway-service", "gateway_node_ids": "node",
    "transport_zone_id": "zone", "transport_zone_ids": "zone", "logical_switch_id": "switch",
    "logical_port_id": "port", "router_port_id": "router-port", "output_port_id": "router-port",
    "qos_queue_id": "qos-queue", "security_profile_ids": "profile",
    "remote_profile_id": "profile",
}  # fmt: skip
"""A body's reference fields (at any depth: `attachment.gateway_service_id`) and the kind
each names; a name given there is resolved to its object's id, as `--parent` is."""


def is_uuid(text: str) -> bool:
    """True if `text` is a UUID (an id, not a name)."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def references(body: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, Kind]]:
    """The (object, field, kind) of each reference field of `body` that holds a name (a
    string, or a list with a string, that is not a UUID)."""
    for field, value in body.items():
        if isinstance(value, dict):
            yield from references(value)
            continue
        if field not in REFERENCES:
            continue
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not is_uuid(v) for v in values):
            yield body, field, KINDS[REFERENCES[field]]


def _cell(item: dict[str, Any], column: str) -> str:
    value: Any = item
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def table(items: Iterable[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    """`items` as an aligned text table of `columns` (a header line, then one per item)."""
    rows = [[c.rpartition(".")[2].upper() for c in columns]]
    rows += [[_cell(item, c) for c in columns] for item in items]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]  # fmt: skip


@dataclass
class Topology:
    """What `loom show` draws: every object of the tenants shown."""

    switches: list[dict[str, Any]]
    ports: dict[str, list[dict[str, Any]]]
    """Switch id -> its ports."""
    routers: list[dict[str, Any]]
    router_ports: dict[str, list[dict[str, Any]]]
    routes: dict[str, list[dict[str, Any]]]
    nat_rules: dict[str, list[dict[str, Any]]]


def show_lines(topology: Topology) -> list[str]:
    """The tree `loom show` prints: per tenant, its switches with their ports (where each
    is bound and whether it is up), its routers with their ports (the switch each joins),
    routes and NAT rules."""
    names = {s["id"]: s["name"] or s["id"] for s in topology.switches}
    tenants = sorted({o.get("tenant") or "" for o in [*topology.switches, *topology.routers]})
    lines: list[str] = []
    for tenant in tenants:
        lines.append(f"tenant {tenant or '(none)'}")
        for switch in sorted(topology.switches, key=lambda s: (s["name"], s["id"])):
            if (switch.get("tenant") or "") != tenant:
                continue
            lines.append(f"    switch {switch['name']} ({switch['id']}) key "
                         f"{switch.get('tunnel_key')}")  # fmt: skip
            for port in sorted(topology.ports.get(switch["id"], []), key=lambda p: p["name"]):
                status = port.get("status") or {}
                attachment = (port.get("attachment") or {}).get("type", "none")
                line = (f"        port {port['name']}: {port.get('mac') or '-'} "
                        f"{' '.join(port.get('ips') or []) or '-'} ({attachment})")  # fmt: skip
                if attachment in ("vif", "none"):  # (a router's port is everywhere)
                    where = status.get("transport_node") or "not bound"
                    line += f" on {where}, {'up' if status.get('up') else 'down'}"
                lines.append(line)
        for router in sorted(topology.routers, key=lambda r: (r["name"], r["id"])):
            if (router.get("tenant") or "") != tenant:
                continue
            lines.append(f"    router {router['name']} ({router['id']}) key "
                         f"{router.get('tunnel_key')}")  # fmt: skip
            for port in sorted(topology.router_ports.get(router["id"], []),
                               key=lambda p: p["name"]):  # fmt: skip
                joined = names.get(port.get("logical_switch_id"), port.get("logical_switch_id"))
                lines.append(f"        port {port['name']}: {port.get('mac')} "
                             f"{port.get('ip_prefix')} -> switch {joined}")  # fmt: skip
            for route in topology.routes.get(router["id"], []):
                lines.append(f"        route {route.get('prefix')} via "
                             f"{route.get('next_hop')}")  # fmt: skip
            for rule in topology.nat_rules.get(router["id"], []):
                lines.append(f"        nat {rule.get('type')} {rule.get('external_ip')} <-> "
                             f"{rule.get('internal_ip')}")  # fmt: skip
    return lines


def flows_lines(body: dict[str, Any]) -> list[str]:
    """What `loom flows NODE` prints: the counts, whether the node holds what is computed,
    each change a reconciliation would make, the flows the node learned (no change), and
    (`--tables`) both tables."""
    state = "in sync" if body["in_sync"] else f"{len(body['changes'])} change(s) to make"
    learned = body.get("learned", [])
    held = f" ({len(learned)} learned by the node)" if learned else ""
    out = [f"node {body['node']} (physical controller {body['controller']}): "
           f"{body['computed_flows']} flows computed, {body['installed_flows']} installed"
           f"{held}, {state}"]  # fmt: skip
    out += [f"  {c['op']:<6} {c['flow']}" for c in body["changes"]]
    out += [f"  learned {flow}" for flow in learned]
    for name in ("computed", "installed"):
        if name in body:
            out.append(f"{name}:")
            out += [f"  {flow}" for flow in body[name]]
    return out


def trace_lines(body: dict[str, Any]) -> list[str]:
    """What `loom trace` prints: the packet as OVS was given it, each table it passed (a
    heading where it enters another datapath; the stage, the flow's priority, the object
    the flow exists for, its match, then its actions), conntrack's answers, the verdict."""
    where = (
        f"node {body['node']}'s installed table"
        if body.get("node")
        else ("the universal flows on an ideal node")
    )
    described = f" ({body['described']})" if body.get("described") else ""
    out = [f"{body['from']}: {body['packet']}{described}",
           f"  through {where} (physical controller {body['controller']})",
           f"  flow: {body['flow']}"]  # fmt: skip
    datapath = None
    for p in body["passes"]:
        if p["ct_state"] is not None:
            out.append(f"conntrack answered {p['ct_state']}, the packet resumes:")
        for step in p["steps"]:
            dp = step.get("datapath")
            if dp and dp != datapath and (dp.get("name") or dp.get("kind")):
                out.append(f"{dp.get('kind') or 'datapath'} {dp.get('name')} (key {dp['key']}):")
            datapath = dp or datapath
            out += _step_lines(step)
    out.append(_verdict_line(body["verdict"]))
    if body["verdict"].get("uplink") and body.get("stand_in_next_hops"):
        hops = ", ".join(body["stand_in_next_hops"])
        out.append(f"  (next hop {hops}: at a stand-in MAC; the active gateway node learns "
                   "its MAC by ARP)")  # fmt: skip
    return out


def _step_lines(step: dict[str, Any]) -> list[str]:
    """One table of a trace: a line, and its actions on the next."""
    indent = "  " * (1 + step.get("depth", 0))
    stage = str(step.get("stage") or "").lower()
    if step["match"] is None:
        return [f"{indent}{step['table']:>3} {stage:<18} no flow matched: dropped"]
    obj = step.get("object") or {}
    named = f"{obj.get('kind')} {obj.get('name') or obj.get('id') or ''}".strip() if obj else ""
    line = f"{indent}{step['table']:>3} {stage:<18} {step['priority']:>5}  {step['match']}"
    lines = [line + (f"  [{named}]" if named else "")]
    actions = [a for a in step["actions"] if not a.startswith("->")]
    if actions:
        lines.append(f"{indent}      {'; '.join(actions)}")
    lines += [f"{indent}      {a}" for a in step["actions"] if a.startswith("->")]
    return lines


def _verdict_line(verdict: dict[str, Any]) -> str:
    """The trace's verdict in words."""
    said = []
    for d in verdict["delivered"]:
        said.append(f"delivered to {d.get('name') or d['port']}"
                    + (f" (bound on {d['node']})" if d.get("node") else ""))  # fmt: skip
    for t in verdict["tunneled"]:
        port = t.get("port")
        if isinstance(port, dict):
            uplink = "'s uplink" if port.get("kind") == "router uplink" else ""
            port = f"{port.get('name') or port.get('id')}{uplink}"
        said.append(f"tunneled to {t.get('node') or t.get('ip')} for {port} "
                    f"(out of {t.get('via')})")  # fmt: skip
    if verdict.get("uplink"):
        source = verdict.get("uplink_source")
        said.append("out of the gateway's uplink" + (f" from {source}" if source else ""))
    if not said:
        last = verdict.get("ended_at") or {}
        stage = str(last.get("stage") or "").lower()
        obj = last.get("object") or {}
        by = f" by {obj.get('kind')} {obj.get('name') or ''}".rstrip() if obj else ""
        flow = f": {last['match']}" if last.get("match") is not None else ": no flow matched"
        said.append(f"dropped at table {last.get('table')} {stage}{by}{flow}")
    return "verdict: " + "; ".join(said)


def status_lines(status: dict[str, Any], nodes: Sequence[dict[str, Any]]) -> list[str]:
    """What `loom status` prints: the generations and how far realization lags, the
    physical controllers and the nodes each masters, nodes not connected (and why), and
    the controllers' warnings."""
    config = int(status.get("config_generation") or 0)
    logical = int(status.get("logical_generation") or 0)
    realized = int(status.get("realized_generation") or 0)
    lines = [
        f"configuration generation {config}: computed {logical} (lag {config - logical}), "
        f"realized on every node {realized} (lag {config - realized})",
    ]
    masters: dict[str, list[str]] = {}
    down: list[str] = []
    for node in sorted(nodes, key=lambda n: n["name"]):
        node_status = node.get("status") or {}
        if node_status.get("connected"):
            masters.setdefault(str(node_status.get("controller") or "?"), []).append(node["name"])
        else:
            why = node_status.get("message") or "not connected"
            down.append(f"    {node['name']}: {why}")
    lines.append(f"nodes: {len(nodes)}, connected {len(nodes) - len(down)}")
    for controller, mastered in sorted(masters.items()):
        lines.append(f"    physical controller {controller}: {len(mastered)} node(s): "
                     f"{', '.join(mastered)}")  # fmt: skip
    if down:
        lines.append("not connected:")
        lines += down
    warnings = status.get("warnings") or []
    lines.append(f"warnings: {len(warnings)}")
    lines += [f"    {w['kind']} {w['source']}: {w['message']}" for w in warnings]
    return lines


class Client:
    """The API as the commands use it: refusals raise `CtlError`; lists are followed
    through every page; names resolve to ids."""

    def __init__(self, http: Http) -> None:
        self.http = http

    def call(self, method: str, path: str, body: Any = None, ok: int = 200) -> Reply:
        """One request; its reply if its status is `ok`.

        Raises:
            CtlError: nobody answered, or the API refused (its error and field named).
        """
        reply = self.http.request(method, path, body)
        if reply.status == ok:
            return reply
        if reply.status == 0:
            raise CtlError(detail=f"the API at {self.http.url} does not answer: {reply.body}")
        error = reply.body if isinstance(reply.body, dict) else {"message": reply.body}
        field = f" (field {error['field']})" if error.get("field") else ""
        raise CtlError(detail=f"{method} {path}: {reply.status} {error.get('message')}{field}")

    def items(self, path: str, **filters: str | None) -> Iterator[dict[str, Any]]:
        """Every item of a collection (page after page)."""
        query = "&".join(f"{k}={v}" for k, v in filters.items() if v is not None)
        cursor = None
        while True:
            args = "&".join(a for a in (query, f"cursor={cursor}" if cursor else "") if a)
            body = self.call("GET", f"{path}?{args}" if args else path).body
            yield from body["items"]
            cursor = body.get("next_cursor")
            if not cursor:
                return

    def path(self, what: Kind, parent: str | None) -> str:
        """The collection's path, its parent resolved (id or name).

        Raises:
            CtlError: a child kind without `--parent`, or a parent that is not there.
        """
        if what.parent is None:
            if parent is not None:
                raise CtlError(detail=f"a {what.name} has no parent")
            return what.path
        if parent is None:
            raise CtlError(detail=f"a {what.name} needs --parent (its {what.parent})")
        parent_kind = KINDS[what.parent]
        return what.path.format(parent=self.resolve(parent_kind.path, parent, parent_kind))

    def resolve(self, path: str, ref: str, what: Kind) -> str:
        """The id of the object `ref` (an id, or a name no other object of `path` has).

        Raises:
            CtlError: none, or several, of that name (the several listed).
        """
        return self._one(list(self.items(path)), ref, what)

    @staticmethod
    def _one(items: list[dict[str, Any]], ref: str, what: Kind) -> str:
        """The id of the one item of `items` that `ref` names (its id or its name).

        Raises:
            CtlError: none, or several (each listed with its id, tenant and parent).
        """
        found = [i for i in items if ref in (i["id"], i.get("name"))]
        if not found:
            raise CtlError(detail=f"no {what.name} {ref!r}")
        if len(found) > 1:
            candidates = "; ".join(_described(i) for i in found)
            kinds = what.name + ("es" if what.name.endswith("ch") else "s")
            raise CtlError(detail=f"several {kinds} named {ref!r}: {candidates}; give the "
                           "id")  # fmt: skip
        return str(found[0]["id"])

    def every(self, what: Kind) -> list[dict[str, Any]]:
        """Every object of kind `what` (a child kind's across all its parents, each marked
        with its parent's name as `parent`)."""
        if what.parent is None:
            return list(self.items(what.path))
        found = []
        for parent in self.items(KINDS[what.parent].path):
            for item in self.items(what.path.format(parent=parent["id"])):
                found.append({**item, "parent": parent.get("name") or parent["id"]})
        return found

    def resolve_references(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` with each name in a reference field (`REFERENCES`) replaced by the id of
        the object it names.

        Raises:
            CtlError: a name that names none, or several.
        """
        for target, field, what in references(body):
            items = self.every(what)
            value = target[field]
            if isinstance(value, list):
                target[field] = [self._one(items, v, what) if isinstance(v, str) else v
                                 for v in value]  # fmt: skip
            else:
                target[field] = self._one(items, value, what)
        return body

    def wait(self, reply: Reply, timeout: float) -> None:
        """Wait until every node has realized the generation `reply` acknowledged.

        Raises:
            CtlError: not within `timeout` seconds.
        """
        generation = reply.generation
        if generation is None:
            return
        deadline = time.monotonic() + timeout
        while not self.http.realized(generation):
            if time.monotonic() > deadline:
                raise CtlError(detail=f"generation {generation} not realized within {timeout} s")
            time.sleep(0.05)

    def topology(self, tenant: str | None) -> Topology:
        """Everything `loom show` draws (of one tenant, or all the caller may see)."""
        switches = list(self.items("/logical-switches", tenant=tenant))
        routers = list(self.items("/logical-routers", tenant=tenant))

        def children(path: str, parents: list[dict[str, Any]]) -> dict[str, list[Any]]:
            return {p["id"]: list(self.items(path.format(parent=p["id"]))) for p in parents}

        return Topology(
            switches, children("/logical-switches/{parent}/ports", switches), routers,
            children("/logical-routers/{parent}/ports", routers),
            children("/logical-routers/{parent}/routes", routers),
            children("/logical-routers/{parent}/nat-rules", routers),
        )  # fmt: skip


def _described(item: dict[str, Any]) -> str:
    """An object as a candidate: its id, and its tenant and parent where it has them."""
    more = [f"{k} {item[k]}" for k in ("tenant", "parent") if item.get(k)]
    return str(item["id"]) + (f" ({', '.join(more)})" if more else "")


def connection(args: argparse.Namespace, environ: os._Environ[str] | dict[str, str]) -> Http:
    """Where the API is and the token to show it (see the module docstring).

    Raises:
        CtlError: no URL or no token from any source, or a token file unreadable.
    """
    client_file = Path(args.state_dir) / CLIENT_FILE
    saved: dict[str, str] = {}
    if client_file.exists():
        try:
            saved = json.loads(client_file.read_text())
        except (OSError, ValueError) as exc:
            raise CtlError(detail=f"{client_file}: {exc}") from None
    url = args.url or environ.get("LOOM_URL") or saved.get("url")
    token = environ.get("LOOM_TOKEN")
    # --token-file, else LOOM_TOKEN, else LOOM_TOKEN_FILE, else loom up's file
    token_file = args.token_file or (
        None if token else environ.get("LOOM_TOKEN_FILE") or saved.get("token_file")
    )
    if token_file is not None:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as exc:
            raise CtlError(detail=f"token file: {exc}") from None
    if not url:
        raise CtlError(detail=f"where is the API? --url, LOOM_URL, or {client_file} "
                       "(written by loom up)")  # fmt: skip
    if not token:
        raise CtlError(detail="no token: --token-file, LOOM_TOKEN, LOOM_TOKEN_FILE, or "
                       f"{client_file}")  # fmt: skip
    return Http(url, token, timeout=args.timeout)


def _print(args: argparse.Namespace, data: Any, lines: Callable[[], list[str]]) -> None:
    if args.format == "json":
        print(json.dumps(data, indent=1, sort_keys=True))
    else:
        print("\n".join(lines()))


def run(args: argparse.Namespace, client: Client) -> int:
    """Run one parsed command against `client`; exit status 0.

    Raises:
        CtlError: the command failed.
    """
    command = args.command
    if command == "show":
        topology = client.topology(args.tenant)
        _print(args, topology.__dict__, lambda: show_lines(topology))
        return 0
    if command == "status":
        status = client.call("GET", "/status").body
        nodes = list(client.items("/transport-nodes")) if args.nodes else []
        _print(args, {"status": status, "nodes": nodes}, lambda: status_lines(status, nodes))
        return 0
    if command in ("flows", "trace"):  # (a node's or a packet's look at the data plane)
        ask, lines = (_flows, flows_lines) if command == "flows" else (_trace, trace_lines)
        body = ask(args, client)
        _print(args, body, lambda: lines(body))
        return 0
    what = kind(args.kind)
    path = client.path(what, args.parent)
    if command == "list":
        items = list(client.items(path, tenant=args.tenant, name=args.name))
        _print(args, items, lambda: table(items, what.columns))
        return 0
    if command == "create":
        body = client.resolve_references(parse_fields(args.fields))
        reply = client.call("POST", path, body, ok=201)
        if args.wait:
            client.wait(reply, args.timeout)
        _print(args, reply.body, lambda: [str(reply.body["id"])])
        return 0
    ref = client.resolve(path, args.ref, what)
    if command == "get":
        body = client.call("GET", f"{path}/{ref}").body
        _print(args, body, lambda: [f"{k}: {json.dumps(v)}" for k, v in sorted(body.items())])
    elif command == "set":
        body = client.resolve_references(parse_fields(args.fields))
        reply = client.call("PATCH", f"{path}/{ref}", body)
        if args.wait:
            client.wait(reply, args.timeout)
    elif command == "delete":
        reply = client.call("DELETE", f"{path}/{ref}", ok=204)
        if args.wait:
            client.wait(reply, args.timeout)
    return 0


def _flows(args: argparse.Namespace, client: Client) -> Any:
    """`loom flows NODE`'s answer."""
    node = client.resolve("/transport-nodes", args.node, KINDS["node"])
    tables = "true" if args.tables else "false"
    return client.call("GET", f"/transport-nodes/{node}/flows?tables={tables}").body


def _trace(args: argparse.Namespace, client: Client) -> Any:
    """`loom trace`'s answer."""
    query = {"from": args.source, "packet": args.packet}
    if args.on_node:
        query["node"] = args.on_node
    if args.ct:
        query["ct"] = ";".join(args.ct)
    return client.call("GET", f"/trace?{urlencode(query)}").body


def add_commands(sub: Any, state_dir_default: str) -> None:
    """Add the client commands to `loom`'s subcommands (`sub`: argparse's subparsers)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the API's base URL (or LOOM_URL)")
    common.add_argument("--token-file", metavar="PATH",
                        help="a file holding the bearer token (or LOOM_TOKEN, "
                        "LOOM_TOKEN_FILE)")  # fmt: skip
    common.add_argument("--state-dir", default=state_dir_default,
                        help=f"where loom up left {CLIENT_FILE} (default ./run/loom)")  # fmt: skip
    common.add_argument("--format", choices=["table", "json"], default="table")
    common.add_argument("--timeout", type=float, default=30.0,
                        help="seconds a request, or --wait, may take (default 30)")  # fmt: skip
    writes = argparse.ArgumentParser(add_help=False)
    writes.add_argument("--wait", action="store_true",
                        help="wait until every node has realized the write")  # fmt: skip
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("kind", help=f"one of: {', '.join(KINDS)}")
    where.add_argument("--parent", help="a child's switch or router (id or name)")

    def add(name: str, parents: list[argparse.ArgumentParser], text: str) -> Any:
        return sub.add_parser(name, parents=parents, help=text, allow_abbrev=False)

    show = add("show", [common], "the tenants' topology")
    show.add_argument("--tenant")
    status = add("status", [common], "generations, controllers, nodes, warnings")
    status.add_argument("--no-nodes", dest="nodes", action="store_false",
                        help="skip the transport nodes (admin only)")  # fmt: skip
    listing = add("list", [common, where], "list a collection")
    listing.add_argument("--tenant")
    listing.add_argument("--name")
    get = add("get", [common, where], "one object")
    get.add_argument("ref", metavar="ID|NAME")
    create = add("create", [common, where, writes], "create an object")
    create.add_argument("fields", nargs="*", metavar="FIELD=VALUE")
    update = add("set", [common, where, writes], "change an object")
    update.add_argument("ref", metavar="ID|NAME")
    update.add_argument("fields", nargs="+", metavar="FIELD=VALUE")
    delete = add("delete", [common, where, writes], "delete an object")
    delete.add_argument("ref", metavar="ID|NAME")
    flows = add("flows", [common], "a node's computed and installed OpenFlow tables")
    flows.add_argument("node", metavar="NODE", help="the transport node (id or name)")
    flows.add_argument("--tables", action="store_true", help="print both whole tables")
    trace = add("trace", [common], "where a packet from a port goes, flow by flow")
    trace.add_argument("--from", dest="source", required=True, metavar="PORT",
                       help="the port the packet leaves (id or name), or a router with "
                       "an uplink: a packet from the physical network")  # fmt: skip
    trace.add_argument("packet", metavar="PACKET",
                       help="its fields, as ovn-trace takes them: "
                       "'ip4.dst == 10.0.2.5 && tcp.dst == 22'")  # fmt: skip
    trace.add_argument("--on-node", metavar="NODE",
                       help="through this node's installed table (admin)")  # fmt: skip
    trace.add_argument("--ct", action="append", metavar="STATE",
                       help="what conntrack answers, once per recirculation (default "
                       "trk,new)")  # fmt: skip
    for parser in (show, status, listing, get, create, update, delete, flows, trace):
        parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """A client command: exit 0, or 1 with one line on stderr."""
    try:
        return run(args, Client(connection(args, os.environ)))
    except CtlError as exc:
        print(f"loom {args.command}: {exc}", file=sys.stderr, flush=True)
        return 1
