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

import logging
import os
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ovs.db.idl
import ovs.poller

from loom_common.cluster import membership
from loom_common.ovsdb import RawConnection, TransactError
from loom_ddlog import Program
from loom_logical.inputs import InputTable, input_tables
from loom_logical.outputs import GLOBAL_SHARD, all_shards
from loom_logical.rules import main_file
from loom_logical.writer import Writer
from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

log = logging.getLogger(__name__)

POLL_MS = 1000


class _Idl(ovs.db.idl.Idl):  # type: ignore[misc]
    """An IDL that reports each row change to a callback (python-ovs has no change tracking)."""

    def __init__(
        self,
        remote: str,
        schema: Path,
        on_change: Callable[[str, str, Any], None],
        columns: dict[str, list[str] | None] | None = None,
    ):
        helper = ovs.db.idl.SchemaHelper(location=str(schema))
        if columns is None:
            helper.register_all()
        for table, names in (columns or {}).items():
            if names is None:
                helper.register_table(table)
            else:
                helper.register_columns(table, names)
        super().__init__(remote, helper)
        self._on_change = on_change

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        self._on_change(event, row._table.name, row)


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
        """
        self.name = name
        self.rules_path = rules or main_file()
        self.program = Program.load([self.rules_path])
        self.tables: dict[str, InputTable] = input_tables()
        self.writer = Writer(self.owns)
        self._zk_hosts = zookeeper
        self._session_timeout = session_timeout
        self._zk_root = zk_root
        self._zk: Any = None
        self._member: membership.Member | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._claimed: dict[str, int] = {}
        """Shard -> the assignment version under which we claimed it (seen committed)."""
        self._dirty_config: dict[str, set[str]] = defaultdict(set)
        self._dirty_locations: dict[str, str | None] = {}
        self._locations: dict[str, str] = {}
        self._config = _Idl(config_remote, schema_path(CONFIG_SCHEMA), self._config_change)
        # Only the small tables, and where VIFs are: the rows this controller writes go over
        # `self._conn` (see `writer`), and are never mirrored in Python.
        self._universal = _Idl(
            universal_remote,
            schema_path(UNIVERSAL_SCHEMA),
            self._universal_change,
            {
                "Shard": None,
                "Logical_Controller": None,
                "Universal_Global": None,
                "Port_Binding": ["logical_port", "chassis"],
            },
        )
        self._universal_remote = universal_remote
        self._conn: RawConnection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._written_generation = -1
        self._reconcile_needed = True
        self._config_seqno = -1
        self._universal_seqno = -1
        self.transactions = 0
        """Engine transactions committed (for tests and status)."""

    # ---- IDL callbacks (run on the controller thread, inside Idl.run) ----

    def _config_change(self, event: str, table: str, row: Any) -> None:
        if table in self.tables:
            self._dirty_config[table].add(str(row.uuid))

    def _universal_change(self, event: str, table: str, row: Any) -> None:
        if table == "Port_Binding":
            chassis = None if event == ovs.db.idl.ROW_DELETE else (row.chassis or [None])[0]
            self._dirty_locations[row.logical_port] = chassis

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
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and close the connections."""
        self._stop.set()
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout)
        if self._member is not None:
            self._member.stop(timeout)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        self._config.close()
        self._universal.close()
        if self._conn is not None:
            self._conn.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ---- shard ownership ----

    def _on_view(self, view: membership.MemberView) -> None:
        """A new membership view (member thread): wake the loop to claim or drop shards."""
        os.write(self._wake_w, b"v")

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
        """Claim the shards the view says we master, in one fenced transaction."""
        if self._member is None:
            return
        view = self._member.view
        self._claimed = {s: v for s, v in self._claimed.items() if view.may_write(s)}
        rows = {r.name: r for r in self._universal.tables["Shard"].rows.values()}
        for shard, version in list(self._claimed.items()):
            row = rows.get(shard)  # someone with a newer assignment took it: not ours
            if row is None or row.owner != self.name or row.epoch != version:
                del self._claimed[shard]
        wanted = [
            s
            for s in sorted(view.masters)
            if view.may_write(s) and self._claimed.get(s) != view.version
        ]
        if not wanted:
            return
        txn = ovs.db.idl.Transaction(self._universal)
        claimable = []
        for shard in wanted:
            row = rows.get(shard)
            if row is None:
                row = txn.insert(self._universal.tables["Shard"])
                row.name = shard
            elif row.epoch > view.version:
                continue  # a newer assignment exists; ours is stale
            else:
                row.verify("epoch")
            row.owner = self.name
            row.epoch = view.version
            claimable.append(shard)
        status = txn.commit_block()
        if status in (ovs.db.idl.Transaction.SUCCESS, ovs.db.idl.Transaction.UNCHANGED):
            for shard in claimable:
                self._claimed[shard] = view.version
            self.writer.load_actual(self._connection(), claimable)
            log.info(
                "%s claimed %d shards (assignment %d)", self.name, len(claimable), view.version
            )
        else:
            log.warning("claiming shards failed: %s %s", status, txn.get_error())

    def _fence(self, shards: Any) -> list[dict[str, Any]]:
        """Operations that fail a write if another controller claimed one of `shards`."""
        if self._member is None:
            return []
        return [
            {"op": "wait", "table": "Shard", "timeout": 0, "where": [["name", "==", shard]],
             "columns": ["owner", "epoch"], "until": "==",
             "rows": [{"owner": self.name, "epoch": self._claimed[shard]}]}
            for shard in shards
        ]  # fmt: skip

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
        return bool(self._dirty_config or self._dirty_locations)

    def config_rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every config row the controller sees now, as engine input tuples, by table."""
        with self._cond:
            return {
                name: [spec.row_tuple(r) for r in self._config.tables[name].rows.values()]
                for name, spec in self.tables.items()
            }

    def location(self, port: str) -> str | None:
        """Where the engine believes logical port `port`'s VIF is."""
        return self._locations.get(port)

    @property
    def written_generation(self) -> int:
        """The highest configuration generation whose universal rows are written."""
        return self._written_generation

    # ---- the loop ----

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with self._cond:  # waiters see the state between passes, never inside one
                    self._step()
            except Exception:  # the daemon must outlive one bad pass; the next retries
                log.exception("logical controller pass failed")
                time.sleep(0.2)
            poller = ovs.poller.Poller()
            poller.fd_wait(self._wake_r, ovs.poller.POLLIN)
            self._config.wait(poller)
            self._universal.wait(poller)
            poller.timer_wait(POLL_MS if not self.writer.pending() else 100)
            poller.block()

    def _step(self) -> None:
        _drain(self._wake_r)
        self._config.run()
        self._universal.run()
        synced = self._config.has_ever_connected() and self._universal.has_ever_connected()
        if not synced or self._config.state != self._config.IDL_S_MONITORING:
            return
        if self._universal.state != self._universal.IDL_S_MONITORING:
            return
        if self._dirty_config or self._dirty_locations:
            self._compute()
        try:
            if self._reconcile_needed:
                self.writer.load_actual(self._connection())
                self._reconcile_needed = False
            self._claim()
            generation = self._config_generation()
            if self.writer.pending() or generation > self._written_generation:
                conn = self._connection()
                if not self.writer.flush(conn, self._fence, self._stamp(generation)):
                    self._reconcile_needed = True  # learn what is there before a retry
                    return
                self._written_generation = max(self._written_generation, generation)
            if self.owns(GLOBAL_SHARD):
                self._report()
        except (OSError, TransactError) as exc:
            log.warning("universal DB connection failed: %s", exc)
            self._drop_connection()
            self._reconcile_needed = True
            return
        self._cond.notify_all()

    def _config_generation(self) -> int:
        rows = list(self._config.tables["Loom_Global"].rows.values())
        return int(rows[0].generation) if rows else 0

    def _compute(self) -> None:
        """One engine transaction about the rows that changed; its delta to the writer."""
        dirty, self._dirty_config = self._dirty_config, defaultdict(set)
        locations, self._dirty_locations = self._dirty_locations, {}
        with self.program.transaction() as txn:
            for table, uuids in dirty.items():
                rows = self._config.tables[table].rows
                spec = self.tables[table]
                for text in uuids:
                    row = rows.get(uuid.UUID(text))
                    if row is None:
                        txn.delete_key(table, text)
                    else:
                        txn.insert_or_update(table, spec.row_tuple(row))
            for port, chassis in locations.items():
                known = self._locations.get(port)
                if chassis == known:
                    continue
                if chassis is None:
                    txn.delete_key("Port_Location", port)
                    del self._locations[port]
                else:
                    txn.insert_or_update("Port_Location", (port, chassis))
                    self._locations[port] = chassis
            delta = txn.commit()
        self.transactions += 1
        self.writer.apply(delta)

    def _report(self) -> None:
        """Copy the realized generation and the warnings back to the config DB for the API.

        Only the master of the global shard does this; the rows are few, so the config IDL
        (which has them) writes them.
        """
        universal = list(self._universal.tables["Universal_Global"].rows.values())
        realized = int(universal[0].generation) if universal else 0
        glob = next(iter(self._config.tables["Loom_Global"].rows.values()), None)
        want = set(self.writer.desired["Warning"])
        have = {
            (r.source, r.kind, r.message): r for r in self._config.tables["Warning"].rows.values()
        }
        stale_generation = glob is not None and glob.logical_generation < realized
        if not stale_generation and want == set(have):
            return
        txn = ovs.db.idl.Transaction(self._config)
        if stale_generation:
            glob.logical_generation = realized
        for key, row in have.items():
            if key not in want:
                row.delete()
        for source, kind, message in sorted(want - set(have)):
            new = txn.insert(self._config.tables["Warning"])
            new.source, new.kind, new.message = source, kind, message
        status = txn.commit_block()
        if status not in (ovs.db.idl.Transaction.SUCCESS, ovs.db.idl.Transaction.UNCHANGED):
            log.warning("reporting to the config DB failed: %s %s", status, txn.get_error())

    def _connection(self) -> RawConnection:
        if self._conn is None:
            self._conn = RawConnection(self._universal_remote)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _stamp(self, generation: int) -> list[dict[str, Any]]:
        """Operations recording that this controller has written `generation`, and the
        realized generation (the minimum over live controllers) if it owns the global shard."""
        controllers = self._universal.tables["Logical_Controller"].rows.values()
        if any(r.name == self.name for r in controllers):
            ops: list[dict[str, Any]] = [
                {"op": "update", "table": "Logical_Controller",
                 "where": [["name", "==", self.name]], "row": {"generation": generation}}
            ]  # fmt: skip
        else:
            ops = [{"op": "insert", "table": "Logical_Controller",
                    "row": {"name": self.name, "generation": generation}}]  # fmt: skip
        if not self.owns(GLOBAL_SHARD):
            return ops
        live = set(self._member.view.members) if self._member is not None else {self.name}
        others = [int(r.generation) for r in controllers if r.name != self.name and r.name in live]
        realized = min([generation, *others])
        if self._universal.tables["Universal_Global"].rows:
            ops.append({"op": "update", "table": "Universal_Global", "where": [],
                        "row": {"generation": realized}})  # fmt: skip
        else:
            ops.append({"op": "insert", "table": "Universal_Global",
                        "row": {"generation": realized}})  # fmt: skip
        return ops


def _drain(fd: int) -> None:
    """Read whatever wake-up bytes are waiting on the non-blocking pipe `fd`."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass
