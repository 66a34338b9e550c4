"""The physical controller daemon: transport nodes + universal flows -> rules/physical ->
OpenFlow and OVSDB configuration on each node it masters.

One thread runs the loop. Each pass:

1. accepts nodes that dialled in (`loom_ovs.manager.Manager`) and polls their replicas;
2. polls the universal DB (`UniversalReplica`: small tables whole, `Universal_Flow` only for
   the datapaths the nodes need);
3. places the universal flows that changed (`loom_physical.images`: each translated and
   encoded once, into its datapath's or port's part, the same on every node), turns what
   changed of the nodes and the small universal tables into one engine transaction of the
   physical rules (`Node`, `Iface`, `FlowTunnel`, `TunnelPort`, `Zone`, `Datapath`,
   `Binding`, `Endpoint`, ...) and folds its output: the nodes' own flows and the
   datapaths' `DpFlow`s into their parts, which datapaths and ports each node has; a new
   set of needed datapaths changes the flow monitor's condition, new `NeedZone` rows get
   zones, and the pass computes again until nothing is left (a new VIF's zone is given
   beforehand, where the rules will ask for it: `_speculate_zones`);
4. for the nodes it masters: writes `br-int` and the tunnel ports the universal `Tunnel`
   rows ask for, pushes the flow changes in one bundle per node (a node that (re)connected
   or was just taken over is reconciled (`Switch.replace`: the table read and compared by
   `ovs-ofctl diff-flows`, only the difference sent, in one bundle; nothing is removed and
   re-added), and reports: `Port_Binding.chassis`/`up` in the universal DB,
   `Transport_Node.status`, `Logical_Switch_Port.status` and
   `Loom_Global.realized_generation` in the config DB.

Sharding: alone, a controller masters every node that connects. With ZooKeeper each
controller is a `loom_common.cluster.membership.Member` of the physical cluster; the shards
are the configured transport nodes' system-ids; the leader assigns each a master and a hot
standby. Nodes dial every controller (their Manager rows list all); a standby computes its
nodes' flows and writes nothing; when the master's session expires the standby becomes
master and reconciles (identical flows are left alone). Its writes are fenced: the
OpenFlow master role and the node's OVSDB fencing token (`NodeSession.claim`) carry the
assignment's zxid, and a node refuses the writes of a master it no longer records.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom_common import heap, runner
from loom_common.cluster import membership
from loom_common.ovsdb import OvsdbError, RawConnection, Replica, TransactError
from loom_common.reconnect import CONNECTION_ERRORS, Link
from loom_ddlog import Program
from loom_ovs import packets
from loom_ovs.manager import Manager, NodeSession, TunnelSpec, omap
from loom_ovs.openflow import MARK, Flow, Key, Switch
from loom_physical import inputs
from loom_physical.images import Images, PartKey, node_parts, to_row
from loom_physical.rules import main_file
from loom_physical.universal import UniversalReplica

log = logging.getLogger(__name__)

POLL_MS = 1000
MAX_ROUNDS = 8
"""Engine rounds per pass (zones and new datapaths feed back into the rules)."""
ZONES = (1, 65535)
HANDOFF = 0.05
"""Seconds the loop waits at most, after a pass's first pushes, for `wait_pass` callers to
look (`_let_waiters_look`)."""
PROBE_INTERVAL = 30.0
"""Seconds between a node's ARP requests for its L3 services' next hops (learned ones are
kept fresh: a next hop's new MAC is learned from the next reply)."""
SLOW_PUSH = 0.5
"""Seconds after which a node's push is logged with where its time went."""
LONG_PASS = 0.5
"""Seconds after which a pass counts as having made many objects (`heap.settle` follows)."""
PUSH_THREADS = 16
"""Nodes pushed at once (a whole table is compared by `ovs-ofctl diff-flows`, whose process
the thread waits for)."""
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)
"""Seconds waited after the 1st, 2nd, ... failed pass in a row before starting over
(`_start_over`). One more failure and the controller gives up (`failure`): it leaves the
cluster, so that a standby takes its nodes over, and the daemon exits non-zero."""


@dataclass
class NodeState:
    """What the controller holds for one connected node."""

    session: NodeSession
    datapaths: set[int] = field(default_factory=set)
    """The datapaths it has (`NodeDatapath`): their parts are in its table."""
    bound: set[str] = field(default_factory=set)
    """The ports bound on it (`Bound`): their parts are in its table."""
    parts: set[PartKey] = field(default_factory=set)
    """The parts its table holds as of the last push (`images.Images.settle`)."""
    full_sync: bool = True
    """The next push replaces the whole table (connected, reconnected or taken over)."""
    zones: dict[str, int] = field(default_factory=dict)
    """Logical port or router -> its conntrack zone on this node (stable while needed)."""
    free_zones: list[int] = field(default_factory=list)
    next_zone: int = ZONES[0]
    recorded_zones: dict[str, int] = field(default_factory=dict)
    """The zones the node itself records (`NodeSession.zones`)."""
    recorded_used: set[int] = field(default_factory=set)
    """`recorded_zones`' values."""
    unsaved_zones: dict[str, int] = field(default_factory=dict)
    """Zones chosen here and not recorded on the node yet (done before the next push)."""
    released_zones: set[str] = field(default_factory=set)
    """Owners whose zones are no longer needed and still recorded on the node."""
    speculative_zones: set[str] = field(default_factory=set)
    """Owners given a zone before the engine asked (`_speculate_zones`), not yet asked."""
    pushed: bool = False
    """Pushed in the current pass (a node that holds a changed part and was not must be
    pushed whole next time: the change is forgotten at the pass's end)."""
    located: set[str] = field(default_factory=set)
    realized: int = 0
    message: str = ""
    pushes: int = 0
    dirty: bool = True
    """Its OVSDB rows or zones changed since its engine rows were computed."""
    reconfigure: bool = True
    """Its OVSDB rows or the tunnels it should have changed since it was configured."""
    stt: bool = False
    """One of its tunnels is STT."""
    waiting: list[str] = field(default_factory=list)
    """Tunnel ports wanted that have no ofport (yet, or an error), in words."""
    switch: Switch | None = None
    """Its br-int's OpenFlow (a kept channel), once the node said where that is."""
    ports_changed: bool = False
    """A port was bound to it or unbound since its last push (it is pushed first)."""
    unconfirmed: Callable[[], None] | None = None
    """Waits for the node's answer to a zone record sent and not confirmed yet."""
    qos_dirty: bool = True
    """Its ports' QoS may have changed since it was written (`NodeSession.configure_qos`)."""
    qos_written: dict[str, dict[str, int]] | None = None
    """The VIFs' rates as last written to the node (None: not yet)."""
    bfd: dict[str, bool] = field(default_factory=dict)
    """The node's BFD verdicts last seen (published in its status, `_report_config`)."""
    probes: set[tuple[Any, ...]] = field(default_factory=set)
    """The ARP requests it sends for its L3 services' next hops (`ArpProbe` rows)."""
    probed_at: float = 0.0
    """When they were last sent (0: due)."""

    def close(self) -> None:
        """Close the node's connections (its OVSDB session, its OpenFlow channel)."""
        self.session.close()
        if self.switch is not None:
            self.switch.close()


