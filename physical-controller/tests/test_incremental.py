"""Incremental equals recompute for the physical rules (issue 20, item 5): pure, no daemon.

One long-lived `Localizer` (the controller's core: the physical rules on the engine, its
feeding of universal rows and node facts, its folding of each delta into the parts of the
nodes' tables, its zones) takes a random world of nodes and universal rows, then random
changes of it, a few at a time, as the controller's passes give them: nodes connect, go
and change hands, VIFs are plugged, unplugged and moved, ports are bound elsewhere,
endpoints, tunnels, datapaths, gateways, service nodes, BFD verdicts, recorded zones and
universal flows come, change and go. Each pass computes until nothing feeds back, reads the
universal flows of the datapaths the nodes need, records the zones given on the nodes and
pushes each node what changed of its parts (`Images.mods`).

After every pass a fresh `Localizer` on a fresh engine takes the same world at once. Both
engines must hold the same inputs and outputs (each the sum of its commits' deltas, each
row once), the same parts, and give every node the same datapaths, ports, zones, probes,
QoS and table; and each node's table after its pushes must be that table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loom_common.engine_inputs import Change as RowChange
from loom_ddlog import Delta, Program
from loom_ovs.manager import TunnelSpec
from loom_ovs.openflow import Flow, Key, Mod
from loom_physical.core import FLOWS, Localizer, NodeFacts, liveness
from loom_physical.images import Images, PartKey
from loom_physical.rules import main_file

Row = tuple[Any, ...]
Change = tuple[Any, ...]
"""One change of the world: its kind (a key of `CHANGES`), then its arguments."""

OUTPUTS = ("NodeFlow", "DpFlow", "NodeDatapath", "Bound", "Located", "NeedZone", "GlobalBind",
           "ArpProbe")  # fmt: skip
MAX_ROUNDS = 8
"""Computations per pass before the pass is said not to settle (the controller's bound)."""

NAMES = ("hv1", "hv2", "gw1", "gw2")
ENCAPS = ("geneve", "vxlan", "stt")
ROUTER = 0x800001
DATAPATHS = (1, 2, ROUTER)
CONFIG_IDS = {1: "sw1", 2: "sw2", ROUTER: "r1"}
PORTS = ("p1", "p2", "p3", "r1p", "r2p", "gp", "bp")
VIFS = ("vif-p1", "vif-p2", "vif-p3", "vif-gp")
"""The VIFs nodes may have: a port's VIF id is `vif-<port>` (one port per VIF)."""
SERVICES = ("g1", "g2")
NEXT_HOPS = ("10.0.0.1", "10.0.0.3")
OWNERS = (*PORTS, *CONFIG_IDS.values())
"""What zones are for: ports (their VIFs') and routers (their config ids)."""
TABLES = ("Datapath", "Node_Endpoint", "Port_Binding", "Gateway_Assignment", "Replication_Set",
          "Tunnel")  # fmt: skip
"""The universal tables the world has rows of, besides the flows (`FLOWS`)."""

UNIVERSAL_FLOWS = (
    "ingress\tls_in_acl\t0\t\tresubmit(,@next)",
    "ingress\tls_in_l2_lkup\t50\tdl_dst=00:00:00:00:00:01\tset_field:0x1->reg15,resubmit(,@egress)",
    "ingress\tls_in_l2_lkup\t100\tdl_dst=01:00:00:00:00:00/01:00:00:00:00:00\t"
    "set_field:0xffff->reg15,resubmit(,@flood)",
    "egress\tls_out_deliver\t50\treg15=0x1\tresubmit(,@deliver)",
    "ingress\tlr_in_dnat\t0\t\tresubmit(,@zone),resubmit(,@next)",
    "ingress\tlr_in_arp_resolve\t100\treg15=0xfffe\tset_field:${nexthop_mac:g1}->eth_dst,"
    "resubmit(,@next)",
    "ingress\tlr_in_arp_resolve\t90\treg15=0xfffd\tset_field:${nexthop_mac:g2}->eth_dst,"
    "resubmit(,@next)",
    "egress\tls_out_deliver\t0\t\tresubmit(,@next)",  # malformed: @next after the last stage
)
"""A datapath's universal flows to choose from (one waits for each gateway's next hop)."""
LOCAL_FLOWS = (
    "ingress\tls_in_port_sec_l2\t50\treg14={port}\tresubmit(,@next)",
    "egress\tls_out_port_sec_l2\t50\treg15={port}\tresubmit(,@next)",
    "ingress\tls_in_port_sec_ip\t90\treg14={port},ip\tdrop",
)
"""A port's local flows to choose from, matching its own key (so parts share no key)."""


def _opt(value: str) -> Any:
    """An optional OVSDB string column: the atom, or the empty set."""
    return value if value else ["set", []]


def _map(items: Iterable[tuple[Any, Any]]) -> list[Any]:
    return ["map", sorted(items)]


def _tunnel_port(peer: str, encap: str) -> str:
    """The name of the node's tunnel port for `encap` to `peer` ("": its flow-based one)."""
    spec = TunnelSpec(peer, encap, "192.0.2.1") if peer else TunnelSpec.flow_based(encap)
    return spec.port_name


@dataclass
class Facts:
    """What one node's OVSDB says (`NodeFacts`, as it changes)."""

    vifs: dict[str, int] = field(default_factory=dict)
    tunnels: dict[str, int] = field(default_factory=dict)
    uplinks: list[int] = field(default_factory=list)
    neighbours: dict[str, str] = field(default_factory=dict)

    def frozen(self) -> NodeFacts:
        """As the controller hands them to its core."""
        return NodeFacts(dict(self.vifs), dict(self.tunnels), tuple(self.uplinks),
                         dict(self.neighbours))  # fmt: skip


@dataclass
class World:
    """What the controller reads: its nodes, the config DB's liveness, the universal DB."""

    connected: set[str] = field(default_factory=set)
    """The nodes connected to this controller."""
    computed: set[str] = field(default_factory=set)
    """The nodes it computes (masters and standbys: connected or not)."""
    live: set[str] = field(default_factory=set)
    """Nodes the config DB says are connected (to another controller)."""
    facts: dict[str, Facts] = field(default_factory=lambda: {n: Facts() for n in NAMES})
    bfd: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(node, peer) -> forwarding, as the node's master publishes it."""
    recorded: dict[str, dict[str, int]] = field(default_factory=lambda: {n: {} for n in NAMES})
    """Node -> the zones it records (owner -> zone)."""
    universal: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {t: {} for t in (*TABLES, FLOWS)}
    )
    """Universal table -> uuid -> row, as the controller's replica holds it (OVSDB JSON;
    `FLOWS`: the `Universal_Flow` rows, `flows` and `local_flows` as sets)."""

    def transport_nodes(self) -> list[dict[str, Any]]:
        """The config DB's `Transport_Node` rows: connected, with their BFD verdicts."""
        rows = []
        for node in sorted(self.live | self.connected):
            status = [("connected", "true")]
            status += [(f"bfd:{p}", "up" if f else "down")
                       for (n, p), f in self.bfd.items() if n == node]  # fmt: skip
            rows.append({"system_id": node, "status": _map(status)})
        return rows

    def visible_flows(self, needed: set[int]) -> dict[str, dict[str, Any]]:
        """The `Universal_Flow` rows the replica holds: those of the datapaths needed."""
        return {uuid: row for uuid, row in self.universal[FLOWS].items()
                if row["datapath"] in needed}  # fmt: skip


