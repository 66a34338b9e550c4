"""The physical controller's planner and executor without any daemon: a node is the lab's
pure stand-in (`loom_lab.standin`: its OVSDB in memory with ovsdb-server's transaction
semantics and the real vswitch schema, ovs-vswitchd's ofports, its br-int's OpenFlow 1.5
answered as OVS answers), the clock is a number the test moves. Each test drives the
planner as the shell does (`plans`, `Executor.run`, `settle`, `end_pass`) and checks the
order correctness rests on: claims before writes, zones recorded before the flows that use
them and released after, a whole table after a (re)connect or a takeover or a lost table,
nothing written by a standby or past a fence."""

from __future__ import annotations

import contextlib
import itertools
import selectors
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from physical_rows import universal as _universal

from loom_common.ovsdb import TransactError
from loom_lab.standin import vswitch
from loom_lab.standin.db import Database
from loom_lab.standin.schema import Schema, value_of
from loom_lab.standin.switch import Bridge, Connection
from loom_lab.standin.vswitch import Vswitchd
from loom_ovs.manager import FENCE_KEY, NODE_TABLES, ZONE_KEY, Fenced, NodeSession
from loom_ovs.sandbox import VSWITCH_SCHEMA
from loom_physical import rules
from loom_physical.core import Localizer
from loom_physical.executor import Executor, NodeLink
from loom_physical.planner import (
    PROBE_INTERVAL,
    Change,
    ClaimNode,
    ClaimSwitch,
    Configure,
    Life,
    Outcome,
    Plan,
    Planner,
    Probe,
    Reconcile,
    RecordZones,
)

pytestmark = pytest.mark.timeout(120)

OFCTL = pytest.mark.ovs
"""A test whose node is reconciled with a table: `Switch.load` compares them with
`ovs-ofctl diff-flows` (a tool of Debian's openvswitch-switch; no daemon runs)."""

SCHEMA = Schema.load(VSWITCH_SCHEMA)


class StandinConn:
    """What `NodeSession` writes through: the stand-in's database, with vswitchd's writes
    after each commit and the session's replica brought up to date (its monitor)."""

    def __init__(self, node: StandinNode) -> None:
        self.node = node
        self._ids = itertools.count(1)
        self._replies: dict[int, list[Any]] = {}

    def transact(self, _db: str, ops: list[dict[str, Any]]) -> list[Any]:
        results = self.node.commit(ops)
        errors = [r for r in results if isinstance(r, dict) and "error" in r]
        if errors:
            raise TransactError(detail=f"{errors[0]['error']}: {errors[0].get('details', '')}")
        return results

    def send_transact(self, db: str, ops: list[dict[str, Any]]) -> int:
        request = next(self._ids)
        try:
            self._replies[request] = self.transact(db, ops)
        except TransactError as exc:
            self._replies[request] = [exc]
        return request

    def close(self) -> None:
        """Nothing to close: the node is in this process."""

    def finish_transact(self, request: int) -> list[Any]:
        reply = self._replies.pop(request)
        if reply and isinstance(reply[0], TransactError):
            raise reply[0]
        return reply


