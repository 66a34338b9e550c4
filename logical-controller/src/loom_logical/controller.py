"""The logical controller daemon: config IDL -> rule engine -> universal-DB writer.

One thread runs the loop: both IDLs are polled; the config rows that changed since the
last pass (and the VIF locations physical controllers wrote to `Port_Binding.chassis`)
become one engine transaction about exactly those rows; the transaction's output delta
goes to the `Writer`, which writes it to the universal database with the generation it
realizes (`Logical_Controller.generation`, and `Universal_Global.generation`, the minimum
over the controllers). A controller started on a database that already holds rows
reconciles them with what it computes (so a restart writes only what changed meanwhile).

Sharding: alone (no ZooKeeper), a controller writes every shard. In a cluster each
controller is a `loom_common.cluster.membership.Member`; the elected leader assigns every
shard a master and a hot standby. Every member computes everything (so a standby's state is
ready), and writes only the shards it masters, once it has *claimed* them: the `Shard` row
says `owner` = this controller and `epoch` = the assignment's version (a fencing token).
Each write transaction also verifies (an OVSDB `wait`) the `Shard` rows of the shards it
writes, so a deposed master whose session expired, and which has not noticed yet, cannot
write over its successor: the successor's claim changed the rows, and the write fails.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from loom_common import heap, metrics, procstat, runner
from loom_common.cluster import membership
from loom_common.ovsdb import (
    Change,
    RawConnection,
    Replica,
    TransactError,
    ops,
    readable,
    unpack_uuid,
)
from loom_common.ovsdb.codec import optional, to_set
from loom_common.ovsdb.ops import Op
from loom_common.passlog import PassLog
from loom_common.reconnect import LOST, Link
from loom_ddlog import PendingDelta, Program, Transaction, allocator_memory, gc_paused
from loom_logical.inputs import ConfigFeed, InputTable, input_tables
from loom_logical.outputs import GLOBAL_SHARD, all_shards
from loom_logical.rules import main_file
from loom_logical.writer import Writer

log = logging.getLogger(__name__)

POLL_MS = 1000
REPORTS = frozenset({"generation", "warnings"})
"""What a controller reports to the config DB: the logical generation (cheap), and the
warnings (a diff of every warning: only when they may have changed)."""
SLOW_PASS = 1.0
"""Seconds after which a pass logs where its time went (replicas, inputs, engine, ...)."""
STREAM_FROM = 10_000
"""Input changes from which an engine transaction's output is streamed to the universal DB
(`Writer.stream`): converted and folded a chunk at a time while ovsdb-server commits the
chunks before, instead of all of it first (a cold start)."""
STREAM_CHUNK = 4_096
"""Output changes converted per chunk of a streamed transaction."""
RETRY_DELAYS = (0.2, 0.4, 0.8, 1.6)
"""Seconds waited after the 1st, 2nd, ... failed pass in a row before the next. One more
failure and the controller gives up (`failure`): it leaves the cluster, so that a standby
takes its shards over, and the daemon exits non-zero."""


class LogicalController:
    """Computes universal flows from the configuration and writes them, for owned shards."""

    def __init__(
        self,
        config_remote: str,
        universal_remote: str,
        *,
        name: str = "logical-0",
        zookeeper: str | None = None,
        session_timeout: float = 10.0,
        zk_root: str = "/loom/logical",
        rules: Path | None = None,
        workers: int = 2,
        stream_from: int = STREAM_FROM,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
        pass_log: Path | None = None,
    ) -> None:
        """Describe the controller; `start()` connects and runs it in a thread.

        Args:
            config_remote: the Loom_Config database (OVSDB remote).
            universal_remote: the Loom_Universal database.
            name: this controller's name (its `Logical_Controller` row, its cluster id).
            zookeeper: ZooKeeper hosts; None for a single controller that owns every shard.
            session_timeout: the ZooKeeper session timeout (failover takes this long).
            zk_root: the cluster's znode path.
            rules: the main rule file (default: the installed `rules/logical`).
            workers: the engine's worker threads (2 nearly halve a cold start on 2
                cores).
            stream_from: input changes from which a transaction's output is streamed to
                the universal DB (see `STREAM_FROM`).
            retry_delays: the waits after failed passes in a row (see `RETRY_DELAYS`).
            pass_log: a file to append one JSON line to per pass that wrote
                (`loom_common.passlog.PassLog`: when, how long by phase — replicas (the
                databases' updates read), inputs (the engine's input made), engine (its
                transaction), apply (its output folded into the writer), write (the
                universal DB's transaction) —, the config generation written).
        """
        self.name = name
        self._pass_log = PassLog(pass_log) if pass_log is not None else None
        self._retry_delays = retry_delays
        self.rules_path = rules or main_file()
        self.program = Program.load([self.rules_path], workers=workers, internal=False)
        self.tables: dict[str, InputTable] = input_tables()
        self.writer = Writer(self.owns, lambda relation: self.program.dump(relation))
        self._stream_from = stream_from
        self._streaming: PendingDelta | None = None
        """A committed transaction's output not folded into the writer yet (streamed by the
        next write)."""
        self._zk_hosts = zookeeper
        self._session_timeout = session_timeout
        self._zk_root = zk_root
        self._zk: Any = None
        self._member: membership.Member | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._claimed: dict[str, int] = {}
        """Shard -> the assignment version under which we claimed it (seen committed)."""
        self._claimed_under: tuple[Any, int] | None = None
        """(view, `Shard` rows seen) when `_claimed` was last worked out: a pass claims
        again only when either changed (a look at each of 7,000 shards is a cost per
        shard, paid at every pass, a port change's too)."""
        self._shard_rows_seen = 0
        """Counts the `Shard` row changes read."""
        self._columns: tuple[Any, dict[str, Any]] | None = None
        """(view, `_assignment_columns()`) as last made (None: `_claimed` changed since)."""
        self._columns_written: dict[str, Any] | None = None
        """The `_assignment_columns()` this controller's row was last written with (a
        stamp carries them only when they changed: they name every shard)."""
        self._feed = ConfigFeed(self.tables)
        """The config rows changed since the last pass, and which rows the engine holds:
        the replica does not keep them (`Replica.unkept`), the engine does."""
        self._dirty_locations: dict[str, str | None] = {}
        self._locations: dict[str, str] = {}
        self._binding_ports: dict[str, str] = {}
        """Port_Binding row uuid -> its logical port (to know a deleted row's port)."""
        config_tables: dict[str, list[str]] = {
            name: table.column_names for name, table in self.tables.items()
        }
        # (Loom_Global is kept, for its generations, beside the settings the rules read)
        config_tables["Loom_Global"] = ["generation", "logical_generation",
                                        *config_tables["Loom_Global"]]  # fmt: skip
        config_tables["Warning"] = ["source", "kind", "message"]
        self._config = Replica(
            config_remote, "Loom_Config", config_tables, wake=self._wake,
            unkept=frozenset(self.tables) - {"Loom_Global"}, staged=True,
        )  # fmt: skip
        # Only the small tables, and where VIFs are: the rows this controller writes are
        # never mirrored (the writer keeps their identities; see `writer`).
        self._universal = Replica(
            universal_remote,
            "Loom_Universal",
            {
                "Shard": ["name", "owner", "epoch"],
                # (not its `shards` and `standby`: 7,000 names, echoed at every stamp;
                # what this controller wrote of them is `_columns_written`)
                "Logical_Controller": ["name", "generation", "assignment_version"],
                "Universal_Global": ["generation"],
                "Port_Binding": ["logical_port", "chassis"],
            },
            wake=self._wake,
            # The writer inserts every Port_Binding row, without a chassis: their echo
            # tells nothing. At full scale it was the 63,000 rows of the cold start,
            # parsed in the first pass after it (which slowed the first port change).
            no_inserts=frozenset({"Port_Binding"}),
        )
        self._config_link = Link("Loom_Config", self._config)
        self._universal_link = Link("Loom_Universal", self._universal)
        self.links = (self._config_link, self._universal_link)
        """The databases' connections: each up, or down and reconnecting (`Link`)."""
        self.failure: str | None = None
        """Why the controller gave up (its loop ended for good; `GIVE_UP_AFTER`)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._written_generation = -1
        self._reconcile_needed = True
        self._phases: dict[str, float] = {}
        """Where the current pass's time went, by phase (seconds)."""
        self._report_due = set(REPORTS)
        """What `_report` copies to the config DB that may have changed (of `REPORTS`)."""
        self._config_seqno = -1
        self._universal_seqno = -1
        self.transactions = 0
        """Engine transactions committed (for tests and status)."""
        self.streamed = 0
        """Of those, the ones whose output was streamed to the universal DB."""
        self.timings: collections.deque[tuple[float, float]] = collections.deque(maxlen=1000)
        """(engine seconds, write seconds) of the latest passes that had work."""
        self.passes: collections.deque[tuple[int, dict[str, float]]] = collections.deque(
            maxlen=1000
        )
        """(generation written, seconds by phase) of the latest passes that wrote."""

    # ---- replica changes ----

    def _config_changes(self, changes: list[Change]) -> None:
        self._feed.note(changes, self._config.reads)
        for table, _uuid, _row in changes:
            if table == "Warning":
                self._report_due.add("warnings")
            elif table == "Loom_Global":
                self._report_due.add("generation")

    def _universal_changes(self, changes: list[Change]) -> None:
        for table, uuid, row in changes:
            if table == "Universal_Global":
                self._report_due.add("generation")
            elif table == "Shard":
                self._shard_rows_seen += 1
            if table != "Port_Binding":
                continue
            if row is None:
                port = self._binding_ports.pop(uuid, None)
                if port is not None:
                    self._location_seen(port, None)
                continue
            self._binding_ports[uuid] = row["logical_port"]
            self._location_seen(row["logical_port"], optional(row["chassis"]))

    def _location_seen(self, port: str, chassis: str | None) -> None:
        """Note port `port`'s VIF location as a Port_Binding row says; only a location that
        differs from the engine's makes a transaction (a binding's other columns changing,
        or the row of a port already retracted with its config row, make none)."""
        if chassis == self._locations.get(port):
            self._dirty_locations.pop(port, None)
        else:
            self._dirty_locations[port] = chassis

    # ---- lifecycle ----

    def start(self) -> LogicalController:
        """Join the cluster (with ZooKeeper) and start the controller thread."""
        if self._zk_hosts:
            self._zk = membership.connect(self._zk_hosts, session_timeout=self._session_timeout)
            self._member = membership.Member(
                self._zk, self.name, all_shards(), root=self._zk_root, on_change=self._on_view
            ).start()
        self._thread = threading.Thread(target=self._loop, name=f"logical-{self.name}")
        self._thread.start()
        metrics.watch(
            "logical",
            self.name,
            lambda: [
                *metrics.cluster_samples(
                    "logical", self.name, self._member.view if self._member is not None else None
                ),
                *metrics.native_memory_samples("logical", self.name, allocator_memory()[0]),
            ],
        )
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and close the connections."""
        self._stop.set()
        metrics.forget("logical", self.name)
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._member is not None:
            self._member.stop(timeout)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        for link in self.links:
            link.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ---- shard ownership ----

    def _wake(self) -> None:
        """Make the loop run a pass now (from any thread)."""
        with contextlib.suppress(OSError):  # full: a pass is due anyway; closed: stopping
            os.write(self._wake_w, b"w")

    def _on_view(self, view: membership.MemberView) -> None:
        """A new membership view (member thread): wake the loop to claim or drop shards."""
        self._wake()

    def view(self) -> membership.MemberView | None:
        """The current membership view (None without ZooKeeper)."""
        return self._member.view if self._member is not None else None

    def owns(self, shard: str) -> bool:
        """True if this controller may write `shard` now: alone, or master and claimed."""
        if self._member is None:
            return True
        view = self._member.view
        return view.may_write(shard) and self._claimed.get(shard) == view.version

    def _claim(self) -> None:
        """Claim the shards the view says we master, in one fenced transaction (when the
        view or the `Shard` rows changed since the last claim that went through)."""
        if self._member is None:
            return
        view = self._member.view
        under = (view, self._shard_rows_seen)
        last = self._claimed_under
        if last is not None and last[0] is view and last[1] == under[1]:
            return
        self._columns = None  # (`_claimed` changes)
        if self._claim_under(view):
            self._claimed_under = under

    def _claim_under(self, view: membership.MemberView) -> bool:
        """`_claim` for `view`; False if the claim was refused."""
        self._claimed = {s: v for s, v in self._claimed.items() if view.may_write(s)}
        rows = {r["name"]: r for r in self._universal.rows["Shard"].values()}
        for shard, version in list(self._claimed.items()):
            row = rows.get(shard)  # someone with a newer assignment took it: not ours
            if row is None or row["owner"] != self.name or row["epoch"] != version:
                del self._claimed[shard]
        wanted = [
            s
            for s in sorted(view.masters)
            if view.may_write(s) and self._claimed.get(s) != view.version
        ]
        if not wanted:
            return True
        claims: list[Op] = []
        claimable = []
        mine = {"owner": self.name, "epoch": view.version}
        for shard in wanted:
            row = rows.get(shard)
            if row is None:
                claims.append(ops.insert("Shard", {"name": shard, **mine}))
            elif row["epoch"] > view.version:
                continue  # a newer assignment exists; ours is stale
            else:
                where = [["name", "==", shard], ["epoch", "==", row["epoch"]]]
                claims.append(ops.update("Shard", where, mine))
                claims.append(_wait_shard(shard, mine))  # the update matched: the row is ours
            claimable.append(shard)
        try:
            self._universal_conn().transact("Loom_Universal", claims)
        except TransactError as exc:
            log.warning("claiming shards failed: %s", exc)
            return False
        if GLOBAL_SHARD in claimable:
            self._report_due = set(REPORTS)
        for shard in claimable:
            self._claimed[shard] = view.version
        self.writer.load_actual(self._universal_conn(), claimable)
        log.info("%s claimed %d shards (assignment %d)", self.name, len(claimable), view.version)
        return True

    def _fence(self, shards: Any) -> list[dict[str, Any]]:
        """Operations that fail a write if another controller claimed one of `shards`."""
        if self._member is None:
            return []
        return [
            _wait_shard(shard, {"owner": self.name, "epoch": self._claimed[shard]})
            for shard in shards
        ]

    def wait_generation(self, generation: int, timeout: float) -> int:
        """Wait until the configuration `generation` is written; return the written one."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._written_generation < generation:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._written_generation

    def wait_pass(self, predicate: Callable[[LogicalController], bool], timeout: float) -> bool:
        """Wait until `predicate(self)` holds at the end of a pass with nothing left to write."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (predicate(self) and not self.writer.pending() and not self._dirty()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _dirty(self) -> bool:
        return bool(self._feed.pending() or self._dirty_locations or self._streaming is not None)

    def config_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every config row the engine holds (as of the last pass), as input tuples, by table."""
        with self._cond:
            return {name: self.program.dump(name) for name in self.tables}

    def location(self, port: str) -> str | None:
        """Where the engine believes logical port `port`'s VIF is."""
        return self._locations.get(port)

    @property
    def written_generation(self) -> int:
        """The highest configuration generation whose universal rows are written."""
        return self._written_generation

    # ---- the loop ----

    def _loop(self) -> None:
        """Run passes until `stop()` (`runner.run_passes`: a failed pass is logged and the
        next retries after a wait; the controller gives up when passes keep failing)."""
        runner.run_passes(
            self._pass,
            stopped=self._stop,
            retry_delays=self._retry_delays,
            give_up=self._give_up,
            recover=self._recover,
            what="logical controller",
            log=log,
        )

    def _recover(self) -> None:
        self._reconcile_needed = True  # a write may have been cut short: read what is there

    def _pass(self) -> None:
        with self._cond:  # waiters see the state between passes, never inside one
            try:
                with gc_paused():
                    self._step()
            finally:
                self._cond.notify_all()
        if self._phases.get("total", 0.0) > SLOW_PASS:
            # A long pass (a cold start) leaves millions of long-lived objects (the desired
            # universal rows); collections would traverse them all, again and again, and
            # find nothing (they hold no cycles). On the full-scale cold start, pausing and
            # freezing together made folding the engine's output into the writer several
            # times faster, and the write faster too.
            heap.settle()
        # Outside the lock: a waiter for written universal rows need not wait for the config
        # DB (the report only reads what this thread alone changes).
        self._report_if_due()
        self._wait()

    def _wait(self) -> None:
        """Wait until a database or `_wake` has something, a link is due to reconnect, or
        `POLL_MS` passed (100 ms while writes are pending)."""
        waiting = [self._wake_r]
        timeout = POLL_MS / 1000 if not self.writer.pending() else 0.1
        for link in self.links:
            if link.has_pending():
                return
            fd = link.fileno()
            if fd is not None:
                waiting.append(fd)
            else:
                timeout = min(timeout, link.retry_in() or 0.0)
        readable(waiting, timeout)

    def _give_up(self, reason: str) -> None:
        """The controller cannot go on: record why, leave the cluster, wake the waiters."""
        if self.failure is not None or self._stop.is_set():
            return
        log.error("logical controller %s cannot continue: %s", self.name, reason)
        runner.leave_cluster(self._member, log)
        self.failure = reason  # once it has left: whoever sees the failure sees it gone
        with self._cond:
            self._cond.notify_all()

    def _step(self) -> None:
        _drain(self._wake_r)
        self._phases = {}
        synced = time.perf_counter()
        if not self._sync_replicas():
            return
        began = time.perf_counter()
        self._phases["replicas"] = began - synced
        if self._feed.pending() or self._dirty_locations:
            self._compute()
        computed = time.perf_counter()
        try:
            if self._reconcile_needed:
                self.writer.load_actual(self._universal_conn())
                self._reconcile_needed = False
            self._claim()
            generation = self._config_generation()
            if (
                self.writer.pending()
                or self._streaming is not None
                or generation > self._written_generation
                or self._assignment_row_stale()
                or self._realized_behind()
            ):
                conn = self._universal_conn()
                if self._streaming is not None:
                    streaming, self._streaming = self._streaming, None
                    owned = {s for s in all_shards() if self.owns(s)}
                    if not self.writer.stream(conn, owned, self._fence(owned), streaming):
                        self._reconcile_needed = True
                        return
                stamp, columns = self._stamp(generation)
                ok = self.writer.flush(conn, self._fence, stamp)
                if ok and columns is not None:
                    self._columns_written = columns
                if not ok:
                    self._reconcile_needed = True  # learn what is there before a retry
                    return
                self._written_generation = max(self._written_generation, generation)
                self._record_pass(generation, synced, began, computed)
        except (OSError, TransactError) as exc:
            # The outcome of a write in flight is unknown: read what is there before the next.
            self._reconcile_needed = True
            if isinstance(exc, LOST):
                self._universal_link.lost(exc)
            else:
                log.warning("universal DB write failed: %s", exc)
            return

    def _record_pass(self, generation: int, synced: float, began: float, computed: float) -> None:
        """A pass wrote `generation`: its phases (`perf_counter` times: replicas synced,
        computation begun and done, written now) to `timings`, `passes`, the metrics and
        the pass log; a slow one to the log."""
        written = time.perf_counter()
        self.timings.append((computed - began, written - computed))
        self._phases["write"] = written - computed
        self._phases["total"] = written - synced
        self.passes.append((generation, dict(self._phases)))
        metrics.observe_pass("logical", self.name, self._phases, generation)
        if self._pass_log is not None:
            phases = {k: v for k, v in self._phases.items() if k != "total"}
            self._pass_log.write(time.time() - (written - synced), written - synced, phases,
                                 generation=generation)  # fmt: skip
        if written - synced > SLOW_PASS:
            phases_text = ", ".join(f"{k} {v:.2f}s" for k, v in self._phases.items())
            log.info("slow pass (generation %d): %s; %s", generation, phases_text,
                     procstat.memory_text(allocator_memory()))  # fmt: skip

    def _sync_replicas(self) -> bool:
        """(Re)connect the replicas that need it and apply their updates; False if one is
        down.

        Each database reconnects on its own (`Link`): a replica that restarts reports
        what changed while it was away (the config tables the engine takes: every row read,
        and `ConfigFeed` deletes the rows the engine holds that are no longer there), so
        only a lost universal write needs a full reconcile.
        """
        self._config_changes(self._config_link.sync())
        self._universal_changes(self._universal_link.sync())
        return self._connected

    @property
    def _connected(self) -> bool:
        return all(link.up for link in self.links)

    def _config_generation(self) -> int:
        rows = list(self._config.rows["Loom_Global"].values())
        return int(rows[0]["generation"]) if rows else 0

    def _compute(self) -> None:
        """One engine transaction about the rows that changed; its delta to the writer (or,
        when large, to `_streaming`, which the write phase folds in as it writes).

        A transaction that fails takes the config rows it was given with it (they are kept
        nowhere else): the config DB is read again, and the VIF locations wait for the next.
        """
        began = time.perf_counter()
        self._fold_streaming()
        locations, self._dirty_locations = self._dirty_locations, {}
        size = self._feed.pending() + len(locations)
        try:
            with self.program.transaction() as txn:
                # (the rows as read are freed by `take` before the engine grows: see
                # `Engine.apply`)
                taken = self._feed.take(txn)
                located = self._locate(txn, taken.deleted.get("Logical_Switch_Port", ()),
                                       locations)  # fmt: skip
                built = time.perf_counter()
                if size >= self._stream_from:
                    delta, pending = None, txn.commit_lazy(STREAM_CHUNK)
                else:
                    delta, pending = txn.commit(), None
        except Exception as exc:
            self._dirty_locations = {**locations, **self._dirty_locations}
            self._config_link.lost(f"the engine refused its input ({exc!r}); reading it again")
            raise
        self._feed.committed(taken)
        for port, chassis in located.items():
            if chassis is None:
                self._locations.pop(port, None)
            else:
                self._locations[port] = chassis
        committed = time.perf_counter()
        self.transactions += 1
        if pending is None:
            assert delta is not None
            self.writer.apply(delta)
            changed = set(delta)
        else:
            changed = pending.relations()
            self._streaming = pending
            if pending.has_deletions():  # only insertions stream (see `Writer.stream`)
                self._fold_streaming()
            else:
                self.streamed += 1
        self._phases.update(
            inputs=built - began, engine=committed - built, apply=time.perf_counter() - committed
        )
        if "Warning" in changed:
            self._report_due.add("warnings")

    def _locate(
        self, txn: Transaction, ports_deleted: Iterable[bytes], locations: dict[str, str | None]
    ) -> dict[str, str | None]:
        """Add to `txn` the VIF locations that changed; return them (port -> chassis, None:
        retracted), for `_locations` once `txn` committed.

        `ports_deleted`: the logical ports (packed uuids) `txn` deletes. Their bindings go
        with them: their locations are retracted now, in the same transaction, rather than
        in one of their own when the bindings' deletions come back (a second engine commit
        per port deletion)."""
        located: dict[str, str | None] = {}
        for packed in ports_deleted:
            port = unpack_uuid(packed)
            if port in self._locations:
                txn.delete_key("Port_Location", port)
                located[port] = None
        for port, chassis in locations.items():
            if port in located or chassis == self._locations.get(port):
                continue
            if chassis is None:
                txn.delete_key("Port_Location", port)
            else:
                txn.insert_or_update("Port_Location", (port, chassis))
            located[port] = chassis
        return located

    def _fold_streaming(self) -> None:
        """Fold a streamed output that no write took (a failed pass) into the writer, before
        a newer transaction's output."""
        if self._streaming is not None:
            streaming, self._streaming = self._streaming, None
            for part in streaming:
                self.writer.apply(part)

    def _report_if_due(self) -> None:
        """Report what may have changed, if we master the global shard."""
        if not (self._report_due and self._connected and self.owns(GLOBAL_SHARD)):
            return
        due, self._report_due = self._report_due, set()
        try:
            self._report(warnings="warnings" in due)
        except LOST as exc:
            self._report_due = set(REPORTS)
            self._config_link.lost(exc)

    def _report(self, *, warnings: bool) -> None:
        """Copy the realized generation, and the warnings if `warnings`, back to the config
        DB for the API. Only the master of the global shard does this."""
        universal = list(self._universal.rows["Universal_Global"].values())
        realized = int(universal[0]["generation"]) if universal else 0
        glob = next(iter(self._config.rows["Loom_Global"].items()), None)
        writes: list[Op] = []
        if glob is not None and glob[1]["logical_generation"] < realized:
            generation = {"logical_generation": realized}
            writes.append(ops.update("Loom_Global", ops.where_uuid(glob[0]), generation))
        if warnings:
            writes += self._warning_ops()
        if not writes:
            return
        assert self._config.conn is not None
        try:
            self._config.conn.transact("Loom_Config", writes)
        except TransactError as exc:  # the replica catches up; the next pass retries
            log.warning("reporting to the config DB failed: %s", exc)
            self._report_due = set(REPORTS)

    def _warning_ops(self) -> list[Op]:
        """Operations that make the config DB's warnings those the engine derives."""
        want = set(self.writer.desired["Warning"])
        have = {
            (r["source"], r["kind"], r["message"]): u
            for u, r in self._config.rows["Warning"].items()
        }
        writes = [
            ops.delete("Warning", ops.where_uuid(u)) for k, u in have.items() if k not in want
        ]
        for source, kind, message in sorted(want - set(have)):
            writes.append(
                ops.insert("Warning", {"source": source, "kind": kind, "message": message})
            )
        return writes

    def _universal_conn(self) -> RawConnection:
        assert self._universal.conn is not None, "not connected"
        return self._universal.conn

    def _stamp(self, generation: int) -> tuple[list[Op], dict[str, Any] | None]:
        """Operations recording that this controller has written `generation` (with its
        assignment's columns if they changed since written: returned too, else None), and
        the realized generation (the minimum over live controllers) if it owns the global
        shard."""
        controllers = list(self._universal.rows["Logical_Controller"].values())
        columns = self._assignment_columns()
        if any(r["name"] == self.name for r in controllers):
            stale = self._assignment_row_stale()
            row = {"generation": generation, **(columns if stale else {})}
            stamp = [ops.update("Logical_Controller", ops.where_eq("name", self.name), row)]
        else:
            stale = True
            own = {"name": self.name, "generation": generation, **columns}
            stamp = [ops.insert("Logical_Controller", own)]
        written = columns if stale else None
        if not self.owns(GLOBAL_SHARD):
            return stamp, written
        realized = self._realized(generation)
        if self._universal.rows["Universal_Global"]:
            stamp.append(ops.update("Universal_Global", [], {"generation": realized}))
        else:
            stamp.append(ops.insert("Universal_Global", {"generation": realized}))
        return stamp, written

    def _realized(self, generation: int) -> int:
        """The generation every live logical controller has written, this one `generation`."""
        live = set(self._member.view.members) if self._member is not None else {self.name}
        others = [
            int(r["generation"])
            for r in self._universal.rows["Logical_Controller"].values()
            if r["name"] != self.name and r["name"] in live
        ]
        return min([generation, *others])

    def _realized_behind(self) -> bool:
        """As master of the global shard: every live controller has written a newer
        generation than `Universal_Global` says (the last of them wrote it after this one
        stamped its own; with nothing more to write, it would say so only at the next
        change)."""
        if self._written_generation < 0 or not self.owns(GLOBAL_SHARD):
            return False
        said = [int(r["generation"]) for r in self._universal.rows["Universal_Global"].values()]
        return bool(said) and self._realized(self._written_generation) > said[0]

    def _assignment_columns(self) -> dict[str, Any]:
        """`Logical_Controller`'s view of the assignment: its version, the shards this
        controller writes (claimed under that version) and those it stands by for."""
        if self._member is None:
            return {"assignment_version": 0, "shards": to_set(all_shards()),
                    "standby": to_set([])}  # fmt: skip
        view = self._member.view
        if self._columns is not None and self._columns[0] is view:
            return self._columns[1]
        columns = {
            "assignment_version": max(view.version, 0),
            "shards": to_set(sorted(s for s in self._claimed if self.owns(s))),
            "standby": to_set(sorted(view.standbys)),
        }
        self._columns = (view, columns)
        return columns

    def _assignment_row_stale(self) -> bool:
        """True if our `Logical_Controller` row does not show the current assignment: this
        controller has not written it since it changed, or the row says another version."""
        want = self._assignment_columns()
        for row in self._universal.rows["Logical_Controller"].values():
            if row["name"] == self.name:
                return want is not self._columns_written or (
                    row.get("assignment_version") != want["assignment_version"]
                )
        return True


def _drain(fd: int) -> None:
    """Read whatever wake-up bytes are waiting on the non-blocking pipe `fd`."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _wait_shard(shard: str, owner: dict[str, Any]) -> Op:
    """An operation that fails its transaction unless `shard`'s row has `owner`'s columns."""
    return ops.wait("Shard", ops.where_eq("name", shard), columns=sorted(owner), rows=[owner])
