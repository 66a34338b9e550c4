"""`loom trace`: a packet through Loom's flows, read by ovs-vswitchd itself (pure part).

A trace runs `ofproto/trace` on a scratch ovs-vswitchd (`loom_physical.scratch`), so what
is traced is OVS's own reading of the flows, not a second interpreter of them. Two tables
can be loaded there:

- **logical** (`ideal_node`, `ideal_flows`): the universal flows of the datapaths the packet
  can reach from its port (its switch, and through routers every switch and router joined
  to it), localized by the physical rules for an *ideal transport node* (NVP §4) on which
  every VIF of those datapaths is plugged and every gateway service is active, its L3
  next hops resolved (at their static MAC, else at a stand-in for the MAC the active node
  learns). The packet walks the whole logical pipeline — switch, routers, the other
  switch, the egress port's ACLs, or a router's NAT out of its uplink — in one trace,
  whatever node each port is on; the verdict names the egress port and the node it is
  bound to. A packet enters at a VIF or, from the physical network, at a router's uplink.
  The flows are the controller's replica's, and for datapaths it does not follow (no
  node of its has them: `missing_flows`) read once from the universal DB (`with_flows`).
- **on a node** (`node_layout`): the node's installed table, on a bridge with the node's
  ports at their ofports (its tunnel ports flow-based as on the node): what that node does
  with the packet — deliver it, send it by tunnel to another node (which one, for which
  port), or drop it.

`parse` turns the trace's text into passes of steps (a conntrack recirculation starts a new
pass), each annotated with what Loom knows: the OpenFlow table as its logical stage or
physical table (`loom_schemas.pipeline.at_table`, by the kind of datapath in `metadata`), the
cookie as the object whose universal row made the flow (`sources`) and the category it
carries (`loom_schemas.pipeline.Category`: `acl`, `router` ...), and the datapath.
`verdict` reads where the packet went from the datapath actions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from loom_common import ctstate
from loom_common.engine_inputs import Change
from loom_common.ovsdb.codec import atoms, omap, to_map, to_set
from loom_ddlog import Program
from loom_ovs.flows import MARK, Flow
from loom_ovs.tunnels import FLOW
from loom_physical.core import Localizer, NodeFacts
from loom_physical.inputs import opt
from loom_physical.translate import ALL_SWITCHES
from loom_schemas.pipeline import (
    DATAPATH,
    FLOOD_KEY,
    ROUTER_KEYS,
    TUN_OUTPORT,
    Category,
    Stage,
    at_table,
    category_of,
)

IDEAL = "loom-ideal-node"
"""The ideal node's system-id (it exists only in a trace's own `Localizer`)."""
FIRST_VIF_OFPORT = 100
"""The ideal node's VIFs are dummy ports from this ofport on, in port order."""
UPLINK_OFPORT = 90
"""The ideal node's uplink (every gateway port of the traced datapaths leaves by it)."""
STAND_IN_MAC = "00:00:00:00:00:00"
"""The ideal node's MAC for an L3 next hop the active node learns by ARP (what every other
node's router flows say for it until then)."""
MAX_ROUNDS = 8
"""Engine rounds an ideal node's computation may take (zones feed back once)."""


