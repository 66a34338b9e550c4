"""The configuration database as the API sees it: one IDL replica, reads and transactions on it.

One `Store` owns one `ovs.db.idl.Idl` connected to the `Loom_Config` database (a standalone
ovsdb-server or the members of a RAFT cluster, leader only). A single thread runs the IDL's
protocol loop and executes every write; request threads read the replica under a lock.

Reads: `store.read(fn)` calls `fn(view)` with the replica locked, so `fn` sees one consistent
state and must return plain data (never `Row` objects, which change under the next update).

Writes: `store.write(fn)` runs `fn(txn)` on the IDL thread inside an OVSDB transaction.
`fn` validates against the replica, makes its changes and returns a result; the store adds
the increment of `Loom_Global.generation`, commits, and returns `(result, generation)`.
When the commit fails because something `fn` read (and `verify`-ed) changed meanwhile, `fn`
runs again on the new replica: a concurrent writer can never be lost, and a check that
depended on the stale state (an ETag, a name's uniqueness) is made again. An exception from
`fn` aborts the transaction; nothing is written.

The first read is staged: every table but `Loom_Global` starts with a condition that matches
nothing, and the IDL thread widens one table at a time once the previous one's rows are in
(`monitor_cond_change`), so ovsdb-server makes one table's reply at a time rather than the
whole database's (at NVP's full scale that reply was the config DB's peak memory).
The replica counts as connected once every table is read.

Why not ovsdbapp's `Connection`: it blocks start-up until the first connection and retries a
transaction until a long timeout when the database is gone. The API must start while the
database is down and answer 503 at once, and must tell "not sent" (safe to retry) from "sent,
then the connection dropped" (outcome unknown); so the loop below is written here (about the
size of ovsdbapp's) on python-ovs, which does the protocol work.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import ovs.db.idl
import ovs.poller
import ovs.vlog

from loom_api import errors
from loom_common.liveness import Liveness

LOG = logging.getLogger(__name__)

T = TypeVar("T")

GLOBAL_TABLE = "Loom_Global"

#: (table, column) pairs of child -> parent references that never change after insert, kept
#: in python-ovs custom indexes so "the ports of this switch" costs O(ports on the switch),
#: not a scan of every port. (The IDL updates these indexes on insert and delete only, so
#: only immutable columns may be indexed.)
PARENT_INDEXES: tuple[tuple[str, str], ...] = (
    ("Logical_Switch_Port", "logical_switch"),
    ("Logical_Router_Port", "logical_router"),
    ("Static_Route", "logical_router"),
    ("Subnet", "logical_switch"),
)

#: Transaction errors from ovsdb-server that are about the data, not the connection.
_CONSTRAINT = "constraint violation"
_REFERENTIAL = "referential integrity violation"
#: The error of a transaction ovsdb-server could not write to its file (a full disk: its
#: `io-error` says "No space left on device"): the server's condition, not the request's.
_IO_ERROR = "I/O error"


def _ref_uuid(value: Any) -> Any:
    """Return the uuid a parent-index entry or query holds (a uuid, or a `Row` in queries)."""
    return value if isinstance(value, uuidlib.UUID) else value.uuid


def _index_entry(index: Any, row: Any) -> Any:
    """Return `row`'s entry in a parent index, keyed by the stored uuid of its parent.

    python-ovs builds entries by resolving the reference through the parent's table. The
    parent can be out of its table for a moment: when a transaction ends, python-ovs takes
    inserted rows out and puts deleted rows back one by one (a router and its gateway port
    inserted together, a network and its subnets deleted together), and when it applies an
    update from the server, tables go in the update's order. A resolved key is then lost (a
    bare `Atom`), the entry lands apart from its siblings, and removing it fails. The uuid
    in the row's own datum is always there, so entries are built from it.
    """
    values = {}
    for column in index.columns:
        name = column.column
        datum = row._changes.get(name) if row._changes else None
        if datum is None and row._data is not None:
            datum = row._data.get(name)
        values[name] = datum.as_scalar() if datum is not None else getattr(row, name)
    return row._table.rows.IndexEntry(uuid=row.uuid, **values)


class ReadView:
    """Read access to the replica; valid only inside `Store.read` / `Store.write` callbacks."""

    def __init__(self, idl: Any, liveness: Liveness | None = None) -> None:
        self._idl = idl
        self.liveness = liveness
        """The physical controllers' beats as this API server saw them (None: not kept)."""

    def rows(self, table: str) -> Iterator[Any]:
        """Yield every row of `table` (python-ovs `Row` objects)."""
        yield from self._idl.tables[table].rows.values()

    def get(self, table: str, uuid: Any) -> Any | None:
        """Return the row of `table` with `uuid` (a `uuid.UUID`), or None."""
        return self._idl.tables[table].rows.get(uuid)

    def children(self, table: str, column: str, parent: Any) -> list[Any]:
        """Return the rows of `table` whose `column` references `parent` (an indexed pair).

        Rows inserted by the current transaction are not included.
        """
        entry = self._idl.tables[table].rows.IndexEntry(**{column: parent})
        return list(self._idl.index_equal(table, f"by_{column}", entry))

    def count(self, table: str) -> int:
        """Return the number of rows in `table`."""
        return len(self._idl.tables[table].rows)

    def global_row(self) -> Any | None:
        """Return the `Loom_Global` row, or None before the first write."""
        return next(iter(self._idl.tables[GLOBAL_TABLE].rows.values()), None)

    def generation(self) -> int:
        """Return the current configuration generation (0 before the first write)."""
        row = self.global_row()
        return int(row.generation) if row is not None else 0

    def realized_generation(self) -> int:
        """Return the generation the controllers report as realized (0 until they exist)."""
        row = self.global_row()
        return int(row.realized_generation) if row is not None else 0

    def logical_generation(self) -> int:
        """Return the generation whose universal flows the logical controllers have written."""
        row = self.global_row()
        return int(row.logical_generation) if row is not None else 0

    def owner_tenant(self, uuid_text: str) -> str | None:
        """Return the tenant of the config row with id `uuid_text` (None: no such row, or a
        row without a tenant such as a transport node)."""
        try:
            key = uuidlib.UUID(uuid_text)
        except ValueError:
            return None
        for table in self._idl.tables.values():
            row = table.rows.get(key)
            if row is not None:
                return str(row.tenant) if "tenant" in table.columns else None
        return None


