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

import collections
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from loom_common import heap, httpd, metrics, procstat, runner
from loom_common.cluster import membership
from loom_common.liveness import Heartbeat
from loom_common.ovsdb import OvsdbError, RawConnection, Replica, readable
from loom_common.passlog import PassLog
from loom_common.pki import Credentials, names_node, server_context
from loom_common.reconnect import CONNECTION_ERRORS, Link
from loom_ddlog import allocator_memory, gc_paused
from loom_ovs.manager import Manager, NodeSession
from loom_ovs.openflow import Flow, Key
from loom_physical import rules as physical_rules
from loom_physical.core import Localizer
from loom_physical.endpoints import Endpoints
from loom_physical.executor import Executor, NodeLink
from loom_physical.images import PartKey
from loom_physical.inputs import opt
from loom_physical.planner import Life, Plan, Planner
from loom_physical.reporting import Reporter
from loom_physical.rules import main_file
from loom_physical.sockets import NodeSockets
from loom_physical.universal import UniversalReplica

log = logging.getLogger(__name__)

T = TypeVar("T")

POLL_MS = 1000
SWEEP_S = 1.0
"""Seconds between looks at every node's session for updates nobody said were there
(else a pass reads the nodes that are readable, were written to, or whose keep-alive
thread kept updates)."""
MAX_ROUNDS = 8
"""Engine rounds per pass (zones and new datapaths feed back into the rules)."""
HANDOFF = 0.05
"""Seconds the loop waits at most, after a pass's first pushes, for `wait_pass` callers to
look (`_let_waiters_look`)."""
RECONNECT_S = 0.1
"""Seconds between tries to reach a switch that lost its table (its ovs-vswitchd is
restarting: a try is a connect to its socket, and its table goes in at the first that
succeeds)."""
LONG_PASS = 0.5
"""Seconds after which a pass counts as having made many objects (`heap.settle` follows)."""
LOGGED_PASS = 0.05
"""Seconds after which a pass that pushed nothing is written to the pass log all the same."""
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
        self._pass_log = PassLog(pass_log) if pass_log is not None else None
        self._this_pass: dict[str, float] = {}
        """Seconds by phase of the pass running (`pass_phases`, `PassLog`)."""
        self._pushed_now, self._computed_now = 0, False
        self.pass_phases: collections.deque[tuple[float, dict[str, float]]] = collections.deque(
            maxlen=1000
        )
        """(perf_counter at its start, seconds by phase) of the latest passes that computed or
        pushed something: `poll` (nodes and databases), `engine`, `push` (OVSDB config and
        OpenFlow), `report` (status)."""
        self.core = Localizer(physical_rules.load(self._rules, workers=workers))
        """What each node should hold (`loom_physical.core`)."""
        self.planner = Planner(self.core)
        """When and what each node is sent (`loom_physical.planner`)."""
        self.executor = Executor(lambda: self.core.images, tls, self._may_write)
        """Runs the plans on the nodes (`loom_physical.executor`)."""
        self.reporter = Reporter(self)
        """What is written of the nodes' and ports' status (`loom_physical.reporting`)."""
        self.endpoints = Endpoints(self, self._rules, tls)
        """Its flows and trace HTTP endpoints (`loom_physical.endpoints`)."""
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.manager = Manager(listen, self._wake, server_context(tls) if tls else None)
        self.refused: dict[str, str] = {}
        """Node -> why its connection was refused (its certificate names another node)."""
        self.universal = UniversalReplica(universal_remote, self._wake)
        self.config = Replica(config_remote, "Loom_Config", {
            "Transport_Node": ["system_id", "status"],
            "Loom_Global": ["generation", "realized_generation", "external_ids"],
            "Logical_Switch_Port": ["status"],
            "Gateway_Service": ["status"],
        }, wake=self._wake)  # fmt: skip
        self.heartbeat = Heartbeat(config_remote, name, url=http_url)
        """Tells the config DB's readers this controller is there (`loom_common.liveness`)."""
        self.links = (Link("Loom_Universal", self.universal), Link("Loom_Config", self.config))
        """The databases' connections: each up, or down and reconnecting (`Link`)."""
        self.failure: str | None = None
        """Why the controller gave up (its loop ended for good; `RETRY_DELAYS`)."""
        self._zk_hosts, self._session_timeout, self._zk_root = zookeeper, session_timeout, zk_root
        self._zk: Any = None
        self.member: membership.Member | None = None
        """Its membership of the physical cluster (None: alone, it masters every node)."""
        self.nodes: dict[str, NodeLink] = {}
        """The connected nodes' connections, by system-id."""
        self._pending: list[NodeSession] = []
        """Sessions whose node has not said its system-id yet."""
        self._accepted: collections.deque[NodeSession] = collections.deque()
        """Sessions the acceptor thread started, for the loop to take (`_accepting`)."""
        self._acceptor: threading.Thread | None = None
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.passes = 0
        self._waiters = 0
        """Threads in `wait_pass`."""
        self._looked = 0
        """Predicate evaluations since the last pass's first pushes."""
        self._pushers = concurrent.futures.ThreadPoolExecutor(
            max_workers=PUSH_THREADS, thread_name_prefix=f"push-{name}"
        )
        self._node_fds = NodeSockets()
        self._channel_fds = NodeSockets()
        """The nodes' kept OpenFlow channels: one that is readable is read between pushes
        (the switch's echo requests; its end: the switch lost its table)."""
        self._channels_ended: set[str] = set()
        """Nodes whose channel ended while the loop waited (`_answer_channels`)."""
        self._table_check: set[str] = set()
        """Nodes whose signals of their table (`TableSignals`) may have changed."""
        self._lost_nodes: set[str] = set()
        """Nodes mastered whose switch lost its table (`Life.LOST`): tried often."""
        self._to_read: set[str] | None = None
        """The nodes `_poll_nodes` reads (None: every node): readable, or written to since
        they were read (a transaction's reply can bring their updates along)."""
        self._swept = 0.0
        """When every node's session was last looked at (one closed elsewhere is seen)."""
        self._datapaths_followed: int | None = None
        """The core's `datapaths_version` when the universal flows followed were last set
        (None: a new core)."""
        self._liveness_due: set[str] = set()
        """Nodes that connected or went, or whose `Transport_Node` rows changed, since their
        liveness was given to the core (`_follow_nodes`)."""
        self._shards: set[str] | None = None
        self._shards_due = True
        """Nodes were configured, removed, connected or gone since the shards were set."""
        self._nodes_version = 0
        """Counts the nodes connecting and going (`_ownership`)."""
        self._owned: tuple[Any, tuple[set[str], frozenset[str]]] = (None, (set(), frozenset()))

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
        self.manager.start()
        self._poll_universal()  # a database not up yet: the loop keeps trying (`Link`)
        self._poll_config()
        if self._zk_hosts:
            self._zk = membership.connect(self._zk_hosts, session_timeout=self._session_timeout)
            self.member = membership.Member(
                self._zk, self.name, None, root=self._zk_root, on_change=lambda _: self._wake()
            ).start()
        self._thread = threading.Thread(target=self._loop, name=f"physical-{self.name}")
        self._thread.start()
        self.heartbeat.start()
        self._acceptor = threading.Thread(target=self._accepting, name=f"accept-{self.name}",
                                          daemon=True)  # fmt: skip
        self._acceptor.start()
        metrics.watch("physical", self.name, self._metric_samples)
        httpd.route("/nodes/", self.endpoints.flows_route)
        httpd.route("/trace", self.endpoints.trace_route)
        return self

    def _metric_samples(self) -> list[metrics.Sample]:
        """What a scrape reads (another thread: copies of what the loop keeps): nodes
        connected and mastered, each mastered node's flows as of its last push, and the
        controller's ZooKeeper membership, the native allocator's memory
        (`loom_common.metrics`)."""
        view = self.member.view if self.member is not None else None
        connected = list(self.nodes)
        mastered = [n for n in connected if view is None or view.may_write(n)]
        flows = dict(self.planner.flow_counts)
        labels = (self.name,)
        return [
            ("loom_physical_nodes", "Transport nodes connected to the controller, and mastered",
             ("controller", "state"),
             [((*labels, "connected"), len(connected)), ((*labels, "mastered"), len(mastered))]),
            ("loom_physical_node_flows", "Flows in a mastered node's table as of its last push",
             ("controller", "node"), [((*labels, n), flows[n]) for n in mastered if n in flows]),
            *metrics.cluster_samples("physical", self.name, view),
            *metrics.native_memory_samples("physical", self.name, allocator_memory()[0]),
        ]  # fmt: skip

    def _accepting(self) -> None:
        """The acceptor thread: take every node that dials in at once, read its database
        (`NodeSession.start`) and hand it to the loop (`_accepted`). Done in the loop, a
        node waited for the pass under way: at cold start with thousands of nodes, passes
        of many seconds, and the nodes gave up on connections that their inactivity probe
        found silent (and dialled again: churn)."""
        waits = self.manager.fds()
        while not self._stop.is_set():
            if not readable(waits, 0.5):
                continue
            for session in self.manager.accept():
                try:
                    session.start()
                except (OSError, OvsdbError) as exc:
                    log.warning("node from %s: could not read its database: %s", session.peer,
                                exc)  # fmt: skip
                    session.close()
                    continue
                self._accepted.append(session)
                self._wake()

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
        if self._acceptor is not None:
            self._acceptor.join(timeout)
        if self.member is not None:
            self.member.stop(timeout)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        self._pushers.shutdown(wait=True)
        self.endpoints.stop()
        for node in self.nodes.values():
            node.close()
        self._node_fds.close()
        self._channel_fds.close()
        for session in [*self._pending, *self._accepted]:
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
        """The connected nodes this controller writes to (do not modify)."""
        return self._ownership()[0]

    def _ownership(self) -> tuple[set[str], frozenset[str]]:
        """(masters, computed), worked out again only when the cluster's view or the
        connected nodes changed (each is a look at every node)."""
        view = self.member.view if self.member is not None else None
        key = (view, self._nodes_version)
        if self._owned[0] != key:
            if view is None:
                owned = (set(self.nodes), frozenset(self.nodes))
            else:
                ours = view.masters | view.standbys
                owned = ({n for n in self.nodes if view.may_write(n)},
                         frozenset(n for n in self.nodes if n in ours))  # fmt: skip
            self._owned = (key, owned)
        return self._owned[1]

    def _may_write(self, node: str) -> bool:
        """This controller masters `node` now (the view changes on ZooKeeper's thread)."""
        return self.member is None or self.member.view.may_write(node)

    def _token(self) -> int | None:
        """The fencing token of this pass's writes: the assignment's zxid (None: alone)."""
        if self.member is None or self.member.view.zxid < 0:
            return None
        return int(self.member.view.zxid)

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
            self.passes += 1
            self._cond.notify_all()

    def _pass(self) -> None:
        """One pass: poll, compute, push, report; then wait for something to do."""
        began = time.perf_counter()
        wall = time.time()
        self._this_pass, self._pushed_now, self._computed_now = {}, 0, False
        # No collection inside a pass (as the logical controller's): a cold start's pass
        # makes millions of long-lived objects (placed flows, replica rows, reports), which
        # collections walk again and again to find nothing. A long pass freezes what it
        # made instead; a short one leaves it to the collector, after the push.
        with gc_paused():
            with self._cond:  # `wait_pass` predicates see the state between passes
                masters = self._step()
                self._looked = 0
                self._cond.notify_all()  # flows are on the nodes: waiters may look
                self._let_waiters_look()
            if masters is not None:
                with self._cond:
                    sent = self._timed("report", self.reporter.send, masters)
                # the nodes where no port came or went, once the others' ports are written
                with self._cond:
                    pushed = self._push("push_others", masters, first=False)
                    self._timed("report_wait", sent.finish)
                    # (what the second phase sent, or realized without sending anything: a
                    # node whose zone record it confirmed)
                    if pushed or self.reporter.due or self.planner.report_due:
                        self._timed("report", lambda: self.reporter.send(masters).finish())
                    self._timed("settle", self.planner.end_pass)
                    self._cond.notify_all()
            # Whole tables are in, or a long pass made many objects (the status of
            # thousands of ports): out of the collector's sight (`loom_common.heap`).
            if self.planner.bulk_loaded or time.perf_counter() - began > LONG_PASS:
                self.planner.bulk_loaded = False
                self._timed("settle", heap.settle)
        with self._cond:
            self.passes += 1
            self._cond.notify_all()
        self._log_pass(wall, time.perf_counter() - began, masters)
        self._wait()

    def _log_pass(self, wall: float, took: float, masters: set[str] | None) -> None:
        """A pass that computed or pushed something, or took long, in the metrics and the
        pass log (idle passes are not)."""
        if took >= LONG_PASS:
            log.info("long pass %.1f s: %s", took, procstat.memory_text(allocator_memory()))
        if not (self._pushed_now or self._computed_now or took >= LOGGED_PASS):
            return
        metrics.observe_pass("physical", self.name, {**self._this_pass, "total": took},
                             self.core.generation)  # fmt: skip
        if self._pass_log is not None:
            self._pass_log.write(wall, took, self._this_pass, pushed=self._pushed_now,
                                 nodes=len(self.nodes), masters=len(masters or ()),
                                 generation=self.core.generation)  # fmt: skip

    def _timed(self, phase: str, do: Callable[..., T], *args: Any) -> T:
        """`do(*args)`, its time added to this pass's `phase` (the pass log's)."""
        began = time.perf_counter()
        result = do(*args)
        self._this_pass[phase] = self._this_pass.get(phase, 0.0) + time.perf_counter() - began
        return result

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
        """Wait until a node, a database or `_wake` has something, a link is due to
        reconnect, or `POLL_MS` passed; the nodes with something to read are noted. What
        a switch sends on an idle channel (its echo requests) is answered here, and waited
        on again: no pass for it unless the channel ended (`_watch_tables`)."""
        only_channels = self._wait_for_input()
        while not self._answer_channels() and only_channels and not self._stop.is_set():
            only_channels = self._wait_for_input()
        if self._to_read is not None:
            self._to_read |= self._node_fds.ready()
            kept = self.manager.kept
            while kept:  # (added to by keep-alive threads: popped one at a time)
                session = kept.pop()
                if session.system_id is not None:
                    self._to_read.add(session.system_id)

    def _answer_channels(self) -> bool:
        """Read the channels that are readable (`Channel.check`); True if one ended (its
        node is looked at by the next pass)."""
        ended = False
        for system_id in self._channel_fds.ready():
            link = self.nodes.get(system_id)
            if link is None or link.switch is None or not link.switch.channel.check():
                self._channel_fds.drop(system_id)
                self._channels_ended.add(system_id)
                ended = True
        return ended

    def _wait_for_input(self) -> bool:
        """Wait (see `_wait`); True if what woke it was the channels alone."""
        channels = self._channel_fds.fileno()
        fds = [self._wake_r, channels]
        timeout = POLL_MS / 1000 if not self._lost_nodes else RECONNECT_S
        for db in self.links:
            if db.has_pending():
                return False
            fd = db.fileno()
            if fd is not None:
                fds.append(fd)
            else:
                timeout = min(timeout, db.retry_in() or 0.0)
        to_read = self._to_read
        if to_read is None:
            return False  # (the first pass reads every node)
        if time.monotonic() - self._swept > SWEEP_S:  # a safety net, cheap per node
            self._swept = time.monotonic()
            for system_id, link in self.nodes.items():
                if not link.session.alive or link.session.replica.has_pending():
                    to_read.add(system_id)
        for system_id in to_read:  # written to: a reply may have brought more
            found = self.nodes.get(system_id)
            if found is not None and found.session.alive and found.session.replica.has_pending():
                return False
        fds.append(self._node_fds.fileno())
        fds += [s.fileno() for s in self._pending if s.alive]
        ready = readable(fds, timeout)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_r, 4096):
                    pass
        return set(ready) == {channels}

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
        masters, computed_nodes = self._ownership()
        core.set_computed(computed_nodes)
        core.set_masters(masters)
        rounds = 0
        for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 - counted for the pass record
            changed = core.compute()
            self._computed_now = self._computed_now or bool(changed)
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
        self._this_pass.update({"poll": polled - began, "engine": computed - polled})
        pushed = self._push("push", masters, first=True)
        if rounds > 1 or pushed:
            self.pass_phases.append((began, {"poll": polled - began, "engine": computed - polled,
                                             "push": self._this_pass["push"]}))  # fmt: skip
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
        plans = planner.plans(masters, generation, time.monotonic(), self._reading,
                              self._token(), first=first)  # fmt: skip
        pushed = 0
        while plans:
            if self._to_read is not None:  # (read next pass: a reply may bring their updates)
                self._to_read.update(p.node for p in plans)
            outcomes = self._run(plans)
            now, again = time.monotonic(), []
            for plan, outcome in zip(plans, outcomes, strict=True):
                pushed += outcome.sent or outcome.configured
                if planner.settle(plan, outcome, now):
                    again.append(
                        planner.plan(
                            planner.nodes[plan.node],
                            generation,
                            now,
                            self._reading(plan.node),
                            self._token(),
                        )
                    )
            self._watch_pushed([p.node for p in plans], masters)
            plans = again
        if not first:
            planner.still_due()
        took = time.perf_counter() - began
        self._this_pass[phase] = self._this_pass.get(phase, 0.0) + took
        if pushed and not first:
            self.pass_phases.append((began, {phase: took}))
        self._pushed_now += pushed
        return pushed

    def _run(self, plans: list[Plan]) -> list[Any]:
        """Run `plans` (one per node): the executor's outcomes, in order."""
        if len(plans) == 1:
            return [self.executor.run(plans[0], self.nodes[plans[0].node])]
        return list(self._pushers.map(lambda p: self.executor.run(p, self.nodes[p.node]), plans))

    def _reading(self, system_id: str) -> Any:
        """What node `system_id`'s session and channel say now (`Planner.plans`)."""
        return self.nodes[system_id].reading()

    def _watch_pushed(self, pushed: list[str], masters: set[str]) -> None:
        """After pushes: watch the channels of the nodes `pushed` as they are now, and keep
        the nodes whose switch lost its table (tried again every `RECONNECT_S`)."""
        for system_id in pushed:
            self._watch_channel(system_id)
        self._lost_nodes = self.planner.lost_among(masters)

    def _watch_channel(self, system_id: str) -> None:
        """Watch node `system_id`'s channel as it is now (after a push: it may have
        connected again, or been closed)."""
        link = self.nodes.get(system_id)
        fd = link.switch.channel.fileno() if link is not None and link.switch else None
        if fd is None:
            self._channel_fds.drop(system_id)
        elif self._channel_fds.watching(system_id) != fd:
            self._channel_fds.watch(system_id, fd)

    # ---- inputs ----

    def _accept(self) -> None:
        while self._accepted:
            self._pending.append(self._accepted.popleft())
        still = []
        for session in self._pending:
            session.poll()
            system_id = session.system_id
            if not session.alive:
                continue
            if system_id is None:
                still.append(session)
                continue
            if self.manager.tls is not None and not names_node(session.certified, system_id):
                why = f"its certificate names {session.certified!r}, not {system_id!r}"
                log.warning("node %s at %s refused: %s", system_id, session.peer, why,
                            extra={"node": system_id, "peer": session.peer})  # fmt: skip
                self.refused[system_id] = why
                session.close()
                continue
            link = self.nodes.get(system_id)
            if link is None:
                link = self.nodes[system_id] = NodeLink(session)
            else:  # the node came back: a new session, a new OpenFlow channel
                link.reconnected(session)
                self._channel_fds.drop(system_id)
            self.planner.connected(system_id)
            self.core.node(system_id, link.facts(), session.zones())
            self._node_fds.watch(system_id, session.fileno())
            if self._to_read is not None:
                self._to_read.add(system_id)
            log.info("node %s connected from %s", system_id, session.peer,
                     extra={"node": system_id, "peer": session.peer})  # fmt: skip
            self.reporter.seen.add(system_id)
            self._liveness_due.add(system_id)
            self.reporter.due = self._shards_due = True
            self._nodes_version += 1
        self._pending = still

    def _poll_config(self) -> None:
        for table, uuid, _ in self.links[1].sync():
            self.reporter.due = True
            if table == "Logical_Switch_Port":
                self.reporter.port_changed(uuid)
            elif table == "Transport_Node":
                nodes, shards = self.reporter.node_row_changed(uuid)
                self._liveness_due |= nodes
                self._shards_due = self._shards_due or shards

    def _follow_nodes(self) -> None:
        """The nodes configured or connected, or their status, changed: who is live and
        the shards to assign (when this member leads) follow."""
        due, self._liveness_due = self._liveness_due, set()
        for node in due:  # (`core.liveness`, for the nodes whose inputs to it changed)
            self.core.set_node_liveness(node, *self.reporter.liveness(node))
        if self.member is not None and self._shards_due:
            self._shards_due = False
            shards = set(self.reporter.node_uuid) | set(self.nodes)
            if shards != self._shards:
                self._shards = shards
                self.member.set_shards(shards)

    def _poll_universal(self) -> None:
        changes = self.links[0].sync()
        if changes:
            self.core.universal(changes)

    def _poll_nodes(self) -> None:
        """Read what the nodes with something to read sent (`_to_read`; all of them when
        `_wait` did not look: a look at each is paid per node)."""
        names, self._to_read = self._to_read, set()
        for system_id in list(self.nodes) if names is None else sorted(names):
            link = self.nodes.get(system_id)
            if link is None:
                continue
            session = link.session
            if session.alive and session.replica.has_pending():
                self._to_read.add(system_id)  # (read the rest next pass; `_wait` returns)
            if session.poll():
                self._table_check.add(system_id)
                self.planner.changed_db(system_id, session.bfd())
                self.core.node(system_id, link.facts(), session.zones())
            if not session.alive:
                log.info("node %s disconnected", system_id, extra={"node": system_id})
                self._liveness_due.add(system_id)
                self.reporter.due = self._shards_due = True
                self._nodes_version += 1
                for fds in (self._node_fds, self._channel_fds):
                    fds.drop(system_id)
                self._lost_nodes.discard(system_id)
                self._to_read.discard(system_id)
                self.planner.gone(system_id)
                self.nodes.pop(system_id).close()
                self.core.node_gone(system_id)

    def _watch_tables(self) -> None:
        """Notice the nodes whose switch may have lost its table: their channel ended
        (`_answer_channels`, as the loop waited), their OVSDB changed (br-int made again,
        flow-restore-wait). A restarted ovs-vswitchd says so only by the end of its
        OpenFlow connections: the node's OVSDB stays connected and shows nothing, and the
        channel is otherwise read only when something is pushed."""
        ended, self._channels_ended = self._channels_ended, set()
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

    def desired_parts(self, system_id: str) -> set[PartKey]:
        """The parts of node `system_id`'s table as the rules have it now."""
        return self.core.desired_parts(system_id)

    def installed(self, system_id: str) -> set[Key]:
        """The keys of the flows node `system_id` holds as of its last push (between
        passes: every change pushed is settled)."""
        node = self.planner.nodes.get(system_id)
        if node is None:
            return set()
        return {flow.key for flow in self.core.images.flows(node.parts)}

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

    def universal_conn(self) -> RawConnection:
        """The universal DB connection (for tests)."""
        assert self.universal.conn is not None
        return self.universal.conn