class TraceRefused(Exception):
    """A trace that cannot run: `status` is the HTTP status to answer with."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message

    def body(self) -> dict[str, str]:
        """The JSON error body."""
        return {"error": self.error, "message": self.message}


@dataclass(frozen=True)
class ScratchPort:
    """One port of the scratch bridge."""

    name: str
    ofport: int
    type: str = "dummy"
    options: Mapping[str, str] = field(default_factory=dict)
    port: str = ""
    """The logical port it stands for (a VIF's), or "" (a tunnel port, an uplink)."""
    role: str = "vif"
    """`vif`, `uplink` or `tunnel`."""


@dataclass
class Table:
    """What a trace loads on the scratch bridge and where the packet enters."""

    ports: list[ScratchPort]
    flows: list[str]
    """The flows, as `ovs-ofctl add-flows` reads them."""
    in_port: int


@dataclass
class Ideal:
    """An ideal node's inputs for the physical rules (`ideal_node`)."""

    changes: list[Change]
    facts: NodeFacts
    ports: list[ScratchPort]
    in_port: int
    datapaths: set[int]
    stand_ins: list[str] = field(default_factory=list)
    """The L3 next hops given `STAND_IN_MAC` (no static neighbour: learned by ARP)."""
    uplink_mac: str = ""
    """For a packet entering at a router's uplink: the uplink's MAC (its `eth.dst`)."""


# ---- what to load --------------------------------------------------------------------


def component(bindings: Iterable[Mapping[str, Any]], dp: int,
              allowed: Set[int] | None = None) -> set[int]:  # fmt: skip
    """Datapath `dp` and every datapath joined to it through router ports (transitively):
    what a packet entering `dp` can reach. `bindings`: `Port_Binding` rows; `allowed`:
    the datapaths the walk may enter (None: any) — a tenant's trace stops at another
    tenant's router on a shared network."""
    rows = list(bindings)
    dp_of = {str(r["logical_port"]): int(r["datapath"]) for r in rows}
    joined: dict[int, set[int]] = {}
    for r in rows:
        peer = opt(r["peer"])
        if r["type"] == "router" and peer in dp_of:
            a, b = int(r["datapath"]), dp_of[peer]
            joined.setdefault(a, set()).add(b)
            joined.setdefault(b, set()).add(a)
    seen, todo = {dp}, [dp]
    while todo:
        for other in joined.get(todo.pop(), ()):
            if other not in seen and (allowed is None or other in allowed):
                seen.add(other)
                todo.append(other)
    return seen


def ideal_node(rows: Mapping[str, Mapping[str, Mapping[str, Any]]], port: str,
               neighbours: Mapping[str, str] | None = None,
               allowed: Set[int] | None = None) -> Ideal:  # fmt: skip
    """The ideal node for a trace from logical port `port`: the universal rows of the
    datapaths its packets can reach (`component`, and datapath 0), with every VIF of them
    plugged here (a dummy port each, `FIRST_VIF_OFPORT` on) and every gateway service
    active here (its ports leave by one uplink, its L3 next hop at its static MAC or at
    `STAND_IN_MAC`); no other node, so no tunnel.

    Args:
        rows: the universal replica's rows (`UniversalReplica.rows`: table -> uuid -> row).
        port: the logical port the packet comes from: a VIF's, or a router's uplink
            (`<router uuid>-uplink`: the packet comes from the physical network).
        neighbours: the static next hops of the active gateways (IP -> MAC), which the
            ideal node says as its own.
        allowed: the datapaths the packet may be followed into (`component`).

    Raises:
        TraceRefused: the port is not known here, is neither a VIF nor an L3 uplink, or
            shares its VIF id.
    """
    bindings = rows["Port_Binding"]
    source = next((b for b in bindings.values() if b["logical_port"] == port), None)
    if source is None:
        raise TraceRefused(404, "not_found", f"port {port} has no binding in this "
                           "controller's universal flows")  # fmt: skip
    uplink = source["type"] == "l3-gateway"
    if not uplink and (source["type"] != "vif" or not opt(source["vif_id"])):
        raise TraceRefused(400, "validation_failed", f"port {port} is a {source['type']} "
                           "port: a trace starts at a VIF or a router's uplink")  # fmt: skip
    dps = component(bindings.values(), int(source["datapath"]), allowed)
    changes, vifs, ports, services = _ideal_ports(bindings, dps)
    changes += _ideal_rows(rows, dps, services)
    uplinks: tuple[int, ...] = ()
    if services:
        uplinks = (UPLINK_OFPORT,)
        ports.append(ScratchPort("uplink", UPLINK_OFPORT, role="uplink"))
    hops = dict(neighbours or {})
    assignments = [g for g in rows["Gateway_Assignment"].values() if g["service"] in services]
    next_hops = {opt(g["uplink_next_hop"]) for g in assignments if g["kind"] == "l3"}
    stand_ins = sorted(hop for hop in next_hops if hop and hop not in hops)
    hops.update(dict.fromkeys(stand_ins, STAND_IN_MAC))
    facts = NodeFacts(vifs=vifs, uplinks=uplinks, neighbours=hops)
    if uplink:
        mac = next((opt(g["uplink_mac"]) for g in assignments
                    if g["service"] == opt(source["gateway_service"])), "")  # fmt: skip
        return Ideal(changes, facts, ports, UPLINK_OFPORT, dps, stand_ins, mac)
    in_port = next((p.ofport for p in ports if p.port == port), None)
    if in_port is None:
        raise TraceRefused(409, "conflict", f"port {port}'s VIF id {opt(source['vif_id'])} "
                           "is another port's too")  # fmt: skip
    return Ideal(changes, facts, ports, in_port, dps, stand_ins)


def missing_flows(ideal: Ideal, flow_rows: Iterable[Mapping[str, Any]],
                  followed: Set[int]) -> set[int]:  # fmt: skip
    """The datapaths of `ideal` (datapath 0 too) whose universal flows the replica does not
    hold: not `followed` (no node of this controller has them), or followed with no row
    yet (the condition just changed). A table without them would make up a verdict: they
    are read for the trace (`with_flows`).

    Args:
        ideal: the ideal node (`ideal_node`).
        flow_rows: the replica's `Flow` rows.
        followed: the datapaths the replica follows (`UniversalReplica.datapaths`).
    """
    held = {int(f["datapath"]) for f in flow_rows}
    wanted = ideal.datapaths | {ALL_SWITCHES}
    return {dp for dp in wanted if dp not in followed or dp not in held}


def with_flows(ideal: Ideal, datapaths: Set[int],
               flows: Mapping[str, Mapping[str, Any]]) -> Ideal:  # fmt: skip
    """`ideal` with the `Flow` rows of `datapaths` replaced by `flows` (uuid -> row, as
    `loom_physical.universal.read_flows` reads them)."""
    kept = [(table, uuid, row) for table, uuid, row in ideal.changes
            if table != "Flow" or row is None or int(row["datapath"]) not in datapaths]  # fmt: skip
    added: list[Change] = [("Flow", uuid, dict(row)) for uuid, row in sorted(flows.items())]
    return Ideal(kept + added, ideal.facts, ideal.ports, ideal.in_port, ideal.datapaths,
                 ideal.stand_ins, ideal.uplink_mac)  # fmt: skip


def _ideal_ports(
    bindings: Mapping[str, Mapping[str, Any]], dps: set[int]
) -> tuple[list[Change], dict[str, int], list[ScratchPort], set[str]]:
    """`ideal_node`'s ports: the bindings of datapaths `dps` (no chassis: every port is
    here), the VIFs (id -> ofport) and their scratch ports, the gateway services named."""
    changes: list[Change] = []
    vifs: dict[str, int] = {}
    ports: list[ScratchPort] = []
    services: set[str] = set()
    mine = [(uuid, b) for uuid, b in bindings.items() if int(b["datapath"]) in dps]
    for uuid, b in sorted(mine, key=lambda item: str(item[1]["logical_port"])):
        changes.append(("Port_Binding", uuid, {**b, "chassis": to_set([])}))
        vif = opt(b["vif_id"])
        if b["type"] == "vif" and vif and vif not in vifs:
            vifs[vif] = ofport = FIRST_VIF_OFPORT + len(vifs)
            ports.append(ScratchPort(f"v{ofport}", ofport, port=str(b["logical_port"])))
        if opt(b["gateway_service"]):
            services.add(opt(b["gateway_service"]))
    return changes, vifs, ports, services


def _ideal_rows(rows: Mapping[str, Mapping[str, Mapping[str, Any]]], dps: set[int],
                services: set[str]) -> list[Change]:  # fmt: skip
    """`ideal_node`'s other universal rows: the datapaths `dps`, their flows and datapath
    0's (the replica's own rows: it replaces a row that changes, never modifies one), the
    gateway `services` active on the ideal node, every switch replicating by local copies."""
    changes: list[Change] = []
    for uuid, d in rows["Datapath"].items():
        if int(d["key"]) in dps:
            changes.append(("Datapath", uuid, d))
    for uuid, g in rows["Gateway_Assignment"].items():
        if g["service"] in services:
            changes.append(("Gateway_Assignment", uuid, {**g, "nodes": to_map({0: IDEAL})}))
    for uuid, r in rows["Replication_Set"].items():
        if int(r["datapath"]) in dps:
            changes.append(("Replication_Set", uuid,
                            {**r, "mode": "source", "service_nodes": to_map({})}))  # fmt: skip
    changes += [("Universal_Global", uuid, r) for uuid, r in rows["Universal_Global"].items()]
    changes += [("Flow", uuid, f) for uuid, f in rows["Flow"].items()
                if int(f["datapath"]) in dps or int(f["datapath"]) == ALL_SWITCHES]  # fmt: skip
    return changes


def ideal_flows(program: Program, ideal: Ideal) -> list[Flow]:
    """The ideal node's table, as the physical rules compute it (a `Localizer` of its own
    on `program`: nothing of the controller's own computation is touched).

    Raises:
        TraceRefused: the computation did not settle.
    """
    core = Localizer(program)
    core.universal(ideal.changes)
    core.node(IDEAL, ideal.facts)
    core.set_computed({IDEAL})
    core.set_liveness({IDEAL}, set())
    for _ in range(MAX_ROUNDS):
        if not core.compute() or not core.feeds_back():
            return core.flows(IDEAL)
    raise TraceRefused(503, "busy", "the ideal node's computation did not settle")


def node_layout(interfaces: Iterable[Mapping[str, Any]],
                vif_ports: Mapping[str, str]) -> list[ScratchPort]:  # fmt: skip
    """The scratch bridge's ports for a node's table: each of the node's `br-int`
    interfaces at its ofport — a tunnel port as it is (its type and `remote_ip`/`key`
    options, flow-based or to one peer), anything else a dummy port.

    Args:
        interfaces: the node's `Interface` rows on `br-int` (OVSDB monitor format).
        vif_ports: VIF id -> the logical port bound to it.
    """
    ports = []
    for iface in interfaces:
        ofport = atoms(iface["ofport"])
        if (
            not ofport
            or not isinstance(ofport[0], int)
            or ofport[0] <= 0
            or iface["name"] == "br-int"
        ):
            continue
        ids = omap(iface["external_ids"])
        options = omap(iface["options"])
        if iface["type"] in ("geneve", "vxlan"):
            kept = {"remote_ip": FLOW, "key": FLOW}
            kept.update({k: str(options[k]) for k in ("remote_ip", "key") if k in options})
            ports.append(ScratchPort(iface["name"], ofport[0], iface["type"], kept,
                                     role="tunnel"))  # fmt: skip
        elif ids.get("loom-uplink") == "true":
            ports.append(ScratchPort(iface["name"], ofport[0], role="uplink"))
        else:
            port = vif_ports.get(str(ids.get("iface-id", "")), "")
            ports.append(ScratchPort(iface["name"], ofport[0], port=port))
    return sorted(ports, key=lambda p: p.ofport)


def uplink_entry(rows: Mapping[str, Mapping[str, Mapping[str, Any]]], port: str,
                 ports: Sequence[ScratchPort], node: str) -> tuple[int, str] | None:  # fmt: skip
    """Where a packet from the physical network to router uplink `port` enters node
    `node`'s table: (its uplink's ofport, the uplink's MAC as `eth.dst`); None if `port`
    is not a router's uplink (`rows`: the universal replica's; `ports`: `node_layout`'s).

    Raises:
        TraceRefused: the node has no uplink.
    """
    binding = next((b for b in rows["Port_Binding"].values() if b["logical_port"] == port), None)
    if binding is None or binding["type"] != "l3-gateway":
        return None
    uplink = next((p for p in ports if p.role == "uplink"), None)
    if uplink is None:
        raise TraceRefused(409, "not_on_node", f"node {node} has no uplink (a gateway node's "
                           "port to the physical network)")  # fmt: skip
    service = opt(binding["gateway_service"])
    mac = next((opt(g["uplink_mac"]) for g in rows["Gateway_Assignment"].values()
                if g["service"] == service), "")  # fmt: skip
    return uplink.ofport, mac


def sources(flow_rows: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """A universal row's cookie -> the object its flows exist for (its `source`: a config
    uuid, `switches` for datapath 0's; "" for a datapath's conjunctions)."""
    return {int(r["cookie"]): str(r["source"]) for r in flow_rows}


def microflow(flow: str, in_port: int, dl_dst: str = "") -> str:
    """`flow` (an `ovs-ofctl` flow description without `in_port`) entering at `in_port`;
    `dl_dst` its Ethernet destination unless it says one (a packet entering at a router's
    uplink is sent to the uplink's MAC, which the API does not know).

    Raises:
        TraceRefused: `flow` names an in_port, or holds characters a flow never has.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.:/,=\-]*", flow):
        raise TraceRefused(400, "validation_failed", f"not a flow description: {flow!r}")
    if re.search(r"(^|,)in_port=", flow):
        raise TraceRefused(400, "validation_failed", "the port says where the packet enters: "
                           "no in_port in the flow")  # fmt: skip
    if dl_dst and not re.search(r"(^|,)dl_dst=", flow):
        flow = f"{flow},dl_dst={dl_dst}" if flow else f"dl_dst={dl_dst}"
    return f"in_port={in_port},{flow}" if flow else f"in_port={in_port}"


def ct_states(states: Sequence[str]) -> list[str]:
    """Each `--ct-next` argument checked (`loom_common.ctstate`).

    Raises:
        TraceRefused: one OVS would not take.
    """
    for state in states:
        try:
            ctstate.check(state)
        except ValueError as exc:
            raise TraceRefused(400, "validation_failed", f"ct state {state!r}: {exc}") from None
    return list(states)


# ---- reading the trace ---------------------------------------------------------------

_STEP = re.compile(r"^(\s*)(\d+)\. (?:(.*?), )?priority (\d+)(?:, cookie (0x[0-9a-f]+))?$")
_NO_MATCH = re.compile(r"^(\s*)(\d+)\. No match\.?$")
_RESUME = re.compile(r"resume conntrack with (?:default )?(ct_state=\S+)")
_METADATA_MATCH = re.compile(rf"(?:^|,){DATAPATH.name}=(0x[0-9a-f]+|\d+)(?:,|$)")
_METADATA_SET = re.compile(rf"set_field:(0x[0-9a-f]+|\d+)->{DATAPATH.name}")


def parse(text: str, cookies: Mapping[int, str]) -> list[dict[str, Any]]:
    """`ofproto/trace` output as passes: `{"ct_state": ..., "flow": ..., "steps": [...],
    "datapath_actions": ...}`, the first pass's `ct_state` None (a resumed one's says what
    conntrack answered). A step: the OpenFlow table, its stage (or physical table), the
    datapath key the packet is in, the flow's priority, match, cookie, the `source` object
    of its universal row (`cookies`: row cookie -> source; None for the physical tables'
    own flows), the `category` its cookie carries (None: it says none), the actions the
    trace shows it run, and its nesting `depth` (inside a `clone`). A table no flow matched
    is a step with `"match": None` (dropped there)."""
    reader = _Reader(cookies)
    for line in text.splitlines():
        reader.read(line)
    return reader.passes


class _Reader:
    """`parse`'s state, line by line."""

    def __init__(self, cookies: Mapping[int, str]) -> None:
        self.cookies = cookies
        self.passes: list[dict[str, Any]] = []
        self.step: dict[str, Any] | None = None
        self.datapath: int | None = None
        self.resumed: str | None = None

    def read(self, line: str) -> None:
        resumed = _RESUME.search(line)
        if resumed:
            self.resumed = resumed.group(1).removeprefix("ct_state=")
        elif line.startswith("Flow: "):
            self.passes.append({"ct_state": self.resumed, "flow": line[6:], "steps": [],
                                "datapath_actions": ""})  # fmt: skip
            self.resumed, self.step = None, None
        elif not self.passes:
            return
        elif line.startswith("Datapath actions: "):
            self.passes[-1]["datapath_actions"] = line.split(": ", 1)[1].strip()
            self.step = None
        elif line.startswith(("Final flow:", "Megaflow:")):
            self.step = None
        elif (m := _STEP.match(line) or _NO_MATCH.match(line)) is not None:
            self._table(m)
        elif self.step is not None and line.strip():
            action = line.strip()
            self.step["actions"].append(action)
            moved = _METADATA_SET.search(action)
            if moved:
                self.datapath = int(moved.group(1), 0)

    def _table(self, m: re.Match[str]) -> None:
        """A table the packet was looked up in (`_STEP` or `_NO_MATCH`)."""
        matched = m.re is _STEP
        match = (m.group(3) or "") if matched else None
        found = _METADATA_MATCH.search(match or "")
        if found:
            self.datapath = int(found.group(1), 0)
        priority = int(m.group(4)) if matched else None
        flow_cookie = m.group(5) if matched else None
        self.step = _step(int(m.group(2)), match, priority, flow_cookie, self.datapath,
                          self.cookies)  # fmt: skip
        self.step["depth"] = len(m.group(1)) // 4
        self.passes[-1]["steps"].append(self.step)


def _step(table: int, match: str | None, priority: int | None, flow_cookie: str | None,
          datapath: int | None, cookies: Mapping[int, str]) -> dict[str, Any]:  # fmt: skip
    kind = "router" if datapath is not None and datapath >= ROUTER_KEYS[0] else "switch"
    where = at_table(table, kind)
    value = int(flow_cookie, 16) if flow_cookie else 0
    source = None
    if value >> 32 and value & 0xFFFF == MARK:
        source = cookies.get(value >> 32, "")
    category = category_of(value) if value & 0xFFFF == MARK else Category.NONE
    return {
        "table": table,
        "stage": where.name if where is not None else None,
        "pipeline": where.pipeline if isinstance(where, Stage) else None,
        "datapath": datapath,
        "priority": priority,
        "match": match,
        "cookie": flow_cookie,
        "source": source,
        "category": category.label if category is not Category.NONE else None,
        "actions": [],
    }


# ---- where the packet went -----------------------------------------------------------

_TUNNEL = re.compile(r"set\(tunnel\((.*)\)\)")
_NAT_SOURCE = re.compile(r"nat\(src=([0-9.]+)")


def verdict(passes: Sequence[Mapping[str, Any]], dp_ports: Mapping[int, ScratchPort],
            endpoints: Mapping[str, str],
            bindings: Mapping[tuple[int, int], str]) -> dict[str, Any]:  # fmt: skip
    """Where the packet went, from each pass's datapath actions: `delivered` (the logical
    ports whose VIF it left by), `uplink` (out of a gateway's uplink; `uplink_source` the
    address SNAT or a floating IP gave it, None if none did), `tunneled` (to which node,
    for which datapath and port: `flood` for a switch's flood group), and `outcome` —
    `delivered`, `tunneled`, `uplink`, several of them joined by `+`, or `dropped`;
    `ended_at` is the last step of the last pass (where a dropped packet was dropped).

    Args:
        passes: `parse`'s passes.
        dp_ports: datapath port number -> the scratch port it is.
        endpoints: tunnel endpoint IP -> its node.
        bindings: (datapath key, port key) -> logical port.
    """
    delivered: list[str] = []
    uplink = False
    tunneled: list[dict[str, Any]] = []
    translated = None
    for p in passes:
        for nat in _NAT_SOURCE.finditer(p["datapath_actions"]):
            translated = nat.group(1)
        for port, tunnel in _outputs(p["datapath_actions"], dp_ports):
            if port.role == "tunnel" and tunnel is not None:
                tunneled.append({**_tunnel_of(tunnel, endpoints, bindings), "via": port.name})
            elif port.role == "uplink":
                uplink = True
            elif port.port:
                delivered.append(port.port)
    outcomes = [name for name, went in (("delivered", delivered), ("tunneled", tunneled),
                                        ("uplink", uplink)) if went]  # fmt: skip
    last = passes[-1]["steps"][-1] if passes and passes[-1]["steps"] else None
    return {
        "outcome": "+".join(outcomes) or "dropped",
        "delivered": sorted(set(delivered)),
        "uplink": uplink,
        "uplink_source": translated if uplink else None,
        "tunneled": tunneled,
        "ended_at": last,
    }


def _outputs(actions: str, dp_ports: Mapping[int, ScratchPort]
             ) -> Iterator[tuple[ScratchPort, str | None]]:  # fmt: skip
    """Each port `actions` (datapath actions) output to, with the tunnel set before it
    (the inside of `tunnel(...)`; None if none): those inside a `clone(...)` too, each
    with the tunnel set in that clone."""
    tunnel: str | None = None
    for action in _top_level(actions):
        m = _TUNNEL.fullmatch(action)
        if m:
            tunnel = m.group(1)
        elif action.startswith("clone(") and action.endswith(")"):
            yield from _outputs(action[len("clone(") : -1], dp_ports)
        elif action.isdigit() and int(action) in dp_ports:
            yield dp_ports[int(action)], tunnel


def _top_level(actions: str) -> list[str]:
    """Datapath actions split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(actions):
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(actions[start:i])
            start = i + 1
    parts.append(actions[start:])
    return [p.strip() for p in parts if p.strip()]


def _tunnel_of(spec: str, endpoints: Mapping[str, str],
               bindings: Mapping[tuple[int, int], str]) -> dict[str, Any]:  # fmt: skip
    """A `tunnel(...)` datapath action's destination: node, datapath, logical port."""
    ip = re.search(r"(?:^|,)dst=([0-9.]+)", spec)
    vni = re.search(r"tun_id=(0x[0-9a-f]+|\d+)", spec)
    option = re.search(r"geneve\(\{class=0x102,type=0x80,len=4,(0x[0-9a-f]+)", spec)
    dst = ip.group(1) if ip else ""
    dp = int(vni.group(1), 0) if vni else None
    out: dict[str, Any] = {"node": endpoints.get(dst, ""), "ip": dst, "datapath": dp,
                           "port": None}  # fmt: skip
    if option is not None and dp is not None:
        key = TUN_OUTPORT.of(int(option.group(1), 16))
        out["port"] = "flood" if key == FLOOD_KEY else bindings.get((dp, key), f"key {key}")
    return out