class StandinNode:
    """One stand-in transport node in this process: its OVSDB (read by a `NodeSession` as
    a controller's is) and its br-int's OpenFlow on a unix socket (served on a thread)."""

    def __init__(self, name: str, run_dir: Path, *, vifs: dict[str, int]) -> None:
        self.name = name
        self.db = Database(SCHEMA)
        self.vswitchd = Vswitchd()
        self.bridge = Bridge(datapath_id=1)
        self.transactions: list[list[str]] = []
        """The controller's transactions, each as its operations' tables and kinds."""
        self.events: list[str] = []
        """The controller's writes in order: `ovsdb:<what>` and `openflow:bundle`."""
        self.bridge.on_commit = lambda: self.events.append("openflow:bundle")
        self.path = run_dir / f"{name}.mgmt"
        self._local(vswitch.node_ops(name, "192.168.0.1", f"unix:{self.path}", []))
        for n, (iface, ofport) in enumerate(sorted(vifs.items())):
            self._local(vswitch.add_vif_ops(self.db, f"tap{n}", iface,
                                            f"50:54:00:00:00:0{n + 1}", ofport))  # fmt: skip
        self.session = self.connect()
        self._server = _OpenFlowServer(self.path, self.bridge)

    def connect(self) -> NodeSession:
        """A new session of the node's (as when it dials the controller again)."""
        session = NodeSession.snapshot(self._selected())
        session.alive = True
        session.replica.conn = session._conn = StandinConn(self)  # type: ignore[assignment]
        self.session = session
        return session

    def commit(self, ops: list[dict[str, Any]]) -> list[Any]:
        """A controller's transaction; vswitchd's writes follow; the session sees both."""
        self.transactions.append([f"{op.get('op')}:{op.get('table')}" for op in ops])
        results, changes = self.db.transact(ops)
        if changes:
            self.events.append(f"ovsdb:{_what(ops)}")
            if Vswitchd.due(changes):
                self._local(self.vswitchd.writes(self.db, 0.0))
        self.refresh()
        return results

    def _local(self, ops: list[Any]) -> None:
        results, changes = self.db.transact(ops)
        assert not [r for r in results if isinstance(r, dict) and "error" in r], results
        if changes and Vswitchd.due(changes):
            self._local(self.vswitchd.writes(self.db, 0.0))

    def refresh(self) -> None:
        """The session's replica as the node's monitor would have it now."""
        for table, rows in self._selected().items():
            self.session.replica.rows[table] = {
                row["_uuid"][1]: {c: v for c, v in row.items() if c != "_uuid"} for row in rows
            }
        self.session._ports_read = None  # (as `NodeSession.poll` does for Port changes)

    def _selected(self) -> dict[str, list[dict[str, Any]]]:
        return {table: [{"_uuid": ["uuid", uuid],
                         **{c: value_of(SCHEMA.tables[table], row, c) for c in columns}}
                        for uuid, row in self.db.rows[table].items()]
                for table, columns in NODE_TABLES.items()}  # fmt: skip

    def external_ids(self, table: str) -> dict[str, str]:
        """The external_ids of the table's (first) row."""
        rows = self.db.rows[table]
        if not rows:
            return {}
        uuid = next(iter(rows))
        return dict(self.db.get(table, uuid, "external_ids")[1])

    def close(self) -> None:
        self._server.close()


class _OpenFlowServer:
    """br-int's OpenFlow: the stand-in's `Connection` per accepted socket, on a thread."""

    def __init__(self, path: Path, bridge: Bridge) -> None:
        self.bridge = bridge
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.05):
                if key.fileobj is self._listener:
                    sock, _ = self._listener.accept()
                    conn = Connection(self.bridge, sock.sendall, sock.close)
                    self._selector.register(sock, selectors.EVENT_READ, conn)
                    conn.start()
                    continue
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                data = b""
                with contextlib.suppress(OSError):
                    data = sock.recv(1 << 16)
                if data:
                    key.data.receive(data)
                else:
                    key.data.lost()
                    self._selector.unregister(sock)
                    sock.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


def _what(ops: list[dict[str, Any]]) -> str:
    """A controller transaction, in a word: the fence claim, zones, or configuration."""
    texts = repr(ops)
    if FENCE_KEY in texts and all(op.get("table") == "Open_vSwitch" for op in ops):
        return "claim"
    if ZONE_KEY in texts:
        return "zones"
    return "configure"


