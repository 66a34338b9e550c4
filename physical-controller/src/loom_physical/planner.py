"""When and what each transport node is sent: the physical controller's planner.

`loom_physical.core` (the `Localizer`) says what each node should hold; this module decides
*when* a node is written and *what* a push sends, in what order; the shell
(`loom_physical.controller`) reads the nodes and the databases and runs the plans
(`loom_physical.executor`). Like the core it opens nothing and reads no clock: the shell
passes `now`, what each node's OVSDB and OpenFlow say (`Reading`) and, clustered, the
assignment's fencing token; every decision is a function of those and is unit-tested in
process (physical-controller/tests/test_planner.py).

A node's life is one state machine (`Life`); what else it may need is a set of `Due`
flags:

    (connected, taken over, start over, a push failed,
     a part it holds changed while not pushed)  --------------------> UNSYNCED
    UNSYNCED --- its whole table pushed (reconciled) --------------> SYNCED
    SYNCED   --- changes pushed --------------------------------------> SYNCED
    UNSYNCED | SYNCED --- its table is not known to be its switch's
                          any more (channel ended, br-int made again,
                          flow-restore-wait: `core.table_unknown`) ---> LOST
    LOST     --- its whole table pushed (the switch answers) ---------> SYNCED
    LOST     --- a push failed -------------------------------------> LOST
    (any)    --- disconnected ----------------------------------------> forgotten

A node that is computed here but mastered elsewhere (a hot standby's) keeps its life and
is never planned: its master writes it. Regaining it makes it UNSYNCED (reconciled whole:
identical flows are left alone). A LOST node realizes nothing (its status says 0) until it
is SYNCED again.

A push's plan is a list of steps in the order correctness needs (`Plan`):

1. `ClaimNode` — the node's OVSDB fencing token, before any OVSDB write;
2. `Configure` — br-int and the tunnel ports;
   (no OpenFlow yet — the node does not say where, ovs-vswitchd waits for its flows to be
   restored, br-int not made yet for a whole push — : the plan ends here, `Plan.waiting`);
3. `ConfirmZones` — the answer to the last zone record;
4. `RecordZones` — new zones recorded before any flow that uses them;
5. `ClaimSwitch` — the bridge's OpenFlow master role, before any OpenFlow write;
6. `Reconcile` (the whole table: only the difference is sent, in one bundle) or `Change`
   (the changed keys, in one bundle);
7. `RecordZones` — zones released, after the flows that used them are gone;
8. `WriteQos` — the VIFs' rates; 9. `Probe` — ARP requests for next hops.

The executor runs the steps in order and stops at the first that fails; it returns an
`Outcome` that `Planner.settle` applies (on the shell's loop thread: the push threads
never touch the planner).

    planner = Planner(core)
    planner.connected("hv1")
    for plan in planner.plans(masters={"hv1"}, generation=7, now=now, read=reading,
                              token=None, first=False):
        outcome = executor.run(plan)
        planner.settle(plan, outcome, now=now)
    planner.end_pass()
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loom_ovs import packets
from loom_ovs.flows import Flow, Key, Mod
from loom_ovs.tunnels import TunnelSpec
from loom_physical.core import Changed, Localizer, TableSignals, table_unknown, unindex
from loom_physical.images import PartKey

log = logging.getLogger(__name__)

PROBE_INTERVAL = 30.0
"""Seconds between a node's ARP requests for its L3 services' next hops (learned ones are
kept fresh: a next hop's new MAC is learned from the next reply)."""
STT_MESSAGE = "the datapath cannot encapsulate STT: tunnels of type stt carry no traffic"


class Life(enum.Enum):
    """Where a node is in its life with this controller (the module docstring's machine)."""

    UNSYNCED = "unsynced"
    """Its next push reconciles its whole table."""
    SYNCED = "synced"
    """Its table is the last push's: changes go as changes."""
    LOST = "lost"
    """Its switch lost the table pushed: it realizes nothing until reconciled."""


class Due:
    """What a node may need besides its flows, since its last push: bits of `Node.due`
    (plain integers: a pass asks every node mastered, and `enum.Flag` operations cost
    microseconds each)."""

    NONE = 0
    CONFIG = 1
    """Its OVSDB rows or the tunnels it should have changed (br-int and tunnel ports)."""
    PLACED = 2
    """Its desired parts may differ from those it holds (its datapaths or ports changed)."""
    QOS = 4
    """Its ports' QoS may have changed since it was written."""
    PORTS = 8
    """A port was bound to it or unbound (it is pushed in a pass's first phase)."""


FRESH = Due.CONFIG | Due.PLACED | Due.QOS
"""What a node (re)connected needs."""
WAITING = Due.CONFIG | Due.QOS | Due.PLACED
"""What a node pushed may still wait for (`_still_due`)."""
SENDING = Due.CONFIG | Due.QOS
"""What makes a push due besides its flows, zones and probes (`_push_due`)."""


@dataclass
class Node:
    """What the planner knows of one connected node."""

    name: str
    life: Life = Life.UNSYNCED
    why: str = ""
    """Why its table is not known to be its switch's (`Life.LOST`; "" otherwise)."""
    due: int = FRESH
    """Its `Due` bits."""
    parts: set[PartKey] = field(default_factory=set)
    """The parts its table holds as of the last push (`images.Images.settle`)."""
    pushed: bool = False
    """Pushed in the current pass (it has the parts as they are now)."""
    realized: int = 0
    message: str = ""
    pushes: int = 0
    stt: bool = False
    """One of its tunnels is STT."""
    waiting: list[str] = field(default_factory=list)
    """Tunnel ports wanted that have no ofport (yet, or an error), in words."""
    record_out: bool = False
    """A zone record was sent and its answer not confirmed yet."""
    qos_written: dict[str, dict[str, int]] | None = None
    """The VIFs' rates as last written to the node (None: not yet)."""
    bfd: dict[str, bool] = field(default_factory=dict)
    """The node's BFD verdicts last seen (published in its status)."""
    probed_at: float | None = None
    """When its next hops were last probed (None: due)."""
    learned: set[Key] = field(default_factory=set)
    """The keys of the flows its datapath learns, as of its last push (one it no longer
    learns is deleted by the next)."""
    installed_as: TableSignals | None = None
    """Its switch's signals when its whole table was last pushed."""

    @property
    def synced(self) -> bool:
        """Its whole table has been pushed (and is known to be its switch's)."""
        return self.life is Life.SYNCED

    def reported(self) -> tuple[Any, ...]:
        """What its status report is made of (`status.NodeReport`)."""
        return (self.realized, self.message, tuple(sorted(self.bfd.items())), self.life,
                self.why)  # fmt: skip


@dataclass(frozen=True)
class Reading:
    """What a node's OVSDB session and OpenFlow channel say now (read by the shell)."""

    remote: str | None
    """Where its br-int takes OpenFlow (None: it does not say)."""
    restoring: bool
    """ovs-vswitchd waits for its flows to be restored (flow-restore-wait)."""
    bridge_created: bool
    """ovs-vswitchd made the br-int written."""
    tunnels: Mapping[str, tuple[str, int | None, str]]
    """Loom's tunnel ports: name -> (peer, ofport or None, error)."""
    signals: TableSignals


# ---- the steps of a plan ----


@dataclass(frozen=True)
class ClaimNode:
    """Record the fencing token on the node's OVSDB (`NodeSession.claim`)."""

    token: int


@dataclass(frozen=True)
class Configure:
    """Make br-int and the tunnel ports what `specs` say (`NodeSession.configure`)."""

    specs: tuple[TunnelSpec, ...]


@dataclass(frozen=True)
class ConfirmZones:
    """Wait for the node's answer to the zone record sent last."""


@dataclass(frozen=True)
class RecordZones:
    """Record `zones` (owner -> zone) on br-int and forget the `released` owners."""

    zones: Mapping[str, int]
    released: frozenset[str]


@dataclass(frozen=True)
class ClaimSwitch:
    """Claim br-int's OpenFlow master role with the token (`Channel.claim`)."""

    token: int


@dataclass(frozen=True)
class Reconcile:
    """Make the switch's table the flows of `parts` (`Switch.load`: only the difference is
    sent, in one bundle), leaving the learned flows of `keep`; map the Geneve option."""

    parts: frozenset[PartKey]
    keep: frozenset[Key]


@dataclass(frozen=True)
class Change:
    """Send `mods` and the parts `new` whole (`Switch.apply`: one bundle)."""

    mods: tuple[Mod, ...]
    new: tuple[PartKey, ...]


@dataclass(frozen=True)
class WriteQos:
    """Give the VIFs these rates (`NodeSession.configure_qos`)."""

    rates: Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Probe:
    """Send these frames (bytes, OpenFlow actions) as packet-outs."""

    frames: tuple[tuple[bytes, str], ...]


Step = (
    ClaimNode
    | Configure
    | ConfirmZones
    | RecordZones
    | ClaimSwitch
    | Reconcile
    | Change
    | WriteQos
    | Probe
)


@dataclass
class Plan:
    """One push to one node: its steps in order, and what settling it needs."""

    node: str
    generation: int
    remote: str | None
    steps: list[Step]
    desired: frozenset[PartKey] = frozenset()
    """The parts the node holds once the flows step is done."""
    learned: frozenset[Key] = frozenset()
    tunnels: Mapping[str, tuple[str, int | None, str]] = field(default_factory=dict)
    """The node's tunnel ports when planned (`Reading.tunnels`)."""
    waiting: str = ""
    """Why the plan stops before OpenFlow (the node's status says it)."""
    whole: bool = False

    def step(self, kind: type[Any]) -> Any:
        """The plan's step of `kind` (the first), or None."""
        return next((s for s in self.steps if isinstance(s, kind)), None)


@dataclass
class Outcome:
    """What running a plan did (the executor's answer)."""

    done: int = 0
    """Steps completed, in order."""
    error: Exception | None = None
    """What stopped it (None: every step done)."""
    skipped: bool = False
    """Not run: this controller no longer masters the node."""
    configured: bool = False
    """`Configure` wrote something."""
    sent: bool = False
    """Flows were sent."""
    record_out: bool = False
    """A zone record is sent and not confirmed."""
    channel_down: bool = False
    """After an error: the node's OpenFlow channel is not connected."""
    signals: TableSignals | None = None
    """The switch's signals after the flows step."""

    def reached(self, plan: Plan, kind: type[Any]) -> bool:
        """The plan's step of `kind` was done."""
        return any(isinstance(s, kind) for s in plan.steps[: self.done])


class Planner:
    """Every connected node's life and dues, the plans that serve them, the outcomes."""

    def __init__(self, core: Localizer) -> None:
        self.core = core
        self.nodes: dict[str, Node] = {}
        self.due: set[str] = set()
        """Nodes that may have something to push: flagged since their last push, or still
        waiting. A pass's second phase looks at these, the holders of the parts that
        changed and the nodes that probe, not at every node mastered."""
        self.first: set[str] = set()
        """Nodes where a port came or went (`Due.PORTS`): a pass's first phase."""
        self.probing: set[str] = set()
        """Nodes that send ARP probes (their next pushes look at them)."""
        self.holding: dict[PartKey, set[str]] = {}
        """Part -> the nodes that hold it (their `Node.parts`)."""
        self.pushed: list[Node] = []
        """The nodes pushed in this pass."""
        self.touched: set[str] = set()
        """Nodes pushed something, or whose message or realized generation changed, since
        the last status report (`take_touched`)."""
        self.marks: set[str] = set()
        """Nodes whose report may have changed since the last (`take_marks`)."""
        self.lost: set[str] = set()
        """The nodes in `Life.LOST`."""
        self.mastered: set[str] = set()
        """The nodes mastered after the last pass (one newly mastered is reconciled)."""
        self.report_due = False
        """Something a status report says changed (the shell clears it)."""
        self.recheck: set[str] = set()
        """Logical ports whose status the next report looks at (their node got its table)."""
        self.flow_counts: dict[str, int] = {}
        """Node -> flows in its table as of its last push (for the metrics)."""
        self.conflicts: dict[str, int] = {}
        """Node -> OpenFlow matches wanted with different actions (the last push)."""
        self.bulk_loaded = False
        """A whole table was pushed since the shell last cleared it."""
        self.idle: dict[int, set[str]] = {}
        """Generation -> masters that realized it with nothing to send (`take_idle`)."""
        self._idle_realized: tuple[int, frozenset[str]] | None = None
        self._looked: set[str] = set()
        """The nodes the last second phase looked at (`still_due`)."""

    # ---- the nodes' lives ----

    def connected(self, name: str) -> Node:
        """Node `name` connected (again: a new session, a new OpenFlow channel)."""
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = Node(name)
        else:
            node.due |= FRESH
            node.qos_written = None
            self._become(node, Life.LOST if node.life is Life.LOST else Life.UNSYNCED)
        self.marks.add(name)
        self.due.add(name)
        if self.core.probes(name):  # (a node back: its probes go again)
            self.probing.add(name)
        return node

    def gone(self, name: str) -> None:
        """Node `name` disconnected: forget it."""
        node = self.nodes.pop(name, None)
        if node is not None:
            self._hold(node, set())
        for nodes in (self.due, self.first, self.probing, self.lost):
            nodes.discard(name)

    def changed_db(self, name: str, bfd: Mapping[str, bool]) -> None:
        """Node `name`'s OVSDB changed: its configuration is looked at again."""
        node = self.nodes[name]
        node.due |= Due.CONFIG
        self.due.add(name)
        if dict(bfd) != node.bfd:
            node.bfd = dict(bfd)
            self.marks.add(name)
            self.report_due = True  # (its status publishes them)

    def take(self, changed: Changed) -> None:
        """What a computation changed (`Localizer.take_changed`): nodes to push first, QoS,
        probes, tunnel ports, parts."""
        for flag, names in (
            (Due.PORTS, changed.located),
            (Due.QOS, changed.qos),
            (Due.CONFIG, changed.reconfigure),
            (Due.PLACED, changed.placed),
        ):
            for name in names:
                if (node := self.nodes.get(name)) is not None:
                    node.due |= flag
        for name in changed.probes:
            if (node := self.nodes.get(name)) is not None:
                node.probed_at = None  # a new one goes at once
            if self.core.probes(name):
                self.probing.add(name)
            else:
                self.probing.discard(name)
        known = self.nodes.keys()
        self.first |= changed.located & known
        self.due |= (changed.located | changed.qos | changed.probes | changed.reconfigure
                     | changed.placed | changed.zoned) & known  # fmt: skip

    def mastered_now(self, masters: set[str]) -> None:
        """This pass masters `masters`: a node (re)gained is reconciled whole."""
        for name in masters - self.mastered:
            node = self.nodes[name]
            node.due |= Due.CONFIG
            if node.life is Life.SYNCED:
                self._become(node, Life.UNSYNCED)
            self.due.add(name)
        self.mastered = set(masters)

    def check_table(self, name: str, signals: TableSignals, *, ended: bool) -> bool:
        """Whether node `name`'s switch still holds its table, as `signals` say (`ended`:
        its channel ended); True if it is LOST now (it was not)."""
        node = self.nodes.get(name)
        if node is None or node.life is Life.LOST:
            return False
        if node.life is Life.UNSYNCED and not ended and not signals.restoring:
            return False  # (reconciled next anyway: a node back, taken over, a push failed)
        why = table_unknown(node.installed_as, signals)
        if why is None:
            return False
        self.lose(node, why)
        return True

    def lose(self, node: Node, why: str) -> None:
        """Node `node`'s table is not known any more (`why`): it realizes nothing and is
        reconciled as soon as its switch answers."""
        log.warning("node %s: %s: its table goes in again when its switch answers", node.name,
                    why, extra={"node": node.name})  # fmt: skip
        node.why = node.message = why
        self.marks.add(node.name)
        self._become(node, Life.LOST)
        self.due.add(node.name)
        self.touched.add(node.name)
        self.report_due = True

    def start_over(self) -> None:
        """A new core (after a failed pass): every node is reconciled, as after a connect."""
        self._idle_realized = None
        for name, node in self.nodes.items():
            self._hold(node, set())
            node.due |= FRESH
            if node.life is Life.SYNCED:
                self._become(node, Life.UNSYNCED)
            self.due.add(name)

    def lost_among(self, masters: set[str]) -> set[str]:
        """The nodes of `masters` whose switch lost its table."""
        return self.lost & masters

    # ---- planning ----

    def plans(self, masters: set[str], generation: int, now: float,
              read: Callable[[str], Reading], token: int | None, *,
              first: bool) -> list[Plan]:  # fmt: skip
        """The pushes of a pass's phase: with `first`, the nodes where a port was bound or
        unbound (the cloud waits for those ports' status, reported before the others are
        pushed), else the others that may have something to send. A node looked at with
        nothing to send realizes `generation` at once; with `first` False, so does every
        master not looked at (`_realize_idle`)."""
        changed = self.core.images.changed()
        if first:
            candidates, self.first = self.first & masters, self.first - masters
        else:
            candidates = (self.due | self.holders(changed) | self.probing) & masters
        plans = []
        for name in sorted(candidates):
            node = self.nodes[name]
            if first and not node.due & Due.PORTS:
                continue
            node.due &= ~Due.PORTS
            if self._push_due(node, changed, now):
                plans.append(self.plan(node, generation, now, read(name), token))
            elif node.realized != generation:
                self._report(node, realized=generation)
        if not first:
            self._realize_idle(masters, generation, candidates)
            self.due -= candidates
            self._looked = candidates
        return plans

    def plan(self, node: Node, generation: int, now: float, reading: Reading,
             token: int | None) -> Plan:  # fmt: skip
        """Node `node`'s push (its steps in the module docstring's order)."""
        name = node.name
        steps: list[Step] = []
        if token is not None:
            steps.append(ClaimNode(token))
        if node.due & Due.CONFIG:
            steps.append(Configure(tuple(self.core.tunnel_specs(name))))
        plan = Plan(name, generation, reading.remote, steps, tunnels=reading.tunnels)
        plan.waiting = _waiting(reading, whole=node.life is not Life.SYNCED)
        if plan.waiting:
            return plan
        if node.record_out:
            steps.append(ConfirmZones())
        zones = self.core.zones(name)
        if zones.unsaved:
            steps.append(_record(zones.take_record()))
        if token is not None:
            steps.append(ClaimSwitch(token))
        steps.append(self._flows(node, plan, reading))
        if zones.released:
            steps.append(_record(zones.take_record()))
        if node.due & Due.QOS:
            wanted = self.core.qos(name)
            if wanted != node.qos_written:
                steps.append(WriteQos(wanted))
        if self._probes_due(node, now):
            steps.append(Probe(self._probe_frames(name)))
        return plan

    def _flows(self, node: Node, plan: Plan, reading: Reading) -> Reconcile | Change:
        """The plan's flows step: the whole table if the node is not SYNCED (or its switch
        lost the table, its end not seen yet: closed meanwhile), else the changes."""
        if node.life is Life.SYNCED and (why := table_unknown(node.installed_as,
                                                              reading.signals)):  # fmt: skip
            self.lose(node, why)
        desired = self.core.desired_parts(node.name)
        learned = self.core.learned(node.name)
        plan.desired, plan.learned = frozenset(desired), frozenset(learned)
        if node.life is not Life.SYNCED:
            plan.whole = True
            return Reconcile(plan.desired, plan.learned)
        mods, new = self.core.images.changes(node.parts, desired, settled=not node.pushed)
        mods += [("delete", Flow(*key, "", 0)) for key in sorted(node.learned - learned)]
        return Change(tuple(mods), tuple(new))

    # ---- outcomes ----

    def settle(self, plan: Plan, outcome: Outcome, now: float) -> bool:
        """Apply what running `plan` did; True if the node is to be pushed again at once
        (its channel was connected again to send the changes: its table is not known, it
        is reconciled)."""
        node = self.nodes.get(plan.node)
        if node is None:
            return False
        before = node.reported()
        try:
            return self._settle(node, plan, outcome, now)
        finally:
            if node.reported() != before:
                self.marks.add(node.name)

    def _settle(self, node: Node, plan: Plan, outcome: Outcome, now: float) -> bool:
        zones = self.core.zones(node.name)
        for step in plan.steps[outcome.done :]:  # (taken at planning, never sent)
            if isinstance(step, RecordZones):
                zones.unsend(dict(step.zones), set(step.released))
        node.record_out = outcome.record_out
        if outcome.skipped:
            return False
        if outcome.error is not None:
            if isinstance(plan.steps[outcome.done], ConfirmZones):
                zones.record_lost()  # refused or lost: recorded again
            self._failed(node, outcome)
            return False
        if outcome.reached(plan, Configure):
            self._configured(node, plan.step(Configure), outcome.configured, plan)
        if plan.waiting:
            if node.message != plan.waiting:
                node.message, self.report_due = plan.waiting, True
            return False
        if self._flows_settled(node, plan, outcome):
            return True
        if plan.step(WriteQos) is not None:
            node.qos_written = dict(plan.step(WriteQos).rates)
        node.due &= ~Due.QOS
        if plan.step(Probe) is not None:
            node.probed_at = now
        node.pushes += 1
        self._realized(node, plan, outcome)
        return False

    def _realized(self, node: Node, plan: Plan, outcome: Outcome) -> None:
        """A push done: what the node realizes now, and what its status says."""
        message = STT_MESSAGE if node.stt else ""
        generation = plan.generation
        if node.waiting:
            message = "; ".join([*([message] if message else []), *node.waiting])
            generation = node.realized  # not realized while a tunnel is missing
        if node.record_out:
            generation = node.realized  # nor before its new zones are recorded
        if (message, generation) != (node.message, node.realized) or outcome.sent:
            self.report_due = True
            self.touched.add(node.name)
        node.message, node.realized = message, generation
        if outcome.sent:
            parts = self.core.images.parts
            self.conflicts[node.name] = sum(parts[k].conflict_count() for k in node.parts
                                            if k in parts)  # fmt: skip

    def _failed(self, node: Node, outcome: Outcome) -> None:
        """A push failed: the node is reconciled next time."""
        if outcome.channel_down and node.installed_as is not None:
            node.why = node.why or "its OpenFlow connection broke"
        message = f"{node.why}; {outcome.error}" if node.why else str(outcome.error)
        if message != node.message:  # (a switch restarting: said once, tried again)
            log.warning("node %s: %s", node.name, message, extra={"node": node.name})
        node.message = message
        self.report_due = True
        self._become(node, Life.LOST if node.why else Life.UNSYNCED)
        node.due |= Due.CONFIG
        self.due.add(node.name)

    def _configured(self, node: Node, step: Configure, wrote: bool, plan: Plan) -> None:
        """The `Configure` step ran: if it wrote, the node's answer (new ofports) comes in a
        later pass and asks for another look; else the tunnel ports without an ofport are
        what it waits for (their flows are missing: it realizes nothing meanwhile)."""
        if wrote:
            node.due &= ~Due.CONFIG
            return
        ports = plan.tunnels
        node.waiting = sorted(
            f"{s.port_name} to {s.peer}: {ports[s.port_name][2] or 'no ofport yet'}"
            for s in step.specs
            if s.port_name not in ports or not ports[s.port_name][1]
        )
        if not node.waiting:
            node.due &= ~Due.CONFIG
        node.stt = any(s.encap == "stt" for s in step.specs)

    def _flows_settled(self, node: Node, plan: Plan, outcome: Outcome) -> bool:
        """The flows step ran: the node holds `plan.desired`. True if it must be pushed
        again at once (see `settle`)."""
        if plan.whole:
            node.installed_as, node.why = outcome.signals, ""
            self._become(node, Life.SYNCED)
            self.bulk_loaded = True
            self.recheck |= self.core.located(node.name)  # their status waited for this
        elif (
            outcome.signals is not None
            and node.installed_as is not None
            and (outcome.signals.connection != node.installed_as.connection)
        ):  # connected again to send them: the switch's table is not known
            self.lose(node, "its OpenFlow connection was made again")
            return True
        node.learned = set(plan.learned)
        self._hold(node, set(plan.desired))
        self.flow_counts[node.name] = self.core.images.size(plan.desired)
        if not node.pushed:
            self.pushed.append(node)
        node.pushed = True
        node.due &= ~Due.PLACED
        return False

    def still_due(self) -> None:
        """After a second phase's pushes: the nodes it looked at that wait for something
        another push must finish stay due (those not looked at stay as they are)."""
        looked, self._looked = self._looked, set()
        self.due |= {n for n in looked if (node := self.nodes.get(n)) and _still_due(node)}

    def end_pass(self) -> None:
        """The pass's pushes are done: a node that holds a part that changed and was not
        pushed (its push failed, or it was not ours to push) is reconciled next time; then
        the parts' changes are forgotten (`Images.settle`)."""
        images = self.core.images
        for name in self.holders(images.changed()):
            node = self.nodes[name]
            if not node.pushed:
                if node.life is Life.SYNCED:
                    self._become(node, Life.UNSYNCED)
                self.due.add(name)
        pushed, self.pushed = self.pushed, []
        for node in pushed:
            node.pushed = False
        images.settle()

    # ---- questions ----

    def holders(self, parts: Iterable[PartKey]) -> set[str]:
        """The nodes that hold one of `parts` (as of their last push)."""
        return set().union(*(self.holding.get(key, ()) for key in parts))

    def flows_due(self, node: Node, changed: set[PartKey]) -> bool:
        """Node `node`'s table has changed since its last push: its parts (`Due.PLACED`), or
        one of them (`changed`: `Images.changed()`). (Its cost is its parts, not its flows.)"""
        if node.due & Due.PLACED:
            return True
        if node.pushed:  # in this pass: it has the parts as they are
            return False
        return not node.parts.isdisjoint(changed)

    def take_touched(self) -> set[str]:
        """The nodes touched since the last call (`touched`), once."""
        touched, self.touched = self.touched, set()
        return touched

    def take_marks(self) -> set[str]:
        """The nodes marked since the last call (`marks`), once."""
        marks, self.marks = self.marks, set()
        return marks

    # ---- inside ----

    def _push_due(self, node: Node, changed: set[PartKey], now: float) -> bool:
        """Node `node` has something to be sent."""
        zones = self.core.zones(node.name)
        return bool(node.due & SENDING or node.life is not Life.SYNCED
                    or self.flows_due(node, changed) or zones.unsaved or zones.released
                    or node.record_out or self._probes_due(node, now))  # fmt: skip

    def _probes_due(self, node: Node, now: float) -> bool:
        if not self.core.probes(node.name):
            return False
        return node.probed_at is None or now - node.probed_at >= PROBE_INTERVAL

    def _probe_frames(self, name: str) -> tuple[tuple[bytes, str], ...]:
        """ARP requests for the node's L3 services' next hops, out of their uplinks (the
        replies teach the node their MACs: rules/physical `LearnedHop`)."""
        frames = []
        for _, ofport, vlan, mac, ip, target in sorted(self.core.probes(name), key=str):
            tagged = vlan is not None  # (an Option<bit<64>>: None or the VLAN)
            push = f"push_vlan:0x8100,set_field:{4096 + vlan}->vlan_vid," if tagged else ""
            frames.append((bytes.fromhex(packets.arp_request(mac, ip, target)),
                           f"{push}output:{ofport}"))  # fmt: skip
        return tuple(frames)

    def _realize_idle(self, masters: set[str], generation: int, looked: set[str]) -> None:
        """The masters with nothing to send (not `looked` at) realize `generation`: marked
        so once per generation and set of masters, not at every pass (`idle`)."""
        key = (generation, frozenset(masters))
        if self._idle_realized == key:
            return
        self._idle_realized = key
        for name in masters - looked:
            node = self.nodes[name]
            if node.realized != generation and not _still_due(node):
                node.realized = generation
                self.idle.setdefault(generation, set()).add(name)
                self.report_due = True

    def take_idle(self) -> dict[int, set[str]]:
        """The nodes whose report changed in their realized generation alone (advanced in
        the report book as they are, not made again), by generation, once."""
        idle, self.idle = self.idle, {}
        return idle

    def _report(self, node: Node, *, realized: int) -> None:
        node.realized = realized
        self.marks.add(node.name)
        self.report_due = True

    def _become(self, node: Node, life: Life) -> None:
        """Node `node` moves to `life` (its report says whether it is synced, or lost)."""
        if node.life is not life:
            node.life = life
            self.marks.add(node.name)
            if life is Life.LOST:
                self.lost.add(node.name)
            else:
                self.lost.discard(node.name)

    def _hold(self, node: Node, parts: set[PartKey]) -> None:
        """Node `node` holds `parts` now (`holding` follows)."""
        for key in node.parts - parts:
            unindex(self.holding, key, node.name)
        for key in parts - node.parts:
            self.holding.setdefault(key, set()).add(node.name)
        node.parts = parts


def _still_due(node: Node) -> bool:
    """After a push: the node waits for something that another push must finish."""
    return bool(node.due & WAITING or node.life is not Life.SYNCED
                or node.record_out)  # fmt: skip


def _waiting(reading: Reading, *, whole: bool) -> str:
    """Why a push stops before OpenFlow ("" if it does not): the node does not say where
    its OpenFlow is, ovs-vswitchd waits for its flows, or has not made br-int yet (the
    node's update saying it exists brings a new pass)."""
    if reading.remote is None:
        return "the node does not say where its OpenFlow is (loom-openflow)"
    if reading.restoring:  # (its table is compared once they are back)
        return "ovs-vswitchd waits for its flows to be restored (flow-restore-wait)"
    if whole and not reading.bridge_created:
        return "waiting for ovs-vswitchd to create br-int"
    return ""


def _record(record: tuple[dict[str, int], set[str]]) -> RecordZones:
    zones, released = record
    return RecordZones(dict(zones), frozenset(released))


__all__ = [
    "Change",
    "ClaimNode",
    "ClaimSwitch",
    "Configure",
    "ConfirmZones",
    "Due",
    "Life",
    "Node",
    "Outcome",
    "Plan",
    "Planner",
    "Probe",
    "Reading",
    "Reconcile",
    "RecordZones",
    "Step",
    "WriteQos",
]
