"""The physical controller's decisions, apart from its I/O (faucet's split: the managers
decide and return what to do, the app sends it).

`Localizer` takes in what the controller reads — the universal database's changes
(`universal`), what each node's OVSDB says (`node`, as `NodeFacts`), which nodes are live
and which this controller computes — and gives out each node's desired state: the parts
of its OpenFlow table (`desired_parts`, `loom_physical.images`), its tunnel ports
(`tunnel_specs`), its conntrack zones (`zones`, `loom_physical.zones`), its VIFs' QoS
(`qos`), its next hops' ARP probes (`probes`). It runs the physical rules on the engine
(an in-memory program: no daemon) and translates the universal flows once each; it opens
no connection and writes nothing, so it is tested without daemons
(physical-controller/tests/test_core.py) and the benchmark uses it as its from-scratch
baseline.

Feeding: the universal tables the rules read are input relations keyed by uuid
(`loom_common.engine_inputs`, `loom_physical.inputs`), fed update by update; what nodes
say is fed by node (`loom_common.group_feed`: each time a node changed, its rows anew,
only the difference reaching the engine); zones as they are given and released.

    core = Localizer(rules.load())
    core.universal(replica_changes)
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 20}))
    core.set_computed({"hv1"})
    while core.compute() and core.feeds_back():
        ...  # follow core.needed_datapaths(), feed the flows read
    flows = core.flows("hv1")
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loom_common.engine_inputs import Change, feed
from loom_common.group_feed import GroupFeed
from loom_common.ovsdb.codec import omap
from loom_ddlog import Program
from loom_ovs.flows import Flow, Key
from loom_ovs.tunnels import TunnelSpec
from loom_physical.images import Images, PartKey, node_parts, to_row
from loom_physical.inputs import COLUMNS, opt, universal_tables
from loom_physical.translate import datapath_match, tier_cookie
from loom_physical.zones import NodeZones

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

FLOWS = "Flow"
"""The universal replica's name for `Universal_Flow` rows (`UniversalReplica`)."""
BY_NODE = {"Tunnel": "from_node", "Node_Endpoint": "node"}
"""Universal tables indexed by node, and the column naming it."""
BINDING_READ = tuple(COLUMNS["Port_Binding"])
"""The `Port_Binding` columns the rules read: all but the `chassis` and `up` that the
controllers write (the chassis reaches the rules as `VifChassis`: `_feed_chassis`)."""

Delta = dict[str, list[tuple[int, tuple[Any, ...]]]]
INPUTS = ("Datapath", "Port_Binding", "Node_Endpoint", "Gateway_Assignment", "Replication_Set",
          "Node", "Iface", "FlowTunnel", "TunnelPort", "Zone", "Live", "Uplink", "Neighbour",
          "Bfd", "VifChassis")  # fmt: skip
"""The physical rules' input relations (`rules/physical/inputs.dl`, `universal.dl`)."""
PLACEMENTS = (("Bound", "bound"), ("Looks", "looks"), ("HoverboardDatapath", "hoverboard"))
"""The rules' outputs of what parts a node takes beside its datapaths, and the `NodeView`
sets they fill."""


@dataclass(frozen=True)
class NodeFacts:
    """What a node's OVSDB says that the rules read."""

    vifs: Mapping[str, int] = field(default_factory=dict)
    """iface-id -> ofport, the VIFs on br-int that have one."""
    tunnels: Mapping[str, int] = field(default_factory=dict)
    """Loom's tunnel port name -> ofport, those that have one."""
    uplinks: tuple[int, ...] = ()
    """The ofports of its uplinks (a gateway node's ports to the physical network)."""
    neighbours: Mapping[str, str] = field(default_factory=dict)
    """Its static next hops: IPv4 address -> MAC."""


@dataclass
class NodeView:
    """What the core holds of one node."""

    facts: NodeFacts
    zones: NodeZones
    datapaths: set[int] = field(default_factory=set)
    """The datapaths it has (`NodeDatapath`): their parts are in its table."""
    bound: set[str] = field(default_factory=set)
    """The ports bound on it (`Bound`): their parts are in its table."""
    looks: set[str] = field(default_factory=set)
    """The ports whose lookups it takes (`Looks`: in switches programmed by Hoverboards)."""
    hoverboard: set[int] = field(default_factory=set)
    """The switches it is a Hoverboard of (`HoverboardDatapath`): every port's lookups."""
    located: set[str] = field(default_factory=set)
    """The logical ports whose VIF is on it (`Located`)."""
    probes: set[tuple[Any, ...]] = field(default_factory=set)
    """The ARP requests it sends for its L3 services' next hops (`ArpProbe`)."""
    learned: set[Key] = field(default_factory=set)
    """The keys of the flows its datapath writes itself (`Learned`: `learn` actions)."""