class Harness:
    """A planner over a real core and stand-in nodes; one pass at a time, as the shell."""

    def __init__(self, tmp_path: Path, *names: str) -> None:
        vifs = {"hv1": {"vif-1": 5}, "hv2": {"vif-2": 7}}
        self.core = Localizer(rules.load())
        self.core.universal(_universal())
        self.nodes = {n: StandinNode(n, tmp_path, vifs=vifs[n]) for n in names}
        self.links = {n: NodeLink(node.session) for n, node in self.nodes.items()}
        self.planner = Planner(self.core)
        self.mastered: set[str] = set(names)
        self.executor = Executor(lambda: self.core.images, None, lambda n: n in self.mastered)
        self.now = 1000.0
        self.token: int | None = None
        self.plans: list[Plan] = []
        self.outcomes: list[Outcome] = []
        for name in names:
            self.planner.connected(name)
        self._feed()

    def _feed(self) -> None:
        for name, link in self.links.items():
            self.core.node(name, link.facts(), link.session.zones())
        self.core.set_computed(set(self.nodes))
        self.core.set_liveness(set(self.nodes), set())

    def run_pass(self, masters: set[str] | None = None) -> list[Plan]:
        """One pass: compute, both push phases, settle; the plans run."""
        masters = set(self.nodes) if masters is None else masters
        self._feed()
        self.core.set_masters(masters)
        while self.core.compute() and self.core.feeds_back():
            pass
        self.planner.take(self.core.take_changed())
        self.planner.mastered_now(masters)
        ran = []
        for first in (True, False):
            plans = self.planner.plans(masters, self.core.generation, self.now, self._read,
                                       self.token, first=first)  # fmt: skip
            while plans:
                again = []
                for plan in plans:
                    outcome = self.executor.run(plan, self.links[plan.node])
                    self.plans.append(plan)
                    self.outcomes.append(outcome)
                    ran.append(plan)
                    if self.planner.settle(plan, outcome, self.now):
                        again.append(
                            self.planner.plan(
                                self.planner.nodes[plan.node],
                                self.core.generation,
                                self.now,
                                self._read(plan.node),
                                self.token,
                            )
                        )
                plans = again
            if not first:
                self.planner.still_due()
        self.planner.end_pass()
        return ran

    def settle(self, masters: set[str] | None = None, passes: int = 6) -> None:
        """Passes until nothing is sent (a new br-int's ofports, then its table ...)."""
        for _ in range(passes):
            if not self.run_pass(masters):
                return
        raise AssertionError(f"still pushing after {passes} passes: {self.plans[-3:]}")

    def _read(self, name: str) -> Any:
        return self.links[name].reading()

    def installed(self, name: str) -> int:
        return len(self.nodes[name].bridge.flows)

    def close(self) -> None:
        for link in self.links.values():
            if link.switch is not None:
                link.switch.close()
        for node in self.nodes.values():
            node.close()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    site = Harness(tmp_path, "hv1", "hv2")
    try:
        yield site
    finally:
        site.close()


def _kinds(plan: Plan) -> list[str]:
    return [type(step).__name__ for step in plan.steps]


def test_a_new_node_is_configured_then_gets_its_whole_table(harness: Harness) -> None:
    """br-int and the tunnel port are written first; once ovs-vswitchd made them, the whole
    table goes in one bundle and the node is SYNCED and realizes the generation."""
    first = harness.run_pass()
    assert {p.node for p in first} == {"hv1", "hv2"}
    for name in ("hv1", "hv2"):
        kinds = _kinds(next(p for p in first if p.node == name))
        assert kinds[0] == "Configure"
        assert kinds.index("RecordZones") < kinds.index("Reconcile")  # (its ports' zones)
    harness.settle()
    node = harness.planner.nodes["hv1"]
    assert node.life is Life.SYNCED
    assert node.realized == harness.core.generation
    assert harness.installed("hv1") == len(harness.core.flows("hv1")) > 0
    reconciles = [p for p in harness.plans if p.node == "hv1" and p.step(Reconcile)]
    assert len(reconciles) == 1
    assert harness.nodes["hv1"].bridge.counters.bundles >= 1
    # nothing changed: nothing to send, nothing sent
    assert harness.run_pass() == []


