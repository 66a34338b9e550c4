"""The logical controller's config input path (`loom_logical.inputs.ConfigFeed`): whatever
the interleaving of creates, modifications, deletions, partial deliveries, re-reads after a
lost connection and failed engine transactions, the engine's input relations hold exactly
what the config DB holds as far as the changes delivered tell, and no transaction is
refused (issue 41: a row created and deleted between two passes reached the engine as a
delete alone, which it refuses, and the controller crash-looped).

Two machines: the pure one feeds generated change streams to a real engine; the other
drives a real ovsdb-server through a staged, unkept `Replica` (as the controller reads the
config DB), with writes committed between the tables of a staged read.
"""

from __future__ import annotations

import logging
import uuid as uuidlib
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from loom_api.testing import ApiClient
from loom_common.engine_inputs import Column, InputTable
from loom_common.engine_inputs import input_tables as schema_tables
from loom_common.ovsdb import OvsdbServer, RawConnection, Replica, pack_uuid
from loom_common.testing import wait_for
from loom_ddlog import EngineError, Program, Transaction
from loom_logical.controller import LogicalController
from loom_logical.inputs import ConfigFeed
from loom_schemas import CONFIG_SCHEMA, schema_path

PURE_TABLES = {
    name: InputTable(name, (Column("v", "signed<64>", "scalar", "integer"),)) for name in ("A", "B")
}
TABLE = st.sampled_from(sorted(PURE_TABLES))


def engine_rows(program: Program, tables: dict[str, InputTable]) -> dict[str, set[Any]]:
    """Every row the engine holds of `tables`, by table."""
    return {name: set(program.dump(name)) for name in tables}


class FeedMachine(RuleBasedStateMachine):
    """The config DB (`db`) changes; its changes reach the feed in order, a prefix at a
    time, over a connection that may be lost (what it had not delivered is lost with it,
    and the next connection reads every row). After every transaction the engine holds
    what the changes delivered say (`seen`)."""

    def __init__(self) -> None:
        super().__init__()
        self.program = Program.compile(
            "".join(t.declaration() for t in PURE_TABLES.values()), "feed.dl"
        )
        self.feed = ConfigFeed(PURE_TABLES)
        self.db: dict[tuple[str, str], int] = {}
        self.seen: dict[tuple[str, str], int] = {}
        """The rows as the changes delivered to the feed say."""
        self.stream: list[tuple[str, str, dict[str, Any] | None]] = []
        """Changes made, not delivered yet."""
        self.reads = 0
        self.made = 0

    def _change(self, table: str, uuid: str, value: int | None) -> None:
        if value is None:
            del self.db[table, uuid]
        else:
            self.db[table, uuid] = value
        self.stream.append((table, uuid, None if value is None else {"v": value}))

    @rule(table=TABLE, value=st.integers(-3, 3))
    def create(self, table: str, value: int) -> None:
        self.made += 1
        self._change(table, str(uuidlib.UUID(int=self.made)), value)

    @precondition(lambda self: self.db)
    @rule(data=st.data(), value=st.integers(-3, 3))
    def modify(self, data: st.DataObject, value: int) -> None:
        table, uuid = data.draw(st.sampled_from(sorted(self.db)))
        self._change(table, uuid, value)

    @precondition(lambda self: self.db)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        table, uuid = data.draw(st.sampled_from(sorted(self.db)))
        self._change(table, uuid, None)

    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        """The first changes made reach the feed (one poll of the replica)."""
        count = data.draw(st.integers(0, len(self.stream)))
        delivered, self.stream = self.stream[:count], self.stream[count:]
        self.feed.note(delivered, self.reads)
        for table, uuid, row in delivered:
            if row is None:
                self.seen.pop((table, uuid), None)
            else:
                self.seen[table, uuid] = row["v"]

    @rule(table=TABLE)
    def delete_never_seen(self, table: str) -> None:
        """A deletion of a row the feed never heard of (a row inserted and deleted on a
        connection before this one, as a staged read may tell it)."""
        self.feed.note([(table, str(uuidlib.uuid4()), None)], self.reads)

    @rule(data=st.data())
    def reconnect(self, data: st.DataObject) -> None:
        """The connection is lost: what it had not delivered is lost with it; the next one
        reads every row (in any order), then delivers the changes after."""
        self.stream = []
        self.reads += 1
        rows = data.draw(st.permutations(sorted(self.db.items())))
        self.feed.note([(t, u, {"v": v}) for (t, u), v in rows], self.reads)
        self.seen = dict(self.db)

    @rule()
    def commit(self) -> None:
        with self.program.transaction() as txn:
            taken = self.feed.take(txn)
            txn.commit()
        self.feed.committed(taken)
        want: dict[str, set[Any]] = {name: set() for name in PURE_TABLES}
        for (table, uuid), value in self.seen.items():
            want[table].add((uuid, value))
        assert engine_rows(self.program, PURE_TABLES) == want
        assert self.feed.pending() == 0

    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        """The engine transaction fails after the feed wrote into it: the controller
        reads the config DB again (`LogicalController._compute`)."""
        txn = self.program.transaction()
        self.feed.take(txn)
        txn.rollback()  # (what a refused commit leaves: nothing applied)
        self.reconnect(data)

    @invariant()
    def held_is_the_engine(self) -> None:
        rows = engine_rows(self.program, PURE_TABLES)
        assert self.feed.held == {
            name: {pack_uuid(uuid) for uuid, _ in found} for name, found in rows.items()
        }


