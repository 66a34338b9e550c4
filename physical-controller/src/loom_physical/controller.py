"""The physical controller daemon: its I/O shell. What each node should hold is decided by
`loom_physical.core` (transport nodes + universal flows -> rules/physical -> each node's
desired state), when and what a node is sent by `loom_physical.planner`, what is reported
by `loom_physical.reporting` (the ops: `loom_physical.status`); this module accepts the
nodes, polls them and the two databases, runs the computation and the plans (on push
threads, `loom_physical.executor`), and feeds the outcomes back.

One thread runs the loop. Each pass:

1. accepts nodes that dialled in (`loom_ovs.manager.Manager`), polls their replicas and
   gives the core what each says (`NodeFacts`, its zone record); a node whose switch may
   have lost its table (its OpenFlow channel ended, as the loop waited: a restarted
   ovs-vswitchd, which its OVSDB does not show) realizes nothing until pushed whole
   (`_watch_tables`, `core.table_unknown`);
2. polls the universal DB (`UniversalReplica`: small tables whole, `Universal_Flow` only for
   the datapaths the nodes need) and gives the core its changes;
3. computes (`Localizer.compute`: one engine transaction of the physical rules, the
   universal flows placed into parts, each translated and encoded once, the same on every
   node); a new set of needed datapaths changes the flow monitor's condition, new zones
   feed back, and the pass computes again until nothing is left;
4. for the nodes it masters, the planner's plans (`Planner.plans`: first the nodes where a
   port came or went, then, after their ports' status is sent, the others): br-int and
   the tunnel ports, new zones recorded, the flow changes in one bundle per node (a node
   that (re)connected, was just taken over or whose switch lost its table is reconciled:
   only the difference sent, in one bundle), QoS; run on the push threads
   (`Executor.run`), settled on the loop's (`Planner.settle`); and
   reports (`Reporter.send`): `Port_Binding.chassis`/`up` in the universal DB,
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

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from loom_common import heap, httpd, metrics, runner
from loom_common.cluster import membership
from loom_common.liveness import Heartbeat
from loom_common.ovsdb import Replica
from loom_common.pki import Credentials, server_context
from loom_common.reconnect import CONNECTION_ERRORS, Link
from loom_ddlog import gc_paused
from loom_ovs.manager import Manager
from loom_ovs.openflow import Flow
from loom_physical import rules as physical_rules
from loom_physical.acceptor import Acceptor
from loom_physical.core import Localizer
from loom_physical.endpoints import Endpoints
from loom_physical.executor import Executor, NodeLink
from loom_physical.inputs import opt
from loom_physical.ownership import Ownership
from loom_physical.passes import LONG_PASS, PassGate, PassRecord
from loom_physical.planner import Life, Outcome, Plan, Planner, Reading
from loom_physical.reporting import CONFIG_COLUMNS, Reporter
from loom_physical.rules import main_file
from loom_physical.sockets import Waits
from loom_physical.universal import UniversalReplica

log = logging.getLogger(__name__)

MAX_ROUNDS = 8
"""Engine rounds per pass (zones and new datapaths feed back into the rules)."""
PUSH_THREADS = 16
"""Nodes pushed at once (a whole table is compared by `ovs-ofctl diff-flows`, whose process
the thread waits for)."""
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)
"""Seconds waited after the 1st, 2nd, ... failed pass in a row before starting over
(`_start_over`). One more failure and the controller gives up (`failure`): it leaves the
cluster, so that a standby takes its nodes over, and the daemon exits non-zero."""


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
        pass_log: Path | None = None,
        tls: Credentials | None = None,
        http_url: str | None = None,
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
            pass_log: a file to append one JSON line to per pass that computed or pushed
                something (`loom_common.passlog.PassLog`: when, how long by phase — poll,
                engine, push, report (the status sent to the databases), push_others (the
                second push phase), report_wait (the databases' answers), settle —, how
                many nodes pushed, how many connected and mastered, the generation).
            tls: with a `pssl:` `listen`, the controller's key and certificate and the
                authority nodes' certificates must be signed by (`loom_common.pki`): a node
                is taken only for the node its certificate names, and its OpenFlow, when
                at an `ssl:` address, is reached with the same credentials and must present
                the same certificate.
            http_url: where this controller's HTTP endpoint answers (`loom_common.httpd`,
                its `--metrics`), published with its heartbeat for the API server, which
                asks it for a node's flows (`flows`).
        """
        self.name = name
        self._rules = rules or main_file()
        self._workers = workers
        self._retry_delays = retry_delays
        self.record = PassRecord(name, pass_log)
        """The pass's phases: `poll` (nodes and databases), `engine`, `push`, `report` ..."""
        self.core = Localizer(physical_rules.load(self._rules, workers=workers))
        """What each node should hold (`loom_physical.core`)."""
        self.planner = Planner(self.core)
        """When and what each node is sent (`loom_physical.planner`)."""
        self.waits = Waits()
        """What the loop waits on between passes (`loom_physical.sockets`)."""
        self._wake = self.waits.wake
        self.ownership = Ownership(name, zookeeper, session_timeout, zk_root, self._wake)
        """Which nodes it computes and masters (`loom_physical.ownership`)."""
        self.executor = Executor(lambda: self.core.images, tls, self.ownership.may_write)
        """Runs the plans on the nodes (`loom_physical.executor`)."""
        self.reporter = Reporter(self)
        """What is written of the nodes' and ports' status (`loom_physical.reporting`)."""
        self.endpoints = Endpoints(self, self._rules, tls)
        """Its flows and trace HTTP endpoints (`loom_physical.endpoints`)."""
        self.manager = Manager(listen, self._wake, server_context(tls) if tls else None)
        self.acceptor = Acceptor(self.manager, self._wake, name)
        """The nodes that dialled in, until each says who it is."""
        self.refused = self.acceptor.refused
        """Node -> why its connection was refused (its certificate names another node)."""
        self.universal = UniversalReplica(universal_remote, self._wake)
        self.config = Replica(config_remote, "Loom_Config", CONFIG_COLUMNS, wake=self._wake)
        self.heartbeat = Heartbeat(config_remote, name, url=http_url)
        """Tells the config DB's readers this controller is there (`loom_common.liveness`)."""
        self.links = (Link("Loom_Universal", self.universal), Link("Loom_Config", self.config))
        """The databases' connections: each up, or down and reconnecting (`Link`)."""
        self.failure: str | None = None
        """Why the controller gave up (its loop ended for good; `RETRY_DELAYS`)."""
        self.nodes: dict[str, NodeLink] = {}
        """The connected nodes' connections, by system-id."""
        self._stop = threading.Event()
        self.gate = PassGate()
        """Where other threads look at the state between passes (`wait_pass`)."""
        self._cond = self.gate.lock
        self._thread: threading.Thread | None = None
        self._pushers = concurrent.futures.ThreadPoolExecutor(PUSH_THREADS, f"push-{name}")
        self._table_check: set[str] = set()
        """Nodes whose signals of their table (`TableSignals`) may have changed."""
        self._lost_nodes: set[str] = set()
        """Nodes mastered whose switch lost its table (`Life.LOST`): tried often."""
        self._datapaths_followed: int | None = None
        """The core's `datapaths_version` when the universal flows followed were last set
        (None: a new core)."""
        self._liveness_due: set[str] = set()
        """Nodes that connected or went, or whose `Transport_Node` rows changed, since their
        liveness was given to the core (`_follow_nodes`)."""

    @property
    def zone_rounds(self) -> int:
        """Engine rounds run again for zones the rules asked for (not given beforehand)."""
        return self.core.zone_rounds

    @property
    def conflicts(self) -> dict[str, int]:
        """Node -> OpenFlow matches wanted with different actions (the last push)."""
        return self.planner.conflicts

    # ---- lifecycle ----

    def start(self) -> PhysicalController:
        """Listen for nodes, connect to the databases, join the cluster, start the thread."""
        self._poll_universal()  # a database not up yet: the loop keeps trying (`Link`)
        self._poll_config()
        self.ownership.start()
        self._thread = threading.Thread(target=self._loop, name=f"physical-{self.name}")
        self._thread.start()
        self.heartbeat.start()
        self.acceptor.start()
        metrics.watch("physical", self.name, self.reporter.metric_samples)
        httpd.route("/nodes/", self.endpoints.flows_route)
        httpd.route("/trace", self.endpoints.trace_route)
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
        metrics.forget("physical", self.name)
        httpd.unroute("/nodes/")
        httpd.unroute("/trace")
        self._wake()
        self.heartbeat.stop()
        if self._thread is not None:
            self._thread.join(timeout)
        self.acceptor.stop(timeout)
        self.ownership.stop(timeout)
        self._pushers.shutdown(wait=True)
        self.endpoints.stop()
        for node in self.nodes.values():
            node.close()
        for link in self.links:
            link.close()
        self.waits.close()

    @property
    def passes(self) -> int:
        """Passes run so far."""
        return self.gate.passes

    def wait_pass(
        self, predicate: Callable[[PhysicalController], bool], timeout: float, *, wake: bool = True
    ) -> bool:
        """Wait until `predicate(self)` holds after a pass; False on timeout. With `wake`,
        each check asks for a pass (a benchmark passes False: passes come from changes)."""
        alive = lambda: self._thread is not None and self._thread.is_alive()  # noqa: E731
        return self.gate.wait(lambda: predicate(self), timeout, alive=alive,
                              wake=self._wake if wake else None)  # fmt: skip

    # ---- ownership ----

    def masters(self) -> set[str]:
        """The connected nodes this controller writes to (do not modify)."""
        return self.ownership.of(self.nodes)[0]

    @property
    def member(self) -> membership.Member | None:
        """Its membership of the physical cluster (None: alone, it masters every node)."""
        return self.ownership.member

    # ---- the loop ----

    def _loop(self) -> None:
        """Run passes until `stop()` (`runner.run_passes`: a failed pass is logged, the
        controller starts over after a wait, and gives up when passes keep failing)."""
        runner.run_passes(self._pass, stopped=self._stop, retry_delays=self._retry_delays,
                          give_up=self._give_up, recover=self._recover,
                          what="physical controller", log=log)  # fmt: skip

    def _recover(self) -> None:
        with self._cond:
            self._start_over()
        self.gate.passed()

    def _pass(self) -> None:
        """One pass: poll, compute, push, report; then wait for something to do."""
        began = time.perf_counter()
        wall = time.time()
        self.record.begin()
        # No collection inside a pass (as the logical controller's): a cold start's pass
        # makes millions of long-lived objects (placed flows, replica rows, reports), which
        # collections walk again and again to find nothing. A long pass freezes what it
        # made instead; a short one leaves it to the collector, after the push.
        with gc_paused():
            with self._cond:  # `wait_pass` predicates see the state between passes
                masters = self._step()
                self.gate.first_pushes_done()  # flows are on the nodes: waiters may look
            if masters is not None:
                with self._cond:
                    sent = self.record.timed("report", self.reporter.send, masters)
                # the nodes where no port came or went, once the others' ports are written
                with self._cond:
                    pushed = self._push("push_others", masters, first=False)
                    self.record.timed("report_wait", sent.finish)
                    # (what the second phase sent, or realized without sending anything: a
                    # node whose zone record it confirmed)
                    if pushed or self.reporter.due or self.planner.report_due:
                        self.record.timed("report", lambda: self.reporter.send(masters).finish())
                    self.record.timed("settle", self.planner.end_pass)
                    self._cond.notify_all()
            # Whole tables are in, or a long pass made many objects (the status of
            # thousands of ports): out of the collector's sight (`loom_common.heap`).
            if self.planner.bulk_loaded or time.perf_counter() - began > LONG_PASS:
                self.planner.bulk_loaded = False
                self.record.timed("settle", heap.settle)
        self.gate.passed()
        self.record.finish(
            wall,
            time.perf_counter() - began,
            nodes=len(self.nodes),
            masters=len(masters or ()),
            generation=self.core.generation,
        )
        self._wait()

    def _give_up(self, reason: str) -> None:
        """The controller cannot go on: record why, leave the cluster, wake the waiters."""
        if self.failure is not None or self._stop.is_set():
            return
        log.error("physical controller %s cannot continue: %s", self.name, reason)
        runner.leave_cluster(self.member, log)
        self.heartbeat.stop()  # its nodes' status ages out
        self.failure = reason  # once it has left: whoever sees the failure sees it gone
        with self._cond:
            self._cond.notify_all()

    def _start_over(self) -> None:
        """After a failed pass, whatever the engine holds is unknown: a new core, fed from
        the databases and the nodes (as a restarted controller would), each node's zones
        kept; each node is reconciled once computed again (only what differs is sent)."""
        old = self.core
        self.core = self.planner.core = Localizer(
            physical_rules.load(self._rules, workers=self._workers)
        )
        # The replicas are kept by their links (what failed is the engine's state): every
        # row held is fed again.
        self.core.universal((table, uuid, row) for table, rows in self.universal.rows.items()
                            for uuid, row in rows.items())  # fmt: skip
        self.reporter.start_over()
        self._liveness_due |= self.nodes.keys() | self.reporter.node_row_uuids.keys()
        self._datapaths_followed = None
        for system_id, link in self.nodes.items():
            self.core.node(system_id, link.facts(), link.session.zones())
            self.core.carry_zones(system_id, old)
        self.planner.start_over()

    def _wait(self) -> None:
        """Wait for something to do (`Waits.wait`)."""
        self.waits.wait(self.links, self.nodes, self.acceptor.pending, self.manager.kept,
                        hurry=bool(self._lost_nodes), stopped=self._stop)  # fmt: skip

    def _step(self) -> set[str] | None:
        """Poll, compute, push the first phase; return the nodes mastered (None: nothing
        pushed, the computation did not settle) for the report, which the loop runs after."""
        began = time.perf_counter()
        self._accept()
        self._poll_config()
        self._poll_universal()
        self._poll_nodes()
        self._watch_tables()
        polled = time.perf_counter()
        core = self.core
        self._follow_nodes()
        # One view of the cluster for the whole pass: a node mastered is a node computed
        # (the view changes on ZooKeeper's thread; read twice, a node that became ours
        # between the computation and the push would be pushed an empty table).
        masters, computed_nodes = self.ownership.of(self.nodes)
        core.set_computed(computed_nodes)
        core.set_masters(masters)
        for _ in range(MAX_ROUNDS):
            changed = core.compute()
            self.record.computed = self.record.computed or bool(changed)
            self._follow_datapaths()
            if not changed or not core.feeds_back():
                break
        else:  # still changing: push nothing half-computed (a reconcile would delete flows)
            self._wake()
            return None
        changes = core.take_changed()
        self.planner.take(changes)
        self.reporter.recheck |= changes.ports
        self.reporter.due = self.reporter.due or changes.status or bool(changes.ports)
        computed = time.perf_counter()
        self.planner.mastered_now(masters)
        self.record.add("poll", polled - began)
        self.record.add("engine", computed - polled)
        self._push("push", masters, first=True)
        return masters

    def _follow_datapaths(self) -> None:
        """Read the universal flows of the datapaths the nodes computed here need now."""
        version = self.core.datapaths_version
        if version == self._datapaths_followed:
            return
        self._datapaths_followed = version
        needed = self.core.needed_datapaths()
        if needed != self.universal.datapaths:
            try:
                self.universal.set_datapaths(needed)
            except CONNECTION_ERRORS as exc:
                self.links[0].lost(exc)  # (it asks for them when it reconnects)
            self._poll_universal()

    # ---- pushing ----

    def _push(self, phase: str, masters: set[str], *, first: bool) -> int:
        """Run a pass's phase of pushes (`Planner.plans`) on the push threads, settle each
        outcome on this one; the number of nodes sent something. A whole table is compared
        by `ovs-ofctl diff-flows`, which waits on the node most of its time: the nodes are
        pushed in parallel."""
        began = time.perf_counter()
        planner, generation = self.planner, self.core.generation
        token = self.ownership.token()
        plans = planner.plans(masters, generation, time.monotonic(), self._reading, token,
                              first=first)  # fmt: skip
        pushed = 0
        while plans:
            self.waits.read_later(p.node for p in plans)  # (a reply may bring updates)
            outcomes = self._run(plans)
            now, again = time.monotonic(), []
            for plan, outcome in zip(plans, outcomes, strict=True):
                pushed += outcome.sent or outcome.configured
                if planner.settle(plan, outcome, now):  # (to be reconciled at once)
                    node = planner.nodes[plan.node]
                    reading = self._reading(node.name)
                    again.append(planner.plan(node, generation, now, reading, token))
            self._watch_pushed([p.node for p in plans], masters)
            plans = again
        if not first:
            planner.still_due()
        self.record.add(phase, time.perf_counter() - began)
        self.record.pushed += pushed
        return pushed

    def _run(self, plans: list[Plan]) -> list[Outcome]:
        """Run `plans` (one per node): the executor's outcomes, in order."""
        if len(plans) == 1:
            return [self.executor.run(plans[0], self.nodes[plans[0].node])]
        return list(self._pushers.map(lambda p: self.executor.run(p, self.nodes[p.node]), plans))

    def _reading(self, system_id: str) -> Reading:
        """What node `system_id`'s session and channel say now (`Planner.plans`)."""
        return self.nodes[system_id].reading()

    def _watch_pushed(self, pushed: list[str], masters: set[str]) -> None:
        """After pushes: watch the channels of the nodes `pushed` as they are now, and keep
        the nodes whose switch lost its table (tried again every `RECONNECT_S`)."""
        for system_id in pushed:
            self.waits.watch_channel(system_id, self.nodes.get(system_id))
        self._lost_nodes = self.planner.lost_among(masters)

    # ---- inputs ----

    def _accept(self) -> None:
        """Take the nodes that said who they are (`Acceptor.identified`)."""
        for system_id, session in self.acceptor.identified():
            link = self.nodes.get(system_id)
            if link is None:
                link = self.nodes[system_id] = NodeLink(session)
            else:  # the node came back: a new session, a new OpenFlow channel
                link.reconnected(session)
                self.waits.channel_fds.drop(system_id)
            self.planner.connected(system_id)
            self.core.node(system_id, link.facts(), session.zones())
            self.waits.node_fds.watch(system_id, session.fileno())
            self.waits.read_later([system_id])
            log.info("node %s connected from %s", system_id, session.peer,
                     extra={"node": system_id, "peer": session.peer})  # fmt: skip
            self.reporter.seen.add(system_id)
            self._liveness_due.add(system_id)
            self.reporter.due = True
            self.ownership.nodes_changed()

    def _poll_config(self) -> None:
        for table, uuid, _ in self.links[1].sync():
            self.reporter.due = True
            if table == "Logical_Switch_Port":
                self.reporter.port_changed(uuid)
            elif table == "Transport_Node":
                nodes, shards = self.reporter.node_row_changed(uuid)
                self._liveness_due |= nodes
                self.ownership.shards_due = self.ownership.shards_due or shards

    def _follow_nodes(self) -> None:
        """The nodes configured or connected, or their status, changed: who is live and
        the shards to assign (when this member leads) follow."""
        due, self._liveness_due = self._liveness_due, set()
        for node in due:  # (`core.liveness`, for the nodes whose inputs to it changed)
            self.core.set_node_liveness(node, *self.reporter.liveness(node))
        if self.ownership.shards_due:
            self.ownership.set_shards(set(self.reporter.node_uuid) | set(self.nodes))

    def _poll_universal(self) -> None:
        changes = self.links[0].sync()
        if changes:
            self.core.universal(changes)

    def _poll_nodes(self) -> None:
        """Read what the nodes with something to read sent (`Waits.to_read`; all of them
        when the wait did not look: a look at each is paid per node)."""
        names = self.waits.take_to_read()
        for system_id in list(self.nodes) if names is None else sorted(names):
            link = self.nodes.get(system_id)
            if link is None:
                continue
            session = link.session
            if session.alive and session.replica.has_pending():
                self.waits.read_later([system_id])  # (the rest next pass: the wait returns)
            if session.poll():
                self._table_check.add(system_id)
                self.planner.changed_db(system_id, session.bfd())
                self.core.node(system_id, link.facts(), session.zones())
            if not session.alive:
                log.info("node %s disconnected", system_id, extra={"node": system_id})
                self._liveness_due.add(system_id)
                self.reporter.due = True
                self.ownership.nodes_changed()
                self.waits.node_gone(system_id)
                self._lost_nodes.discard(system_id)
                self.planner.gone(system_id)
                self.nodes.pop(system_id).close()
                self.core.node_gone(system_id)

    def _watch_tables(self) -> None:
        """Notice the nodes whose switch may have lost its table: their channel ended
        (`_answer_channels`, as the loop waited), their OVSDB changed (br-int made again,
        flow-restore-wait). A restarted ovs-vswitchd says so only by the end of its
        OpenFlow connections: the node's OVSDB stays connected and shows nothing, and the
        channel is otherwise read only when something is pushed."""
        ended, self.waits.channels_ended = self.waits.channels_ended, set()
        check, self._table_check = self._table_check | ended, set()
        for system_id in check:
            link = self.nodes.get(system_id)
            if link is not None and self.planner.check_table(
                system_id, link.signals(), ended=system_id in ended
            ):
                self._lost_nodes.add(system_id)

    # ---- for tests and tools ----

    def settled(self) -> bool:
        """True if everything known is on the nodes this controller masters: each one's
        flows pushed, its tunnel ports there (with ofports), its VIFs' bindings written."""
        if self.core.has_pending():
            return False
        bindings = {r["logical_port"]: r for r in self.universal.rows["Port_Binding"].values()}
        changed = self.core.images.changed()
        for system_id in self.masters():
            node = self.planner.nodes[system_id]
            if not node.synced or self.planner.flows_due(node, changed):
                return False
            tunnels = {name for name, (_, ofport, _) in
                       self.nodes[system_id].session.tunnels().items() if ofport}  # fmt: skip
            if any(s.port_name not in tunnels for s in self.core.tunnel_specs(system_id)):
                return False
            for port in self.core.located(system_id):
                row = bindings.get(port)
                if row is None or opt(row["chassis"]) != system_id or row["up"] is not True:
                    return False
        return True

    def tunnel_peers(self, system_id: str) -> set[str]:
        """The nodes node `system_id` has a per-peer tunnel port to (with an ofport)."""
        link = self.nodes.get(system_id)
        if link is None:
            return set()
        return {peer for peer, ofport, _ in link.session.tunnels().values() if ofport and peer}

    def life(self, system_id: str) -> Life | None:
        """Where node `system_id` is in its life here (None: not connected)."""
        node = self.planner.nodes.get(system_id)
        return node.life if node is not None else None

    def flows(self, system_id: str) -> list[Flow]:
        """Node `system_id`'s desired table."""
        if system_id not in self.nodes:
            return []
        return self.core.flows(system_id)