@dataclass
class Changed:
    """What a computation changed that the controller acts on (taken with `take_changed`)."""

    ports: set[str] = field(default_factory=set)
    """Logical ports whose location, binding or QoS changed (their status is looked at)."""
    located: set[str] = field(default_factory=set)
    """Nodes where a port was located or unlocated (pushed first; QoS looked at)."""
    qos: set[str] = field(default_factory=set)
    """Nodes whose VIFs' QoS may have changed."""
    probes: set[str] = field(default_factory=set)
    """Nodes whose ARP probes changed (sent at once)."""
    reconfigure: set[str] = field(default_factory=set)
    """Nodes whose tunnel ports may have to change."""
    placed: set[str] = field(default_factory=set)
    """Nodes whose datapaths or bound ports changed: the parts of their tables."""
    zoned: set[str] = field(default_factory=set)
    """Nodes whose zones were given, released or adopted (a record may be due)."""
    status: bool = False
    """Something of the bindings, the generation or the gateways' active nodes changed (a
    report is due)."""


class Localizer:
    """Universal flows and node facts -> each node's desired state (module docstring)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.images = Images()
        """Every datapath's, port's and node's part of the nodes' tables."""
        self.tables = universal_tables()
        self.nodes: dict[str, NodeView] = {}
        self.rows: dict[str, dict[str, Mapping[str, Any]]] = {t: {} for t in BY_NODE}
        """`Tunnel` and `Node_Endpoint` rows by uuid (for the nodes' tunnel ports)."""
        self.bindings: dict[str, Mapping[str, Any]] = {}
        """Logical port -> its Port_Binding row."""
        self.generation = 0
        """`Universal_Global.generation` as last read."""
        self.transactions = 0
        self._feed = GroupFeed()
        self._pending: list[Change] = []
        """Universal rows changed since they were fed."""
        self._flow_rows: dict[str, Mapping[str, Any] | None] = {}
        """The Universal_Flow rows changed since they were placed, as read (None: deleted);
        once placed, `images` keeps them (translated, texts packed)."""
        self._by_node: dict[str, dict[str, set[str]]] = {t: {} for t in BY_NODE}
        """Table -> node -> its rows' uuids."""
        self._row_node: dict[str, str] = {}
        self._binding_port: dict[str, str] = {}
        """Port_Binding uuid -> its logical port."""
        self.binding_uuids: dict[str, str] = {}
        """Logical port -> its Port_Binding row's uuid (do not modify)."""
        self._chassis_ports: dict[str, set[str]] = {}
        """Node -> the ports whose Port_Binding row names it as chassis."""
        self._vif_ports: dict[str, str] = {}
        """VIF id -> its logical port (to give a new VIF's port its zone beforehand)."""
        self._vif_node: dict[str, str] = {}
        """VIF id -> the node it was last seen on."""
        self._new_bindings: set[str] = set()
        """Ports whose binding changed since the last computation (zones beforehand)."""
        self._computed: set[str] = set()
        self._computed_given: frozenset[str] | None = None
        """The set `set_computed` was last given, if a frozenset (given again: unchanged)."""
        self._masters: AbstractSet[str] | None = None
        """The nodes this controller masters (`set_masters`); None: every node."""
        self._live: set[str] = set()
        """The nodes given as live or with BFD verdicts (`set_node_liveness`)."""
        self._node_dps: dict[int, set[str]] = {}
        """Datapath -> the nodes that need it (`NodeDatapath`)."""
        self.datapaths_version = 0
        """Changes when the datapaths some node needs may have changed (`needed_datapaths`
        is then asked again: it is a set of every datapath, 7,000 at NVP's scale)."""
        self._with_qos: set[str] = set()
        self._where: dict[str, set[str]] = {}
        """Logical port -> the nodes its VIF is on (`Located`; two while it moves)."""
        self._changed = Changed()
        self._dirty: set[str] = set()
        """Nodes whose facts, tunnels or computing changed since their rows were fed (a
        computation feeds those only)."""
        self._new_vifs: set[str] = set()
        """Nodes whose VIFs may be new to the rules (connected, their VIFs changed, or
        computed here since the last computation): their ports are given zones beforehand
        (`_speculate_zones`), not every dirty node's (a tunnel port's number, a zone
        record: every node at a cold start's end)."""
        self._zoned: set[str] = set()
        """Nodes whose zones may have changes to feed (given, released, adopted)."""
        self._speculated: set[str] = set()
        """Nodes given zones beforehand since the last computation (`release_unasked`)."""
        self.zone_rounds = 0
        """Engine rounds run again for zones the rules asked for (not given beforehand)."""
        self.active_gateways: dict[str, str] = {}
        """Gateway service (config uuid) -> the node it is active on (`ActiveGateway`; do
        not modify)."""

    # ---- inputs ----

    def universal(self, changes: Iterable[Change]) -> None:
        """Take in universal DB changes (the replica's, `UniversalReplica.poll`)."""
        for table, uuid, row in changes:
            if table == FLOWS:
                self._flow_rows[uuid] = row
                continue
            if table == "Port_Binding":
                if self._binding_read(uuid, row):
                    self._pending.append((table, uuid, row))
                    self._bind(uuid, row)
                else:
                    assert row is not None  # (a deletion is read)
                    self._placed(uuid, row)
                continue
            if table in self.tables:
                self._pending.append((table, uuid, row))
            if table in BY_NODE:
                self._index(table, uuid, row)
            elif table == "Universal_Global":
                self._changed.status = True
                if row is not None:
                    self.generation = int(row["generation"])

    def node(
        self, node: str, facts: NodeFacts, recorded_zones: Mapping[str, int] | None = None
    ) -> None:
        """Node `node` is connected and says `facts` (its zones record: `recorded_zones`,
        None if it did not change)."""
        view = self.nodes.get(node)
        if view is None:
            master = self._masters is None or node in self._masters
            view = self.nodes[node] = NodeView(facts, NodeZones(node, master=master))
            self._dirty.add(node)
            self._new_vifs.add(node)
            for vif in facts.vifs:
                self._vif_node[vif] = node
        elif view.facts != facts:
            if view.facts.vifs != facts.vifs:
                self._new_vifs.add(node)
            view.facts = facts
            self._dirty.add(node)
            for vif in facts.vifs:
                self._vif_node[vif] = node
        if recorded_zones is not None:
            view.zones.adopt(recorded_zones)
            self._zoned.add(node)

    def carry_zones(self, node: str, old: Localizer) -> None:
        """Keep node `node`'s zones as `old` (a core whose engine failed) gave them."""
        if node in old.nodes and node in self.nodes:
            zones = old.nodes[node].zones
            zones.changes = [(1, row) for row in sorted(zones.rows())]
            zones.speculative = set()
            zones.waiting = set()  # (the new engine's `NeedZone` asks again)
            self.nodes[node].zones = zones
            self._zoned.add(node)

    def node_gone(self, node: str) -> None:
        """Node `node` disconnected: its rows leave the engine."""
        view = self.nodes.pop(node, None)
        self._dirty.discard(node)
        self._new_vifs.discard(node)
        self._zoned.discard(node)
        self._speculated.discard(node)  # (given zones by a computation that fed nothing)
        if view is None:
            return
        self._feed.drop(("node", node))
        self._feed.drop(("zones", node))
        for dp in view.datapaths:
            unindex(self._node_dps, dp, node)
        self.datapaths_version += bool(view.datapaths)

    def set_computed(self, nodes: AbstractSet[str]) -> None:
        """The nodes this controller computes flows for (masters and standbys). A caller
        that gives the same set again unchanged (`frozenset`) costs nothing: the
        controller gives its ownership's set at every pass, 3,000 nodes at NVP's scale."""
        if nodes is self._computed_given:
            return
        self._dirty |= (nodes ^ self._computed) & self.nodes.keys()
        self._new_vifs |= (nodes - self._computed) & self.nodes.keys()
        self._computed = set(nodes)
        self._computed_given = nodes if isinstance(nodes, frozenset) else None

    def set_masters(self, nodes: AbstractSet[str]) -> None:
        """The nodes this controller masters: it gives their zones; of the other nodes it
        computes, it takes the zones their masters record (`NodeZones`). The same set
        object given again costs nothing (the controller's is kept while its view of the
        cluster is)."""
        if nodes is self._masters:
            return
        before, self._masters = self._masters, nodes
        for node, view in self.nodes.items():
            master = node in nodes
            if before is None or (node in before) != master:
                view.zones.set_master(master)
                if view.zones.changes:
                    self._zoned.add(node)

    def set_liveness(self, live: set[str], bfd: set[tuple[str, str, bool]]) -> None:
        """The nodes connected to some controller, and their BFD verdicts (`liveness`); every
        other node is not live."""
        verdicts: dict[str, set[tuple[str, str, bool]]] = {}
        for row in bfd:
            verdicts.setdefault(row[0], set()).add(row)
        for node in self._live - live - verdicts.keys():
            self.set_node_liveness(node, False, ())
        for node in live | verdicts.keys():
            self.set_node_liveness(node, node in live, verdicts.get(node, ()))

    def set_node_liveness(
        self, node: str, live: bool, bfd: Iterable[tuple[str, str, bool]]
    ) -> None:
        """Node `node` is live (connected to some controller) or not, and its BFD verdicts
        are `bfd` (`node_liveness`): the controller says so of the nodes whose status or
        connection changed, at the cost of those (not of every node, at every pass that
        sees a status written)."""
        rows: dict[str, set[tuple[Any, ...]]] = {
            "Live": {(node,)} if live else set(),
            "Bfd": set(bfd),
        }
        if live or rows["Bfd"]:
            self._live.add(node)
            self._feed.replace(("live", node), rows)
        elif node in self._live:
            self._live.discard(node)
            self._feed.drop(("live", node))

    # ---- computing ----

    def compute(self) -> bool:
        """One engine transaction of what changed; True if it changed anything."""
        self._place_flows()
        self._speculate_zones()
        self._changed.zoned |= self._zoned
        for node in sorted(self._zoned):
            for weight, row in self.nodes[node].zones.take_changes():
                (self._feed.add if weight > 0 else self._feed.discard)(("zones", node), "Zone", row)
        self._zoned = set()
        for node in sorted(self._dirty):
            self._feed.replace(("node", node), self._node_rows(node, self.nodes[node]))
        self._dirty = set()
        if not self._pending and not self._feed.pending():
            return False
        txn = self.program.transaction()
        fed = self._feed.flush(txn)
        fed += feed(txn, self.tables, self._pending)
        self._pending = []
        if not fed:
            txn.rollback()
            return False
        delta = txn.commit()
        self.transactions += 1
        self._fold(delta)
        for node in self._speculated:
            self.nodes[node].zones.release_unasked()
        self._zoned |= self._speculated
        self._changed.zoned |= self._zoned
        self._speculated = set()
        return True

    def feeds_back(self) -> bool:
        """The last computation asks for another round before a push: zones to give (flows
        wait for them), universal rows to feed (a newly needed datapath's), or a port's
        `VifChassis` row to feed again (`_feed_chassis`)."""
        return (bool(self._pending or self._flow_rows) or self._feed.pending()
                or self._zones_given())  # fmt: skip

    def needed_datapaths(self) -> set[int]:
        """The datapaths whose universal flows some node computed here needs (and 0, what
        every switch shares)."""
        return set(self._node_dps) | {0}

    def take_changed(self) -> Changed:
        """What changed since the last call (see `Changed`)."""
        changed, self._changed = self._changed, Changed()
        return changed

    # ---- a node's desired state ----

    def desired_parts(self, node: str) -> set[PartKey]:
        """The parts of node `node`'s table as the rules have it now."""
        view = self.nodes.get(node)
        if view is None:
            return set()
        return node_parts(node, view.datapaths, view.bound, view.looks, view.hoverboard)

    def flows(self, node: str) -> list[Flow]:
        """Node `node`'s desired table, sorted."""
        return sorted(self.images.flows(self.desired_parts(node)))

    def tunnel_specs(self, node: str) -> list[TunnelSpec]:
        """The tunnel ports node `node` needs: one flow-based port per encapsulation it has
        an endpoint for, and a per-peer port for each `Tunnel` row from it (BFD)."""
        endpoints = self._node_rows_of("Node_Endpoint", node)
        specs = [TunnelSpec.flow_based(e) for e in sorted({r["encap"] for r in endpoints})]
        for row in self._node_rows_of("Tunnel", node):
            specs.append(TunnelSpec(row["to_node"], row["encap"], row["remote_ip"],
                                    bool(row["bfd"])))  # fmt: skip
        return specs

    def qos(self, node: str) -> dict[str, dict[str, int]]:
        """VIF id -> its port's QoS rates, for the ports located on node `node`."""
        view = self.nodes.get(node)
        wanted: dict[str, dict[str, int]] = {}
        if view is None:
            return wanted
        for port in view.located & self._with_qos:
            row = self.bindings[port]
            if vif := opt(row["vif_id"]):
                wanted[vif] = {k: int(v) for k, v in omap(row["qos"]).items()}
        return wanted

    def zones(self, node: str) -> NodeZones:
        """Node `node`'s zones (the controller records them on the node)."""
        return self.nodes[node].zones

    def located(self, node: str) -> set[str]:
        """The logical ports whose VIF is on node `node` (do not modify)."""
        view = self.nodes.get(node)
        return view.located if view is not None else set()

    def bound_to(self, nodes: Iterable[str]) -> set[str]:
        """The ports whose binding names one of `nodes` as its chassis."""
        return set().union(*(self._chassis_ports.get(node, ()) for node in nodes))

    def where(self, port: str) -> set[str]:
        """The nodes logical port `port`'s VIF is on (do not modify)."""
        return self._where.get(port, set())

    def learned(self, node: str) -> set[Key]:
        """The keys of the flows node `node`'s datapath writes itself (`learn` actions): a
        reconciliation leaves them (do not modify)."""
        view = self.nodes.get(node)
        return view.learned if view is not None else set()

    def probes(self, node: str) -> set[tuple[Any, ...]]:
        """The ARP requests node `node` sends for its next hops (do not modify)."""
        view = self.nodes.get(node)
        return view.probes if view is not None else set()

    def has_pending(self) -> bool:
        """Something taken in is not computed yet."""
        return bool(self._pending or self._flow_rows or self._dirty or self._feed.pending())

    def engine_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every input row the engine holds, by relation (a from-scratch engine is fed
        these: the benchmark's baseline)."""
        return {name: self.program.dump(name) for name in INPUTS}

    # ---- inside ----

    def _node_rows(self, node: str, view: NodeView) -> dict[str, set[tuple[Any, ...]]]:
        """The engine rows of node `node`'s facts (its neighbours whether computed here or
        not: a hypervisor's router needs its gateway's next hop wherever it is mastered)."""
        facts = view.facts
        rows: dict[str, set[tuple[Any, ...]]] = {
            "Neighbour": {(node, ip, mac) for ip, mac in facts.neighbours.items()}
        }
        if node not in self._computed:
            return rows
        rows["Node"] = {(node,)}
        rows["Iface"] = {(node, vif, ofport) for vif, ofport in facts.vifs.items()}
        rows["Uplink"] = {(node, of) for of in facts.uplinks[:1]}
        tunnel_ports, flow_tunnels = set(), set()
        for spec in self.tunnel_specs(node):
            # A flow-based port's number is the one it asks for until the node says
            # otherwise (`TunnelSpec.ofport_request`).
            ofport = facts.tunnels.get(spec.port_name, spec.ofport_request)
            if ofport is None:
                continue
            if spec.peer:
                tunnel_ports.add((node, spec.peer, spec.encap, ofport))
            else:
                flow_tunnels.add((node, spec.encap, ofport))
        rows["TunnelPort"], rows["FlowTunnel"] = tunnel_ports, flow_tunnels
        return rows

    def _node_rows_of(self, table: str, node: str) -> list[Mapping[str, Any]]:
        rows = self.rows[table]
        return [rows[u] for u in sorted(self._by_node[table].get(node, ())) if u in rows]

    def _index(self, table: str, uuid: str, row: Mapping[str, Any] | None) -> None:
        """Keep a `Tunnel` or `Node_Endpoint` row by its node; its node's (old and new)
        tunnel ports follow."""
        index = self._by_node[table]
        touched = set()
        if (old := self._row_node.pop(uuid, None)) is not None:
            index.get(old, set()).discard(uuid)
            touched.add(old)
        if row is None:
            self.rows[table].pop(uuid, None)
        else:
            self.rows[table][uuid] = row
            node = str(row[BY_NODE[table]])
            index.setdefault(node, set()).add(uuid)
            self._row_node[uuid] = node
            touched.add(node)
        self._dirty |= touched & self.nodes.keys()
        self._changed.reconfigure |= touched

    def _binding_read(self, uuid: str, row: Mapping[str, Any] | None) -> bool:
        """Whether `Port_Binding` row `uuid`'s change is one the rules read (a change of
        its `chassis` or `up` alone is not: the controllers write those for every VIF, and
        a cold start's 63,000 coming back would be fed for nothing)."""
        port = self._binding_port.get(uuid)
        old = self.bindings.get(port) if port is not None else None
        return old is None or row is None or any(old[c] != row[c] for c in BINDING_READ)

    def _placed(self, uuid: str, row: Mapping[str, Any]) -> None:
        """`Port_Binding` row `uuid` changed its `chassis` or `up` alone (`_binding_read`):
        what `_bind` would do of it, and no more (a cold start's 63,000 chassis coming
        back)."""
        self._changed.status = True
        port = self._binding_port[uuid]
        old = self.bindings[port]
        self.bindings[port], self.binding_uuids[port] = row, uuid
        if (was := opt(old["chassis"])) != (chassis := opt(row["chassis"])):
            unindex(self._chassis_ports, was, port)
            self._chassis_ports.setdefault(chassis, set()).add(port)
        self._feed_chassis(port)
        self._changed.ports.add(port)

    def _bind(self, uuid: str, row: Mapping[str, Any] | None) -> None:
        """Keep the bindings' indexes (by port, by VIF, with QoS) of a `Port_Binding` row."""
        self._changed.status = True
        port = self._binding_port.pop(uuid, None)
        old = None
        if port is not None:
            if self.binding_uuids.get(port) == uuid:
                del self.binding_uuids[port]
            old = self.bindings.pop(port, None)
            self._with_qos.discard(port)
            if old is not None and (chassis := opt(old["chassis"])) is not None:
                unindex(self._chassis_ports, chassis, port)
            if old is not None and self._vif_ports.get(opt(old["vif_id"])) == port:
                del self._vif_ports[opt(old["vif_id"])]
        if row is not None:
            port = str(row["logical_port"])
            self._binding_port[uuid] = port
            self.binding_uuids[port] = uuid
            self.bindings[port] = row
            if (chassis := opt(row["chassis"])) is not None:
                self._chassis_ports.setdefault(str(chassis), set()).add(port)
            if vif := opt(row["vif_id"]):
                self._vif_ports[vif] = port
            if omap(row["qos"]):
                self._with_qos.add(port)
            if old is None or any(old[c] != row[c] for c in ("vif_id", "type")):
                self._new_bindings.add(port)
        if port is not None:
            self._feed_chassis(port)
            self._changed.ports.add(port)
            if old is None or row is None or old["qos"] != row["qos"]:
                self._changed.qos.update(n for n in self.where(port) if n in self.nodes)

    def _feed_chassis(self, port: str) -> None:
        """Feed port `port`'s `VifChassis` row: its binding's chassis, or "" when that names
        the node the rules place it on anyway (`PortAt`: a VIF no chassis names, on the
        least node it is seen on here). So the chassis a controller writes for a VIF it
        found, coming back, changes nothing the engine has (a cold start's 63,000 would cost
        engine time for no change of output); `_fold_nodes` feeds a port again when where it
        is seen changes, and `PortAt` is what the chassis as written would give."""
        row = self.bindings.get(port)
        if row is None or row["type"] != "vif" or self.binding_uuids.get(port) is None:
            self._feed.drop(("chassis", port))
            return
        chassis = opt(row["chassis"]) or ""
        if chassis and chassis == min(self._where.get(port, ()), default=None):
            chassis = ""
        at = (port, int(row["datapath"]), int(row["port_key"]), chassis)
        self._feed.replace(("chassis", port), {"VifChassis": {at}})

    def _place_flows(self) -> None:
        """Put the universal flows of the rows that changed into their parts (translated
        once, whatever the nodes that have them)."""
        rows, self._flow_rows = self._flow_rows, {}
        for uuid, row in rows.items():
            self.images.set_row(uuid, to_row(row) if row is not None else None)

    def _speculate_zones(self) -> None:
        """Give the ports of new VIFs (a VIF plugged, or the port of a VIF that waited for
        it) their zones before the rules ask (`NeedZone`): so they go in the same
        transaction as the VIF or the port, and its flows need no second round."""
        found: set[tuple[str, str]] = set()
        new_vifs, self._new_vifs = self._new_vifs & self._computed, set()
        for node in new_vifs:
            view = self.nodes.get(node)
            if view is not None:
                for vif in view.facts.vifs:
                    if (port := self._vif_ports.get(vif)) is not None:
                        found.add((node, port))
        for port in self._new_bindings:
            row = self.bindings.get(port)
            where = self._vif_node.get(opt(row["vif_id"])) if row is not None else None
            if where is not None and where in self._computed and where in self.nodes:
                found.add((where, port))
        self._new_bindings = set()
        for node, port in found:
            view = self.nodes[node]
            row = self.bindings.get(port)
            if row is not None and opt(row["vif_id"]) in view.facts.vifs:
                view.zones.speculate(port)
                self._speculated.add(node)
                self._zoned.add(node)

    def _fold(self, delta: Delta) -> None:
        """Fold an engine delta into the parts, the nodes' datapaths and ports, their
        zones and probes."""
        self._fold_parts(delta)
        self._fold_placement(delta)
        self._fold_nodes(delta)
        self._fold_gateways(delta)

    def _fold_parts(self, delta: Delta) -> None:
        """The nodes' own flows and the datapaths' `DpFlow`s into their parts; the values
        of the universal flows' identifiers."""
        images = self.images
        # (weights are counts of derivations where the engine counts them, `rules.COUNTED`)
        for weight, (node, table, priority, match, actions) in delta.get("NodeFlow", []):
            flow = Flow(table, priority, match, actions, tier_cookie(table))
            for _ in range(abs(weight)):
                (images.add if weight > 0 else images.remove)(("node", node), flow)
        for kind, relation in (("dp", "DpFlow"), ("lookups", "HoverboardFlow")):
            for weight, (dp, table, priority, match, actions) in delta.get(relation, []):
                head = datapath_match(dp)
                flow = Flow(table, priority, f"{head},{match}" if match else head, actions,
                            tier_cookie(table))  # fmt: skip
                for _ in range(abs(weight)):
                    (images.add if weight > 0 else images.remove)((kind, dp), flow)
        for weight, (ident, text) in sorted(delta.get("GlobalBind", []), key=lambda d: d[0]):
            images.set_binding(ident, text if weight > 0 else None)

    def _fold_placement(self, delta: Delta) -> None:
        """Which datapaths (`NodeDatapath`), ports (`Bound`), ports' lookups (`Looks`) and
        Hoverboard switches (`HoverboardDatapath`) each node has; which ports' rows are
        lookups (`Lookups`)."""
        self.datapaths_version += bool(delta.get("NodeDatapath"))
        for weight, (node, dp) in delta.get("NodeDatapath", []):
            if weight > 0:
                self._node_dps.setdefault(dp, set()).add(node)
            else:
                unindex(self._node_dps, dp, node)
            if (view := self.nodes.get(node)) is not None:
                (view.datapaths.add if weight > 0 else view.datapaths.discard)(dp)
            self._changed.placed.add(node)
        for relation, attribute in PLACEMENTS:
            for weight, (node, what) in delta.get(relation, []):
                if (view := self.nodes.get(node)) is not None:
                    held = getattr(view, attribute)
                    (held.add if weight > 0 else held.discard)(what)
                self._changed.placed.add(node)
        # (deletions first: a port that moves between switches is in one at a time)
        for weight, (dp, port) in sorted(delta.get("Lookups", []), key=lambda d: d[0]):
            self.images.set_lookups(dp, port, weight > 0)

    def _fold_nodes(self, delta: Delta) -> None:
        """Where VIFs are (`Located`), the ARP probes, the zones the rules ask for."""
        moved = set()
        for weight, (port, node) in delta.get("Located", []):
            self._changed.ports.add(port)
            self._changed.status = True
            moved.add(port)
            if weight > 0:
                self._where.setdefault(port, set()).add(node)
            else:
                unindex(self._where, port, node)
            if (view := self.nodes.get(node)) is not None:
                self._changed.located.add(node)
                self._changed.qos.add(node)
                (view.located.add if weight > 0 else view.located.discard)(port)
        for port in moved:  # (another round if that changes its row: `feeds_back`)
            self._feed_chassis(port)
        for weight, row in delta.get("ArpProbe", []):
            if (view := self.nodes.get(row[0])) is not None:
                (view.probes.add if weight > 0 else view.probes.discard)(row)
                self._changed.probes.add(row[0])
        for weight, (node, owner) in delta.get("NeedZone", []):
            if (view := self.nodes.get(node)) is not None:
                if weight > 0:
                    view.zones.asked(owner)
                else:
                    view.zones.release(owner)
                self._zoned.add(node)
        if self._zones_given():
            self.zone_rounds += 1

    def _fold_gateways(self, delta: Delta) -> None:
        """Where each gateway service is active (`ActiveGateway`), the flows the nodes
        learn (`Learned`)."""
        for weight, (node, table, priority, match) in delta.get("Learned", []):
            if (view := self.nodes.get(node)) is not None:
                key = (int(table), int(priority), str(match))
                (view.learned.add if weight > 0 else view.learned.discard)(key)
        for weight, (gw, node) in sorted(delta.get("ActiveGateway", []), key=lambda d: d[0]):
            # (deletions first: a service that moves leaves its old node, then takes its new)
            if weight > 0:
                self.active_gateways[gw] = node
            elif self.active_gateways.get(gw) == node:
                del self.active_gateways[gw]
            self._changed.status = True

    def _zones_given(self) -> bool:
        """Zones were given that the engine has not been fed (flows wait for them)."""
        return any(w > 0 for n in self._zoned for w, _ in self.nodes[n].zones.changes)


def unindex(index: dict[K, set[V]], key: K, value: V) -> None:
    """Take `value` out of `index[key]`, and the key out once its set is empty."""
    values = index.get(key)
    if values is not None:
        values.discard(value)
        if not values:
            del index[key]


def liveness(
    transport_nodes: Iterable[Mapping[str, Any]], connected: Iterable[str]
) -> tuple[set[str], set[tuple[str, str, bool]]]:
    """The live nodes — connected to this controller (`connected`) or, as the config DB's
    `Transport_Node.status` says, to another — and the `Bfd` rows: the connected nodes'
    BFD verdicts as their masters publish them there (`bfd:<peer>` = up/down), so that
    every controller judges a gateway alike."""
    live = set(connected)
    bfd: set[tuple[str, str, bool]] = set()
    for row in transport_nodes:
        node, up, verdicts = node_liveness(row)
        if up:
            live.add(node)
            bfd |= verdicts
    return live, bfd


def node_liveness(row: Mapping[str, Any]) -> tuple[str, bool, set[tuple[str, str, bool]]]:
    """One `Transport_Node` row's part of `liveness`: its node, whether its status says
    connected, and its `Bfd` rows."""
    node = str(row["system_id"])
    status = omap(row["status"])
    if status.get("connected") != "true":
        return node, False, set()
    verdicts = {(node, key[len("bfd:") :], value == "up")
                for key, value in status.items() if key.startswith("bfd:")}  # fmt: skip
    return node, True, verdicts


@dataclass(frozen=True)
class TableSignals:
    """What says whether the OpenFlow table a node's switch holds is still the one pushed
    to it: the table lives in ovs-vswitchd, and a restarted ovs-vswitchd has an empty one
    while the node's OVSDB (ovsdb-server kept running) stays connected and shows nothing."""

    connection: int
    """The kept channel's connections made so far (`Channel.connections`)."""
    open: bool
    """The channel's connection is there (the switch has not closed it)."""
    bridge: str | None
    """br-int's row uuid in the node's OVSDB (None: no br-int)."""
    restoring: bool
    """`Open_vSwitch other_config:flow-restore-wait` is true: ovs-vswitchd waits for its
    flows to be put back (as `ovs-ctl restart` does) and forwards nothing meanwhile."""


def table_unknown(installed: TableSignals | None, now: TableSignals) -> str | None:
    """Why the table last installed on a node (`installed`: the signals when its whole
    table was last pushed; None: never) is not known to be the switch's any more, in words,
    or None while it is. The node realizes nothing until it is pushed whole again."""
    if now.restoring:
        return "ovs-vswitchd waits for its flows to be restored (flow-restore-wait)"
    if installed is None:
        return None
    if not now.open:
        return "its OpenFlow connection closed (ovs-vswitchd stopped or restarted)"
    if now.connection != installed.connection:
        return "its OpenFlow connection was made again (ovs-vswitchd restarted?)"
    if now.bridge != installed.bridge:
        return "br-int was made again"
    return None