class PhysicalController:
    """Localizes universal flows for the transport nodes that connect to it."""

    def __init__(
        self,
        universal_remote: str,
        config_remote: str,
        *,
        name: str = "physical-0",
        listen: str = "ptcp:0:127.0.0.1",
        zookeeper: str | None = None,
        session_timeout: float = 10.0,
        zk_root: str = "/loom/physical",
        rules: Path | None = None,
        workers: int = 1,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
    ) -> None:
        """Describe the controller; `start()` listens, connects and runs it in a thread.

        Args:
            universal_remote: the Loom_Universal database.
            config_remote: the Loom_Config database (status, the transport nodes).
            name: this controller's cluster id (the `controller` in node status).
            listen: the OVSDB manager address nodes dial (`ptcp:PORT:IP`, `punix:PATH`).
            zookeeper: ZooKeeper hosts; None for a single controller that masters every node.
            session_timeout: the ZooKeeper session timeout (failover takes this long).
            zk_root: the physical cluster's znode path.
            rules: the main rule file (default: the installed `rules/physical`).
            workers: the engine's worker threads.
            retry_delays: the waits after failed passes in a row (see `RETRY_DELAYS`).
        """
        self.name = name
        self._retry_delays = retry_delays
        self._rules = rules or main_file()
        self._workers = workers
        self.program = Program.load([self._rules], workers=workers, internal=False)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.manager = Manager(listen, self._wake)
        self.universal = UniversalReplica(universal_remote, self._wake)
        self.config = Replica(
            config_remote,
            "Loom_Config",
            {
                "Transport_Node": ["system_id", "status"],
                "Loom_Global": ["generation", "realized_generation"],
                "Logical_Switch_Port": ["status"],
            },
            wake=self._wake,
        )
        self.links = (Link("Loom_Universal", self.universal), Link("Loom_Config", self.config))
        """The databases' connections: each up, or down and reconnecting (`Link`)."""
        self._universal_link, self._config_link = self.links
        self.failure: str | None = None
        """Why the controller gave up (its loop ended for good; `GIVE_UP_AFTER`)."""
        self._zk_hosts = zookeeper
        self._session_timeout = session_timeout
        self._zk_root = zk_root
        self._zk: Any = None
        self._member: membership.Member | None = None
        self.nodes: dict[str, NodeState] = {}
        self._pending: list[NodeSession] = []
        """Sessions whose node has not said its system-id yet."""
        self._fed_global: dict[str, set[tuple[Any, ...]]] = {}
        self.images = Images()
        """Every datapath's, port's and node's part of the nodes' tables (`images`)."""
        self._by_node: dict[str, dict[str, set[str]]] = {"Tunnel": {}, "Node_Endpoint": {}}
        """Universal table -> node (`from_node`, `node`) -> its rows' uuids."""
        self._row_node: dict[str, str] = {}
        """Tunnel or Node_Endpoint row uuid -> its node (`_by_node`)."""
        self._vif_ports: dict[str, str] = {}
        self._vif_node: dict[str, str] = {}
        """VIF id -> the node it was last seen on (`_speculate_zones`)."""
        """VIF id -> its logical port (Port_Binding `vif_id`), to give a new VIF its zone
        before the rules ask (`_speculate_zones`)."""
        self._fed_nodes: dict[str, dict[str, set[tuple[Any, ...]]]] = {}
        """Node -> input relation -> the rows fed for it (until it disconnects): its OVSDB's
        (`_node_inputs`) and its zones."""
        self._disconnected: set[str] = set()
        """Nodes gone since the last computation (their rows are taken out of the engine)."""
        self._fed_live: set[tuple[Any, ...]] = set()
        self._fed_neighbours: set[tuple[Any, ...]] = set()
        self._fed_bfd: set[tuple[Any, ...]] = set()
        self._zone_changes: list[tuple[int, tuple[str, str, int]]] = []
        """Zone rows allocated (+1) or released (-1) since the last computation."""
        self.zone_rounds = 0
        """Engine rounds run again for zones the rules asked for (not given beforehand)."""
        self._node_dps: dict[int, set[str]] = {}
        """Datapath -> the nodes that need it (the engine's `NodeDatapath`): its keys are the
        datapaths whose universal flows are read."""
        self._dirty_universal: dict[str, set[str]] = {}
        """Universal table -> the uuids of its rows changed since they were fed."""
        self._fed_binding: dict[str, tuple[Any, ...]] = {}
        """Port_Binding row uuid -> the Binding row fed for it."""
        self._fed_marking: dict[str, tuple[Any, ...]] = {}
        """Port_Binding uuid -> its `Marking` row (ports whose QoS marks DSCP)."""
        self._report_due = True
        """Something `_report` writes may have changed since it last ran."""
        self._recheck: set[str] = set()
        """Logical ports whose status `_report` must look at again."""
        self._bindings: dict[str, dict[str, Any]] = {}
        """Logical port -> its Port_Binding row."""
        self._binding_port: dict[str, str] = {}
        """Port_Binding row uuid -> its logical port."""
        self._reported_masters: set[str] = set()
        self._mastered: set[str] = set()
        """The nodes mastered after the last pass (one newly mastered gets a full sync)."""
        self._seen: set[str] = set()
        """Nodes that have been connected to this process (only those it reports gone)."""
        self._need_zone: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.passes = 0
        self.transactions = 0
        self._waiters = 0
        """Threads in `wait_pass`."""
        self._looked = 0
        """Predicate evaluations since the last pass's first pushes."""
        self._with_qos: set[str] = set()
        """Ports whose binding has QoS rates."""
        self._qos_ports: set[str] = set()
        """Ports whose binding changed since their nodes' QoS was looked at."""
        self._bulk_loaded = False
        """A whole table was pushed since the last `heap.settle()`."""
        self._pushers = concurrent.futures.ThreadPoolExecutor(
            max_workers=PUSH_THREADS, thread_name_prefix=f"push-{name}"
        )
        self.pass_phases: collections.deque[tuple[float, dict[str, float]]] = collections.deque(
            maxlen=1000
        )
        """(perf_counter at its start, seconds by phase) of the latest passes that computed or
        pushed something: `poll` (nodes and databases), `engine`, `push` (OVSDB config and
        OpenFlow), `report` (status)."""
        self.conflicts: dict[str, int] = {}
        """Node -> OpenFlow matches wanted with different actions (the last push)."""

    # ---- lifecycle ----

    def start(self) -> PhysicalController:
        """Listen for nodes, connect to the databases, join the cluster, start the thread."""
        self.manager.start()
        self._poll_universal()  # a database not up yet: the loop keeps trying (`Link`)
        self._poll_config()
        if self._zk_hosts:
            self._zk = membership.connect(self._zk_hosts, session_timeout=self._session_timeout)
            self._member = membership.Member(
                self._zk, self.name, None, root=self._zk_root, on_change=lambda _: self._wake()
            ).start()
        self._thread = threading.Thread(target=self._loop, name=f"physical-{self.name}")
        self._thread.start()
        return self

    @property
    def target(self) -> str:
        """What a node's Manager row says to reach this controller."""
        return self.manager.target

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and close every connection (nodes keep their flows)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._member is not None:
            self._member.stop(timeout)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        self._pushers.shutdown(wait=True)
        for state in self.nodes.values():
            state.close()
        for session in self._pending:
            session.close()
        self.manager.close()
        for link in self.links:
            link.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"w")

    def wait_pass(
        self, predicate: Callable[[PhysicalController], bool], timeout: float, *, wake: bool = True
    ) -> bool:
        """Wait until `predicate(self)` holds after a pass; False on timeout. With `wake`,
        each check asks for a pass (a benchmark passes False: passes come from changes)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiters += 1
            try:
                while not self._looked_at(predicate):
                    left = deadline - time.monotonic()
                    if left <= 0 or self._thread is None or not self._thread.is_alive():
                        return False
                    if wake:
                        self._wake()
                    self._cond.wait(min(left, 0.5))
            finally:
                self._waiters -= 1
        return True

    def _looked_at(self, predicate: Callable[[PhysicalController], bool]) -> bool:
        """`predicate(self)`, counted as a look for `_let_waiters_look` (lock held)."""
        try:
            return predicate(self)
        finally:
            self._looked += 1
            self._cond.notify_all()

    def _let_waiters_look(self) -> None:
        """After a pass's first pushes, let the `wait_pass` callers look before the loop
        takes the lock again for the rest (lock held; it would otherwise win the lock back
        at once, and they would see the pass only after the other nodes' pushes). Bounded
        by `HANDOFF`; nothing to do when nobody waits."""
        deadline = time.monotonic() + HANDOFF
        while self._looked < self._waiters and (left := deadline - time.monotonic()) > 0:
            self._cond.wait(left)

    # ---- ownership ----

    def masters(self) -> set[str]:
        """The connected nodes this controller writes to."""
        if self._member is None:
            return set(self.nodes)
        view = self._member.view
        return {n for n in self.nodes if view.may_write(n)}

    def _computed(self) -> set[str]:
        """The connected nodes whose flows this controller computes (masters, standbys)."""
        if self._member is None:
            return set(self.nodes)
        view = self._member.view
        return {n for n in self.nodes if n in view.masters or n in view.standbys}

    # ---- the loop ----

    def _loop(self) -> None:
        """Run passes until `stop()` (`runner.run_passes`: a failed pass is logged, the
        controller starts over after a wait, and gives up when passes keep failing)."""
        runner.run_passes(
            self._pass,
            stopped=self._stop,
            retry_delays=self._retry_delays,
            give_up=self._give_up,
            recover=self._recover,
            what="physical controller",
            log=log,
        )

    def _recover(self) -> None:
        with self._cond:
            self._start_over()
            self.passes += 1
            self._cond.notify_all()

    def _pass(self) -> None:
        """One pass: poll, compute, push, report; then wait for something to do."""
        began = time.perf_counter()
        with self._cond:  # `wait_pass` predicates see the state between passes
            masters = self._step()
            self._looked = 0
            self._cond.notify_all()  # flows are on the nodes: waiters may look
            self._let_waiters_look()
        if masters is not None:
            with self._cond:
                self._report(masters)
            # the nodes where no port came or went, once the others' ports are up
            with self._cond:
                if self._push_others(masters):
                    self._report(masters)
                self._settle_images()
                self._cond.notify_all()
        # Whole tables are in, or a long pass made many objects (the status of thousands
        # of ports): out of the collector's sight (`loom_common.heap`).
        if self._bulk_loaded or time.perf_counter() - began > LONG_PASS:
            self._bulk_loaded = False
            heap.settle()
        with self._cond:
            self.passes += 1
            self._cond.notify_all()
        self._wait()

    def _settle_images(self) -> None:
        """The pass's pushes are done: a node that holds a part that changed and was not
        pushed (its push failed, or it was not ours to push) gets its whole table next time;
        then the parts' changes are forgotten (`Images.settle`)."""
        changed = self.images.changed()
        for state in self.nodes.values():
            if not state.pushed and not state.parts.isdisjoint(changed):
                state.full_sync = True
            state.pushed = False
        self.images.settle()

    def _give_up(self, reason: str) -> None:
        """The controller cannot go on: record why, leave the cluster, wake the waiters."""
        if self.failure is not None or self._stop.is_set():
            return
        log.error("physical controller %s cannot continue: %s", self.name, reason)
        runner.leave_cluster(self._member, log)
        self.failure = reason  # once it has left: whoever sees the failure sees it gone
        with self._cond:
            self._cond.notify_all()

    def _start_over(self) -> None:
        """After a failed pass, whatever the engine holds is unknown: build a new engine from
        the databases and the nodes (as a restarted controller would), and push each node's
        table whole once it is computed again (`Switch.replace` changes only what differs)."""
        self.program = Program.load([self._rules], workers=self._workers, internal=False)
        self._fed_nodes, self._fed_global, self._fed_binding = {}, {}, {}
        self.images = Images()
        self._fed_marking = {}
        self._fed_live, self._fed_neighbours, self._zone_changes = set(), set(), []
        self._fed_bfd = set()
        self._node_dps = {}
        self._bindings, self._binding_port, self._dirty_universal = {}, {}, {}
        self._with_qos, self._vif_ports = set(), {}
        # The replicas are kept by their links (what failed is the engine's state): every
        # row held is fed again.
        for table, rows in self.universal.rows.items():
            self._mark_universal([(table, uuid, row) for uuid, row in rows.items()])
        self._reported_masters = set()  # report everything again
        self._report_due = True
        for system_id, state in self.nodes.items():
            state.parts = set()
            state.full_sync = state.dirty = state.reconfigure = True
            for owner, zone in state.zones.items():
                self._zone_changes.append((1, (system_id, owner, zone)))

    def _wait(self) -> None:
        """Wait until a node, a database or `_wake` has something, a link is due to
        reconnect, or `POLL_MS` passed."""
        fds = [self._wake_r, self.manager.fileno()]
        timeout = POLL_MS / 1000
        for link in self.links:
            if link.has_pending():
                return
            fd = link.fileno()
            if fd is not None:
                fds.append(fd)
            else:
                timeout = min(timeout, link.retry_in() or 0.0)
        for state in self.nodes.values():
            if state.session.alive:
                if state.session.replica.has_pending():
                    return
                fds.append(state.session.fileno())
        fds += [s.fileno() for s in self._pending if s.alive]
        readable, _, _ = select.select(fds, [], [], timeout)
        if self._wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_r, 4096):
                    pass

    def _step(self) -> set[str] | None:
        """Poll, compute, push; return the nodes mastered (None: nothing pushed, the
        computation did not settle) for `_report`, which the loop runs after it."""
        began = time.perf_counter()
        self._accept()
        self._poll_config()
        self._poll_universal()
        self._poll_nodes()
        polled = time.perf_counter()
        rounds = 0
        for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 - counted for the pass record
            if not self._compute() or not self._feeds_back():
                break
            if self._zones_to_feed():
                self.zone_rounds += 1
        else:  # still changing: push nothing half-computed (a full sync would delete flows)
            self._wake()
            return None
        computed = time.perf_counter()
        masters = self.masters()
        for system_id in masters - self._mastered:  # (re)gained: reconcile the whole table
            self.nodes[system_id].full_sync = self.nodes[system_id].reconfigure = True
        self._mastered = set(masters)
        pushed = self._realize_all(masters, self._universal_generation(), first=True)
        realized = time.perf_counter()
        if rounds > 1 or pushed:
            self.pass_phases.append((began, {
                "poll": polled - began, "engine": computed - polled,
                "push": realized - computed,
            }))  # fmt: skip
        return masters

    def _push_others(self, masters: set[str]) -> int:
        """A pass's second push phase (the nodes where no port came or went), recorded in
        `pass_phases` as `push_others`; the number of nodes sent something."""
        began = time.perf_counter()
        pushed = self._realize_all(masters, self._universal_generation(), first=False)
        if pushed:
            self.pass_phases.append((began, {"push_others": time.perf_counter() - began}))
        return pushed

    # ---- inputs ----

    def _accept(self) -> None:
        for session in self.manager.accept():
            try:
                session.start()
            except (OSError, OvsdbError) as exc:
                log.warning("node from %s: could not read its database: %s", session.peer, exc)
                session.close()
                continue
            self._pending.append(session)
        still = []
        for session in self._pending:
            session.poll()
            system_id = session.system_id
            if not session.alive:
                continue
            if system_id is None:
                still.append(session)
                continue
            state = self.nodes.get(system_id)
            if state is None:
                state = self.nodes[system_id] = NodeState(session)
            else:
                state.close()  # the node came back: a new session, a new OpenFlow channel
                state.session, state.switch = session, None
                state.qos_dirty, state.qos_written = True, None
                state.full_sync = True
                state.dirty = state.reconfigure = True
            self._follow_recorded_zones(system_id, state)
            log.info("node %s connected from %s", system_id, session.peer)
            self._seen.add(system_id)
            self._report_due = True
        self._pending = still
        if self._member is not None and self._member.view.leader:
            self._member.set_shards(self._configured_nodes())

    def _configured_nodes(self) -> set[str]:
        return {str(row["system_id"]) for row in self.config.rows["Transport_Node"].values()} | set(
            self.nodes
        )

    def _poll_config(self) -> None:
        for table, uuid, _ in self._config_link.sync():
            self._report_due = True
            if table == "Logical_Switch_Port":
                self._recheck.add(uuid)
        if self._member is not None and self._member.view.leader:
            self._member.set_shards(self._configured_nodes())

    def _poll_universal(self) -> None:
        self._mark_universal(self._universal_link.sync())

    def _mark_universal(self, changes: list[tuple[str, str, Any]]) -> None:
        """Note what changed of the universal DB, for the next computation."""
        for table, uuid, row in changes:
            self._dirty_universal.setdefault(table, set()).add(uuid)
            if table in self._by_node:
                self._index_row(table, uuid, row)
            elif table == "Port_Binding":
                self._mark_binding(uuid, row)
            if table in ("Port_Binding", "Universal_Global"):
                self._report_due = True

    def _index_row(self, table: str, uuid: str, row: dict[str, Any] | None) -> None:
        """Keep `_by_node` of a `Tunnel` or `Node_Endpoint` row; its node's (old and new)
        tunnel ports follow."""
        index = self._by_node[table]
        touched = set()
        if (old_node := self._row_node.pop(uuid, None)) is not None:
            index.get(old_node, set()).discard(uuid)
            touched.add(old_node)
        if row is not None:
            node = str(row["from_node" if table == "Tunnel" else "node"])
            index.setdefault(node, set()).add(uuid)
            self._row_node[uuid] = node
            touched.add(node)
        for node in touched:
            if (state := self.nodes.get(node)) is not None:
                state.dirty = state.reconfigure = True

    def _mark_binding(self, uuid: str, row: dict[str, Any] | None) -> None:
        """Keep the bindings' indexes (by port, by VIF, with QoS) of a `Port_Binding` row."""
        port = self._binding_port.pop(uuid, None)
        if port is not None:
            old = self._bindings.pop(port, None)
            self._with_qos.discard(port)
            if old is not None and self._vif_ports.get(inputs.opt(old["vif_id"])) == port:
                del self._vif_ports[inputs.opt(old["vif_id"])]
        if row is not None:
            port = row["logical_port"]
            self._binding_port[uuid] = port
            self._bindings[port] = row
            if vif := inputs.opt(row["vif_id"]):
                self._vif_ports[vif] = port
            if omap(row["qos"]):
                self._with_qos.add(port)
            else:
                self._with_qos.discard(port)
        if port is not None:
            self._recheck.add(port)
            self._qos_ports.add(port)

    def _poll_nodes(self) -> None:
        for system_id, state in list(self.nodes.items()):
            if state.session.poll():
                state.dirty = state.reconfigure = True
                self._follow_recorded_zones(system_id, state)
                if state.session.bfd() != state.bfd:
                    state.bfd = dict(state.session.bfd())
                    self._report_due = True  # (its status publishes them)
            if not state.session.alive:
                log.info("node %s disconnected", system_id)
                self._report_due = True
                self.nodes.pop(system_id).close()
                self._disconnected.add(system_id)

    def _universal_generation(self) -> int:
        for row in self.universal.rows["Universal_Global"].values():
            return int(row["generation"])
        return 0

    # ---- the engine ----

    def _node_inputs(self, system_id: str, state: NodeState) -> dict[str, set[tuple[Any, ...]]]:
        """The engine rows node `system_id`'s OVSDB stands for now (its zones are fed as they
        are allocated: a node has thousands, and rebuilding them per change cost more than
        the engine; see `_fold_nodes`)."""
        rows: dict[str, set[tuple[Any, ...]]] = {
            "Node": {(system_id,)}, "Iface": set(), "TunnelPort": set(), "FlowTunnel": set(),
            "Uplink": {(system_id, of) for of in state.session.uplinks()[:1]},
        }  # fmt: skip
        for iface_id, vif in state.session.vifs().items():
            rows["Iface"].add((system_id, iface_id, vif.ofport))
        specs = {t.port_name: t for t in self._tunnel_specs(system_id)}
        for name, (peer, ofport, _) in state.session.tunnels().items():
            spec = specs.get(name)
            if ofport is None or spec is None:
                continue
            if spec.peer:
                rows["TunnelPort"].add((system_id, peer, spec.encap, ofport))
            else:
                rows["FlowTunnel"].add((system_id, spec.encap, ofport))
        return rows

    def _universal_inputs(self, dirty: dict[str, set[str]]) -> dict[str, set[tuple[Any, ...]]]:
        """The engine rows of the small universal tables that changed (each whole)."""
        rows: dict[str, set[tuple[Any, ...]]] = {}
        if "Datapath" in dirty:
            rows["Datapath"] = inputs.datapaths(self.universal.rows["Datapath"].values())
        if "Node_Endpoint" in dirty:
            rows["Endpoint"] = inputs.endpoints(self.universal.rows["Node_Endpoint"].values())
        if "Gateway_Assignment" in dirty:
            gateway_rows = self.universal.rows["Gateway_Assignment"].values()
            rows["Gateway"], rows["GatewayNode"] = inputs.gateways(gateway_rows)
        if "Replication_Set" in dirty:
            rows["ServiceNode"] = inputs.service_nodes(
                self.universal.rows["Replication_Set"].values()
            )
        return rows

    def _liveness(self) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
        """The `Live` rows — the nodes connected to some physical controller (ours, and as
        the config DB says) — and the `Bfd` rows: the connected nodes' BFD verdicts as
        their masters publish them in the config DB (`Transport_Node.status` `bfd:<peer>` =
        up/down), read from there, not from this controller's own sessions, so that every
        controller judges a gateway alike."""
        live = {(n,) for n in self.nodes}
        bfd = set()
        for row in self.config.rows["Transport_Node"].values():
            status = omap(row["status"])
            if status.get("connected") != "true":
                continue
            node = str(row["system_id"])
            live.add((node,))
            for key, value in status.items():
                if key.startswith("bfd:"):
                    bfd.add((node, key[len("bfd:") :], value == "up"))
        return live, bfd

    def _compute(self) -> bool:
        """One engine transaction of what changed; True if it changed any output."""
        computed = self._computed()
        txn = self.program.transaction()
        changed = False
        deletes: list[tuple[str, tuple[Any, ...]]] = []
        inserts: list[tuple[str, tuple[Any, ...]]] = []

        def feed(relation: str, old: set[tuple[Any, ...]], new: set[tuple[Any, ...]]) -> None:
            # Collected, then every retraction before any insertion: a row deleted for one
            # uuid and inserted for another in the same pass (a binding re-created) must end
            # up present, whatever order the uuids come in.
            deletes.extend((relation, row) for row in old - new)
            inserts.extend((relation, row) for row in new - old)

        for system_id in list(self._disconnected):
            for relation, old in self._fed_nodes.get(system_id, {}).items():
                feed(relation, old, set())
            self._fed_nodes.pop(system_id, None)
            self._disconnected.discard(system_id)
        self._place_flows(self._dirty_universal.pop("Flow", set()))
        self._speculate_zones(computed)
        changed = self._feed_zones(txn) or changed
        for system_id, state in self.nodes.items():
            fed = self._fed_nodes.get(system_id, {})
            have = {relation: rows for relation, rows in fed.items() if relation != "Zone"}
            if system_id in computed and not state.dirty and have:
                continue
            want = self._node_inputs(system_id, state) if system_id in computed else {}
            for relation in {*want, *have}:
                feed(relation, have.get(relation, set()), want.get(relation, set()))
            state.dirty = False
            zones = fed.get("Zone")  # fed as allocated (`_feed_zones`), kept as they are
            self._fed_nodes[system_id] = {**want, "Zone": zones} if zones else dict(want)
        live, bfd = self._liveness()
        feed("Live", self._fed_live, live)
        feed("Bfd", self._fed_bfd, bfd)
        self._fed_live, self._fed_bfd = live, bfd
        # Every connected node's static neighbours, not only those of nodes computed here:
        # a hypervisor's router needs its gateway's next hop wherever the gateway is mastered.
        neighbours = {
            (system_id, ip, mac)
            for system_id, state in self.nodes.items()
            for ip, mac in state.session.neighbours().items()
        }
        feed("Neighbour", self._fed_neighbours, neighbours)
        self._fed_neighbours = neighbours
        if self._dirty_universal:
            self._feed_universal(feed, self._dirty_universal)
            self._dirty_universal = {}
        for relation, row in deletes:
            txn.delete(relation, row)
        for relation, row in inserts:
            txn.insert(relation, row)
        changed = changed or bool(deletes or inserts)
        if not changed:
            txn.rollback()
            return False
        delta = txn.commit()
        self.transactions += 1
        self._fold(delta)
        self._release_unasked_zones()
        return True

    def _place_flows(self, uuids: set[str]) -> None:
        """Put the universal flows of the rows that changed into their parts (`images`:
        translated once, whatever the nodes that have them)."""
        rows = self.universal.rows["Flow"]
        for uuid in uuids:
            row = rows.get(uuid)
            self.images.set_row(uuid, to_row(row) if row is not None else None)

    def _speculate_zones(self, computed: set[str]) -> None:
        """Give the ports of new VIFs (a VIF plugged, or the port of a VIF that waited for
        it) their zones before the rules ask for them (`NeedZone`): so they go in the same
        transaction as the VIF or the port, and its flows need no second round for its
        zone."""
        found: list[tuple[str, str]] = []
        for system_id in computed:
            state = self.nodes[system_id]
            if state.dirty:
                for iface_id in state.session.vifs():
                    self._vif_node[iface_id] = system_id
                    if (port := self._vif_ports.get(iface_id)) is not None:
                        found.append((system_id, port))
        for uuid in self._dirty_universal.get("Port_Binding", ()):
            port = self._binding_port.get(uuid)
            row = self._bindings.get(port) if port is not None else None
            node = self._vif_node.get(inputs.opt(row["vif_id"])) if row is not None else None
            if port is not None and node in computed:
                found.append((node, port))
        for system_id, port in found:
            state = self.nodes[system_id]
            vif = self._bindings.get(port, {}).get("vif_id")
            if port not in state.zones and inputs.opt(vif) in state.session.vifs():
                self._zone_needed(system_id, state, port)
                state.speculative_zones.add(port)

    def _release_unasked_zones(self) -> None:
        """Release the zones given beforehand that the engine did not ask for (the flows
        that named them are not on that node after all)."""
        for node, state in self.nodes.items():
            for owner in state.speculative_zones:
                self._zone_released(node, state, owner)
            state.speculative_zones = set()

    def _feeds_back(self) -> bool:
        """Whether the last computation's output asks for another round before a push:
        zones to allocate (flows wait for them) or newly needed datapaths' rows. Zones
        released wait for the next transaction: no flow uses them any more, so feeding
        their retraction changes no output, and it costs no commit of its own there (it
        was a round of every port deletion, ~1 ms of the engine)."""
        return bool(self._dirty_universal) or self._zones_to_feed()

    def _zones_to_feed(self) -> bool:
        """Zones were given that the engine has not been fed yet."""
        return any(w > 0 for w, _ in self._zone_changes)

    def _feed_zones(self, txn: Any) -> bool:
        """Feed the zones allocated and released since the last computation."""
        fed = False
        for weight, row in self._zone_changes:
            if row[0] not in self.nodes:
                continue
            zones = self._fed_nodes.setdefault(row[0], {}).setdefault("Zone", set())
            if weight > 0:
                txn.insert("Zone", row)
                zones.add(row)
            else:
                txn.delete("Zone", row)
                zones.discard(row)
            fed = True
        self._zone_changes = []
        return fed

    def _feed_universal(
        self,
        feed: Callable[[str, set[tuple[Any, ...]], set[tuple[Any, ...]]], None],
        dirty: dict[str, set[str]],
    ) -> None:
        """Feed what changed of the universal DB's rows: the rows of the big tables
        (`Port_Binding`, `Universal_Flow`) one by one, the small ones whole."""
        want = self._universal_inputs(dirty)
        for relation, new in want.items():
            feed(relation, self._fed_global.get(relation, set()), new)
            self._fed_global[relation] = new
        for uuid in dirty.get("Port_Binding", ()):
            row = self.universal.rows["Port_Binding"].get(uuid)
            old_binding = self._fed_binding.pop(uuid, None)
            new_binding = inputs.binding(row) if row is not None else None
            feed("Binding", {old_binding} if old_binding else set(),
                 {new_binding} if new_binding else set())  # fmt: skip
            if new_binding is not None:
                self._fed_binding[uuid] = new_binding
            old_mark = self._fed_marking.pop(uuid, None)
            new_mark = inputs.marking(row) if row is not None else None
            feed("Marking", {old_mark} if old_mark else set(), {new_mark} if new_mark else set())
            if new_mark is not None:
                self._fed_marking[uuid] = new_mark

    def _fold(self, delta: dict[str, list[tuple[int, tuple[Any, ...]]]]) -> None:
        """Fold an engine delta into the parts, the nodes' datapaths and ports, and the
        controller's needs."""
        self._fold_parts(delta)
        self._fold_placement(delta)
        self._fold_nodes(delta)
        needed = set(self._node_dps) | {0}  # (datapath 0: what every switch shares)
        if needed != self.universal.datapaths:  # the flows read follow
            try:
                self.universal.set_datapaths(needed)
            except CONNECTION_ERRORS as exc:
                self._universal_link.lost(exc)  # (it asks for them when it reconnects)
            self._poll_universal()

    def _fold_parts(self, delta: dict[str, list[tuple[int, tuple[Any, ...]]]]) -> None:
        """The nodes' own flows and the datapaths' `DpFlow`s into their parts; the values
        of the universal flows' identifiers."""
        for weight, (node, table, priority, match, actions) in delta.get("NodeFlow", []):
            flow = Flow(table, priority, match, actions, MARK)
            (self.images.add if weight > 0 else self.images.remove)(("node", node), flow)
        for weight, (dp, table, priority, match, actions) in delta.get("DpFlow", []):
            flow = Flow(table, priority, f"metadata={dp:#x},{match}", actions, MARK)
            (self.images.add if weight > 0 else self.images.remove)(("dp", dp), flow)
        for weight, (ident, text) in sorted(delta.get("GlobalBind", []), key=lambda d: d[0]):
            self.images.set_binding(ident, text if weight > 0 else None)

    def _fold_placement(self, delta: dict[str, list[tuple[int, tuple[Any, ...]]]]) -> None:
        """Which datapaths (`NodeDatapath`) and ports (`Bound`) each node has."""
        for weight, (node, dp) in delta.get("NodeDatapath", []):
            if weight > 0:
                self._node_dps.setdefault(dp, set()).add(node)
            elif (nodes := self._node_dps.get(dp)) is not None:
                nodes.discard(node)
                if not nodes:
                    del self._node_dps[dp]
            if (state := self.nodes.get(node)) is not None:
                (state.datapaths.add if weight > 0 else state.datapaths.discard)(dp)
        for weight, (node, port) in delta.get("Bound", []):
            if (state := self.nodes.get(node)) is not None:
                (state.bound.add if weight > 0 else state.bound.discard)(port)

    def _fold_nodes(self, delta: dict[str, list[tuple[int, tuple[Any, ...]]]]) -> None:
        """Fold where VIFs are and which zones nodes need."""
        for weight, (port, node) in delta.get("Located", []):
            self._report_due = True
            self._recheck.add(port)
            state = self.nodes.get(node)
            if state is not None:
                state.ports_changed = state.qos_dirty = True
                if weight > 0:
                    state.located.add(port)
                else:
                    state.located.discard(port)
        for weight, row in delta.get("ArpProbe", []):
            state = self.nodes.get(row[0])
            if state is not None:
                (state.probes.add if weight > 0 else state.probes.discard)(row)
                state.probed_at = 0.0  # a new one goes at once
        for weight, (node, owner) in delta.get("NeedZone", []):
            state = self.nodes.get(node)
            if state is None:
                continue
            if weight > 0:
                state.speculative_zones.discard(owner)
                self._zone_needed(node, state, owner)
            else:
                self._zone_released(node, state, owner)

    def _zone_released(self, node: str, state: NodeState, owner: str) -> None:
        """`owner` needs no zone on `node` any more."""
        if owner in state.zones:
            zone = state.zones.pop(owner)
            state.free_zones.append(zone)
            state.unsaved_zones.pop(owner, None)
            state.released_zones.add(owner)
            self._zone_changes.append((-1, (node, owner, zone)))

    def _zone_needed(self, node: str, state: NodeState, owner: str) -> None:
        """Give `owner` a zone on `node`: the one the node records if any (a previous master
        chose it), else a free one, to be recorded on the node before the flows using it."""
        zone = state.zones.get(owner) or state.recorded_zones.get(owner)
        if zone is None:
            used = state.recorded_used
            while state.free_zones and state.free_zones[-1] in used:
                state.free_zones.pop()
            zone = state.free_zones.pop() if state.free_zones else None
            while zone is None:
                candidate, state.next_zone = state.next_zone, state.next_zone + 1
                if candidate >= ZONES[1]:
                    log.warning("node %s: no conntrack zone left for %s", node, owner)
                    return
                if candidate not in used:
                    zone = candidate
            state.unsaved_zones[owner] = zone
        if state.zones.get(owner) != zone:
            state.zones[owner] = zone
            state.released_zones.discard(owner)
            self._zone_changes.append((1, (node, owner, zone)))

    def _follow_recorded_zones(self, system_id: str, state: NodeState) -> None:
        """Adopt the zones the node records (another master may have chosen them)."""
        recorded = state.session.zones()
        if recorded is state.recorded_zones:
            return  # unchanged (a node change that was not its zones)
        state.recorded_zones, state.recorded_used = recorded, set(recorded.values())
        if state.recorded_zones:
            state.next_zone = max(state.next_zone, max(state.recorded_zones.values()) + 1)
        for owner, zone in state.recorded_zones.items():
            current = state.zones.get(owner)
            if current is not None and current != zone and owner not in state.unsaved_zones:
                self._zone_changes.append((-1, (system_id, owner, current)))
                self._zone_changes.append((1, (system_id, owner, zone)))
                state.zones[owner] = zone

    # ---- writing to the nodes ----

    def _tunnel_specs(self, system_id: str) -> list[TunnelSpec]:
        """The tunnel ports node `system_id` needs: one flow-based port per encapsulation
        it has an endpoint for, and a per-peer port for each `Tunnel` row from it (BFD)."""
        rows = self.universal.rows
        encaps = {rows["Node_Endpoint"][u]["encap"] for u in self._by_node["Node_Endpoint"]
                  .get(system_id, ()) if u in rows["Node_Endpoint"]}  # fmt: skip
        specs = [TunnelSpec.flow_based(encap) for encap in sorted(encaps)]
        for uuid in self._by_node["Tunnel"].get(system_id, ()):
            row = rows["Tunnel"].get(uuid)
            if row is not None:
                specs.append(TunnelSpec(row["to_node"], row["encap"], row["remote_ip"],
                                        bool(row["bfd"])))  # fmt: skip
        return specs

    def _realize_all(self, masters: set[str], generation: int, *, first: bool) -> int:
        """Realize `generation` on the nodes in `masters`: with `first`, only the nodes where
        a port was bound or unbound (the cloud waits for those ports' status, which is
        reported before the others are pushed), else all. The nodes with something to send
        are pushed in parallel (a whole table is compared by `ovs-ofctl diff-flows`, which
        waits on the node most of its time). Returns the number of nodes sent something."""
        busy = []
        if self._qos_ports:
            for state in self.nodes.values():
                if not self._qos_ports.isdisjoint(state.located):
                    state.qos_dirty = True
            self._qos_ports = set()
        for system_id in sorted(masters):
            state = self.nodes[system_id]
            if first and not state.ports_changed:
                continue
            state.ports_changed = False
            if (state.reconfigure or state.full_sync or self._flows_due(system_id, state)
                    or state.unsaved_zones or state.released_zones or state.qos_dirty
                    or state.unconfirmed is not None or self._probes_due(state)):  # fmt: skip
                busy.append(system_id)
            elif state.realized != generation:
                state.realized = generation
                self._report_due = True
        if len(busy) <= 1:
            return sum(self._realize(system_id, generation) for system_id in busy)
        return sum(self._pushers.map(lambda n: self._realize(n, generation), busy))

    def _realize(self, system_id: str, generation: int) -> bool:
        """Configure node `system_id` and push its flow changes; note what it realizes.
        True if anything was sent to the node."""
        state = self.nodes[system_id]
        if self._member is not None and not self._member.view.may_write(system_id):
            return False  # deposed since the pass began: the new master writes it
        specs = self._tunnel_specs(system_id) if state.reconfigure else None
        began = time.perf_counter()
        steps: dict[str, float] = {}
        whole = state.full_sync
        try:
            if self._member is not None and self._member.view.zxid >= 0:
                # Fencing of the node's OVSDB: its writes carry the assignment's zxid
                # (`NodeSession.claim`), as its OpenFlow does (`_push_flows`).
                state.session.claim(self._member.view.zxid)
            configured = specs is not None and self._configure(state, specs)
            steps["config"] = time.perf_counter() - began
            remote = self._openflow_remote(state)
            if remote is None:
                return False
            sent = self._send(state, remote) or configured
        except Exception as exc:  # any failure: this node is pushed whole next time
            log.warning("node %s: %s", system_id, exc)
            if state.switch is not None:
                state.switch.close()  # and on a new connection
            state.message = str(exc)
            self._report_due = True
            state.full_sync = True
            state.reconfigure = True
            return False
        _log_slow_push(system_id, time.perf_counter() - began, steps, whole)
        state.pushes += 1
        message = (
            "the datapath cannot encapsulate STT: tunnels of type stt carry no traffic"
            if state.stt
            else ""
        )
        if state.waiting:
            message = "; ".join([*([message] if message else []), *state.waiting])
            generation = state.realized  # not realized while a tunnel is missing
        if state.unconfirmed is not None:
            generation = state.realized  # nor before its new zones are recorded
        if (message, generation) != (state.message, state.realized) or sent:
            self._report_due = True
        state.message, state.realized = message, generation
        if sent:
            self.conflicts[system_id] = sum(
                self.images.parts[key].table.conflict_count()
                for key in state.parts
                if key in self.images.parts
            )
        return sent

    def desired_parts(self, system_id: str) -> set[PartKey]:
        """The parts of node `system_id`'s table as the rules have it now."""
        state = self.nodes[system_id]
        return node_parts(system_id, state.datapaths, state.bound)

    def installed(self, system_id: str) -> set[Key]:
        """The keys of the flows node `system_id` holds as of its last push (between
        passes: every change pushed is settled)."""
        state = self.nodes.get(system_id)
        if state is None:
            return set()
        return {flow.key for flow in self.images.flows(state.parts)}

    def pushes_due(self) -> bool:
        """Some node mastered here has flows to push."""
        return any(self._flows_due(n, self.nodes[n]) for n in self.masters())

    def _flows_due(self, system_id: str, state: NodeState) -> bool:
        """Node `system_id`'s table has changed since its last push."""
        desired = self.desired_parts(system_id)
        if desired != state.parts:
            return True
        if state.pushed:  # in this pass: it has the parts as they are
            return False
        parts = self.images.parts
        return any(key in parts and parts[key].before for key in desired)

    def _openflow_remote(self, state: NodeState) -> str | None:
        """Where the node's br-int takes OpenFlow, if it does yet (else its status says
        why: the node does not say where, or ovs-vswitchd has not made the bridge we just
        wrote; the node's update saying it exists brings a new pass)."""
        remote = state.session.openflow_remote
        waiting = None
        if remote is None:
            waiting = "the node does not say where its OpenFlow is (loom-openflow)"
        elif state.full_sync and not state.session.bridge_created():
            waiting = "waiting for ovs-vswitchd to create br-int"
        if waiting is None:
            return remote
        if state.message != waiting:
            state.message, self._report_due = waiting, True
        return None

    def _configure(self, state: NodeState, specs: list[TunnelSpec]) -> bool:
        """Write the node's br-int and tunnel ports as `specs` say; True if something was
        written (the node's answer, new ofports, comes in a later pass and asks for another
        look: until then a second look would write the same rows again)."""
        if state.session.configure(specs):
            state.reconfigure = False
            return True
        ports = state.session.tunnels()
        state.waiting = sorted(
            f"{s.port_name} to {s.peer}: {ports[s.port_name][2] or 'no ofport yet'}"
            for s in specs
            if s.port_name not in ports or not ports[s.port_name][1]
        )
        # Until every tunnel port has an ofport (vswitchd writes it after our transaction)
        # its flows are missing: push what there is, realize nothing.
        state.reconfigure = bool(state.waiting)
        state.stt = any(s.encap == "stt" for s in specs)
        return False

    def _send(self, state: NodeState, remote: str) -> bool:
        """Record new zones, push the flows, write the VIFs' QoS; True if flows were sent.

        New zones are recorded on the node's OVSDB before any flow using them goes to its
        vswitchd (a successor reads them back), released ones after the flows that used
        them are gone (a successor must not hand them out before); the record's
        confirmation (a round trip of 5-10 ms: ovsdb-server rewrites br-int's
        external_ids, thousands of keys) is awaited at the node's next push, in the same
        pass's second push phase at the latest, and the node counts nothing as realized
        until then."""
        self._confirm_zones(state)
        if state.unsaved_zones:
            self._record_zones(state)
        sent = self._push_flows(state, remote)
        if state.released_zones and state.unconfirmed is None:
            self._record_zones(state)
        if state.qos_dirty:
            self._write_qos(state)
        if self._probes_due(state):
            self._probe(state)
        return sent

    @staticmethod
    def _probes_due(state: NodeState) -> bool:
        return bool(state.probes) and time.monotonic() - state.probed_at >= PROBE_INTERVAL

    @staticmethod
    def _probe(state: NodeState) -> None:
        """Ask for the node's L3 services' next hops by ARP, out of their uplinks (the
        replies teach the node their MACs: rules/physical `LearnedHop`)."""
        assert state.switch is not None
        state.probed_at = time.monotonic()
        for _, ofport, vlan, mac, ip, target in sorted(state.probes, key=str):
            tagged = vlan is not None  # (an Option<bit<64>>: None or the VLAN)
            push = f"push_vlan:0x8100,set_field:{4096 + vlan}->vlan_vid," if tagged else ""
            frame = bytes.fromhex(packets.arp_request(mac, ip, target))
            state.switch.packet_out(frame, f"{push}output:{ofport}")

    @staticmethod
    def _record_zones(state: NodeState) -> None:
        """Send the node the zones given and released since its last record."""
        state.unconfirmed = state.session.save_zones(state.unsaved_zones, state.released_zones)
        state.unsaved_zones, state.released_zones = {}, set()

    @staticmethod
    def _confirm_zones(state: NodeState) -> None:
        """Wait for the node's answer to the last zone record (if any is outstanding)."""
        if state.unconfirmed is not None:
            confirm, state.unconfirmed = state.unconfirmed, None
            try:
                confirm()
            except Exception:
                # refused or lost: record them again (the node pushes whole next time)
                state.unsaved_zones = {**dict(state.zones), **state.unsaved_zones}
                raise

    def _write_qos(self, state: NodeState) -> None:
        """Give the node's VIFs their ports' QoS rates (written when they changed, and
        once after a connect: what the node has is compared there)."""
        wanted = {}
        for port in state.located & self._with_qos:  # (a subset of `_bindings`' ports)
            row = self._bindings[port]
            vif = inputs.opt(row["vif_id"])
            if vif:
                wanted[vif] = {k: int(v) for k, v in omap(row["qos"]).items()}
        if wanted != state.qos_written:
            state.session.configure_qos(wanted)
            state.qos_written = wanted
        state.qos_dirty = False

    def _push_flows(self, state: NodeState, remote: str) -> bool:
        """Push the node's flow changes: its whole table after a (re)connect or a takeover
        (`Switch.replace`: only the difference is sent), else the changed keys; one bundle
        either way. True if anything was sent."""
        if state.switch is None or state.switch.remote != remote:
            if state.switch is not None:
                state.switch.close()
            state.switch = Switch(remote)
        if self._member is not None:
            # Fencing: the bridge's master role, claimed with the assignment's zxid before
            # any write; the switch refuses a deposed master's bundles (it made it a slave)
            # and its claims (stale), the reconciliation's bundle as any other.
            generation = self._member.view.zxid
            if generation >= 0 and state.switch.channel.generation != generation:
                state.switch.channel.claim(generation)
        desired = self.desired_parts(state.session.system_id or "")
        if state.full_sync:
            state.switch.ensure_tlv_map()
            state.switch.replace(self.images.flows(desired))
            state.parts, state.pushed = desired, True
            state.full_sync = False
            self._bulk_loaded = True
            self._recheck |= state.located  # their status waited for this
            return True
        mods = self.images.mods(state.parts, desired, settled=not state.pushed)
        if mods:
            state.switch.apply(mods)
        state.parts, state.pushed = desired, True
        return bool(mods)

    # ---- status ----

    def _report(self, masters: set[str]) -> None:
        """Write what changed of the masters' status to the universal and config DBs: the
        ports whose location, binding or config row changed since the last report (every
        port when the nodes mastered changed), the nodes' status, the realized generation."""
        if not self._report_due and masters == self._reported_masters:
            return
        if not all(link.up for link in self.links):
            return  # written once both are back (`_report_due` stays set)
        check = self._recheck if masters == self._reported_masters else None
        self._recheck, self._report_due = set(), False
        self._reported_masters = set(masters)
        if check is None:
            located = {p: n for n in masters for p in self.nodes[n].located}
            check = (
                set(located) | set(self._bindings) | set(self.config.rows["Logical_Switch_Port"])
            )
        else:  # only the ports to check (a change's few, not the thousands located)
            located = {p: n for p in check for n in masters if p in self.nodes[n].located}
        ops = self._binding_ops(masters, located, check)
        if ops:
            try:
                self.universal.transact(ops)
            except (TransactError, OSError) as exc:
                log.warning("writing port bindings failed: %s", exc)
                self._recheck |= check
                self._report_due = True
        self._report_config(masters, located, check)

    def _binding_ops(
        self, masters: set[str], located: dict[str, str], check: set[str]
    ) -> list[dict[str, Any]]:
        """Universal DB updates of `Port_Binding.chassis`/`up` for the ports in `check`."""
        ops: list[dict[str, Any]] = []
        for port in check:
            row = self._bindings.get(port)
            if row is None:
                continue
            node = located.get(port)
            chassis = inputs.opt(row["chassis"])
            if node is not None and not self.nodes[node].full_sync:
                if chassis != node or row["up"] is not True:
                    ops.append({"op": "update", "table": "Port_Binding",
                                "where": [["logical_port", "==", port]],
                                "row": {"chassis": node, "up": True}})  # fmt: skip
            elif node is None and chassis in masters and row["type"] == "vif":
                # its VIF left a node this controller masters
                ops.append({"op": "update", "table": "Port_Binding",
                            "where": [["logical_port", "==", port], ["chassis", "==", chassis]],
                            "row": {"chassis": ["set", []], "up": False}})  # fmt: skip
        return ops

    def _report_config(self, masters: set[str], located: dict[str, str], check: set[str]) -> None:
        ops: list[dict[str, Any]] = []
        nodes = {str(r["system_id"]): (u, r) for u, r in self.config.rows["Transport_Node"].items()}
        for system_id, (uuid, row) in nodes.items():
            state = self.nodes.get(system_id)
            if state is None:  # gone: say so if it was connected here
                said = omap(row["status"])
                mine = said.get("controller") == self.name and system_id in self._seen
                if mine and said.get("connected") == "true":
                    ops.append(_set_status("Transport_Node", uuid, {
                        **{k: str(v) for k, v in said.items()}, "connected": "false",
                        "message": "not connected to any physical controller"}))  # fmt: skip
                continue
            if system_id not in masters:
                continue
            status = {
                "connected": "true", "controller": self.name,
                "realized_generation": str(state.realized), "message": state.message,
                **{f"bfd:{peer}": "up" if up else "down" for peer, up in state.bfd.items()},
            }  # fmt: skip
            if omap(row["status"]) != status:
                ops.append(_set_status("Transport_Node", uuid, status))
        ops += self._port_status_ops(masters, located, check)
        realized = self._realized_generation(masters)
        for uuid, row in self.config.rows["Loom_Global"].items():
            if realized is not None and row["realized_generation"] != realized:
                ops.append({"op": "update", "table": "Loom_Global",
                            "where": [["_uuid", "==", ["uuid", uuid]]],
                            "row": {"realized_generation": realized}})  # fmt: skip
        self._report_universal_realized(realized)
        if not ops:
            return
        conn = self.config.conn
        assert conn is not None
        try:
            conn.transact("Loom_Config", ops)
        except (TransactError, OSError) as exc:
            log.warning("writing status failed: %s", exc)
            self._recheck |= check
            self._report_due = True

    def _report_universal_realized(self, realized: int | None) -> None:
        """Copy the realized generation to `Universal_Global.realized_generation`."""
        for uuid, row in self.universal.rows["Universal_Global"].items():
            if realized is None or row.get("realized_generation") == realized:
                continue
            op = {"op": "update", "table": "Universal_Global",
                  "where": [["_uuid", "==", ["uuid", uuid]]],
                  "row": {"realized_generation": realized}}  # fmt: skip
            try:
                self.universal.transact([op])
            except (TransactError, OSError) as exc:
                log.warning("writing the realized generation failed: %s", exc)
                self._report_due = True

    def _port_status_ops(
        self, masters: set[str], located: dict[str, str], check: set[str]
    ) -> list[dict[str, Any]]:
        """Config DB updates of the status of the ports in `check` that are, or were, on
        the nodes this controller masters."""
        ops: list[dict[str, Any]] = []
        ports = self.config.rows["Logical_Switch_Port"]
        gone = {"up": "false", "realized": "false", "transport_node": ""}
        for port in check:
            row = ports.get(port)
            if row is None:
                continue
            status = omap(row["status"])
            node = located.get(port)
            if node is not None and not self.nodes[node].full_sync:
                want = {"up": "true", "realized": "true", "transport_node": node}
                if status != want:
                    ops.append(_set_status("Logical_Switch_Port", port, want))
            elif node is None and status.get("transport_node") in masters and status != gone:
                ops.append(_set_status("Logical_Switch_Port", port, gone))
        return ops

    def _realized_generation(self, masters: set[str]) -> int | None:
        """The generation every connected node has realized (as the nodes' status says, ours
        as we know them); None while a node of ours is not pushed yet."""
        generation = self._universal_generation()
        if any(self.nodes[n].full_sync for n in masters):
            return None
        for system_id, state in self.nodes.items():
            if system_id in masters:
                generation = min(generation, state.realized)
        for row in self.config.rows["Transport_Node"].values():
            status = omap(row["status"])
            sysid = str(row["system_id"])
            if sysid in masters or status.get("connected") != "true":
                continue
            with contextlib.suppress(ValueError):
                generation = min(generation, int(status.get("realized_generation", "0")))
        return generation

    # ---- for tests and tools ----

    def settled(self) -> bool:
        """True if everything known is on the nodes this controller masters: each one's
        flows pushed, its tunnel ports there (with ofports), its VIFs' bindings written."""
        if self._dirty_universal or any(state.dirty for state in self.nodes.values()):
            return False
        bindings = {r["logical_port"]: r for r in self.universal.rows["Port_Binding"].values()}
        for system_id in self.masters():
            state = self.nodes[system_id]
            if state.full_sync or self._flows_due(system_id, state):
                return False
            tunnels = {name for name, (_, ofport, _) in state.session.tunnels().items() if ofport}
            if any(spec.port_name not in tunnels for spec in self._tunnel_specs(system_id)):
                return False
            for port in state.located:
                row = bindings.get(port)
                if row is None or inputs.opt(row["chassis"]) != system_id or row["up"] is not True:
                    return False
        return True

    def tunnel_peers(self, system_id: str) -> set[str]:
        """The nodes node `system_id` has a tunnel port to (with an ofport)."""
        state = self.nodes.get(system_id)
        if state is None:
            return set()
        return {peer for peer, ofport, _ in state.session.tunnels().values() if ofport}

    def flows(self, system_id: str) -> list[Flow]:
        """Node `system_id`'s desired table."""
        state = self.nodes.get(system_id)
        if state is None:
            return []
        return sorted(self.images.flows(self.desired_parts(system_id)))

    def universal_conn(self) -> RawConnection:
        """The universal DB connection (for tests)."""
        assert self.universal.conn is not None
        return self.universal.conn


def _log_slow_push(node: str, took: float, steps: dict[str, float], whole: bool) -> None:
    """Say where a slow push's time went (OVSDB config; the rest: zone records, OpenFlow,
    QoS)."""
    if took <= SLOW_PUSH:
        return
    steps["send"] = took - sum(steps.values())
    parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in steps.items())
    log.warning("node %s: push took %.0f ms (%s; whole table: %s)", node, took * 1000, parts, whole)


def _set_status(table: str, uuid: str, status: dict[str, str]) -> dict[str, Any]:
    return {"op": "update", "table": table, "where": [["_uuid", "==", ["uuid", uuid]]],
            "row": {"status": ["map", sorted(status.items())]}}  # fmt: skip
