"""Cluster membership on a real ZooKeeper: ownership states, takeover, joining, fencing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState

from loom_common.cluster.membership import (
    CLOSE,
    REGISTERED,
    Member,
    MemberView,
    Ownership,
    Published,
    connect,
    decode,
    encode,
    leader_of,
    next_ownership,
    predecessor_gone,
)
from loom_common.cluster.sharding import Owners, assign
from loom_common.procs import Daemon
from loom_common.zookeeper import ZooKeeperEnsemble, ZooKeeperServer

SESSION = 1.0  # seconds; the test server's tick is 0.2 s (sessions of 0.4..4 s allowed)
SHARDS = [f"dp-{i:02d}" for i in range(12)]
WAIT = 20.0  # generous bound for things that take milliseconds when the machine is idle

# -- pure parts --------------------------------------------------------------------------------

Own = Ownership
TRANSITIONS = [
    (Own.JOINING, REGISTERED, Own.ACQUIRED),
    (Own.ACQUIRED, KazooState.SUSPENDED, Own.SUSPENDED),
    (Own.SUSPENDED, KazooState.CONNECTED, Own.ACQUIRED),
    (Own.SUSPENDED, KazooState.LOST, Own.LOST),
    (Own.ACQUIRED, KazooState.LOST, Own.LOST),
    (Own.JOINING, KazooState.LOST, Own.LOST),
    (Own.LOST, KazooState.CONNECTED, Own.JOINING),
    (Own.ACQUIRED, CLOSE, Own.CLOSED),
    (Own.SUSPENDED, CLOSE, Own.CLOSED),
    # Not listed: no change.
    (Own.ACQUIRED, KazooState.CONNECTED, Own.ACQUIRED),
    (Own.JOINING, KazooState.SUSPENDED, Own.JOINING),
    (Own.JOINING, KazooState.CONNECTED, Own.JOINING),
    (Own.LOST, KazooState.SUSPENDED, Own.LOST),
    (Own.SUSPENDED, REGISTERED, Own.SUSPENDED),
    (Own.CLOSED, KazooState.CONNECTED, Own.CLOSED),
    (Own.CLOSED, REGISTERED, Own.CLOSED),
]


@pytest.mark.parametrize(("state", "event", "expected"), TRANSITIONS)
def test_ownership_transitions(state: Ownership, event: str, expected: Ownership) -> None:
    assert next_ownership(state, event) is expected


def test_only_acquired_masters_may_write() -> None:
    view = MemberView(
        "a", state=Own.ACQUIRED, masters=frozenset({"s1"}), standbys=frozenset({"s2"})
    )
    assert view.may_write("s1")
    assert not view.may_write("s2")
    for state in (Own.SUSPENDED, Own.LOST, Own.JOINING, Own.CLOSED):
        assert not MemberView("a", state=state, masters=frozenset({"s1"})).may_write("s1")


def test_assignment_codec_round_trip_and_size() -> None:
    members = tuple(f"ctl-{i}" for i in range(5))
    shards = [f"3f2504e0-4f89-11d3-9a0c-0305e82c{i:04d}" for i in range(7000)]
    published = Published(assign(members, shards), members, "ctl-0")
    data = encode(published)
    assert decode(data) == published
    assert len(data) < 400_000  # ZooKeeper's znode limit is 1 MiB
    one = Published({"s": Owners("a")}, ("a",), "a")
    assert decode(encode(one)) == one
    assert json.loads(encode(one)) == {
        "format": 1, "leader": "a", "members": ["a"], "shards": {"s": [0, -1]},
    }  # fmt: skip
    for bad in (None, b"", b"{", b'{"format": 2}', b'{"format": 1, "members": ["a"]}'):
        assert decode(bad) is None


def test_member_id_is_one_znode_name() -> None:
    for bad in ("", "a/b"):
        with pytest.raises(ValueError, match="bad member id"):
            Member(None, bad)


# -- on a real ZooKeeper -----------------------------------------------------------------------


class Cluster:
    """Members on their own clients against one server; everything stopped at teardown."""

    def __init__(self, zk: ZooKeeperServer, root: str) -> None:
        self.zk = zk
        self.root = root
        self.clients: list[Any] = []
        self.members: list[Member] = []

    def client(self, session: float = SESSION) -> Any:
        client = connect(self.zk.hosts, session_timeout=session)
        self.clients.append(client)
        return client

    def member(
        self,
        member_id: str,
        shards: list[str] | None = SHARDS,
        *,
        session: float = SESSION,
        on_change: Callable[[MemberView], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> Member:
        member = Member(
            self.client(session), member_id, shards, root=self.root, on_change=on_change,
            clock=clock,
        )  # fmt: skip
        self.members.append(member.start())
        return member

    def close(self) -> None:
        for member in self.members:
            member.stop()
        for client in self.clients:
            client.stop()
            client.close()


@pytest.fixture
def cluster(zk: ZooKeeperServer) -> Iterator[Cluster]:
    c = Cluster(zk, "/loom/test")
    try:
        yield c
    finally:
        c.close()


def owns(count: int) -> Callable[[MemberView], bool]:
    """The view is ACQUIRED with `count` masters."""
    return lambda v: v.state is Own.ACQUIRED and len(v.masters) == count


def disjoint_cover(*views: MemberView) -> None:
    masters = [v.masters for v in views]
    assert set().union(*masters) == set(SHARDS)
    assert sum(len(m) for m in masters) == len(SHARDS)


@pytest.mark.zk
def test_two_members_split_the_shards_with_each_other_as_standby(cluster: Cluster) -> None:
    a = cluster.member("a")
    b = cluster.member("b", clock=lambda: 1234.5)
    va = a.wait_for(owns(6), WAIT)
    vb = b.wait_for(owns(6), WAIT)
    assert vb.since == 1234.5  # views are stamped by the injected clock
    assert va.version == vb.version
    disjoint_cover(va, vb)
    assert va.standbys == vb.masters  # hot standbys
    assert vb.standbys == va.masters
    assert va.leader != vb.leader
    assert va.leader  # the first member stood first
    assert leader_of(cluster.clients[0], cluster.root) == "a"
    assert va.members == ("a", "b")


@pytest.mark.zk
def test_closing_a_client_hands_its_shards_over_at_once(cluster: Cluster) -> None:
    a = cluster.member("a")
    b = cluster.member("b")
    b.wait_for(owns(6), WAIT)
    a.wait_for(owns(6), WAIT)
    started = time.monotonic()
    cluster.clients[0].stop()  # a clean close ends the session: its nodes go now
    vb = b.wait_for(owns(12), WAIT)
    assert vb.leader
    assert vb.since - started < SESSION  # no session timeout to wait for
    assert a.view.state is Own.LOST
    assert a.view.masters == frozenset()


MEMBER_SCRIPT = """
import json, sys, time
from loom_common.cluster.membership import Member, connect
hosts, member_id, root, session = sys.argv[1:5]
shards = sys.argv[5:]
def show(view):
    print(json.dumps({"state": view.state.value, "masters": sorted(view.masters),
                      "leader": view.leader}), flush=True)