class WriteView(ReadView):
    """A `ReadView` plus the changes of one transaction; valid only inside `Store.write`."""

    def __init__(self, idl: Any, txn: Any, liveness: Liveness | None = None) -> None:
        super().__init__(idl, liveness)
        self._txn = txn
        self.inserted_ids: list[uuidlib.UUID] = []

    def insert(self, table: str, *, row_uuid: uuidlib.UUID | None = None, **columns: Any) -> Any:
        """Insert a row into `table` with `columns` set; return it.

        Its uuid is provisional, unless `row_uuid` is given: then the database stores the row
        under exactly that (fresh, random) uuid, so the transaction itself may write the id
        into a string column (the Neutron layer names a port's VIF after the port's id).
        """
        row = self._txn.insert(
            self._idl.tables[table], new_uuid=row_uuid, persist_uuid=row_uuid is not None
        )
        self.inserted_ids.append(row.uuid)
        for name, value in columns.items():
            setattr(row, name, value)
        return row

    def children(self, table: str, column: str, parent: Any) -> list[Any]:
        """Return the rows of `table` whose `column` references `parent` (an indexed pair).

        As `ReadView.children` says, rows inserted by the current transaction are left out:
        python-ovs adds a new row to the index as soon as its indexed column is set, before
        its other columns (a port key, say) have values.
        """
        inserted = set(self.inserted_ids)
        return [row for row in super().children(table, column, parent) if row.uuid not in inserted]

    def update(self, row: Any, **columns: Any) -> None:
        """Set `columns` on `row`."""
        for name, value in columns.items():
            setattr(row, name, value)

    def delete(self, row: Any) -> None:
        """Delete `row`."""
        row.delete()

    @staticmethod
    def verify(row: Any, *columns: str) -> None:
        """Make the commit fail (and `fn` run again) if any of `row`'s `columns` changed."""
        for column in columns:
            row.verify(column)

    def verify_table(self, table: str, column: str) -> None:
        """Verify `column` on every row of `table` (for checks over a whole table, like uniqueness).

        The OVSDB protocol can only verify rows, so rows inserted concurrently are not covered;
        schema indexes (unique columns) cover those.
        """
        for row in self._idl.tables[table].rows.values():
            row.verify(column)

    def comment(self, text: str) -> None:
        """Attach `text` to the transaction (shown by `ovsdb-tool show-log`)."""
        self._txn.add_comment(text)