def test_a_change_goes_as_a_change_to_the_nodes_that_hold_it(harness: Harness) -> None:
    harness.settle()
    before = harness.installed("hv1")
    harness.core.universal([("Flow", "f-sw", {"datapath": 1, "source": "sw", "cookie": 1,
                            "flows": {"ingress\tls_in_acl\t0\t\tresubmit(,@next)",
                                      "ingress\tls_in_acl\t1\tip\tresubmit(,@next)"},
                            "local_flows": set()})])  # fmt: skip
    ran = harness.run_pass()
    assert {p.node for p in ran} == {"hv1", "hv2"}  # (both hold the switch's part)
    for plan in ran:
        change = plan.step(Change)
        assert change is not None
        assert plan.step(Reconcile) is None
        assert [op for op, _ in change.mods] == ["add"]
    assert harness.installed("hv1") == before + 1


@OFCTL
def test_a_takeover_claims_the_node_then_reconciles_its_whole_table(harness: Harness) -> None:
    """Regained (a standby becoming master), a node is reconciled whole; with a token, the
    node's OVSDB fence is claimed before any OVSDB write and the bridge's master role
    before any OpenFlow write."""
    harness.settle()
    harness.run_pass(masters={"hv2"})  # hv1 taken by another controller
    harness.token = 7
    ran = harness.run_pass(masters={"hv1", "hv2"})
    plan = next(p for p in ran if p.node == "hv1")
    kinds = _kinds(plan)
    assert kinds[0] == "ClaimNode"
    assert plan.step(ClaimNode).token == 7
    assert kinds.index("ClaimSwitch") < kinds.index("Reconcile")
    assert plan.whole
    assert harness.nodes["hv1"].external_ids("Open_vSwitch")[FENCE_KEY] == "7"
    assert harness.nodes["hv1"].bridge.election_id == 7
    assert harness.planner.nodes["hv1"].life is Life.SYNCED
    # every write after the claim carries the fence (a `wait` on the recorded token)
    for ops in harness.nodes["hv1"].transactions[-1:]:
        assert ops[0] == "wait:Open_vSwitch"


def test_a_fenced_node_refuses_a_deposed_master_and_nothing_is_written(
    harness: Harness,
) -> None:
    """Another controller recorded a newer token: the claim fails before anything is
    written; the node is not realized and is reconciled when this controller may again."""
    harness.settle()
    hv1 = harness.nodes["hv1"]
    uuid = next(iter(hv1.db.rows["Open_vSwitch"]))
    hv1._local([{"op": "mutate", "table": "Open_vSwitch", "where": [["_uuid", "==",
                 ["uuid", uuid]]], "mutations": [["external_ids", "insert",
                 ["map", [[FENCE_KEY, "9"]]]]]}])  # fmt: skip
    hv1.refresh()
    harness.token = 8
    writes = len(hv1.transactions)
    flows = dict(hv1.bridge.flows)
    harness.planner.connected("hv1")  # (reconnected: a whole push is due)
    ran = harness.run_pass(masters={"hv1"})
    plan = next(p for p in ran if p.node == "hv1")
    outcome = harness.outcomes[harness.plans.index(plan)]
    assert isinstance(outcome.error, Fenced)
    assert outcome.done == 0
    assert len(hv1.transactions) == writes  # (the claim was refused before sending)
    assert hv1.bridge.flows == flows
    node = harness.planner.nodes["hv1"]
    assert node.life is Life.UNSYNCED
    assert "hv1" in harness.planner.due