def test_feed_machine() -> None:
    run_state_machine_as_test(
        FeedMachine, settings=settings(max_examples=300, stateful_step_count=40, deadline=None)
    )


# ---- against a real ovsdb-server ----

DB_COLUMNS = {"Transport_Zone": ["name", "encap"], "Logical_Switch": ["name", "tunnel_key"]}
DB_TABLES = schema_tables(schema_path(CONFIG_SCHEMA), DB_COLUMNS)
ENCAPS = ("geneve", "vxlan", "stt")


class DatabaseMachine(RuleBasedStateMachine):
    """Writes to a real config DB, read by a staged, unkept `Replica` as the logical
    controller reads it (and fed as it feeds it: `ConfigFeed.note` with the replica's
    `reads`). Every write bumps `Loom_Global.generation` (a kept table), so a pass can
    wait until the replica has every write; a pass that does not wait feeds whatever
    arrived. Re-reads are a closed connection, and staged reads with writes committed
    between two tables' reads."""

    config: OvsdbServer

    def __init__(self) -> None:
        super().__init__()
        self.conn = RawConnection(self.config.remote, timeout=30)
        self.program = Program.compile(
            "".join(t.declaration() for t in DB_TABLES.values()), "config.dl"
        )
        self.feed = ConfigFeed(DB_TABLES)
        self.generation = 0
        self.made = 0
        self.meddle: list[dict[str, Any]] | None = None
        """Writes to commit during the next staged read, before its second table's."""
        self.replica = Replica(
            self.config.remote, "Loom_Config",
            {**DB_COLUMNS, "Loom_Global": ["generation"]},
            unkept=frozenset(DB_COLUMNS), staged=True, connect=self._connect,
        )  # fmt: skip

    @initialize()
    def empty(self) -> None:
        ops: list[dict[str, Any]] = [{"op": "delete", "table": t, "where": []} for t in DB_COLUMNS]
        ops.append({"op": "delete", "table": "Loom_Global", "where": []})
        ops.append({"op": "insert", "table": "Loom_Global", "row": {"generation": 0}})
        self.conn.transact("Loom_Config", ops)

    def teardown(self) -> None:
        self.replica.close()
        self.conn.close()

    def _connect(self) -> RawConnection:
        machine = self

        class Meddling(RawConnection):
            def call_noting(self, method: str, params: list[Any]) -> tuple[Any, list[Any]]:
                if params[1] == ["initial", "Logical_Switch"] and machine.meddle is not None:
                    ops, machine.meddle = machine.meddle, None
                    machine.write(ops)
                return super().call_noting(method, params)

        return Meddling(self.config.remote, db="Loom_Config")

    def write(self, ops: list[dict[str, Any]]) -> None:
        self.generation += 1
        bump = {"op": "update", "table": "Loom_Global", "where": [],
                "row": {"generation": self.generation}}  # fmt: skip
        self.conn.transact("Loom_Config", [*ops, bump])

    def _new(self, table: str, value: int) -> dict[str, Any]:
        self.made += 1
        if table == "Transport_Zone":
            row: dict[str, Any] = {
                "name": f"tz{self.made}",
                "encap": ENCAPS[value % 3],
                "revision": 1,
            }
        else:
            row = {"name": f"ls{value}", "tenant": "t", "tunnel_key": self.made,
                   "revision": 1, "replication_mode": "source"}  # fmt: skip
        return {"op": "insert", "table": table, "row": row}

    def _rows(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The DB's rows of the fed tables, by table and uuid."""
        ops = [{"op": "select", "table": t, "where": [], "columns": ["_uuid", *c]}
               for t, c in DB_COLUMNS.items()]  # fmt: skip
        results = self.conn.transact("Loom_Config", ops)
        return {
            table: {row.pop("_uuid")[1]: row for row in result["rows"]}
            for table, result in zip(DB_COLUMNS, results, strict=True)
        }

    def _pick(self, data: st.DataObject) -> tuple[str, str] | None:
        rows = self._rows()
        found = sorted((t, u) for t, r in rows.items() for u in r)
        return data.draw(st.sampled_from(found)) if found else None

    @rule(table=st.sampled_from(sorted(DB_COLUMNS)), value=st.integers(0, 5))
    def create(self, table: str, value: int) -> None:
        self.write([self._new(table, value)])

    @rule(table=st.sampled_from(sorted(DB_COLUMNS)), value=st.integers(0, 5))
    def create_and_delete(self, table: str, value: int) -> None:
        """A row that comes and goes in two transactions (the writer of issue 41)."""
        self.write([self._new(table, value)])
        column, key = ("tunnel_key", self.made) if table == "Logical_Switch" else (
            "name", f"tz{self.made}")  # fmt: skip
        self.write([{"op": "delete", "table": table, "where": [[column, "==", key]]}])

    @rule(data=st.data(), value=st.integers(0, 5))
    def modify(self, data: st.DataObject, value: int) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        table, uuid = picked
        row = {"encap": ENCAPS[value % 3]} if table == "Transport_Zone" else {"name": f"m{value}"}
        self.write([{"op": "update", "table": table, "where": [["_uuid", "==", ["uuid", uuid]]],
                     "row": row}])  # fmt: skip

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        picked = self._pick(data)
        if picked is not None:
            table, uuid = picked
            self.write([{"op": "delete", "table": table,
                         "where": [["_uuid", "==", ["uuid", uuid]]]}])  # fmt: skip

    @rule()
    def lose_connection(self) -> None:
        self.replica.close()

    @rule(table=st.sampled_from(sorted(DB_COLUMNS)), value=st.integers(0, 5),
          data=st.data())  # fmt: skip
    def lose_connection_and_write_during_the_read(
        self, table: str, value: int, data: st.DataObject
    ) -> None:
        """The next read commits writes between its tables' reads: a zone created and one
        deleted after the zones were read, before the switches are."""
        self.replica.close()
        ops = [self._new(table, value)]
        picked = self._pick(data)
        if picked is not None:
            ops.append({"op": "delete", "table": picked[0],
                        "where": [["_uuid", "==", ["uuid", picked[1]]]]})  # fmt: skip
        self.meddle = ops

    def _sync(self) -> None:
        if self.replica.conn is None:
            self.feed.note(self.replica.start(), self.replica.reads)
        self.feed.note(self.replica.poll(), self.replica.reads)

    def _commit(self) -> None:
        with self.program.transaction() as txn:
            taken = self.feed.take(txn)
            txn.commit()
        self.feed.committed(taken)

    @rule()
    def pass_without_waiting(self) -> None:
        """A pass on whatever has arrived."""
        self._sync()
        self._commit()

    @rule()
    def pass_with_every_write(self) -> None:
        """A pass once the replica has every write: the engine holds what the DB holds."""

        def caught_up() -> bool:
            self._sync()
            rows = list(self.replica.rows["Loom_Global"].values())
            return bool(rows) and rows[0]["generation"] == self.generation

        wait_for(caught_up, 10, f"the replica to read generation {self.generation}")
        self._commit()
        want = {
            table: {DB_TABLES[table].json_tuple(uuid, row) for uuid, row in rows.items()}
            for table, rows in self._rows().items()
        }
        assert engine_rows(self.program, DB_TABLES) == want

    @invariant()
    def held_is_the_engine(self) -> None:
        rows = engine_rows(self.program, DB_TABLES)
        assert self.feed.held == {
            name: {pack_uuid(row[0]) for row in found} for name, found in rows.items()
        }


@pytest.mark.ovs
@pytest.mark.timeout(600)
def test_database_machine(config_db: OvsdbServer) -> None:
    machine: type[DatabaseMachine] = type("Bound", (DatabaseMachine,), {"config": config_db})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


@pytest.mark.ovs
@pytest.mark.timeout(120)
def test_a_refused_transaction_makes_the_controller_read_the_config_again(
    controller: LogicalController,
    admin: ApiClient,
    config_db: OvsdbServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An engine transaction that fails takes the config rows it was given with it: the
    controller reads the config DB again, and the engine then holds what the DB holds (the
    port deleted in the lost transaction is gone, the one created is there)."""
    sw = admin.create("/api/v1/logical-switches", {"name": "sw", "tenant": "t"})["id"]
    ports: list[str] = []

    def create_port(name: str) -> int:
        response = admin.post(f"/api/v1/logical-switches/{sw}/ports", {"name": name})
        assert response.status_code == 201, response.get_json()
        ports.append(response.get_json()["id"])
        return int(response.headers["X-Loom-Config-Generation"])

    generation = max(create_port(f"p{i}") for i in range(3))
    assert controller.wait_generation(generation, 30) >= generation

    commit = Transaction.commit
    refusals = [1]

    def refused_once(txn: Transaction) -> Any:
        if refusals[0]:
            refusals[0] -= 1
            txn.rollback()
            raise EngineError("refused (the test)")
        return commit(txn)

    monkeypatch.setattr(Transaction, "commit", refused_once)
    caplog.set_level(logging.INFO)
    response = admin.delete(f"/api/v1/logical-switches/{sw}/ports/{ports[0]}")
    assert response.status_code == 204
    generation = create_port("p3")
    assert controller.wait_generation(generation, 30) >= generation
    assert refusals == [0]
    assert "the engine refused its input" in caplog.text
    assert "Loom_Config reconnected" in caplog.text

    held = {row[0] for row in controller.config_rows()["Logical_Switch_Port"]}
    assert held == set(ports[1:])
    assert controller.failure is None
