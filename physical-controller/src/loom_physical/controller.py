"""The physical controller daemon: its I/O. What it decides is `loom_physical.core`
(transport nodes + universal flows -> rules/physical -> each node's desired state), what it
reports `loom_physical.status`; this module reads and writes: the nodes' OVSDB sessions
and OpenFlow channels, the two databases, ZooKeeper.

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
4. for the nodes it masters: writes `br-int` and the tunnel ports the core asks for,
   records new zones on the node, pushes the flow changes in one bundle per node (a node
   that (re)connected, was just taken over or whose switch lost its table is reconciled:
   `Switch.replace`, only the difference sent, in one bundle; nothing is removed and
   re-added), writes QoS, and
   reports: `Port_Binding.chassis`/`up` in the universal DB, `Transport_Node.status`,
   `Logical_Switch_Port.status` and `Loom_Global.realized_generation` in the config DB.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

from loom_common import heap, httpd, metrics, procstat, runner
from loom_common.cluster import membership
from loom_common.liveness import Heartbeat
from loom_common.ovsdb import OvsdbError, RawConnection, Replica, TransactError, readable
from loom_common.passlog import PassLog
from loom_common.pki import Credentials, names_node, server_context
from loom_common.reconnect import CONNECTION_ERRORS, Link
from loom_ddlog import allocator_memory, gc_paused
from loom_ovs import packets
from loom_ovs.manager import Manager, NodeSession, TunnelSpec, omap
from loom_ovs.openflow import Flow, Key, OpenFlowError, Switch
from loom_physical import flowsview, status, trace
from loom_physical import rules as physical_rules
from loom_physical.core import (
    Localizer,
    NodeFacts,
    TableSignals,
    node_liveness,
    table_unknown,
    unindex,
)
from loom_physical.images import PartKey
from loom_physical.inputs import opt
from loom_physical.rules import main_file
from loom_physical.scratch import ScratchDown, ScratchError, Tracer
from loom_physical.universal import DB as UNIVERSAL_DB
from loom_physical.universal import UniversalReplica, read_flows

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
PROBE_INTERVAL = 30.0
"""Seconds between a node's ARP requests for its L3 services' next hops (learned ones are
kept fresh: a next hop's new MAC is learned from the next reply)."""
RECONNECT_S = 0.1
"""Seconds between tries to reach a switch that lost its table (its ovs-vswitchd is
restarting: a try is a connect to its socket, and its table goes in at the first that
succeeds)."""
SLOW_PUSH = 0.5
"""Seconds after which a node's push is logged with where its time went."""
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


REPORTED = frozenset({"realized", "message", "bfd", "full_sync", "lost"})
"""The `NodeState` fields its status report (`status.NodeReport`) is made of."""


@dataclass
class NodeState:
    """What the shell holds for one connected node (the core holds what it decides).

    Setting a field of its status report (`REPORTED`) adds the node to `marks` (the
    controller's nodes whose report may have changed: a report rebuilds theirs, not every
    node's)."""

    session: NodeSession
    name: str = ""
    """Its system-id (as its session says, read once: `marks` takes it at every change)."""
    parts: set[PartKey] = field(default_factory=set)
    """The parts its table holds as of the last push (`images.Images.settle`)."""
    placed: bool = True
    """Its desired parts may differ from `parts` (its datapaths or ports changed since)."""
    full_sync: bool = True
    """The next push replaces the whole table (connected, reconnected or taken over)."""
    pushed: bool = False
    """Pushed in the current pass (a node that holds a changed part and was not must be
    pushed whole next time: the change is forgotten at the pass's end)."""
    realized: int = 0
    message: str = ""
    pushes: int = 0
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
    """The node's BFD verdicts last seen (published in its status)."""
    probed_at: float = 0.0
    """When its next hops were last probed (0: due)."""
    learned: set[Key] = field(default_factory=set)
    """The keys of the flows its datapath learns, as of its last push (one it no longer
    learns is deleted by the next: a gateway's next hop after its service left)."""
    lost: str = ""
    """Why the table last pushed to it is not known to be its switch's any more
    (`core.table_unknown`; "" while it is): it realizes nothing until pushed whole."""
    installed_as: TableSignals | None = None
    """Its switch's signals when its whole table was last pushed (`signals`)."""
    marks: set[str] | None = field(default=None, repr=False, compare=False)
    """The controller's nodes whose report may have changed (None: reported by nobody)."""

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in REPORTED:
            marks = self.__dict__.get("marks")
            if marks is not None:
                marks.add(self.name)

    def facts(self) -> NodeFacts:
        """What its OVSDB says that the rules read."""
        session = self.session
        return NodeFacts(
            vifs={vif: info.ofport for vif, info in session.vifs().items()},
            tunnels={name: ofport for name, (_, ofport, _) in session.tunnels().items()
                     if ofport is not None},
            uplinks=tuple(session.uplinks()),
            neighbours=dict(session.neighbours()),
        )  # fmt: skip

    def signals(self) -> TableSignals:
        """What says now whether its switch still holds the table pushed (`TableSignals`)."""
        channel = self.switch.channel if self.switch is not None else None
        bridge = self.session.bridge()
        return TableSignals(
            connection=channel.connections if channel is not None else 0,
            open=channel is not None and channel.connected,
            bridge=bridge[0] if bridge is not None else None,
            restoring=self.session.flow_restore_wait,
        )

    def close(self) -> None:
        """Close the node's connections (its OVSDB session, its OpenFlow channel)."""
        self.session.close()
        if self.switch is not None:
            self.switch.close()


class NodeSockets:
    """The nodes' OVSDB sockets in one `epoll` set, kept as nodes come and go: a pass asks
    which are readable at the cost of those that are (a `poll` of every node's socket, and
    a look at each, cost ~3 ms a pass at 3,000 nodes)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._fd_node: dict[int, str] = {}
        self._node_fd: dict[str, int] = {}

    def watch(self, node: str, fd: int) -> None:
        """`node`'s session is on `fd` now."""
        self.drop(node)
        try:
            self._epoll.register(fd, select.EPOLLIN)
        except FileExistsError:  # (a number reused while the kernel still holds the old)
            self._epoll.modify(fd, select.EPOLLIN)
        self._fd_node[fd], self._node_fd[node] = node, fd

    def drop(self, node: str) -> None:
        """`node` is gone (its socket may be closed already: the kernel dropped it then)."""
        fd = self._node_fd.pop(node, None)
        if fd is not None and self._fd_node.get(fd) == node:  # (not a number reused since)
            self._fd_node.pop(fd, None)
            with contextlib.suppress(OSError):
                self._epoll.unregister(fd)

    def watching(self, node: str) -> int | None:
        """The descriptor watched for `node` (None: none)."""
        return self._node_fd.get(node)

    def ready(self) -> set[str]:
        """The nodes whose socket is readable (or closed) now."""
        return {node for fd, _ in self._epoll.poll(0) if (node := self._fd_node.get(fd))}

    def fileno(self) -> int:
        """Readable when a node's socket is (for `readable` with the other descriptors)."""
        return self._epoll.fileno()

    def close(self) -> None:
        """Close the `epoll` set (not the sockets)."""
        self._epoll.close()


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
        self._pass_log = PassLog(pass_log) if pass_log is not None else None
        self._this_pass: dict[str, float] = {}
        """Seconds by phase of the pass running (`pass_phases`, `PassLog`)."""
        self._pushed_now = 0
        self._computed_now = False
        self._retry_delays = retry_delays
        self._rules = rules or main_file()
        self._workers = workers
        self.core = Localizer(physical_rules.load(self._rules, workers=workers))
        """What the controller decides (`loom_physical.core`)."""
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._tls = tls
        self.manager = Manager(listen, self._wake, server_context(tls) if tls else None)
        self.refused: dict[str, str] = {}
        """Node -> why its connection was refused (its certificate names another node)."""
        self.universal = UniversalReplica(universal_remote, self._wake)
        self.config = Replica(
            config_remote,
            "Loom_Config",
            {
                "Transport_Node": ["system_id", "status"],
                "Loom_Global": ["generation", "realized_generation", "external_ids"],
                "Logical_Switch_Port": ["status"],
                "Gateway_Service": ["status"],
            },
            wake=self._wake,
        )
        self.heartbeat = Heartbeat(config_remote, name, url=http_url)
        """Tells the config DB's readers this controller is there (`loom_common.liveness`)."""
        self.links = (Link("Loom_Universal", self.universal), Link("Loom_Config", self.config))
        """The databases' connections: each up, or down and reconnecting (`Link`)."""
        self._universal_link, self._config_link = self.links
        self.failure: str | None = None
        """Why the controller gave up (its loop ended for good; `RETRY_DELAYS`)."""
        self._zk_hosts = zookeeper
        self._session_timeout = session_timeout
        self._zk_root = zk_root
        self._zk: Any = None
        self._member: membership.Member | None = None
        self._node_flows: dict[str, int] = {}
        """Node -> flows in its table as of its last push (for the metrics)."""
        self.nodes: dict[str, NodeState] = {}
        self._pending: list[NodeSession] = []
        """Sessions whose node has not said its system-id yet."""
        self._accepted: collections.deque[NodeSession] = collections.deque()
        """Sessions the acceptor thread started, for the loop to take (`_accepting`)."""
        self._acceptor: threading.Thread | None = None
        self._report_due = True
        """Something `_report` writes may have changed since it last ran."""
        self._recheck: set[str] = set()
        """Logical ports whose status `_report` must look at again."""
        self._reported_masters: set[str] = set()
        self._mastered: set[str] = set()
        """The nodes mastered after the last pass (one newly mastered gets a full sync)."""
        self._seen: set[str] = set()
        """Nodes that have been connected to this process (only those it reports gone)."""
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.passes = 0
        self._waiters = 0
        """Threads in `wait_pass`."""
        self._looked = 0
        """Predicate evaluations since the last pass's first pushes."""
        self._bulk_loaded = False
        """A whole table was pushed since the last `heap.settle()`."""
        self._pushers = concurrent.futures.ThreadPoolExecutor(
            max_workers=PUSH_THREADS, thread_name_prefix=f"push-{name}"
        )
        self._tracer = Tracer()
        """Runs `trace_report`'s traces on a scratch switch of its own."""
        self.pass_phases: collections.deque[tuple[float, dict[str, float]]] = collections.deque(
            maxlen=1000
        )
        """(perf_counter at its start, seconds by phase) of the latest passes that computed or
        pushed something: `poll` (nodes and databases), `engine`, `push` (OVSDB config and
        OpenFlow), `report` (status)."""
        self._node_fds = NodeSockets()
        self._channel_fds = NodeSockets()
        """The nodes' kept OpenFlow channels: one that is readable is read between pushes
        (the switch's echo requests; its end: the switch lost its table)."""
        self._channels_ended: set[str] = set()
        """Nodes whose channel ended while the loop waited (`_answer_channels`)."""
        self._table_check: set[str] = set()
        """Nodes whose signals of their table (`TableSignals`) may have changed."""
        self._lost_nodes: set[str] = set()
        """Nodes whose switch lost its table and has not had it again (`NodeState.lost`)."""
        self._to_read: set[str] | None = None
        """The nodes `_poll_nodes` reads (None: every node): readable, or written to since
        they were read (a transaction's reply can bring their updates along)."""
        self._swept = 0.0
        """When every node's session was last looked at (one closed elsewhere is seen)."""
        self._said_node: dict[str, str] = {}
        """Logical_Switch_Port uuid -> the node its status names (`transport_node`)."""
        self._said_ports: dict[str, set[str]] = {}
        """Node -> the ports whose status names it."""
        self._due: set[str] = set()
        """Nodes that may have something to push: flagged (reconfigure, full sync, QoS,
        zones, a record to confirm, ports placed) since their last push, or still waiting.
        A pass's second push phase looks at these, the holders of the parts that changed
        and the nodes that probe, not at every node mastered."""
        self._first: set[str] = set()
        """Nodes where a port came or went (`ports_changed`): a pass's first push phase."""
        self._holding: dict[PartKey, set[str]] = {}
        """Part -> the nodes that hold it (their `NodeState.parts`)."""
        self._holding_lock = threading.Lock()
        self._pushed_states: list[NodeState] = []
        """The nodes pushed in this pass (`NodeState.pushed`)."""
        self._probing: set[str] = set()
        """Nodes that send ARP probes (their next pushes look at them)."""
        self._idle_realized: tuple[int, frozenset[str]] | None = None
        """(generation, masters) when every master not pushed was last marked realized."""
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
        self._node_rows: dict[str, tuple[str, bool, set[tuple[str, str, bool]]]] = {}
        """`Transport_Node` uuid -> its node, live by its status, its BFD rows
        (`core.node_liveness`: each row read when it changes)."""
        self._node_uuid: dict[str, str] = {}
        """System-id -> its `Transport_Node` row's uuid."""
        self._node_row_uuids: dict[str, set[str]] = {}
        """System-id -> the uuids of the `Transport_Node` rows that name it."""
        self._rows_changed: set[str] = set()
        """`Transport_Node` rows changed since the last status report (looked at again)."""
        self._last_reports: dict[str, status.NodeReport] = {}
        """What the last status report written said of each node mastered."""
        self._reports = status.ReportBook()
        """Each node mastered's report as last made (`_report_config`)."""
        self._report_marks: set[str] = set()
        """Nodes whose report may differ from `_reports` (`NodeState.marks`)."""
        self._touched: set[str] = set()
        """Nodes pushed something, or whose message or realized generation changed, since
        the last status report (their rows say so: `status.node_status_ops`)."""
        self.conflicts: dict[str, int] = {}
        """Node -> OpenFlow matches wanted with different actions (the last push)."""

    @property
    def zone_rounds(self) -> int:
        """Engine rounds run again for zones the rules asked for (not given beforehand)."""
        return self.core.zone_rounds

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
        self.heartbeat.start()
        self._acceptor = threading.Thread(target=self._accepting, name=f"accept-{self.name}",
                                          daemon=True)  # fmt: skip
        self._acceptor.start()
        metrics.watch("physical", self.name, self._metric_samples)
        httpd.route("/nodes/", self._flows_route)
        httpd.route("/trace", self._trace_route)
        return self

    def flows_report(self, system_id: str, *, tables: bool = False,
                     timeout: float = 30.0) -> tuple[int, dict[str, Any]]:  # fmt: skip
        """Node `system_id`'s table as computed here, as the node holds it, and the
        difference (`loom_physical.flowsview`): (HTTP status, JSON body). The computed table
        is read between passes (`wait_pass`); the node's on this thread, by `ovs-ofctl`."""
        got: dict[str, Any] = {}

        def grab(controller: PhysicalController) -> bool:
            state = controller.nodes.get(system_id)
            if state is not None:
                got["mastered"] = system_id in controller.masters()
                got["remote"] = state.session.openflow_remote
                got["computed"] = controller.flows(system_id)
                got["learned"] = set(controller.core.learned(system_id))
            return True

        if not self.wait_pass(grab, timeout, wake=False):
            return 503, {"error": "busy", "message": f"{self.name} did not finish its pass"}
        if "computed" not in got:
            return 404, {"error": "not_found", "message": f"node {system_id} is not "
                         f"connected to {self.name}"}  # fmt: skip
        if not got["mastered"] or got["remote"] is None:
            return 409, {"error": "not_master", "message": f"{self.name} does not write "
                         f"node {system_id}'s flows now"}  # fmt: skip
        switch = Switch(got["remote"], tls=self._tls, peer=system_id)
        try:
            installed = switch.dump()
            mods = switch.difference(got["computed"])
        except OpenFlowError as exc:
            return 503, {"error": "node_unreachable", "message": str(exc)}
        finally:
            switch.close()
        return 200, flowsview.report(system_id, self.name, got["computed"], installed, mods,
                                     learned=got["learned"], tables=tables)  # fmt: skip

    def _flows_route(self, rest: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """`GET /nodes/<system-id>/flows[?tables=true]` (`loom_common.httpd`)."""
        node, sep, what = rest.partition("/")
        if not node or sep != "/" or what != "flows":
            return 404, {"error": "not_found"}
        tables = query.get("tables", ["false"])[0] == "true"
        return self.flows_report(unquote(node), tables=tables)

    def trace_report(self, port: str, flow: str, *, node: str | None = None,
                     ct: tuple[str, ...] = (), allowed: frozenset[int] | None = None,
                     timeout: float = 30.0) -> tuple[int, dict[str, Any]]:  # fmt: skip
        """A packet from logical port `port` (`flow`: its fields in `ovs-ofctl` syntax, no
        `in_port`) traced through this controller's flows (`loom_physical.trace`): through
        the universal flows on an ideal node, or with `node` through that node's installed
        table; `ct`: what conntrack answers at each recirculation; `allowed`: the datapaths
        an ideal node's packet may be followed into (None: any). (HTTP status, JSON body.)

        The inputs are read between passes (`wait_pass`); the node's table on this thread;
        the computation and the trace on the trace thread (`Tracer`)."""
        try:
            states = trace.ct_states(ct)
            got: dict[str, Any] = {}
            if not self.wait_pass(lambda c: c._trace_inputs(port, node, allowed, got), timeout,
                                  wake=False):  # fmt: skip
                return 503, {"error": "busy", "message": f"{self.name} did not finish its pass"}
            if "refused" in got:
                raise got["refused"]
            if got.get("missing"):
                refused = self._read_missing(got, timeout)
                if refused is not None:
                    return refused
            installed: list[str] = []
            if node is not None:
                switch = Switch(got["remote"], tls=self._tls, peer=node)
                try:
                    installed = switch.dump()
                except OpenFlowError as exc:
                    return 503, {"error": "node_unreachable", "message": str(exc)}
                finally:
                    switch.close()
            microflow = trace.microflow(flow, got["in_port"], got.get("dl_dst", ""))
            text, dp_ports = self._tracer.run(
                lambda scratch: scratch.trace(self._trace_table(got, installed), microflow,
                                              states), timeout)  # fmt: skip
        except trace.TraceRefused as refused:
            return refused.status, refused.body()
        except ScratchError as exc:
            return 400, {"error": "trace_refused", "message": str(exc)}
        except ScratchDown as exc:
            return 503, {"error": "busy", "message": f"{self.name}: {exc}"}
        except TimeoutError:
            return 503, {"error": "busy", "message": f"{self.name}: the trace took over "
                         f"{timeout:g} s"}  # fmt: skip
        passes = trace.parse(text, got["cookies"])
        verdict = trace.verdict(passes, dp_ports, got["endpoints"], got["keys"])
        verdict["delivered"] = [{"port": p, "node": got["chassis"].get(p, "")}
                                for p in verdict["delivered"]]  # fmt: skip
        ideal = got.get("ideal")
        stand_ins = ideal.stand_ins if ideal is not None else []
        return 200, {"controller": self.name, "node": node, "port": port, "flow": microflow,
                     "ct": states, "passes": passes, "verdict": verdict, "trace": text,
                     "datapaths_read": sorted(got.get("missing", ())),
                     "stand_in_next_hops": stand_ins}  # fmt: skip

    def _read_missing(self, got: dict[str, Any], timeout: float) -> tuple[int, Any] | None:
        """The universal flows of the ideal node's datapaths the replica does not hold
        (`got["missing"]`), read once from the universal DB into `got` (on the asking
        thread); a 503 answer if they could not be read."""
        missing = got["missing"]
        try:
            flows = read_flows(self.universal.remote, missing, timeout)
        except CONNECTION_ERRORS as exc:
            keys = ", ".join(str(k) for k in sorted(missing))
            return 503, {"error": "flows_unavailable", "message": f"{self.name} does not "
                         f"follow the universal flows of datapath(s) {keys} (no node of "
                         f"its has them) and could not read them from the universal DB: "
                         f"{exc}"}  # fmt: skip
        got["ideal"] = ideal = trace.with_flows(got["ideal"], missing, flows)
        got["cookies"] = trace.sources(row for table, _, row in ideal.changes
                                       if table == "Flow" and row is not None)  # fmt: skip
        return None

    def _trace_inputs(self, port: str, node: str | None, allowed: frozenset[int] | None,
                      got: dict[str, Any]) -> bool:  # fmt: skip
        """Read what a trace needs (on the loop's side of `wait_pass`) into `got`; a
        refusal as `got["refused"]` (raised on the asking thread)."""
        rows = self.universal.rows
        bindings = rows["Port_Binding"].values()
        got["endpoints"] = {str(r["ip"]): str(r["node"]) for r in rows["Node_Endpoint"].values()}
        got["keys"] = {(int(b["datapath"]), int(b["port_key"])): str(b["logical_port"])
                       for b in bindings}  # fmt: skip
        got["chassis"] = {str(b["logical_port"]): opt(b["chassis"]) for b in bindings}
        try:
            if node is None:
                gateways = {n for g in rows["Gateway_Assignment"].values()
                            for _, n in omap(g["nodes"]).items()}  # fmt: skip
                known = [self.core.nodes[n].facts for n in gateways if n in self.core.nodes]
                neighbours = {ip: mac for facts in known for ip, mac in facts.neighbours.items()}
                ideal = trace.ideal_node(rows, port, neighbours, allowed)
                got["ideal"], got["in_port"] = ideal, ideal.in_port
                got["dl_dst"] = ideal.uplink_mac
                got["missing"] = trace.missing_flows(ideal, rows["Flow"].values(),
                                                     self.universal.datapaths)  # fmt: skip
                # (the flow rows it took: its datapaths' and datapath 0's)
                flow_rows = [row for table, _, row in ideal.changes if table == "Flow"]
            else:
                datapaths = self._trace_node(port, node, got) | {0}
                flow_rows = [f for f in rows["Flow"].values() if int(f["datapath"]) in datapaths]
        except trace.TraceRefused as refused:
            got["refused"] = refused
            return True
        got["cookies"] = trace.sources(row for row in flow_rows if row is not None)
        return True

    def _trace_node(self, port: str, node: str, got: dict[str, Any]) -> set[int]:
        """`_trace_inputs` for a trace on node `node`: its OpenFlow, its ports, where
        `port`'s VIF is on it (a router's uplink: the node's uplink); the datapaths it has.

        Raises:
            TraceRefused: the node is not ours to read, or the port has no VIF on it (or
                the node no uplink).
        """
        state = self.nodes.get(node)
        if state is None:
            raise trace.TraceRefused(404, "not_found", f"node {node} is not connected to "
                                     f"{self.name}")  # fmt: skip
        if node not in self.masters() or state.session.openflow_remote is None:
            raise trace.TraceRefused(409, "not_master", f"{self.name} does not write node "
                                     f"{node}'s flows now")  # fmt: skip
        bindings = self.universal.rows["Port_Binding"].values()
        vif_ports = {opt(b["vif_id"]): str(b["logical_port"]) for b in bindings if opt(b["vif_id"])}
        got["remote"] = state.session.openflow_remote
        got["ports"] = trace.node_layout(state.session.interfaces(), vif_ports)
        entry = trace.uplink_entry(self.universal.rows, port, got["ports"], node)
        if entry is not None:
            got["in_port"], got["dl_dst"] = entry
        else:
            mine = [vif for vif, bound in vif_ports.items() if bound == port]
            vif = state.session.vifs().get(mine[0]) if mine else None
            if vif is None:
                raise trace.TraceRefused(409, "not_on_node", f"port {port} has no VIF on node "
                                         f"{node}")  # fmt: skip
            got["in_port"] = vif.ofport
        view = self.core.nodes.get(node)
        return set(view.datapaths) if view is not None else set()

    def _trace_table(self, got: dict[str, Any], installed: list[str]) -> trace.Table:
        """The table a trace loads (on the trace thread): the ideal node's, computed by
        the physical rules on an engine of its own, or the node's installed one."""
        if "ideal" in got:
            ideal = got["ideal"]
            program = physical_rules.load(self._rules)
            flows = [f.text() for f in trace.ideal_flows(program, ideal)]
            return trace.Table(ideal.ports, flows, ideal.in_port)
        return trace.Table(got["ports"], installed, got["in_port"])

    def _trace_route(self, rest: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """`GET /trace?port=P&flow=F[&node=N][&ct=S...][&datapaths=K,K...]`
        (`loom_common.httpd`)."""
        if rest not in ("", "/"):
            return 404, {"error": "not_found"}
        port, flow = query.get("port", [""])[0], query.get("flow", [""])[0]
        if not port:
            return 400, {"error": "validation_failed", "message": "port: required"}
        node = query.get("node", [None])[0] or None
        allowed = None
        if "datapaths" in query:
            keys = query["datapaths"][0].split(",")
            if not all(k.isdigit() for k in keys):
                return 400, {"error": "validation_failed", "message": "datapaths: keys, "
                             "separated by commas"}  # fmt: skip
            allowed = frozenset(int(k) for k in keys)
        return self.trace_report(port, flow, node=node, ct=tuple(query.get("ct", [])),
                                 allowed=allowed)  # fmt: skip

    def _metric_samples(self) -> list[metrics.Sample]:
        """What a scrape reads (another thread: copies of what the loop keeps): nodes
        connected and mastered, each mastered node's flows as of its last push, and the
        controller's ZooKeeper membership, the native allocator's memory
        (`loom_common.metrics`)."""
        view = self._member.view if self._member is not None else None
        connected = list(self.nodes)
        mastered = [n for n in connected if view is None or view.may_write(n)]
        flows = dict(self._node_flows)
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
        if self._member is not None:
            self._member.stop(timeout)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        self._pushers.shutdown(wait=True)
        self._tracer.stop()
        for state in self.nodes.values():
            state.close()
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
        view = self._member.view if self._member is not None else None
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
        wall = time.time()
        self._this_pass, self._pushed_now, self._computed_now = {}, 0, False
        # No collection inside a pass (as the logical controller's): a cold start's pass
        # makes millions of long-lived objects (placed flows, replica rows, reports), which
        # collections walked again and again to find nothing -- perf at S=0.5: the
        # collector was a quarter of a physical controller's CPU. A long pass freezes
        # what it made instead; a short one leaves it to the collector, after the push.
        with gc_paused():
            with self._cond:  # `wait_pass` predicates see the state between passes
                masters = self._step()
                self._looked = 0
                self._cond.notify_all()  # flows are on the nodes: waiters may look
                self._let_waiters_look()
            if masters is not None:
                with self._cond:
                    sent = self._timed("report", self._send_report, masters)
                # the nodes where no port came or went, once the others' ports are written
                with self._cond:
                    pushed = self._push_others(masters)
                    self._timed("report_wait", sent.finish)
                    # (what the second phase sent, or realized without sending anything: a
                    # node whose zone record it confirmed -- at a cold start, every node,
                    # reported a pass later before)
                    if pushed or self._report_due:
                        self._timed("report", self._report, masters)
                    self._timed("settle", self._settle_images)
                    self._cond.notify_all()
            # Whole tables are in, or a long pass made many objects (the status of
            # thousands of ports): out of the collector's sight (`loom_common.heap`).
            if self._bulk_loaded or time.perf_counter() - began > LONG_PASS:
                self._bulk_loaded = False
                self._timed("settle", heap.settle)
        with self._cond:
            self.passes += 1
            self._cond.notify_all()
        took = time.perf_counter() - began
        if took >= LONG_PASS:
            log.info("long pass %.1f s: %s", took, procstat.memory_text(allocator_memory()))
        # (a pass that computed or pushed something, or took long: idle passes are not)
        if self._pushed_now or self._computed_now or took >= LOGGED_PASS:
            metrics.observe_pass("physical", self.name, {**self._this_pass, "total": took},
                                 self.core.generation)  # fmt: skip
        if self._pass_log is not None and (self._pushed_now or self._computed_now
                                           or took >= LOGGED_PASS):  # fmt: skip
            masters_now = masters if masters is not None else set()
            self._pass_log.write(wall, took, self._this_pass, pushed=self._pushed_now,
                                 nodes=len(self.nodes), masters=len(masters_now),
                                 generation=self.core.generation)  # fmt: skip
        self._wait()

    def _timed(self, phase: str, do: Callable[..., T], *args: Any) -> T:
        """`do(*args)`, its time added to this pass's `phase` (the pass log's)."""
        began = time.perf_counter()
        result = do(*args)
        self._this_pass[phase] = self._this_pass.get(phase, 0.0) + time.perf_counter() - began
        return result

    def _settle_images(self) -> None:
        """The pass's pushes are done: a node that holds a part that changed and was not
        pushed (its push failed, or it was not ours to push) gets its whole table next time;
        then the parts' changes are forgotten (`Images.settle`)."""
        images = self.core.images
        for system_id in self._holders(images.changed()):
            state = self.nodes[system_id]
            if not state.pushed:
                state.full_sync = True
                self._due.add(system_id)
        pushed, self._pushed_states = self._pushed_states, []
        for state in pushed:
            state.pushed = False
        images.settle()

    def _give_up(self, reason: str) -> None:
        """The controller cannot go on: record why, leave the cluster, wake the waiters."""
        if self.failure is not None or self._stop.is_set():
            return
        log.error("physical controller %s cannot continue: %s", self.name, reason)
        runner.leave_cluster(self._member, log)
        self.heartbeat.stop()  # its nodes' status ages out
        self.failure = reason  # once it has left: whoever sees the failure sees it gone
        with self._cond:
            self._cond.notify_all()

    def _start_over(self) -> None:
        """After a failed pass, whatever the engine holds is unknown: a new core, fed from
        the databases and the nodes (as a restarted controller would), each node's zones
        kept; each node's table is pushed whole once computed again (`Switch.replace`
        changes only what differs)."""
        old = self.core
        self.core = Localizer(physical_rules.load(self._rules, workers=self._workers))
        # The replicas are kept by their links (what failed is the engine's state): every
        # row held is fed again.
        self.core.universal((table, uuid, row) for table, rows in self.universal.rows.items()
                            for uuid, row in rows.items())  # fmt: skip
        self._reported_masters = set()  # report everything again
        self._report_due = True
        self._liveness_due |= self.nodes.keys() | self._node_row_uuids.keys()
        self._datapaths_followed = None
        for system_id, state in self.nodes.items():
            self.core.node(system_id, state.facts(), state.session.zones())
            self.core.carry_zones(system_id, old)
            self._set_parts(system_id, state, set())
            state.full_sync = state.reconfigure = state.placed = True
            self._due.add(system_id)

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
            state = self.nodes.get(system_id)
            if state is None or state.switch is None or not state.switch.channel.check():
                self._channel_fds.drop(system_id)
                self._channels_ended.add(system_id)
                ended = True
        return ended

    def _wait_for_input(self) -> bool:
        """Wait (see `_wait`); True if what woke it was the channels alone."""
        channels = self._channel_fds.fileno()
        fds = [self._wake_r, channels]
        timeout = POLL_MS / 1000 if not self._lost_nodes else RECONNECT_S
        for link in self.links:
            if link.has_pending():
                return False
            fd = link.fileno()
            if fd is not None:
                fds.append(fd)
            else:
                timeout = min(timeout, link.retry_in() or 0.0)
        to_read = self._to_read
        if to_read is None:
            return False  # (the first pass reads every node)
        if time.monotonic() - self._swept > SWEEP_S:  # a safety net: ~1 us a node
            self._swept = time.monotonic()
            for system_id, node in self.nodes.items():
                if not node.session.alive or node.session.replica.has_pending():
                    to_read.add(system_id)
        for system_id in to_read:  # written to: a reply may have brought more
            state = self.nodes.get(system_id)
            if state is not None and state.session.alive and state.session.replica.has_pending():
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
        """Poll, compute, push; return the nodes mastered (None: nothing pushed, the
        computation did not settle) for `_report`, which the loop runs after it."""
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
        else:  # still changing: push nothing half-computed (a full sync would delete flows)
            self._wake()
            return None
        self._take_changed()
        computed = time.perf_counter()
        for system_id in masters - self._mastered:  # (re)gained: reconcile the whole table
            self.nodes[system_id].full_sync = self.nodes[system_id].reconfigure = True
            self._due.add(system_id)
        self._mastered = set(masters)
        pushed = self._realize_all(masters, core.generation, first=True)
        realized = time.perf_counter()
        phases = {"poll": polled - began, "engine": computed - polled,
                  "push": realized - computed}  # fmt: skip
        self._this_pass.update(phases)
        self._pushed_now += pushed
        if rounds > 1 or pushed:
            self.pass_phases.append((began, phases))
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
                self._universal_link.lost(exc)  # (it asks for them when it reconnects)
            self._poll_universal()

    def _take_changed(self) -> None:
        """Act on what the computation changed: nodes to push first, QoS, probes, tunnel
        ports, ports whose status to look at."""
        changed = self.core.take_changed()
        self._recheck |= changed.ports
        self._report_due = self._report_due or changed.status or bool(changed.ports)
        for state in self._connected(changed.located):
            state.ports_changed = True
        for state in self._connected(changed.qos):
            state.qos_dirty = True
        for state in self._connected(changed.probes):
            state.probed_at = 0.0  # a new one goes at once
        for state in self._connected(changed.reconfigure):
            state.reconfigure = True
        for state in self._connected(changed.placed):
            state.placed = True
        for system_id in changed.probes:
            if self.core.probes(system_id):
                self._probing.add(system_id)
            else:
                self._probing.discard(system_id)
        self._first |= changed.located & self.nodes.keys()
        self._due |= (changed.located | changed.qos | changed.probes | changed.reconfigure
                      | changed.placed | changed.zoned) & self.nodes.keys()  # fmt: skip

    def _connected(self, nodes: Iterable[str]) -> Iterator[NodeState]:
        """The states of those of `nodes` that are connected."""
        for system_id in nodes:
            if (state := self.nodes.get(system_id)) is not None:
                yield state

    def _push_others(self, masters: set[str]) -> int:
        """A pass's second push phase (the nodes where no port came or went), recorded in
        `pass_phases` as `push_others`; the number of nodes sent something."""
        began = time.perf_counter()
        pushed = self._realize_all(masters, self.core.generation, first=False)
        if pushed:
            phases = {"push_others": time.perf_counter() - began}
            self.pass_phases.append((began, phases))
            self._this_pass.update(phases)
            self._pushed_now += pushed
        return pushed

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
            state = self.nodes.get(system_id)
            if state is None:
                state = self.nodes[system_id] = NodeState(session, system_id,
                                                          marks=self._report_marks)  # fmt: skip
                self._report_marks.add(system_id)
            else:
                state.close()  # the node came back: a new session, a new OpenFlow channel
                self._channel_fds.drop(system_id)
                state.session, state.switch = session, None
                state.qos_dirty, state.qos_written = True, None
                state.full_sync = True
                state.reconfigure = True
            self.core.node(system_id, state.facts(), session.zones())
            self._node_fds.watch(system_id, session.fileno())
            self._due.add(system_id)
            if self.core.probes(system_id):  # (a node back: its probes go again)
                self._probing.add(system_id)
            if self._to_read is not None:
                self._to_read.add(system_id)
            log.info("node %s connected from %s", system_id, session.peer,
                     extra={"node": system_id, "peer": session.peer})  # fmt: skip
            self._seen.add(system_id)
            self._liveness_due.add(system_id)
            self._report_due = self._shards_due = True
            self._nodes_version += 1
        self._pending = still

    def _poll_config(self) -> None:
        for table, uuid, _ in self._config_link.sync():
            self._report_due = True
            if table == "Logical_Switch_Port":
                self._recheck.add(uuid)
                self._port_said_on(uuid)
            elif table == "Transport_Node":
                self._node_row_changed(uuid)

    def _port_said_on(self, uuid: str) -> None:
        """Index `Logical_Switch_Port` row `uuid` by the node its status names."""
        old = self._said_node.pop(uuid, None)
        if old is not None:
            unindex(self._said_ports, old, uuid)
        row = self.config.rows["Logical_Switch_Port"].get(uuid)
        node = omap(row["status"]).get("transport_node") if row is not None else None
        if node:
            self._said_node[uuid] = node
            self._said_ports.setdefault(node, set()).add(uuid)

    def _node_row_changed(self, uuid: str) -> None:
        """Read `Transport_Node` row `uuid` again (its node's liveness, BFD, shard)."""
        row = self.config.rows["Transport_Node"].get(uuid)
        old = self._node_rows.pop(uuid, None)
        if old is not None:
            unindex(self._node_row_uuids, old[0], uuid)
            self._liveness_due.add(old[0])
            if self._node_uuid.get(old[0]) == uuid:
                del self._node_uuid[old[0]]
        if row is not None:
            self._node_rows[uuid] = node_liveness(row)
            node = self._node_rows[uuid][0]
            self._node_uuid[node] = uuid
            self._node_row_uuids.setdefault(node, set()).add(uuid)
            self._liveness_due.add(node)
        self._rows_changed.add(uuid)
        if old is None or row is None or old[0] != self._node_rows[uuid][0]:
            self._shards_due = True

    def _follow_nodes(self) -> None:
        """The nodes configured or connected, or their status, changed: who is live and
        the shards to assign (when this member leads) follow."""
        due, self._liveness_due = self._liveness_due, set()
        for node in due:  # (`core.liveness`, for the nodes whose inputs to it changed)
            rows = [self._node_rows[u] for u in self._node_row_uuids.get(node, ())]
            up = [verdicts for _, live, verdicts in rows if live]
            self.core.set_node_liveness(node, node in self.nodes or bool(up),
                                        set().union(*up))  # fmt: skip
        if self._member is not None and self._shards_due:
            self._shards_due = False
            shards = set(self._node_uuid) | set(self.nodes)
            if shards != self._shards:
                self._shards = shards
                self._member.set_shards(shards)

    def _poll_universal(self) -> None:
        changes = self._universal_link.sync()
        if changes:
            self.core.universal(changes)

    def _poll_nodes(self) -> None:
        """Read what the nodes with something to read sent (`_to_read`; all of them when
        `_wait` did not look: a look at each costs ~20 us, 35 ms a pass at 1,500 nodes)."""
        names, self._to_read = self._to_read, set()
        for system_id in list(self.nodes) if names is None else sorted(names):
            state = self.nodes.get(system_id)
            if state is None:
                continue
            if state.session.alive and state.session.replica.has_pending():
                self._to_read.add(system_id)  # (read the rest next pass; `_wait` returns)
            if state.session.poll():
                self._table_check.add(system_id)
                state.reconfigure = True
                self._due.add(system_id)
                self.core.node(system_id, state.facts(), state.session.zones())
                if state.session.bfd() != state.bfd:
                    state.bfd = dict(state.session.bfd())
                    self._report_due = True  # (its status publishes them)
            if not state.session.alive:
                log.info("node %s disconnected", system_id, extra={"node": system_id})
                self._liveness_due.add(system_id)
                self._report_due = self._shards_due = True
                self._nodes_version += 1
                self._node_fds.drop(system_id)
                self._channel_fds.drop(system_id)
                self._lost_nodes.discard(system_id)
                self._to_read.discard(system_id)
                self._set_parts(system_id, state, set())
                self._due.discard(system_id)
                self._first.discard(system_id)
                self._probing.discard(system_id)
                self.nodes.pop(system_id).close()
                self.core.node_gone(system_id)

    def _watch_tables(self) -> None:
        """Notice the nodes whose switch may have lost its table: their channel ended
        (`_answer_channels`, as the loop waited), their OVSDB changed (br-int made again,
        flow-restore-wait). A restarted ovs-vswitchd says so only by
        the end of its OpenFlow connections: the node's OVSDB stays connected and shows
        nothing, and the channel is otherwise read only when something is pushed."""
        ended, self._channels_ended = self._channels_ended, set()
        check, self._table_check = self._table_check | ended, set()
        for system_id in check:
            state = self.nodes.get(system_id)
            if state is None or state.lost:
                continue
            if state.full_sync and system_id not in ended and not state.session.flow_restore_wait:
                continue  # (pushed whole next anyway: a node back, taken over, a push failed)
            why = table_unknown(state.installed_as, state.signals())
            if why is not None:
                self._table_lost(system_id, state, why)

    def _table_lost(self, system_id: str, state: NodeState, why: str) -> None:
        """Node `system_id`'s table is not known any more (`why`): it realizes nothing and
        is pushed whole as soon as its switch answers (`Switch.load`: an empty table gets
        its flows at once; one ovs-vswitchd restored is compared, the difference sent),
        the master role claimed again and the Geneve option mapped again first."""
        log.warning("node %s: %s: its table goes in again when its switch answers", system_id,
                    why, extra={"node": system_id})  # fmt: skip
        state.lost, state.message = why, why
        state.full_sync = True
        self._lost_nodes.add(system_id)
        self._due.add(system_id)
        self._touched.add(system_id)
        self._report_due = True

    def _watch_pushed(self, pushed: Iterable[str], masters: set[str]) -> None:
        """After pushes (on the loop's thread): watch the channels of the nodes `pushed` as
        they are now, and keep the nodes still to reach (`_lost_nodes`) while ours."""
        for system_id in pushed:
            self._watch_channel(system_id)
            if self.nodes[system_id].lost:
                self._lost_nodes.add(system_id)
        if self._lost_nodes:  # (tried again every `RECONNECT_S`)
            self._lost_nodes = {n for n in self._lost_nodes & masters if self.nodes[n].lost}

    def _watch_channel(self, system_id: str) -> None:
        """Watch node `system_id`'s channel as it is now (after a push: it may have
        connected again, or been closed)."""
        state = self.nodes.get(system_id)
        fd = state.switch.channel.fileno() if state is not None and state.switch else None
        if fd is None:
            self._channel_fds.drop(system_id)
        elif self._channel_fds.watching(system_id) != fd:
            self._channel_fds.watch(system_id, fd)

    # ---- writing to the nodes ----

    def _realize_all(self, masters: set[str], generation: int, *, first: bool) -> int:
        """Realize `generation` on the nodes in `masters`: with `first`, only the nodes where
        a port was bound or unbound (the cloud waits for those ports' status, which is
        reported before the others are pushed), else the others that may have something
        to send (`_due`, the holders of the parts changed, the nodes that probe: not every
        node mastered). The nodes with something to send are pushed in parallel (a whole
        table is compared by `ovs-ofctl diff-flows`, which waits on the node most of its
        time). Returns the number of nodes sent something."""
        busy = []
        changed = self.core.images.changed()
        if first:
            candidates, self._first = self._first & masters, self._first - masters
        else:
            candidates = (self._due | self._holders(changed) | self._probing) & masters
        for system_id in sorted(candidates):
            state = self.nodes[system_id]
            if first and not state.ports_changed:
                continue
            state.ports_changed = False
            if self._push_due(system_id, state, changed):
                busy.append(system_id)
            elif state.realized != generation:
                state.realized = generation
                self._report_due = True
        if not first:
            self._realize_idle(masters, generation, candidates)
        if self._to_read is not None:  # (read next pass: a reply may bring their updates)
            self._to_read.update(busy)
        if len(busy) <= 1:
            pushed = sum(self._realize(system_id, generation) for system_id in busy)
        else:
            pushed = sum(self._pushers.map(lambda n: self._realize(n, generation), busy))
        self._watch_pushed(busy, masters)
        if not first:  # what is still to do (a tunnel port's ofport, a record to confirm);
            # the nodes not looked at (a standby's: another controller pushes them) stay as
            # they are -- a look at each of them was ~15 ms a pass at NVP's scale
            still = {n for n in candidates if n in self.nodes and self._still_due(self.nodes[n])}
            self._due = (self._due - candidates) | still
        return pushed

    def _push_due(self, system_id: str, state: NodeState, changed: set[PartKey]) -> bool:
        """Node `system_id` has something to be sent."""
        return (state.reconfigure or state.full_sync or self._flows_due(state, changed)
                or self._zones_due(system_id) or state.qos_dirty
                or state.unconfirmed is not None
                or self._probes_due(system_id, state))  # fmt: skip

    @staticmethod
    def _still_due(state: NodeState) -> bool:
        """After a push: the node waits for something that another push must finish."""
        return (state.reconfigure or state.full_sync or state.qos_dirty or state.placed
                or state.unconfirmed is not None)  # fmt: skip

    def _realize_idle(self, masters: set[str], generation: int, looked: set[str]) -> None:
        """The masters with nothing to send (not `looked` at) realize `generation`: marked so
        once per generation and set of masters (their status is not rewritten for it:
        `status`), not at every pass."""
        key = (generation, frozenset(masters))
        if self._idle_realized == key:
            return
        self._idle_realized = key
        book = self._reports
        for system_id in masters - looked:
            state = self.nodes[system_id]
            if state.realized != generation and not self._still_due(state):
                # (its report changes in its generation alone: advanced in the book as it
                # is, not made again -- 1,500 reports at every change at NVP's scale)
                object.__setattr__(state, "realized", generation)
                if not book.advance(system_id, generation):
                    self._report_marks.add(system_id)
                self._report_due = True

    def _zones_due(self, system_id: str) -> bool:
        zones = self.core.zones(system_id)
        return bool(zones.unsaved or zones.released)

    def _realize(self, system_id: str, generation: int) -> bool:
        """Configure node `system_id` and push its flow changes; note what it realizes.
        True if anything was sent to the node."""
        state = self.nodes[system_id]
        if self._member is not None and not self._member.view.may_write(system_id):
            return False  # deposed since the pass began: the new master writes it
        specs = self.core.tunnel_specs(system_id) if state.reconfigure else None
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
            if state.switch is not None:
                if not state.switch.channel.connected and state.installed_as is not None:
                    state.lost = state.lost or "its OpenFlow connection broke"
                state.switch.close()  # and on a new connection
            message = f"{state.lost}; {exc}" if state.lost else str(exc)
            if message != state.message:  # (a switch restarting: said once, tried again)
                log.warning("node %s: %s", system_id, message, extra={"node": system_id})
            state.message = message
            self._report_due = True
            state.full_sync = True
            state.reconfigure = True
            self._due.add(system_id)
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
            self._touched.add(system_id)
        state.message, state.realized = message, generation
        if sent:
            self.conflicts[system_id] = sum(
                self.core.images.parts[key].conflict_count()
                for key in state.parts
                if key in self.core.images.parts
            )
        return sent

    def desired_parts(self, system_id: str) -> set[PartKey]:
        """The parts of node `system_id`'s table as the rules have it now."""
        return self.core.desired_parts(system_id)

    def installed(self, system_id: str) -> set[Key]:
        """The keys of the flows node `system_id` holds as of its last push (between
        passes: every change pushed is settled)."""
        state = self.nodes.get(system_id)
        if state is None:
            return set()
        return {flow.key for flow in self.core.images.flows(state.parts)}

    def _flows_due(self, state: NodeState, changed: set[PartKey]) -> bool:
        """The node's table has changed since its last push: its parts (`placed`), or one
        of them (`changed`: `Images.changed()`). (Its cost is its parts, not its flows.)"""
        if state.placed:
            return True
        if state.pushed:  # in this pass: it has the parts as they are
            return False
        return not state.parts.isdisjoint(changed)

    def _openflow_remote(self, state: NodeState) -> str | None:
        """Where the node's br-int takes OpenFlow, if it does yet (else its status says
        why: the node does not say where, or ovs-vswitchd has not made the bridge we just
        wrote; the node's update saying it exists brings a new pass)."""
        remote = state.session.openflow_remote
        waiting = None
        if remote is None:
            waiting = "the node does not say where its OpenFlow is (loom-openflow)"
        elif state.session.flow_restore_wait:  # (its table is compared once they are back)
            waiting = "ovs-vswitchd waits for its flows to be restored (flow-restore-wait)"
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
        zones = self.core.zones(state.session.system_id or "")
        self._confirm_zones(state)
        if zones.unsaved:
            self._record_zones(state)
        sent = self._push_flows(state, remote)
        if zones.released and state.unconfirmed is None:
            self._record_zones(state)
        if state.qos_dirty:
            self._write_qos(state)
        if self._probes_due(state.session.system_id or "", state):
            self._probe(state)
        return sent

    def _probes_due(self, system_id: str, state: NodeState) -> bool:
        probes = self.core.probes(system_id)
        return bool(probes) and time.monotonic() - state.probed_at >= PROBE_INTERVAL

    def _probe(self, state: NodeState) -> None:
        """Ask for the node's L3 services' next hops by ARP, out of their uplinks (the
        replies teach the node their MACs: rules/physical `LearnedHop`)."""
        assert state.switch is not None
        state.probed_at = time.monotonic()
        probes = self.core.probes(state.session.system_id or "")
        for _, ofport, vlan, mac, ip, target in sorted(probes, key=str):
            tagged = vlan is not None  # (an Option<bit<64>>: None or the VLAN)
            push = f"push_vlan:0x8100,set_field:{4096 + vlan}->vlan_vid," if tagged else ""
            frame = bytes.fromhex(packets.arp_request(mac, ip, target))
            state.switch.packet_out(frame, f"{push}output:{ofport}")

    def _record_zones(self, state: NodeState) -> None:
        """Send the node the zones given and released since its last record."""
        unsaved, released = self.core.zones(state.session.system_id or "").take_record()
        state.unconfirmed = state.session.save_zones(unsaved, released)

    def _confirm_zones(self, state: NodeState) -> None:
        """Wait for the node's answer to the last zone record (if any is outstanding)."""
        if state.unconfirmed is not None:
            confirm, state.unconfirmed = state.unconfirmed, None
            try:
                confirm()
            except Exception:
                # refused or lost: record them again (the node pushes whole next time)
                self.core.zones(state.session.system_id or "").record_lost()
                raise

    def _write_qos(self, state: NodeState) -> None:
        """Give the node's VIFs their ports' QoS rates (written when they changed, and
        once after a connect: what the node has is compared there)."""
        wanted = self.core.qos(state.session.system_id or "")
        if wanted != state.qos_written:
            state.session.configure_qos(wanted)
            state.qos_written = wanted
        state.qos_dirty = False

    def _push_flows(self, state: NodeState, remote: str) -> bool:
        """Push the node's flow changes: its whole table after a (re)connect or a takeover
        (`Switch.replace`: only the difference is sent, the flows the node learns left),
        else the changed keys and the learned flows of keys it no longer learns; one bundle
        either way. True if anything was sent."""
        if state.switch is None or state.switch.remote != remote:
            if state.switch is not None:
                state.switch.close()
            state.switch = Switch(remote, tls=self._tls, peer=state.session.system_id)
        if self._member is not None:
            # Fencing: the bridge's master role, claimed with the assignment's zxid before
            # any write; the switch refuses a deposed master's bundles (it made it a slave)
            # and its claims (stale), the reconciliation's bundle as any other.
            generation = self._member.view.zxid
            if generation >= 0 and state.switch.channel.generation != generation:
                state.switch.channel.claim(generation)
        system_id = state.session.system_id or ""
        if not state.full_sync and (why := table_unknown(state.installed_as, state.signals())):
            state.lost, state.full_sync = why, True  # (its end not seen yet: closed meanwhile)
        desired = self.desired_parts(system_id)
        images = self.core.images
        learned = self.core.learned(system_id)
        if state.full_sync:
            # (a switch that lost its table forgot the option's mapping too)
            state.switch.ensure_tlv_map()
            # (the flows its datapath learned stay: the rules compute their keys, not them)
            state.switch.load(images.flows(desired), images.encoded(desired), keep=learned)
            state.learned = set(learned)
            self._set_parts(system_id, state, desired)
            self._count_flows(system_id, desired)
            state.pushed, state.placed = True, False
            self._pushed_states.append(state)
            state.full_sync = False
            state.installed_as, state.lost = state.signals(), ""
            self._bulk_loaded = True
            self._recheck |= self.core.located(system_id)  # their status waited for this
            return True
        mods, new = images.changes(state.parts, desired, settled=not state.pushed)
        mods += [("delete", Flow(*key, "", 0)) for key in sorted(state.learned - learned)]
        adds = images.encoded(new)
        if adds is None:  # (a flow the encoder does not know: `apply` takes it by ovs-ofctl)
            mods += [("add", flow) for flow in images.flows(new)]
            adds = []
            state.switch.apply(mods)
        elif mods or adds:
            state.switch.apply(mods, adds, lambda: images.flows(new))
        if state.installed_as is None or state.switch.channel.connections != (
            state.installed_as.connection
        ):  # connected again to send them: the switch's table is not known, pushed whole
            state.lost, state.full_sync = "its OpenFlow connection was made again", True
            return self._push_flows(state, remote)
        state.learned = set(learned)
        self._set_parts(system_id, state, desired)
        self._count_flows(system_id, desired)
        if not state.pushed:
            self._pushed_states.append(state)
        state.pushed, state.placed = True, False
        return bool(mods or adds)

    def _holders(self, parts: Iterable[PartKey]) -> set[str]:
        """The nodes that hold one of `parts` (as of their last push)."""
        return set().union(*(self._holding.get(key, ()) for key in parts))

    def _count_flows(self, system_id: str, parts: set[PartKey]) -> None:
        """For the metrics, the flows node `system_id` holds as pushed: counted at the push,
        before its status can say its table is in (at the pass's end, a scrape after the
        status could read the count before it)."""
        if system_id:
            self._node_flows[system_id] = self.core.images.size(parts)

    def _set_parts(self, system_id: str, state: NodeState, parts: set[PartKey]) -> None:
        """Node `system_id` holds `parts` now (`_holding` follows; pushes run in threads)."""
        with self._holding_lock:
            for key in state.parts - parts:
                unindex(self._holding, key, system_id)
            for key in parts - state.parts:
                self._holding.setdefault(key, set()).add(system_id)
            state.parts = parts

    # ---- status ----

    def _report(self, masters: set[str]) -> None:
        """Write what changed of the masters' status (`_send_report`) and wait for the
        databases' answers."""
        self._send_report(masters).finish()

    def _send_report(self, masters: set[str]) -> _Sent:
        """Send what changed of the masters' status to the universal and config DBs: the
        ports whose location, binding or config row changed since the last report (every
        port when the nodes mastered changed), the nodes' status, the realized generation.
        The answers are waited for by the `_Sent` returned (`_pass` pushes the other nodes
        meanwhile: the status is at the databases first, and their commits overlap the
        pushes)."""
        sent = _Sent()
        if not self._report_due and masters == self._reported_masters:
            return sent
        if not all(link.up for link in self.links):
            return sent  # written once both are back (`_report_due` stays set)
        previous, check = self._reported_masters, self._recheck
        self._recheck, self._report_due = set(), False
        self._reported_masters = set(masters)
        core = self.core
        gained = masters - previous
        if gained:  # their ports: located there, bound there, or said to be there
            check = check | core.bound_to(gained)
            for node in gained:
                check |= core.located(node) | self._said_ports.get(node, set())
        # (a node no longer ours: its new master writes its ports)
        located = {p: n for p in check for n in core.where(p) if n in masters}
        # (of the nodes the ports are on: only theirs is asked)
        synced = {n for n in set(located.values()) if not self.nodes[n].full_sync}
        ops = status.binding_ops(core.bindings, located, check, masters, synced,
                                 core.binding_uuids)  # fmt: skip
        if ops:

            def bindings_lost(exc: Exception) -> None:
                log.warning("writing port bindings failed: %s", exc)
                self._recheck |= check
                self._report_due = True

            sent.send(self.universal.conn, UNIVERSAL_DB, ops, bindings_lost)
        self._report_config(sent, masters, located, check, synced)
        return sent

    def _report_config(
        self,
        sent: _Sent,
        masters: set[str],
        located: dict[str, str],
        check: set[str],
        synced: set[str],
    ) -> None:
        reports, remade = self._remake_reports(masters)
        touched, self._touched = self._touched, set()
        rows_changed, self._rows_changed = self._rows_changed, set()
        # The rows to look at: of nodes pushed something, whose report changed, whose row
        # changed, or gone (not every node's at every change).
        last = self._last_reports
        changed = {n for n in remade if _differs(last.get(n), reports[n])}
        look = {self._node_uuid[n] for n in touched | changed | (self._seen - self.nodes.keys())
                if n in self._node_uuid} | rows_changed  # fmt: skip
        nodes = self.config.rows["Transport_Node"]
        ops = status.node_status_ops({u: nodes[u] for u in look if u in nodes}, self.name,
                                     reports, self.nodes.keys(), self._seen, touched)  # fmt: skip
        ops += status.port_status_ops(self.config.rows["Logical_Switch_Port"], located, check,
                                      masters, synced)  # fmt: skip
        ops += status.gateway_status_ops(self.config.rows["Gateway_Service"],
                                         self.core.active_gateways, masters,
                                         self._synced, self._live)  # fmt: skip
        ops += self._realized_ops(sent)

        def status_lost(exc: Exception) -> None:
            log.warning("writing status failed: %s", exc)
            self._recheck |= check
            self._touched |= touched
            self._rows_changed |= look
            self._report_marks |= remade  # compared with what was written, next time
            self._report_due = True

        def status_written() -> None:
            for n in last.keys() - reports.keys():
                del last[n]
            last.update((n, reports[n]) for n in remade)

        if ops:
            sent.send(self.config.conn, "Loom_Config", ops, status_lost, status_written)
        else:
            status_written()

    def _synced(self, system_id: str) -> bool:
        """Node `system_id` is connected here and its whole table has been pushed."""
        state = self.nodes.get(system_id)
        return state is not None and not state.full_sync

    def _live(self, system_id: str) -> bool:
        """Node `system_id` is connected here or, as its status says, to another controller."""
        rows = self._node_row_uuids.get(system_id, ())
        return system_id in self.nodes or any(self._node_rows[u][1] for u in rows)

    def _remake_reports(self, masters: set[str]) -> tuple[dict[str, status.NodeReport], set[str]]:
        """Every node mastered's report, and the nodes whose report was made again: those
        marked since the last report and those newly mastered (cost: those, not every node
        mastered, at every pass that reports)."""
        book = self._reports
        for n in book.reports.keys() - masters:
            book.drop(n)
        marks = set(self._report_marks)  # (the set the nodes hold: emptied, not replaced)
        self._report_marks.clear()
        remade = (marks & masters) | (masters - book.reports.keys())
        for n in remade:
            state = self.nodes[n]
            book.put(n, status.NodeReport(0 if state.lost else state.realized, state.message,
                                          state.bfd, not state.full_sync,
                                          bool(state.lost)))  # fmt: skip
        return book.reports, remade

    def _realized_ops(self, sent: _Sent) -> list[status.Op]:
        """Publish what the nodes mastered here have realized (their reports as last made);
        with what the cluster's other members published, the generation every node has
        (`Loom_Global`, and the universal DB's copy)."""
        rows = self.config.rows["Loom_Global"]
        book = self._reports  # (asked in O(distinct generations), not O(nodes))
        if not rows or not (book.all_synced() or book.any_lost()):
            return []  # (a node that lost its table: every node's realized is 0 now)
        uuid, row = next(iter(rows.items()))
        published = omap(row.get("external_ids", ["map", []]))
        generation = self.core.generation
        ops = status.published_ops(published, uuid, self.name, book.own_realized(generation))
        members = self._member.view.members if self._member is not None else ()
        others = [m for m in members if m != self.name]
        realized = book.realized(generation, published, others)
        if realized is not None:
            ops += status.generation_ops("Loom_Global", rows, realized)
            self._report_universal_realized(sent, realized)
        return ops

    def _report_universal_realized(self, sent: _Sent, realized: int) -> None:
        """Copy the realized generation to `Universal_Global.realized_generation`."""
        ops = status.generation_ops(
            "Universal_Global", self.universal.rows["Universal_Global"], realized
        )

        def generation_lost(exc: Exception) -> None:
            log.warning("writing the realized generation failed: %s", exc)
            self._report_due = True

        if ops:
            sent.send(self.universal.conn, UNIVERSAL_DB, ops, generation_lost)

    # ---- for tests and tools ----

    def settled(self) -> bool:
        """True if everything known is on the nodes this controller masters: each one's
        flows pushed, its tunnel ports there (with ofports), its VIFs' bindings written."""
        if self.core.has_pending():
            return False
        bindings = {r["logical_port"]: r for r in self.universal.rows["Port_Binding"].values()}
        for system_id in self.masters():
            state = self.nodes[system_id]
            if state.full_sync or self._flows_due(state, self.core.images.changed()):
                return False
            tunnels = {name for name, (_, ofport, _) in state.session.tunnels().items() if ofport}
            if any(s.port_name not in tunnels for s in self.core.tunnel_specs(system_id)):
                return False
            for port in self.core.located(system_id):
                row = bindings.get(port)
                if row is None or opt(row["chassis"]) != system_id or row["up"] is not True:
                    return False
        return True

    def tunnel_peers(self, system_id: str) -> set[str]:
        """The nodes node `system_id` has a per-peer tunnel port to (with an ofport)."""
        state = self.nodes.get(system_id)
        if state is None:
            return set()
        return {peer for peer, ofport, _ in state.session.tunnels().values() if ofport and peer}

    def flows(self, system_id: str) -> list[Flow]:
        """Node `system_id`'s desired table."""
        if system_id not in self.nodes:
            return []
        return self.core.flows(system_id)

    def universal_conn(self) -> RawConnection:
        """The universal DB connection (for tests)."""
        assert self.universal.conn is not None
        return self.universal.conn


def _differs(last: status.NodeReport | None, now: status.NodeReport) -> bool:
    """A node's report says something new, but for its realized generation."""
    return last is None or (last.message, last.synced, last.bfd) != (
        now.message,
        now.synced,
        now.bfd,
    )


@dataclass
class _Sent:
    """Transactions sent and not yet answered (`PhysicalController._send_report`)."""

    waiting: list[tuple[RawConnection, int, Callable[[Exception], None], Callable[[], None]]] = (
        field(default_factory=list)
    )

    def send(self, conn: RawConnection | None, db: str, ops: list[dict[str, Any]],
             lost: Callable[[Exception], None],
             done: Callable[[], None] = lambda: None) -> None:  # fmt: skip
        """Send `ops` to `db` on `conn`; at `finish`, `done()` once committed, else
        `lost(error)` (at once if it cannot be sent)."""
        try:
            if conn is None:
                raise OSError("not connected")
            self.waiting.append((conn, conn.send_transact(db, ops), lost, done))
        except (TransactError, OSError) as exc:
            lost(exc)

    def finish(self) -> None:
        """Wait for every answer, in the order sent; say each outcome."""
        waiting, self.waiting = self.waiting, []
        for conn, request, lost, done in waiting:
            try:
                conn.finish_transact(request)
            except (TransactError, OSError) as exc:
                lost(exc)
            else:
                done()


def _log_slow_push(node: str, took: float, steps: dict[str, float], whole: bool) -> None:
    """Say where a slow push's time went (OVSDB config; the rest: zone records, OpenFlow,
    QoS)."""
    if took <= SLOW_PUSH:
        return
    steps["send"] = took - sum(steps.values())
    parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in steps.items())
    log.warning("node %s: push took %.0f ms (%s; whole table: %s)", node, took * 1000, parts,
                whole, extra={"node": node})  # fmt: skip