def test_new_zones_are_recorded_before_the_flows_and_released_after(harness: Harness) -> None:
    harness.settle()
    zones = harness.core.zones("hv1")
    zones.need("p7")  # (as the rules ask for a port's zone)
    zone = zones.zones["p7"]
    assert zones.unsaved == {"p7": zone}
    hv1 = harness.nodes["hv1"]
    hv1.events.clear()
    plan = harness.planner.plan(harness.planner.nodes["hv1"], harness.core.generation,
                                harness.now, harness._read("hv1"), None)  # fmt: skip
    kinds = _kinds(plan)
    assert kinds.index("RecordZones") < kinds.index("Change")
    outcome = harness.executor.run(plan, harness.links["hv1"])
    assert outcome.error is None
    assert outcome.record_out
    harness.planner.settle(plan, outcome, harness.now)
    assert hv1.external_ids("Bridge")[f"{ZONE_KEY}p7"] == str(zone)
    node = harness.planner.nodes["hv1"]
    assert node.record_out  # not realized before the record is confirmed
    # released: recorded again after the flows that used it
    zones.release("p7")
    plan = harness.planner.plan(node, harness.core.generation, harness.now,
                                harness._read("hv1"), None)  # fmt: skip
    kinds = _kinds(plan)
    assert kinds[0] == "ConfirmZones"
    assert kinds.index("Change") < kinds.index("RecordZones")
    record = plan.steps[kinds.index("RecordZones")]
    assert isinstance(record, RecordZones)
    assert record.released == {"p7"}
    outcome = harness.executor.run(plan, harness.links["hv1"])
    assert outcome.error is None
    harness.planner.settle(plan, outcome, harness.now)
    assert f"{ZONE_KEY}p7" not in hv1.external_ids("Bridge")


def test_a_record_never_sent_is_due_again(harness: Harness) -> None:
    """A plan that stopped before its zone record (the node deposed meanwhile) leaves the
    zones to record: none is lost."""
    harness.settle()
    zones = harness.core.zones("hv1")
    zones.need("p9")
    wanted = dict(zones.unsaved)
    assert list(wanted) == ["p9"]
    plan = harness.planner.plan(harness.planner.nodes["hv1"], harness.core.generation,
                                harness.now, harness._read("hv1"), None)  # fmt: skip
    assert plan.step(RecordZones) is not None
    assert not zones.unsaved
    harness.mastered = set()  # deposed before the plan ran
    outcome = harness.executor.run(plan, harness.links["hv1"])
    assert outcome.skipped
    harness.planner.settle(plan, outcome, harness.now)
    assert zones.unsaved == wanted


@OFCTL
def test_a_standby_keeps_quiet_and_is_reconciled_when_it_masters(harness: Harness) -> None:
    """A node computed here and mastered elsewhere is never written, whatever changes; a
    part it holds that changed meanwhile makes it UNSYNCED, so that gaining it reconciles
    its whole table."""
    harness.settle()
    hv1 = harness.nodes["hv1"]
    writes, bundles = len(hv1.transactions), hv1.bridge.counters.bundles
    harness.core.universal([("Flow", "f-sw", {"datapath": 1, "source": "sw", "cookie": 1,
                            "flows": {"ingress\tls_in_acl\t2\tarp\tresubmit(,@next)"},
                            "local_flows": set()})])  # fmt: skip
    harness.mastered = {"hv2"}
    ran = harness.run_pass(masters={"hv2"})
    assert [p.node for p in ran] == ["hv2"]
    assert (len(hv1.transactions), hv1.bridge.counters.bundles) == (writes, bundles)
    assert harness.planner.nodes["hv1"].life is Life.UNSYNCED
    harness.mastered = {"hv1", "hv2"}
    ran = harness.run_pass()
    assert [p.node for p in ran if p.whole] == ["hv1"]
    assert harness.installed("hv1") == len(harness.core.flows("hv1"))


@OFCTL
def test_a_reconnected_node_is_reconciled_with_only_the_difference(harness: Harness) -> None:
    harness.settle()
    hv1 = harness.nodes["hv1"]
    adds = hv1.bridge.counters.flow_mods
    harness.links["hv1"].reconnected(hv1.connect())  # (a new session: a new channel)
    harness.planner.connected("hv1")
    ran = harness.run_pass()
    plan = next(p for p in ran if p.node == "hv1")
    assert plan.whole
    assert plan.step(Configure) is not None
    assert harness.planner.nodes["hv1"].life is Life.SYNCED
    assert hv1.bridge.counters.flow_mods == adds  # (the same table: nothing re-sent)