@dataclass(frozen=True)
class Committed(Generic[T]):
    """A committed write: what `fn` returned, the new generation, and the ids of new rows."""

    result: T
    generation: int
    inserted: dict[uuidlib.UUID, uuidlib.UUID]

    def real_id(self, row: Any) -> uuidlib.UUID:
        """Return the permanent uuid of `row`, inserted by the transaction (or an old row)."""
        key: uuidlib.UUID = row.uuid
        return self.inserted.get(key, key)


@dataclass
class _Job(Generic[T]):
    """One write waiting for the IDL thread."""

    fn: Callable[[WriteView], T]
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    committed: Committed[T] | None = None
    error: BaseException | None = None


RECONNECT_FIRST_MS = 200
"""The wait before the first attempt to reconnect to the config DB after it was lost
(doubling with each failed attempt up to `RECONNECT_MS`)."""
RECONNECT_MS = 1000
"""The longest wait between attempts to reconnect to the config DB."""
RECONNECT_CLUSTER_MS = 100
"""The wait between attempts to reconnect to a member of a config DB cluster."""


class Store:
    """The config DB replica and its writer thread. Thread-safe; start() before use."""

    def __init__(
        self,
        remote: str,
        schema_path: str,
        *,
        timeout: float = 10.0,
        reconnect_grace: float = 2.0,
        max_retries: int = 20,
    ) -> None:
        """Prepare a store; nothing connects until `start()`.

        Args:
            remote: OVSDB connection string(s), comma-separated for a cluster.
            schema_path: the `Loom_Config` `.ovsschema` file.
            timeout: the longest a write may wait for the database's reply.
            reconnect_grace: how long a write waits for a lost connection to come back
                (a RAFT leader change) before answering "unavailable".
            max_retries: how often a write is re-run after verify conflicts.
        """
        helper = ovs.db.idl.SchemaHelper(location=schema_path)
        helper.register_all()
        self._idl = ovs.db.idl.Idl(remote, helper, leader_only=True)
        # python-ovs backs off to 8 s between attempts: a database back after a restart
        # waited about that long for the API. `set_backoff` refuses less than 1 s before the
        # first attempt, which was most of the API's downtime after a restarted database
        # (the restart itself is quicker): its FSM's own field is set below that floor.
        # A RAFT cluster that lost its leader elects another in 1-2 s; meanwhile the IDL
        # tries the members in turn and is refused by those not (yet) leader, each refusal
        # doubling its wait: it found the new leader well after the election. For a
        # cluster the wait is `RECONNECT_CLUSTER_MS`, whatever the refusals.
        reconnect = self._idl._session.reconnect
        reconnect.set_backoff(RECONNECT_MS, RECONNECT_MS)
        reconnect.min_backoff = RECONNECT_FIRST_MS
        if "," in remote:
            reconnect.min_backoff = reconnect.max_backoff = RECONNECT_CLUSTER_MS
        self._unread = [t for t in self._idl.tables if t != GLOBAL_TABLE]
        """The tables still to be read (in order), the first one perhaps being read."""
        for table in self._unread:
            self._idl.cond_change(table, [False])
        for table, column in PARENT_INDEXES:
            index = self._idl.index_create(table, f"by_{column}")
            index.add_column(column, key=lambda entry, c=column: _ref_uuid(getattr(entry, c)))
            index.index_entry_from_row = functools.partial(_index_entry, index)
        self._remote = remote
        self._timeout = timeout
        self._grace = reconnect_grace
        self._max_retries = max_retries
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._jobs: queue.SimpleQueue[_Job[Any]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._running = False
        self._thread: threading.Thread | None = None
        self._seen: tuple[int, bool] = (-1, False)
        self.liveness = Liveness(time.monotonic())
        """The physical controllers' beats (`loom_common.liveness`), kept by the IDL
        thread: a node whose controller is silent is shown not connected."""

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the IDL thread; it connects (and reconnects) in the background."""
        ovs.vlog.Vlog.init(None)
        # vlog writes its "console" lines to stderr itself and through the logging tree:
        # once is enough, and through the tree they get the daemon's format (JSON too).
        console = logging.getLogger("console")
        for handler in list(console.handlers):
            console.removeHandler(handler)
        console.setLevel(logging.INFO)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="loom-store", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the IDL thread and close the connection."""
        self._running = False
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self._idl.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def wait_connected(self, timeout: float) -> bool:
        """Block until the replica is complete and current, or `timeout` passes."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self._monitoring():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    @property
    def connected(self) -> bool:
        """True while the replica is connected and being kept current."""
        with self._lock:
            return self._monitoring()

    @property
    def remote(self) -> str:
        """The database connection string."""
        return self._remote

    # ---- reads and writes ----------------------------------------------------------------

    def read(self, fn: Callable[[ReadView], T]) -> T:
        """Return `fn(view)` over the locked replica.

        Raises:
            errors.Unavailable: the database is not connected (the replica may be stale).
        """
        with self._lock:
            if not self._monitoring():
                raise errors.Unavailable(detail=f"no connection to {self._remote}")
            return fn(ReadView(self._idl, self.liveness))

    def write(self, fn: Callable[[WriteView], T]) -> Committed[T]:
        """Run `fn` in a transaction on the IDL thread; return its result and the new generation.

        Raises:
            errors.LoomApiError: whatever `fn` raised (nothing written), or `Conflict` when the
                database refused the change (a unique index), or `Unavailable` /
                `OutcomeUnknown` when the database could not be reached.
        """
        job: _Job[T] = _Job(fn=fn, deadline=time.monotonic() + self._timeout + self._grace)
        self._jobs.put(job)
        self._wake()
        if not job.done.wait(self._timeout + self._grace + 5):
            raise errors.OutcomeUnknown(detail="the store thread did not answer")
        if job.error is not None:
            raise job.error
        assert job.committed is not None
        return job.committed

    def wait_realized(self, generation: int, timeout: float) -> int:
        """Wait up to `timeout` seconds for `realized_generation >= generation`; return it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                realized = ReadView(self._idl, self.liveness).realized_generation()
                left = deadline - time.monotonic()
                if realized >= generation or left <= 0:
                    return realized
                self._changed.wait(left)

    @contextmanager
    def locked(self) -> Iterator[ReadView]:
        """Hold the replica lock for a sequence of reads that must agree (tests, status)."""
        with self._lock:
            yield ReadView(self._idl, self.liveness)

    # ---- the IDL thread ------------------------------------------------------------------

    def _monitoring(self) -> bool:
        # The IDL keeps its MONITORING state through a disconnect until it reconnects, so
        # the session is asked too (python-ovs has no public accessor for it).
        idl = self._idl
        return bool(
            idl.state == idl.IDL_S_MONITORING and idl._session.is_connected() and not self._unread
        )

    def _read_next(self) -> None:
        """Widen the next unread table's condition once the one before it is read (its
        change acknowledged: ovsdb-server sends the rows a change adds before its reply)."""
        idl = self._idl
        if idl.state != idl.IDL_S_MONITORING:
            return
        while self._unread and idl.tables[self._unread[0]].condition_state.acked == [True]:
            self._unread.pop(0)
        if self._unread and idl.tables[self._unread[0]].condition_state.latest != [True]:
            idl.cond_change(self._unread[0], [True])

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # closed during stop()
            os.write(self._wake_w, b"x")

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _run_idl(self) -> None:
        """One round of protocol work; wake waiters when the replica changed."""
        with self._lock:
            self._idl.run()
            self._read_next()
            state = (self._idl.change_seqno, self._monitoring())
            if state != self._seen:
                self._seen = state
                glob = ReadView(self._idl).global_row()
                if glob is not None:
                    self.liveness.observe(glob.external_ids, time.monotonic())
                self._changed.notify_all()

    def _block(self, timeout_ms: int | None = None, txn: Any = None) -> None:
        poller = ovs.poller.Poller()
        with self._lock:
            self._idl.wait(poller)
            if txn is not None:
                txn.wait(poller)
        poller.fd_wait(self._wake_r, ovs.poller.POLLIN)
        if timeout_ms is not None:
            poller.timer_wait(timeout_ms)
        poller.block()
        self._drain_wake()

    def _loop(self) -> None:
        while self._running:
            try:
                self._run_idl()
                while True:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    self._execute(job)
                if self._running:
                    self._block()
            except Exception:  # a bug here must not kill the only writer
                LOG.exception("store loop error; continuing")

    def _execute(self, job: _Job[Any]) -> None:
        try:
            job.committed = self._commit(job)
        except BaseException as exc:  # handed to the waiting request thread
            job.error = exc
        finally:
            job.done.set()

    def _await_connection(self, deadline: float) -> None:
        """Give a lost connection `reconnect_grace` to come back before giving up."""
        grace_end = min(deadline, time.monotonic() + self._grace)
        while not self._monitoring():
            left = grace_end - time.monotonic()
            if left <= 0:
                raise errors.Unavailable(detail=f"no connection to {self._remote}")
            self._block(timeout_ms=max(1, int(left * 1000)))
            self._run_idl()

    def _commit(self, job: _Job[T]) -> Committed[T]:
        for _attempt in range(self._max_retries):
            self._await_connection(job.deadline)
            with self._lock:
                seqno = self._idl.change_seqno
                txn = ovs.db.idl.Transaction(self._idl)
                view = WriteView(self._idl, txn, self.liveness)
                try:
                    result = job.fn(view)
                except BaseException:
                    txn.abort()
                    raise
                global_row = view.global_row()
                if global_row is None:
                    view.insert(GLOBAL_TABLE, generation=1, realized_generation=0)
                else:
                    global_row.increment("generation")
                status = txn.commit()
            sent = status == txn.INCOMPLETE
            status = self._finish(txn, job.deadline)
            if status == txn.UNCHANGED:  # `fn` changed nothing: no new generation
                return Committed(result, ReadView(self._idl, self.liveness).generation(), {})
            if status == txn.SUCCESS:
                generation = txn.get_increment_new_value() if global_row is not None else 1
                inserted = {temp: txn.get_insert_uuid(temp) for temp in view.inserted_ids}
                return Committed(result, int(generation), inserted)
            if status == txn.TRY_AGAIN:
                if sent and not self._monitoring():
                    raise errors.OutcomeUnknown(detail=f"connection to {self._remote} lost")
                # A verify failed, nothing was sent, or the cluster is electing a leader:
                # as python-ovs asks, wait for the replica to change, then run `fn` again.
                self._await_change(seqno, job.deadline)
                continue
            if status == txn.ERROR:
                self._raise_db_error(txn.get_error(), inserted_global=global_row is None)
                continue
            raise errors.Unavailable(detail=f"transaction ended with status {status}")
        raise errors.Unavailable(detail="the database kept refusing the change; retry later")

    def _await_change(self, seqno: int, deadline: float) -> None:
        """Wait until the replica changes past `seqno` or the connection drops.

        Raises:
            errors.Unavailable: `deadline` passed first.
        """
        while self._idl.change_seqno == seqno and self._monitoring():
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.Unavailable(detail="the database did not accept the change in time")
            self._block(timeout_ms=max(1, int(left * 1000)))
            self._run_idl()

    def _finish(self, txn: Any, deadline: float) -> Any:
        """Drive a sent transaction to completion, or raise OutcomeUnknown at the deadline."""
        while True:
            with self._lock:
                status = txn.commit()
            if status != txn.INCOMPLETE:
                return status
            if not self._monitoring():
                # python-ovs keeps it INCOMPLETE until it reconnects: while the database is
                # down, the request waited for its whole deadline.
                raise errors.OutcomeUnknown(
                    detail=f"connection to {self._remote} lost with the change in flight"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.OutcomeUnknown(detail="no reply from the database in time")
            self._block(timeout_ms=max(1, int(left * 1000)), txn=txn)
            self._run_idl()

    @staticmethod
    def _raise_db_error(text: str, *, inserted_global: bool) -> None:
        if inserted_global and _CONSTRAINT in text and GLOBAL_TABLE in text:
            return  # another API server created Loom_Global first: run again
        if _IO_ERROR in text:
            raise errors.StorageFull(detail=text)
        if _CONSTRAINT in text:
            raise errors.Conflict(detail=f"the database refused a duplicate: {text}")
        if _REFERENTIAL in text:
            raise errors.Conflict(detail=f"the change would break a reference: {text}")
        raise errors.ValidationFailed(detail=f"the database refused the change: {text}")
