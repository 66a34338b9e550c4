"""Controller cluster membership in ZooKeeper (Kazoo): join, elect a leader, own shards.

Every member of a cluster (say, the logical controllers) runs one `Member` on its own
`KazooClient`. Under the cluster's root path:

- `members/<id>`: an ephemeral node per live member (it vanishes when the session expires);
- `election/n_<seq>`: an ephemeral sequential node per member; the lowest is the leader
  (ZooKeeper's election recipe, the one Kazoo's `Election`/`Lock` implement; run here by
  the worker thread without blocking, because Kazoo's lock retries a closed client forever);
- `assignment`: the leader's assignment of shards (see `loom_common.cluster.sharding`) as
  JSON, written only by the leader, only with a version check on the znode and on the
  leader's own lock node in the same transaction, so a deposed leader cannot write.

The leader recomputes the assignment when members come or go, when its shard list changes
and when it takes office; each member watches `assignment` and derives the shards it masters
(it writes their state) and those it stands by for (it computes their state, hot). Ownership
follows the connection state (`Ownership`): in `SUSPENDED` nothing may be written, in `LOST`
the desired state is dropped and the member joins again on a new session.

A member whose session expires is noticed by the server one session timeout (plus at most
one tick) after its last heartbeat; its shards then go to their standbys on the next
assignment. A member that leaves with `stop()` deletes its node at once. A member restarted
after a crash (`loom up` restarts it within a second) finds its id held by its dead
predecessor's session: a node that names this host and a PID that no longer runs is the
predecessor's, and is deleted with its election node (`predecessor_gone`), so the shards
move at once instead of a session timeout later. A node of a process still running, or of
another host, is waited for (two hosts given one id must not evict each other).

Threads: Kazoo calls our listeners and watches on its own threads; they only queue events.
One worker thread per member handles them in order and does every ZooKeeper call.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

from loom_common.cluster.sharding import Owners, assign, masters_of, standbys_of

log = logging.getLogger(__name__)

DEFAULT_ROOT = "/loom/cluster"
FORMAT = 1


def predecessor_gone(data: bytes, host: str, *, alive: Callable[[int], bool] | None = None) -> bool:
    """A member node's body (`data`) names a process of this host (`host`) that no longer
    runs: a crashed predecessor's. False when unsure (another host, no pid, unreadable)."""
    try:
        body = json.loads(data)
        pid, its_host = int(body["pid"]), body["host"]
    except (ValueError, KeyError, TypeError):
        return False
    if its_host != host or pid <= 0:
        return False
    return not (alive or _pid_alive)(pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class Ownership(enum.Enum):
    """This member's standing in the cluster, following its ZooKeeper session.

    JOINING -> ACQUIRED:   registered under a live session; masters may be written.
    ACQUIRED -> SUSPENDED: ZK connection lost; stop writing (the assignment may be stale).
    SUSPENDED -> ACQUIRED: reconnected within the session timeout; resume.
    SUSPENDED -> LOST:     session expired; drop desired state (others own our shards now).
    ACQUIRED -> LOST:      session expired without a suspension first (same as above).
    JOINING -> LOST:       the session expired before registration completed.
    LOST -> JOINING:       reconnected on a new session; register again.
    any -> CLOSED:         `Member.stop()`; final.
    """

    JOINING = "joining"
    ACQUIRED = "acquired"
    SUSPENDED = "suspended"
    LOST = "lost"
    CLOSED = "closed"


REGISTERED = "REGISTERED"
"""The pseudo connection event of a completed registration (next to Kazoo's states)."""
CLOSE = "CLOSE"
"""The pseudo connection event of `Member.stop()`."""

_TRANSITIONS: dict[tuple[Ownership, str], Ownership] = {
    (Ownership.JOINING, REGISTERED): Ownership.ACQUIRED,
    (Ownership.ACQUIRED, KazooState.SUSPENDED): Ownership.SUSPENDED,
    (Ownership.SUSPENDED, KazooState.CONNECTED): Ownership.ACQUIRED,
    (Ownership.SUSPENDED, KazooState.LOST): Ownership.LOST,
    (Ownership.ACQUIRED, KazooState.LOST): Ownership.LOST,
    (Ownership.JOINING, KazooState.LOST): Ownership.LOST,
    (Ownership.LOST, KazooState.CONNECTED): Ownership.JOINING,
}


def next_ownership(state: Ownership, event: str) -> Ownership:
    """Return the state after `event` (a `KazooState`, `REGISTERED` or `CLOSE`).

    Events that the table in `Ownership` does not list leave the state as it is.
    """
    if state is Ownership.CLOSED or event == CLOSE:
        return Ownership.CLOSED
    return _TRANSITIONS.get((state, event), state)


@dataclass(frozen=True)
class Published:
    """The content of the `assignment` znode."""

    assignment: Mapping[str, Owners]
    members: tuple[str, ...]
    leader: str


def encode(published: Published) -> bytes:
    """Return the znode bytes of an assignment: owners as indexes into the member list.

    `{"format": 1, "leader": ID, "members": [ID, ...], "shards": {SHARD: [M, S]}}` where M
    and S index `members` (S is -1 without a standby). At ~45 bytes per shard, 7,000 shards
    stay well under ZooKeeper's 1 MiB znode limit.
    """
    index = {member: i for i, member in enumerate(published.members)}
    shards = {
        shard: [index[o.master], index[o.standby] if o.standby is not None else -1]
        for shard, o in sorted(published.assignment.items())
    }
    body = {
        "format": FORMAT,
        "leader": published.leader,
        "members": list(published.members),
        "shards": shards,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def decode(data: bytes | None) -> Published | None:
    """Return the assignment in znode bytes, or None for an empty or unreadable node."""
    if not data:
        return None
    try:
        body = json.loads(data)
        if body.get("format") != FORMAT:
            return None
        members = tuple(str(m) for m in body["members"])
        assignment = {
            str(shard): Owners(members[m], members[s] if s >= 0 else None)
            for shard, (m, s) in body["shards"].items()
        }
        return Published(assignment, members, str(body["leader"]))
    except (ValueError, KeyError, TypeError, IndexError):
        log.warning("unreadable assignment znode: %r", data[:200])
        return None


@dataclass(frozen=True)
class MemberView:
    """What one member may do now: a snapshot, replaced (never mutated) on every change."""

    member_id: str
    state: Ownership = Ownership.JOINING
    leader: bool = False
    version: int = -1
    """The `assignment` znode version this view follows (-1: none yet); a fencing token."""
    zxid: int = -1
    """The ZooKeeper transaction id of that assignment (its znode's mzxid; -1: none yet):
    grows with every assignment for as long as ZooKeeper keeps its data, even if the
    znode is re-created (the OpenFlow generation id physical masters claim nodes with)."""
    masters: frozenset[str] = frozenset()
    """Shards this member masters. Kept in SUSPENDED (not writable), empty when not joined."""
    standbys: frozenset[str] = frozenset()
    """Shards this member stands by for: compute their state, write nothing."""
    members: tuple[str, ...] = ()
    """The live members, as the last children watch saw them."""
    since: float = field(default=0.0, compare=False)
    """The injected clock's time when this view was made."""

    def may_write(self, shard: str) -> bool:
        """True if this member may write `shard`'s state now (ACQUIRED and its master)."""
        return self.state is Ownership.ACQUIRED and shard in self.masters


def connect(hosts: str, *, session_timeout: float = 10.0, start_timeout: float = 15.0) -> Any:
    """Return a started `KazooClient` whose reconnection backs off to at most one second.

    Kazoo's default connection retry backs off to an hour; a controller must come back as
    soon as ZooKeeper does.

    Args:
        hosts: ZooKeeper's connection string (`127.0.0.1:2181,...`).
        session_timeout: the session timeout asked for (the server clamps it to 2..20 ticks).
        start_timeout: seconds to wait for the first connection.

    Raises:
        kazoo.handlers.threading.KazooTimeoutError: no connection within `start_timeout`.
    """
    retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0)
    client = KazooClient(hosts=hosts, timeout=session_timeout, connection_retry=retry)
    client.start(timeout=start_timeout)
    return client


class Member:
    """One member of a controller cluster: registration, leadership, owned shards."""

    def __init__(
        self,
        client: Any,
        member_id: str,
        shards: Iterable[str] | None = None,
        *,
        root: str = DEFAULT_ROOT,
        on_change: Callable[[MemberView], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry_delay: float = 0.2,
    ) -> None:
        """Describe the member; `start()` joins the cluster.

        Args:
            client: a `KazooClient` (started or not); the caller owns it and stops it.
            member_id: this member's id, unique in the cluster (a second process with the
                same id waits in JOINING until the first one's session is gone).
            shards: the shards this member assigns when it leads (`set_shards` replaces
                them). None: not known yet; as the leader it writes no assignment until
                `set_shards` (an empty list would take every shard from every member).
            root: the cluster's znode path.
            on_change: called with every new view, from the member's worker thread (keep
                it short: the member handles nothing else meanwhile).
            clock: the time source that stamps views (`MemberView.since`).
            retry_delay: seconds before a ZooKeeper step that failed is tried again.

        Raises:
            ValueError: `member_id` is empty or contains a slash.
        """
        if "/" in member_id or not member_id:
            raise ValueError(f"bad member id {member_id!r}")
        self.member_id = member_id
        self.root = root.rstrip("/")
        self._client = client
        self._on_change = on_change
        self._clock = clock
        self._retry_delay = retry_delay
        self._events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._cond = threading.Condition()
        self._view = MemberView(member_id, since=clock())
        self._worker = threading.Thread(target=self._work, name=f"member-{member_id}", daemon=True)
        # Owned by the worker thread once started.
        self._state = Ownership.JOINING
        self._shards = frozenset(shards) if shards is not None else None
        self._published: Published | None = None
        self._version = -1
        self._zxid = -1
        self._members: tuple[str, ...] = ()
        self._candidate: str | None = None  # our election node
        self._leading = False
        self._need_register = True
        self._need_election = False
        self._need_rebalance = False

    @property
    def members_path(self) -> str:
        """The parent of the members' ephemeral nodes."""
        return f"{self.root}/members"

    @property
    def election_path(self) -> str:
        """The parent of the election's ephemeral sequential nodes."""
        return f"{self.root}/election"

    @property
    def assignment_path(self) -> str:
        """The znode holding the leader's assignment."""
        return f"{self.root}/assignment"

    @property
    def view(self) -> MemberView:
        """The current view (a snapshot)."""
        with self._cond:
            return self._view

    def start(self) -> Member:
        """Connect if needed, create the cluster's paths, set the watches, and join.

        Returns at once; `wait_for` waits for a state. Raises what Kazoo raises when the
        client cannot connect or the paths cannot be created.
        """
        if not self._client.connected:
            self._client.start()
        for path in (self.members_path, self.election_path, self.assignment_path):
            self._client.ensure_path(path)
        self._client.add_listener(self._on_connection)
        self._client.ChildrenWatch(self.members_path, self._on_members)
        self._client.DataWatch(self.assignment_path, self._on_assignment)
        self._worker.start()
        self._events.put(("connection", KazooState.CONNECTED))
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Leave the cluster: delete our nodes, so that others take over at once.

        The client stays as it is (the caller owns it).

        Args:
            timeout: seconds to wait for the worker thread to finish.
        """
        self._events.put(("close",))
        self._worker.join(timeout)
        self._client.remove_listener(self._on_connection)

    def set_shards(self, shards: Iterable[str]) -> None:
        """Replace the shards this member assigns when it leads (others ignore them)."""
        self._events.put(("shards", frozenset(shards)))

    def wait_for(self, predicate: Callable[[MemberView], bool], timeout: float) -> MemberView:
        """Wait until the view satisfies `predicate`; return that view.

        Raises:
            TimeoutError: it did not within `timeout` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self._view), timeout):
                raise TimeoutError(f"{self.member_id}: not reached in {timeout}s: {self._view}")
            return self._view

    # -- Kazoo's threads: only queue events ------------------------------------------------

    def _on_connection(self, state: str) -> None:
        self._events.put(("connection", state))

    def _on_members(self, children: list[str]) -> bool:
        self._events.put(("members", tuple(sorted(children))))
        return self._state is not Ownership.CLOSED

    def _on_assignment(self, data: bytes | None, stat: Any) -> bool:
        self._events.put(("assignment", data, stat.version if stat is not None else -1,
                          stat.mzxid if stat is not None else -1))  # fmt: skip
        return self._state is not Ownership.CLOSED

    def _on_watch(self, event: Any) -> None:
        self._events.put(("watch",))

    # -- the worker thread: every decision and every ZooKeeper call -------------------------

    def _work(self) -> None:
        retry_pending = False
        while True:
            try:
                event = self._events.get(timeout=self._retry_delay if retry_pending else None)
            except queue.Empty:
                event = ("retry",)
            if event[0] == "close":
                self._leave()
                self._publish_view()
                return
            try:
                self._handle(event)
                retry_pending = not self._reconcile()
                self._publish_view()
            except Exception:  # a bug, or on_change raised: log it, keep following ZK
                log.exception("%s: failed handling %r", self.member_id, event[0])
                retry_pending = True

    def _handle(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "connection":
            self._transition(event[1])
        elif kind == "members":
            self._members = event[1]
            self._need_rebalance = True
        elif kind == "assignment":
            self._published = decode(event[1])
            self._version, self._zxid = event[2], event[3]
            self._need_rebalance = True  # a new leader rewrites a stale or unreadable one
        elif kind == "shards":
            self._shards = event[1]
            self._need_rebalance = True
        elif kind == "watch":  # our id's old node, or our election predecessor, changed
            self._need_register = self._state is Ownership.JOINING
            self._need_election = True

    def _transition(self, connection: str) -> None:
        old = self._state
        self._state = next_ownership(old, connection)
        if self._state is Ownership.LOST:  # our ephemeral nodes are gone with the session
            self._candidate = None
            self._leading = False
            self._need_register = True
        if self._state is Ownership.ACQUIRED and old is Ownership.SUSPENDED:
            self._need_election = self._need_rebalance = True  # things moved meanwhile
        if self._state is not old:
            log.info("%s: %s -> %s (%s)", self.member_id, old.name, self._state.name, connection)

    def _reconcile(self) -> bool:
        """Do what the state asks for; return False if a ZooKeeper step must be retried."""
        try:
            if self._state is Ownership.JOINING and self._need_register:
                self._register()
            if self._state is Ownership.ACQUIRED:
                if self._candidate is None or self._need_election:
                    self._elect()
                if self._leading and self._need_rebalance and self._shards is not None:
                    self._rebalance(self._shards)
        except KazooException as exc:
            log.info("%s: ZooKeeper step failed, will retry: %r", self.member_id, exc)
            return False
        return True

    def _register(self) -> None:
        """Create our ephemeral member node; wait if another session still holds our id."""
        path = f"{self.members_path}/{self.member_id}"
        body = json.dumps({"id": self.member_id, "pid": os.getpid(),
                           "host": socket.gethostname()}).encode()  # fmt: skip
        try:
            self._client.create(path, body, ephemeral=True)
        except NodeExistsError:
            data, stat = self._client.get(path, watch=self._on_watch)
            if stat.ephemeralOwner != self._client.client_id[0]:
                if predecessor_gone(data, socket.gethostname()):
                    self._evict(path, stat.ephemeralOwner)
                    return self._register()
                log.warning("%s: id held by another session; waiting", self.member_id)
                self._need_register = False  # until the watch says the node changed
                return None
        self._need_register = False
        self._state = next_ownership(self._state, REGISTERED)
        self._need_election = True
        return None

    def _evict(self, path: str, session: int) -> None:
        """Delete a dead predecessor's member node and its election nodes (those of its
        session)."""
        log.info("%s: id held by the session of a process of ours that is gone; taking it",
                 self.member_id)  # fmt: skip
        for child in self._client.get_children(self.election_path):
            node = f"{self.election_path}/{child}"
            stat = self._client.exists(node)
            if stat is not None and stat.ephemeralOwner == session:
                with contextlib.suppress(NoNodeError):
                    self._client.delete(node)
        with contextlib.suppress(NoNodeError):
            self._client.delete(path)

    def _elect(self) -> None:
        """Stand for election if not yet; lead if our node is the lowest, else watch the next."""
        if self._candidate is None:
            self._candidate = self._client.create(
                f"{self.election_path}/n_", self.member_id.encode(), ephemeral=True,
                sequence=True,
            )  # fmt: skip
        ours = self._candidate.rsplit("/", 1)[1]
        children = self._client.get_children(self.election_path)
        if ours not in children:  # deleted under a live session (by hand): stand again
            self._candidate = None
            self._leading = False
            return self._elect()
        ahead = sorted(c for c in children if c < ours)
        self._need_election = False
        if not ahead:
            if not self._leading:
                log.info("%s: elected leader", self.member_id)
                self._leading = self._need_rebalance = True
            return None
        self._leading = False
        if self._client.exists(f"{self.election_path}/{ahead[-1]}", watch=self._on_watch) is None:
            return self._elect()  # it went meanwhile: look again
        return None

    def _rebalance(self, shards: frozenset[str]) -> None:
        """As the leader: compute the assignment and write it if it changed (fenced)."""
        members = tuple(sorted(self._client.get_children(self.members_path)))
        data, stat = self._client.get(self.assignment_path)
        current = decode(data)
        previous = current.assignment if current is not None else None
        new = Published(assign(members, shards, previous), members, self.member_id)
        if current is not None and (current.assignment, current.members) == (
            new.assignment,
            new.members,
        ):
            self._need_rebalance = False
            return
        txn = self._client.transaction()
        txn.check(self._candidate, 0)  # our election node still exists: still the leader
        txn.set_data(self.assignment_path, encode(new), version=stat.version)
        failures = [r for r in txn.commit() if isinstance(r, Exception)]
        if failures:  # deposed (node gone) or raced (version moved): look again
            self._need_election = True
            raise KazooException(f"assignment write refused: {failures}")
        log.info(
            "%s: assignment v%d: %d shards over %s", self.member_id, stat.version + 1,
            len(new.assignment), ",".join(members),
        )  # fmt: skip
        self._need_rebalance = False

    def _leave(self) -> None:
        """Delete our nodes (best effort) and close."""
        if self._state is Ownership.ACQUIRED:
            for path in (self._candidate, f"{self.members_path}/{self.member_id}"):
                try:
                    if path is not None:
                        self._client.delete(path)
                except KazooException as exc:
                    log.info("%s: could not delete %s: %r", self.member_id, path, exc)
        self._state = next_ownership(self._state, CLOSE)
        self._leading = False

    def _publish_view(self) -> None:
        """Derive the view from the worker's state; notify waiters if it changed."""
        state = self._state
        owning = state in (Ownership.ACQUIRED, Ownership.SUSPENDED)
        assignment = self._published.assignment if self._published is not None else {}
        with self._cond:
            old = self._view
            new = MemberView(
                self.member_id,
                state=state,
                leader=self._leading and owning,
                version=self._version,
                zxid=self._zxid,
                masters=masters_of(assignment, self.member_id) if owning else frozenset(),
                standbys=standbys_of(assignment, self.member_id) if owning else frozenset(),
                members=self._members,
                since=self._clock(),
            )
            if new == old:
                return
            self._view = new
            self._cond.notify_all()
        if self._on_change is not None:
            self._on_change(new)


def leader_of(client: Any, root: str = DEFAULT_ROOT) -> str | None:
    """Return the id of the cluster's current leader (the lowest election node), if any."""
    path = f"{root.rstrip('/')}/election"
    children = sorted(client.get_children(path)) if client.exists(path) else []
    for child in children:
        try:
            data, _ = client.get(f"{path}/{child}")
        except KazooException:
            continue
        return str(data.decode())
    return None