# ---- the changes ----


def _set(table: dict[Any, Any], key: Any, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _binding_row(port: str, spec: tuple[Any, ...]) -> dict[str, Any]:
    dp, key, ptype, has_vif, peer, chassis, gateway, vlan, dscp = spec
    return {"logical_port": port, "datapath": dp, "port_key": key, "type": ptype,
            "vif_id": _opt(f"vif-{port}" if has_vif else ""), "peer": _opt(peer),
            "chassis": _opt(chassis),
            "gateway_service": _opt(gateway), "vlan": ["set", []] if vlan is None else vlan,
            "qos": _map([] if dscp is None else [("dscp", dscp), ("max_rate", 1000)]),
            "up": False}  # fmt: skip


def _gateway_row(service: str, spec: tuple[Any, ...]) -> dict[str, Any]:
    kind, next_hop, nodes = spec
    l3 = kind == "l3"
    return {"service": service, "kind": kind, "uplink_next_hop": _opt(next_hop if l3 else ""),
            "uplink_mac": _opt(f"0a:00:00:00:00:{SERVICES.index(service) + 1:02x}" if l3 else ""),
            "uplink_ip": _opt("10.0.0.2/24" if l3 else ""),
            "nodes": _map(nodes.items())}  # fmt: skip


def _flow_row(spec: tuple[Any, ...]) -> dict[str, Any]:
    dp, source, cookie, flows, local = spec
    port = f"{PORTS.index(source) + 1:#x}" if source in PORTS else "0x0"
    return {"datapath": dp, "source": source, "cookie": cookie, "flows": set(flows),
            "local_flows": {LOCAL_FLOWS[i].format(port=port) for i in local}}  # fmt: skip


def _member(which: str) -> Any:
    def change(w: World, name: str, present: bool) -> None:
        group: set[str] = getattr(w, which)
        (group.add if present else group.discard)(name)

    return change


def _endpoint(w: World, node: str, encap: str, ip: str | None) -> None:
    row = None if ip is None else {"node": node, "encap": encap, "ip": ip}
    _set(w.universal["Node_Endpoint"], f"ep-{node}-{encap}", row)


def _tunnel(w: World, node: str, peer: str, encap: str | None) -> None:
    """The universal `Tunnel` row from `node` to `peer` (BFD watches it)."""
    row = None if encap is None else {"from_node": node, "to_node": peer, "encap": encap,
                                      "remote_ip": "192.0.2.1", "bfd": True}  # fmt: skip
    _set(w.universal["Tunnel"], f"tu-{node}-{peer}", row)


def _datapath(w: World, key: int, encap: str | None) -> None:
    kind = "router" if key & 0x800000 else "switch"
    row = None if encap is None else {"key": key, "kind": kind, "config_id": CONFIG_IDS[key],
                                      "encap": _opt(encap)}  # fmt: skip
    _set(w.universal["Datapath"], f"dp-{key}", row)


def _binding(w: World, port: str, spec: tuple[Any, ...] | None) -> None:
    row = None if spec is None else _binding_row(port, spec)
    _set(w.universal["Port_Binding"], f"pb-{port}", row)


def _chassis(w: World, port: str, chassis: str) -> None:
    """Port `port` is bound elsewhere (its `chassis` written by another node's master)."""
    row = w.universal["Port_Binding"].get(f"pb-{port}")
    if row is not None:
        w.universal["Port_Binding"][f"pb-{port}"] = {**row, "chassis": _opt(chassis)}


def _migrate(w: World, port: str, node: str, ofport: int) -> None:
    """Port `port`'s VIF moves to `node` (unplugged everywhere, plugged there, bound there)."""
    row = w.universal["Port_Binding"].get(f"pb-{port}")
    vif = row["vif_id"] if row is not None else None
    if isinstance(vif, str):  # (an empty optional column is ["set", []])
        for facts in w.facts.values():
            facts.vifs.pop(vif, None)
        w.facts[node].vifs[vif] = ofport
        _chassis(w, port, node)


def _gateway(w: World, service: str, spec: tuple[Any, ...] | None) -> None:
    row = None if spec is None else _gateway_row(service, spec)
    _set(w.universal["Gateway_Assignment"], f"ga-{service}", row)


def _replication(w: World, dp: int, spec: tuple[str, dict[int, str]] | None) -> None:
    row = None if spec is None else {"datapath": dp, "mode": spec[0],
                                     "service_nodes": _map(spec[1].items())}  # fmt: skip
    _set(w.universal["Replication_Set"], f"rs-{dp}", row)


def _flow(w: World, uuid: str, spec: tuple[Any, ...] | None) -> None:
    _set(w.universal[FLOWS], uuid, None if spec is None else _flow_row(spec))


CHANGES: dict[str, Any] = {
    "connect": _member("connected"),
    "compute": _member("computed"),
    "live": _member("live"),
    "iface": lambda w, n, i, of: _set(w.facts[n].vifs, i, of),
    "tunnel_port": lambda w, n, p, e, of: _set(w.facts[n].tunnels, _tunnel_port(p, e), of),
    "uplink": lambda w, n, of: setattr(w.facts[n], "uplinks", [] if of is None else [of]),
    "neighbour": lambda w, n, ip, mac: _set(w.facts[n].neighbours, ip, mac),
    "bfd": lambda w, n, p, f: _set(w.bfd, (n, p), f),
    "recorded_zone": lambda w, n, o, z: w.recorded[n].__setitem__(o, z),  # another master's
    "migrate": _migrate,
    "endpoint": _endpoint,
    "tunnel": _tunnel,
    "datapath": _datapath,
    "binding": _binding,
    "chassis": _chassis,
    "gateway": _gateway,
    "replication": _replication,
    "flow": _flow,
}


def apply(world: World, change: Change) -> None:
    """Make `change` to `world`."""
    CHANGES[change[0]](world, *change[1:])


def base_world() -> World:
    """Two hypervisors and a gateway of ours, a gateway elsewhere; two switches joined by a
    router with an L3 uplink, an L2 gateway port, a service node, and flows everywhere."""
    world = World()
    changes: list[Change] = [
        *(("connect", n, True) for n in ("hv1", "hv2", "gw1")),
        *(("compute", n, True) for n in ("hv1", "hv2", "gw1")),
        ("live", "gw2", True),
        *(("endpoint", n, "geneve", f"192.168.0.{i}") for i, n in enumerate(NAMES, 1)),
        ("endpoint", "hv2", "vxlan", "192.168.0.2"),
        *(("tunnel_port", n, "", "geneve", 20) for n in NAMES),
        ("tunnel_port", "hv2", "", "vxlan", 21),
        ("tunnel", "hv1", "gw1", "geneve"), ("tunnel_port", "hv1", "gw1", "geneve", 30),
        ("tunnel", "gw1", "hv1", "geneve"), ("tunnel_port", "gw1", "hv1", "geneve", 30),
        ("tunnel", "hv2", "gw1", "geneve"), ("tunnel_port", "hv2", "gw1", "geneve", 31),
        ("uplink", "gw1", 1),
        ("bfd", "hv1", "gw1", True),
        ("bfd", "gw1", "hv1", True),
        ("datapath", 1, ""), ("datapath", 2, "vxlan"), ("datapath", ROUTER, ""),
        ("binding", "p1", (1, 1, "vif", True, "", "hv1", "", None, 46)),
        ("binding", "p2", (1, 2, "vif", True, "", "hv2", "", None, None)),
        ("binding", "p3", (2, 1, "vif", True, "", "hv1", "", None, None)),
        ("binding", "r1p", (ROUTER, 1, "router", False, "r2p", "", "", None, None)),
        ("binding", "r2p", (1, 3, "router", False, "r1p", "", "", None, None)),
        ("binding", "gp", (ROUTER, 0xFFFE, "l3-gateway", False, "", "", "g1", None, None)),
        ("binding", "bp", (2, 2, "l2-gateway", False, "", "", "g2", 100, None)),
        ("iface", "hv1", "vif-p1", 5), ("iface", "hv2", "vif-p2", 5), ("iface", "hv1", "vif-p3", 6),
        ("gateway", "g1", ("l3", "10.0.0.1", {1: "gw1", 2: "gw2"})),
        ("gateway", "g2", ("l2", "", {1: "gw1"})),
        ("replication", 2, ("service-node", {1: "gw1"})),
        ("flow", "u1", (0, "sw", 1, UNIVERSAL_FLOWS[:3], ())),
        ("flow", "u2", (1, "p1", 2, UNIVERSAL_FLOWS[3:4], (0, 1))),
        ("flow", "u3", (ROUTER, "r1", 3, UNIVERSAL_FLOWS[4:6], ())),
        ("flow", "u4", (2, "p3", 4, (), (0, 2))),
    ]  # fmt: skip
    for change in changes:
        apply(world, change)
    return world


def _kind(name: str, *args: st.SearchStrategy[Any]) -> st.SearchStrategy[Change]:
    return st.tuples(st.just(name), *args)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


names = st.sampled_from(NAMES)
ofports = st.integers(5, 8)
weights = st.dictionaries(st.integers(1, 3), names, max_size=3)
macs = st.sampled_from(("0a:00:00:00:01:01", "0a:00:00:00:01:02"))
ips = st.sampled_from(("192.168.0.1", "192.168.0.5", "fd00::1"))
binding_specs = st.tuples(
    st.sampled_from(DATAPATHS), st.integers(1, 3),
    st.sampled_from(("vif", "router", "l2-gateway", "l3-gateway", "none")),
    st.booleans(), st.sampled_from(("", *PORTS)), st.sampled_from(("", *NAMES)),
    st.sampled_from(("", *SERVICES)), _maybe(st.sampled_from((0, 100))),
    _maybe(st.sampled_from((10, 46))),
)  # fmt: skip
gateway_specs = st.tuples(st.sampled_from(("l2", "l3")), st.sampled_from(("", *NEXT_HOPS)),
                          weights)  # fmt: skip
replication_specs = st.tuples(st.sampled_from(("service-node", "source")), weights)
flow_specs = st.tuples(
    st.sampled_from((0, *DATAPATHS)), st.sampled_from(("sw", *PORTS)), st.integers(1, 3),
    st.lists(st.sampled_from(UNIVERSAL_FLOWS), max_size=3, unique=True).map(tuple),
    st.lists(st.integers(0, len(LOCAL_FLOWS) - 1), max_size=2, unique=True).map(tuple),
)  # fmt: skip
CHANGE: st.SearchStrategy[Change] = st.one_of(
    _kind("connect", names, st.booleans()),
    _kind("compute", names, st.booleans()),
    _kind("live", names, st.booleans()),
    _kind("iface", names, st.sampled_from(VIFS), _maybe(ofports)),
    _kind("tunnel_port", names, st.sampled_from(("", *NAMES)), st.sampled_from(ENCAPS),
          _maybe(st.integers(20, 21))),
    _kind("uplink", names, _maybe(st.integers(1, 2))),
    _kind("neighbour", st.sampled_from(("gw1", "gw2", "hv1")), st.sampled_from(NEXT_HOPS),
          _maybe(macs)),
    _kind("bfd", names, names, _maybe(st.booleans())),
    _kind("recorded_zone", names, st.sampled_from(OWNERS), st.integers(1, 4)),
    _kind("migrate", st.sampled_from(PORTS), names, ofports),
    _kind("endpoint", names, st.sampled_from(ENCAPS), _maybe(ips)),
    _kind("tunnel", names, names, _maybe(st.sampled_from(ENCAPS))),
    _kind("datapath", st.sampled_from(DATAPATHS), _maybe(st.sampled_from(("", *ENCAPS)))),
    _kind("binding", st.sampled_from(PORTS), _maybe(binding_specs)),
    _kind("chassis", st.sampled_from(PORTS), st.sampled_from(("", *NAMES))),
    _kind("gateway", st.sampled_from(SERVICES), _maybe(gateway_specs)),
    _kind("replication", st.sampled_from((1, 2)), _maybe(replication_specs)),
    _kind("flow", st.sampled_from(("u1", "u2", "u3", "u4", "u5")), _maybe(flow_specs)),
)  # fmt: skip


# ---- the controller's side ----


class RecordingLocalizer(Localizer):
    """A `Localizer` that keeps each delta it folds (to be summed against the dumps)."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.deltas: list[Delta] = []

    def _fold(self, delta: Delta) -> None:
        self.deltas.append(delta)
        super()._fold(delta)


def _diff(
    table: str, fed: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]]
) -> list[RowChange]:
    """The replica's changes from rows `fed` to rows `now` (by uuid)."""
    return [(table, uuid, now.get(uuid)) for uuid in sorted(fed.keys() | now.keys())
            if fed.get(uuid) != now.get(uuid)]  # fmt: skip


def push(table: dict[Key, Flow], mods: list[Mod]) -> None:
    """What a switch does with a bundle (add replaces, delete removes)."""
    for op, flow in mods:
        if op == "delete":
            table.pop(flow.key, None)
        else:
            table[flow.key] = flow


class Shell:
    """The controller's shell around one `Localizer`, without its I/O: its passes as
    `PhysicalController._step` runs them, the world read whole and what changed handed in."""

    def __init__(self) -> None:
        self.program = Program.load([main_file()], internal=False)
        self.core = RecordingLocalizer(self.program)
        self.rows: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in (*TABLES, FLOWS)}
        """The universal rows handed in, by table."""
        self.nodes: dict[str, tuple[NodeFacts, dict[str, int]]] = {}
        """Connected node -> its facts and recorded zones as last handed in."""
        self.switches: dict[str, dict[Key, Flow]] = {}
        """Computed connected node -> the table it holds after its pushes."""
        self.installed: dict[str, set[PartKey]] = {}

    def run_pass(self, world: World) -> None:
        """Read what changed of `world`, compute until nothing feeds back (reading the flows
        of the datapaths needed), record the zones given, push."""
        core = self.core
        for table in TABLES:
            core.universal(_diff(table, self.rows[table], world.universal[table]))
            self.rows[table] = dict(world.universal[table])
        self._follow_datapaths(world)  # (the flows of the datapaths needed so far changed)
        for node in [n for n in self.nodes if n not in world.connected]:
            core.node_gone(node)
            del self.nodes[node]
        for node in sorted(world.connected):
            facts, recorded = world.facts[node].frozen(), dict(world.recorded[node])
            if self.nodes.get(node) != (facts, recorded):
                was = self.nodes.get(node)
                core.node(node, facts, recorded if was is None or was[1] != recorded else None)
                self.nodes[node] = (facts, recorded)
        core.set_computed(set(world.computed))
        core.set_liveness(*liveness(world.transport_nodes(), world.connected))
        for _ in range(MAX_ROUNDS):
            changed = core.compute()
            self._follow_datapaths(world)
            if not changed or not core.feeds_back():
                break
        else:
            raise AssertionError(f"no settling in {MAX_ROUNDS} computations")
        self._record_zones(world)
        self._push(world)

    def _follow_datapaths(self, world: World) -> None:
        """Read the universal flows of the datapaths the nodes need now."""
        visible = world.visible_flows(self.core.needed_datapaths())
        self.core.universal(_diff(FLOWS, self.rows[FLOWS], visible))
        self.rows[FLOWS] = visible

    def _record_zones(self, world: World) -> None:
        """Each connected node records the zones given to it, forgets those taken back."""
        for node in self.nodes:
            given, released = self.core.zones(node).take_record()
            recorded = world.recorded[node]
            recorded.update(given)
            for owner in released:
                recorded.pop(owner, None)

    def _push(self, world: World) -> None:
        """Each computed connected node's push (a new one: its whole table), the settle."""
        ours = world.connected & world.computed
        for node in [n for n in self.switches if n not in ours]:
            del self.switches[node], self.installed[node]
        images = self.core.images
        for node in sorted(ours):
            desired = self.core.desired_parts(node)
            if node not in self.switches:
                self.switches[node] = {f.key: f for f in images.flows(desired)}
            else:
                push(self.switches[node], images.mods(self.installed[node], desired))
            self.installed[node] = desired
        images.settle()