client = connect(hosts, session_timeout=float(session))
Member(client, member_id, shards, root=root, on_change=show).start()
time.sleep(600)  # until killed
"""


def member_process(cluster: Cluster, tmp_path: Path, member_id: str) -> Daemon:
    argv = [sys.executable, "-c", MEMBER_SCRIPT, cluster.zk.hosts, member_id, cluster.root,
            str(SESSION), *SHARDS]  # fmt: skip
    return Daemon(f"member-{member_id}", argv, tmp_path).start()


@pytest.mark.zk
@pytest.mark.parametrize("victim_leads", [False, True], ids=["follower", "leader"])
def test_kill9_of_a_member_moves_its_shards_within_session_timeout_and_a_tick(
    cluster: Cluster, tmp_path: Path, victim_leads: bool, request: pytest.FixtureRequest
) -> None:
    """The survivor owns everything one session timeout (+ a tick) after the kill."""
    victim = None
    try:
        if victim_leads:
            victim = member_process(cluster, tmp_path, "victim")
            wait_registered(cluster, "victim")
        survivor = cluster.member("survivor")
        if victim is None:
            survivor.wait_for(lambda v: v.leader, WAIT)
            victim = member_process(cluster, tmp_path, "victim")
        before = survivor.wait_for(lambda v: owns(6)(v) and "victim" in v.members, WAIT)
        assert before.leader is not victim_leads
        assert before.standbys == set(SHARDS) - before.masters
        killed = time.monotonic()
        victim.kill9()
        after = survivor.wait_for(owns(12), WAIT)
        takeover = after.since - killed
        tick = cluster.zk.tick_ms / 1000
        print(f"takeover after kill -9 ({request.node.callspec.id}): {takeover:.3f}s")
        assert SESSION * 0.5 < takeover <= SESSION + tick + 0.5
        assert after.leader
        assert after.members == ("survivor",)
    finally:
        if victim is not None:
            victim.stop()


def wait_registered(cluster: Cluster, member_id: str) -> None:
    """Wait (on a watch, not by polling) until `member_id`'s node exists."""
    appeared = threading.Event()

    def watch(data: bytes | None, stat: Any) -> bool:
        if stat is not None:
            appeared.set()
        return stat is None  # stop watching once it is there

    cluster.client().DataWatch(f"{cluster.root}/members/{member_id}", watch)
    assert appeared.wait(WAIT), f"{member_id} never registered"