@OFCTL
def test_a_refused_bundle_leaves_the_node_to_be_reconciled(harness: Harness) -> None:
    """The switch refuses the push (another controller became its master with a newer
    generation): the outcome is an error, the node is not realized, and the next pass
    reconciles it."""
    harness.settle()
    harness.token = 3
    harness.run_pass()  # (claims the role with generation 3)
    harness.nodes["hv1"].bridge.election_id = 5  # a newer master elsewhere
    harness.core.universal([("Flow", "f-sw", {"datapath": 1, "source": "sw", "cookie": 1,
                            "flows": {"ingress\tls_in_acl\t3\tip6\tresubmit(,@next)"},
                            "local_flows": set()})])  # fmt: skip
    generation = harness.planner.nodes["hv1"].realized
    harness.links["hv1"].switch.channel.generation = None  # type: ignore[union-attr]
    ran = harness.run_pass()
    plan = next(p for p in ran if p.node == "hv1")
    outcome = harness.outcomes[harness.plans.index(plan)]
    assert outcome.error is not None
    node = harness.planner.nodes["hv1"]
    assert node.life is not Life.SYNCED
    assert node.realized == generation
    assert node.message
    assert "hv1" in harness.planner.due


def test_a_lost_table_realizes_nothing_until_reconciled(harness: Harness) -> None:
    harness.settle()
    link = harness.links["hv1"]
    assert link.switch is not None
    harness.nodes["hv1"].bridge.flows.clear()  # (ovs-vswitchd restarted: an empty table)
    link.switch.channel.close()
    assert harness.planner.check_table("hv1", link.signals(), ended=True)
    node = harness.planner.nodes["hv1"]
    assert node.life is Life.LOST
    assert "hv1" in harness.planner.marks  # (its report: realized 0)
    ran = harness.run_pass()
    assert [p.node for p in ran if p.whole] == ["hv1"]
    assert node.life is Life.SYNCED
    assert node.why == ""
    assert harness.installed("hv1") == len(harness.core.flows("hv1"))


def test_probes_follow_the_clock(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node's next hops are probed at once, then not again until `PROBE_INTERVAL` has
    passed on the clock the shell gives."""
    harness.settle()
    probe = (None, 3, None, "50:54:00:00:00:aa", "172.16.0.2", "172.16.0.1")
    monkeypatch.setattr(harness.core, "probes", lambda n: {probe} if n == "hv1" else set())
    harness.planner.probing.add("hv1")
    ran = harness.run_pass()
    assert [p.node for p in ran if p.step(Probe)] == ["hv1"]
    frames = harness.plans[-1].step(Probe).frames
    assert frames[0][1] == "output:3"
    assert len(frames[0][0]) >= 42
    assert harness.nodes["hv1"].bridge.counters.packet_outs == 1
    harness.now += PROBE_INTERVAL - 1
    assert harness.run_pass() == []
    harness.now += 1
    assert [p.node for p in harness.run_pass() if p.step(Probe)] == ["hv1"]


def test_plans_are_made_without_a_clock_or_a_socket(harness: Harness) -> None:
    """The planner decides from what it is given: two plans of the same node from the
    same reading at the same `now` are the same."""
    harness.settle()
    harness.planner.connected("hv1")
    reading = harness._read("hv1")
    node = harness.planner.nodes["hv1"]
    one = harness.planner.plan(node, 4, harness.now, reading, 2)
    two = harness.planner.plan(node, 4, harness.now, reading, 2)
    assert one.steps == two.steps
    assert isinstance(one.steps[0], ClaimNode)
    assert one.step(Reconcile) is not None
    assert any(isinstance(s, ClaimSwitch) for s in one.steps)