def from_scratch(world: World) -> Shell:
    """A new controller (a fresh engine) that reads `world` at once."""
    fresh = Shell()
    fresh.run_pass(world)
    return fresh


def parts(images: Images) -> dict[PartKey, dict[Key, list[tuple[int, str]]]]:
    """Every non-empty part: key -> every (cookie, actions) wanted for it."""
    tables = {key: part.table for key, part in images.parts.items() if len(part)}
    return {key: {flow.key: table.candidates(flow.key) for flow in table}
            for key, table in tables.items()}  # fmt: skip


def summed(deltas: list[Delta], relation: str) -> Counter[Row]:
    """Relation `relation` as the sum of `deltas`."""
    rows: Counter[Row] = Counter()
    for delta in deltas:
        for weight, row in delta.get(relation, []):
            rows[row] += weight
    return +rows


def zones_fed(shell: Shell) -> set[Row]:
    """The `Zone` rows the engine holds and keeps (not those taken back, still to leave)."""
    pending: Counter[Row] = Counter()
    for node in shell.nodes:
        for weight, row in shell.core.zones(node).changes:
            pending[row] += weight
    return set(shell.core.engine_rows()["Zone"]) - {row for row, n in pending.items() if n < 0}


def check(run: Shell, world: World) -> None:
    """The long-lived controller holds and gives what a fresh one does."""
    program = run.program
    for relation in OUTPUTS:
        counted = summed(run.core.deltas, relation)
        assert all(n == 1 for n in counted.values()), (relation, counted)
        assert set(counted) == set(program.dump(relation)), f"{relation}: deltas summed != dumped"
    recorded = {n: dict(z) for n, z in world.recorded.items()}
    fresh = from_scratch(world)
    assert world.recorded == recorded, "a fresh controller gave zones the nodes do not record"
    core, other = run.core, fresh.core
    # The engines hold the same inputs, but for the zones taken back in this pass: they
    # leave the engine with the next transaction (nothing uses them, `Localizer.feeds_back`).
    rows, fresh_rows = core.engine_rows(), other.engine_rows()
    assert zones_fed(run) == zones_fed(fresh)
    del rows["Zone"], fresh_rows["Zone"]
    assert rows == fresh_rows
    for relation in OUTPUTS:
        assert program.dump(relation) == fresh.program.dump(relation), relation
    assert core.images.bindings == other.images.bindings
    assert parts(core.images) == parts(other.images)
    assert core.needed_datapaths() == other.needed_datapaths()
    for port in PORTS:
        assert core.where(port) == other.where(port), port
        assert core.where(port) == {n for n in world.connected if port in core.located(n)}
    for node in world.connected:
        assert core.desired_parts(node) == other.desired_parts(node), node
        assert core.flows(node) == other.flows(node), node
        assert core.zones(node).zones == other.zones(node).zones, node
        assert core.located(node) == other.located(node), node
        assert core.probes(node) == other.probes(node), node
        assert core.qos(node) == other.qos(node), node
        assert core.tunnel_specs(node) == other.tunnel_specs(node), node
    assert run.switches == fresh.switches, "a node's table after its pushes"