@pytest.mark.zk
def test_a_joining_member_takes_its_share_and_only_that(cluster: Cluster) -> None:
    a = cluster.member("a")
    b = cluster.member("b")
    before = {m.member_id: m.wait_for(owns(6), WAIT) for m in (a, b)}
    c = cluster.member("c")
    vc = c.wait_for(owns(4), WAIT)
    after = {m.member_id: m.wait_for(owns(4), WAIT) for m in (a, b)}
    disjoint_cover(vc, *after.values())
    for member_id, view in after.items():
        assert view.masters <= before[member_id].masters  # nothing moved between a and b
        assert view.version == vc.version
    # What c took cold, the member that gave it up keeps hot as standby, or its old standby.
    assert all(shard in (after["a"].standbys | after["b"].standbys) for shard in vc.masters)


@pytest.mark.zk
def test_stop_leaves_at_once_and_the_leader_reassigns(cluster: Cluster) -> None:
    a = cluster.member("a")
    b = cluster.member("b")
    a.wait_for(owns(6), WAIT)
    b.wait_for(owns(6), WAIT)
    started = time.monotonic()
    a.stop()  # the leader leaves cleanly; its client stays connected
    assert a.view.state is Own.CLOSED
    assert not a.view.may_write(next(iter(SHARDS)))
    vb = b.wait_for(owns(12), WAIT)
    assert vb.leader
    assert vb.since - started < SESSION


@pytest.mark.zk
def test_session_expiry_loses_everything_then_rejoins(cluster: Cluster) -> None:
    """ACQUIRED -> LOST on expiry: nothing owned; then JOINING -> ACQUIRED on a new session.

    (JOINING lasts one step of the worker when the id is free, so no view shows it.)
    """
    views: list[MemberView] = []
    a = cluster.member("a", on_change=views.append)
    b = cluster.member("b")
    a.wait_for(owns(6), WAIT)
    b.wait_for(owns(6), WAIT)
    old_session = cluster.clients[0].client_id
    seen = len(views)
    expire_session(cluster, cluster.clients[0])
    b.wait_for(owns(12), WAIT)  # a's node went with its session
    va = a.wait_for(lambda v: owns(6)(v) and "a" in v.members, WAIT)
    assert cluster.clients[0].client_id != old_session
    states = [v.state for v in views[seen:]]
    lost = states.index(Own.LOST)
    assert set(states[:lost]) <= {Own.ACQUIRED, Own.SUSPENDED}
    assert views[seen + lost].masters == frozenset()
    assert views[seen + lost].standbys == frozenset()
    assert states[-1] is Own.ACQUIRED
    assert not va.leader  # b led while a was gone
    assert b.view.leader


