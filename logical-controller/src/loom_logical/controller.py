"""The logical controller daemon: config IDL -> rule engine -> universal-DB writer.

One thread runs the loop: both IDLs are polled; the config rows that changed since the
last pass (and the VIF locations physical controllers wrote to `Port_Binding.chassis`)
become one engine transaction about exactly those rows; the transaction's output delta
goes to the `Writer`, which writes it to the universal database with the generation it
realizes (`Logical_Controller.generation`, and `Universal_Global.generation`, the minimum
over the controllers). A controller started on a database that already holds rows
reconciles them with what it computes (so a restart writes only what changed meanwhile).

Sharding (which shards this controller may write) is a predicate given at construction:
`all shards` for a single controller; `loom_common.cluster.membership` for a cluster.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ovs.db.idl
import ovs.poller

from loom_ddlog import Program
from loom_logical.inputs import InputTable, input_tables
from loom_logical.rules import main_file
from loom_logical.writer import Writer
from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

log = logging.getLogger(__name__)

POLL_MS = 1000


class _Idl(ovs.db.idl.Idl):  # type: ignore[misc]
    """An IDL that reports each row change to a callback (python-ovs has no change tracking)."""

    def __init__(self, remote: str, schema: Path, on_change: Callable[[str, str, Any], None]):
        helper = ovs.db.idl.SchemaHelper(location=str(schema))
        helper.register_all()
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
        owns: Callable[[str], bool] = lambda _shard: True,
        rules: Path | None = None,
    ) -> None:
        """Describe the controller; `start()` connects and runs it in a thread.

        Args:
            config_remote: the Loom_Config database (OVSDB remote).
            universal_remote: the Loom_Universal database.
            name: this controller's name (its `Logical_Controller` row).
            owns: which shards this controller writes.
            rules: the main rule file (default: the installed `rules/logical`).
        """
        self.name = name
        self.program = Program.load([rules or main_file()])
        self.tables: dict[str, InputTable] = input_tables()
        self.writer = Writer(owns)
        self._dirty_config: dict[str, set[str]] = defaultdict(set)
        self._dirty_locations: dict[str, str | None] = {}
        self._locations: dict[str, str] = {}
        self._config = _Idl(config_remote, schema_path(CONFIG_SCHEMA), self._config_change)
        self._universal = _Idl(
            universal_remote, schema_path(UNIVERSAL_SCHEMA), self._universal_change
        )
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
        self.writer.observe(event, table, row)
        if table == "Port_Binding":
            chassis = None if event == ovs.db.idl.ROW_DELETE else (row.chassis or [None])[0]
            self._dirty_locations[row.logical_port] = chassis

    # ---- lifecycle ----

    def start(self) -> LogicalController:
        """Start the controller thread."""
        self._thread = threading.Thread(target=self._loop, name=f"logical-{self.name}")
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and close the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._config.close()
        self._universal.close()

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
            self._config.wait(poller)
            self._universal.wait(poller)
            poller.timer_wait(POLL_MS if not self.writer.pending() else 100)
            poller.block()

    def _step(self) -> None:
        self._config.run()
        self._universal.run()
        synced = self._config.has_ever_connected() and self._universal.has_ever_connected()
        if not synced or self._config.state != self._config.IDL_S_MONITORING:
            return
        if self._universal.state != self._universal.IDL_S_MONITORING:
            return
        if self._dirty_config or self._dirty_locations:
            self._compute()
        if self._reconcile_needed:
            self.writer.reconcile()
            self._reconcile_needed = False
        generation = self._config_generation()
        if self.writer.pending() or generation > self._written_generation:
            status = self.writer.flush(self._universal, lambda txn: self._stamp(txn, generation))
            if status in ("success", "unchanged"):
                self._written_generation = max(self._written_generation, generation)
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

    def _stamp(self, txn: Any, generation: int) -> None:
        """Record in `txn` that this controller has written `generation`."""
        me = next(
            (
                r
                for r in self._universal.tables["Logical_Controller"].rows.values()
                if r.name == self.name
            ),
            None,
        )
        if me is None:
            me = txn.insert(self._universal.tables["Logical_Controller"])
            me.name = self.name
            me.generation = generation
        elif me.generation != generation:
            me.generation = generation
        others = [
            int(r.generation)
            for r in self._universal.tables["Logical_Controller"].rows.values()
            if r.name != self.name
        ]
        realized = min([generation, *others])
        rows = list(self._universal.tables["Universal_Global"].rows.values())
        if not rows:
            txn.insert(self._universal.tables["Universal_Global"]).generation = realized
        elif rows[0].generation != realized:
            rows[0].generation = realized