def test_the_base_world_exercises_every_output() -> None:
    """The world the random changes start from gives every output relation rows, every
    kind of part flows, and a bound identifier (so the property below is not vacuous)."""
    world = base_world()
    run = Shell()
    run.run_pass(world)
    check(run, world)
    assert [r for r in OUTPUTS if not run.program.dump(r)] == []
    assert {key[0] for key in parts(run.core.images)} == {"dp", "port", "node"}
    assert run.core.images.bindings == {"nexthop_mac:g1": "00:00:00:00:00:00"}  # ARP learns it
    assert all(run.switches[n] for n in ("hv1", "hv2", "gw1"))
    assert world.recorded["hv1"], "zones given are recorded on the node"
    assert run.core.zones("hv1").zones == world.recorded["hv1"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(CHANGE, max_size=10),
    passes=st.lists(st.lists(CHANGE, min_size=1, max_size=3), min_size=1, max_size=8),
)
def test_incremental_equals_recompute(initial: list[Change], passes: list[list[Change]]) -> None:
    """From the base world changed by `initial`, each batch of `passes` is read by one pass
    of the long-lived controller; after each, it holds and gives what a fresh one does."""
    world = base_world()
    for change in initial:
        apply(world, change)
    run = Shell()
    run.run_pass(world)
    check(run, world)
    for batch in passes:
        for change in batch:
            apply(world, change)
        before = {r: run.program.dump(r) for r in OUTPUTS}
        run.run_pass(world)
        changed = [r for r in OUTPUTS if run.program.dump(r) != before[r]]
        for relation in changed:
            event(f"{relation} changed")
        if not changed:
            event("no output changed")
        check(run, world)