def expire_session(cluster: Cluster, client: Any) -> None:
    """Make the server expire `client`'s session: another connection takes it and closes it."""
    session_id, password = client.client_id
    thief = KazooClient(hosts=cluster.zk.hosts, client_id=(session_id, password), timeout=SESSION)
    thief.start(timeout=WAIT)
    thief.stop()
    thief.close()


@pytest.mark.zk
def test_a_paused_server_suspends_members_then_they_resume_the_same_session(
    cluster: Cluster, zk: ZooKeeperServer
) -> None:
    """ACQUIRED -> SUSPENDED (nothing writable) -> ACQUIRED: same session, nothing moved.

    The server is paused (SIGSTOP) rather than restarted: ZooKeeper 3.8.0 may accept a
    client's connection while it is still loading and never answer it, so a client that
    reconnects at that moment waits its whole connect timeout (the session timeout over the
    number of hosts) and its session expires. With one host that is a coin toss.
    """
    long = 4.0  # 20 ticks; a client notices silence after 2/3 of it
    suspended = [threading.Event(), threading.Event()]

    def watcher(i: int) -> Callable[[MemberView], None]:
        return lambda v: suspended[i].set() if v.state is Own.SUSPENDED else None

    a = cluster.member("a", session=long, on_change=watcher(0))
    b = cluster.member("b", session=long, on_change=watcher(1))
    before = [a.wait_for(owns(6), WAIT), b.wait_for(owns(6), WAIT)]
    sessions = [c.client_id for c in cluster.clients]
    assert zk.pid is not None
    os.kill(zk.pid, signal.SIGSTOP)
    try:
        for event in suspended:
            assert event.wait(long)
        view = a.view
        assert view.state is Own.SUSPENDED
        assert view.masters == before[0].masters  # kept hot, but
        assert not any(view.may_write(shard) for shard in view.masters)  # not writable
    finally:
        os.kill(zk.pid, signal.SIGCONT)
    after = [m.wait_for(lambda v: v.state is Own.ACQUIRED, WAIT) for m in (a, b)]
    assert [c.client_id for c in cluster.clients] == sessions
    assert [v.masters for v in after] == [v.masters for v in before]
    assert [v.version for v in after] == [v.version for v in before]
    assert all(after[0].may_write(shard) for shard in after[0].masters)


@pytest.mark.zk
def test_a_second_process_with_the_same_id_waits_for_the_first(cluster: Cluster) -> None:
    first = cluster.member("a")
    first.wait_for(owns(12), WAIT)
    second = cluster.member("a")
    with pytest.raises(TimeoutError):
        second.wait_for(lambda v: v.state is not Own.JOINING, 0.5)
    first.stop()
    assert second.wait_for(owns(12), WAIT).leader


@pytest.mark.zk
def test_the_leader_assigns_new_shards(cluster: Cluster) -> None:
    a = cluster.member("a")
    b = cluster.member("b")
    a.wait_for(owns(6), WAIT)
    b.wait_for(owns(6), WAIT)
    more = [*SHARDS, "dp-new-1", "dp-new-2"]
    b.set_shards(more)  # not the leader: ignored
    a.set_shards(more)
    va = a.wait_for(owns(7), WAIT)
    vb = b.wait_for(owns(7), WAIT)
    assert va.masters | vb.masters == set(more)


@pytest.mark.zk
def test_a_deposed_leader_cannot_write(cluster: Cluster) -> None:
    """The assignment write is fenced by the writer's own election node."""
    a = cluster.member("a")
    b = cluster.member("b")
    va = a.wait_for(owns(6), WAIT)
    b.wait_for(owns(6), WAIT)
    admin = cluster.client()
    election = f"{cluster.root}/election"
    (first, _) = sorted(admin.get_children(election))
    admin.delete(f"{election}/{first}")  # a's node, by hand: b is next
    vb = b.wait_for(lambda v: v.leader, WAIT)
    a.set_shards([*SHARDS, "only-a-knows"])  # a tries to write: refused, it stands again
    a.wait_for(lambda v: not v.leader, WAIT)
    assert leader_of(admin, cluster.root) == "b"
    data, _ = admin.get(f"{cluster.root}/assignment")
    published = decode(data)
    assert published is not None
    assert published.leader in ("a", "b")
    assert "only-a-knows" not in published.assignment
    assert a.view.masters == va.masters
    assert vb.masters == set(SHARDS) - va.masters


@pytest.mark.zk
def test_a_leader_without_its_shard_list_writes_nothing(cluster: Cluster) -> None:
    a = cluster.member("a", shards=None)
    b = cluster.member("b")
    assert a.wait_for(lambda v: v.leader and v.members == ("a", "b"), WAIT).version == 0
    assert b.view.masters == frozenset()  # the empty znode: nobody owns anything yet
    a.set_shards(SHARDS)
    a.wait_for(owns(6), WAIT)
    b.wait_for(owns(6), WAIT)


@pytest.mark.zk
def test_ensemble_leader_loss_suspends_members_but_moves_nothing(
    zk_ensemble: ZooKeeperEnsemble,
) -> None:
    """A new ZooKeeper leader is elected within the session: SUSPENDED -> ACQUIRED."""
    clients = [connect(zk_ensemble.hosts, session_timeout=4.0) for _ in range(2)]
    suspended = [threading.Event() for _ in clients]

    def watcher(i: int) -> Callable[[MemberView], None]:
        return lambda v: suspended[i].set() if v.state is Own.SUSPENDED else None

    members = [
        Member(client, f"m{i}", SHARDS, root="/loom/ens", on_change=watcher(i)).start()
        for i, client in enumerate(clients)
    ]
    try:
        before = [m.wait_for(owns(6), WAIT) for m in members]
        sessions = [c.client_id for c in clients]
        zk_leader = zk_ensemble.leader()
        assert zk_leader is not None
        zk_leader.kill9()  # the followers drop their clients while they elect a new leader
        for event in suspended:
            assert event.wait(WAIT)
        after = [m.wait_for(lambda v: v.state is Own.ACQUIRED, WAIT) for m in members]
        assert zk_ensemble.leader() not in (None, zk_leader)
        assert [c.client_id for c in clients] == sessions
        assert [v.masters for v in after] == [v.masters for v in before]
        assert [v.version for v in after] == [v.version for v in before]
    finally:
        for member in members:
            member.stop()
        for client in clients:
            client.stop()
            client.close()


def test_predecessor_gone_only_for_a_dead_process_of_this_host() -> None:
    def body(pid: object, host: object = "h1") -> bytes:
        return json.dumps({"id": "a", "pid": pid, "host": host}).encode()

    dead, alive = (lambda _pid: False), (lambda _pid: True)
    assert predecessor_gone(body(4242), "h1", alive=dead)
    assert not predecessor_gone(body(4242), "h1", alive=alive)
    assert not predecessor_gone(body(4242, "h2"), "h1", alive=dead)  # another host's
    for bad in (b"", b"{", json.dumps({"id": "a", "pid": 1}).encode(), body("x"), body(0)):
        assert not predecessor_gone(bad, "h1", alive=dead)


@pytest.mark.zk
def test_a_restarted_member_takes_its_id_from_its_dead_predecessor_at_once(
    cluster: Cluster,
) -> None:
    """A crashed process's member and election nodes live on until its session expires; its
    successor (same id, this host, the old PID gone) deletes them and masters at once."""
    old = cluster.client(session=30.0)  # the predecessor's session: it outlives the test
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    body = {"id": "a", "pid": int(dead.stdout), "host": socket.gethostname()}
    old.ensure_path(f"{cluster.root}/members")
    old.ensure_path(f"{cluster.root}/election")
    old.create(f"{cluster.root}/members/a", json.dumps(body).encode(), ephemeral=True)
    old.create(f"{cluster.root}/election/n_", b"a", ephemeral=True, sequence=True)
    successor = cluster.member("a")
    view = successor.wait_for(owns(12), 10.0)  # well before the predecessor's session ends
    assert view.leader
    assert old.get_children(f"{cluster.root}/election") != []  # (the successor's own)
    data, _ = old.get(f"{cluster.root}/members/a")
    assert json.loads(data)["pid"] == os.getpid()
