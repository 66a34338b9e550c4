"""The config store: one generation per write, all-or-nothing writes, 503 and recovery.

Runs the `Store` and the API on a real ovsdb-server, which the `config_db` fixture can kill
(SIGKILL) and restart on the same file and port while the store keeps running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from loom_api import errors
from loom_api.store import ReadView, Store, WriteView
from loom_schemas import CONFIG_SCHEMA, schema_path

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient
    from loom_common.ovsdb import OvsdbServer

pytestmark = pytest.mark.ovs

API = "/api/v1"
SWITCHES = f"{API}/logical-switches"
PROFILES = f"{API}/security-profiles"
TIMEOUT = 15.0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Wait until `condition()` holds (polling a state, with a deadline), else fail."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def store_schema() -> str:
    return str(schema_path(CONFIG_SCHEMA))


def generation(store: Store) -> int:
    return store.read(lambda view: view.generation())


def count(store: Store, table: str) -> int:
    return store.read(lambda view: view.count(table))


def insert_zone(name: str) -> Callable[[WriteView], Any]:
    def write(view: WriteView) -> Any:
        return view.insert("Transport_Zone", name=name, encap="geneve", revision=1)

    return write


# ---- generations ---------------------------------------------------------------------------


def test_generation_starts_at_zero_and_counts_writes(store: Store) -> None:
    assert generation(store) == 0
    first = store.write(insert_zone("a"))
    second = store.write(insert_zone("b"))
    assert (first.generation, second.generation) == (1, 2)
    assert generation(store) == 2


def test_one_generation_per_write_however_many_rows(store: Store, admin: ApiClient) -> None:
    before = generation(store)
    rules = [{"direction": "ingress", "protocol": "tcp", "port_range_min": p} for p in (22, 80)]
    response = admin.post(PROFILES, {"name": "web", "rules": rules})
    assert response.status_code == 201
    assert int(response.headers["X-Loom-Config-Generation"]) == before + 1
    assert generation(store) == before + 1
    assert count(store, "Security_Rule") == 2


def test_committed_ids_are_real(store: Store) -> None:
    committed = store.write(insert_zone("z"))
    key = committed.real_id(committed.result)

    def name(view: ReadView) -> str:
        row = view.get("Transport_Zone", key)
        assert row is not None
        return str(row.name)

    assert store.read(name) == "z"


# ---- nothing written on failure ---------------------------------------------------------------


def test_an_exception_in_the_write_writes_nothing(store: Store) -> None:
    store.write(insert_zone("kept"))
    before = generation(store)

    def half_then_fail(view: WriteView) -> None:
        insert_zone("lost")(view)
        raise errors.ValidationFailed(field="name", detail="no")

    with pytest.raises(errors.ValidationFailed):
        store.write(half_then_fail)
    assert generation(store) == before
    assert store.read(lambda view: sorted(r.name for r in view.rows("Transport_Zone"))) == ["kept"]


def test_a_refused_api_request_writes_nothing(store: Store, admin: ApiClient) -> None:
    admin.create(SWITCHES, {})
    before = generation(store)
    rules = [
        {"direction": "ingress", "protocol": "tcp"},  # inserted first, then ...
        {"direction": "ingress", "remote_prefix": "10.0.0.1/8"},  # ... this one is refused
    ]
    response = admin.post(PROFILES, {"name": "web", "rules": rules})
    assert response.status_code == 400
    rules[1] = {"direction": "ingress", "remote_profile_id": "00000000-0000-0000-0000-000000000000"}
    response = admin.post(PROFILES, {"name": "web", "rules": rules})
    assert response.status_code == 400
    assert response.get_json()["field"] == "rules.1.remote_profile_id"
    assert generation(store) == before
    assert count(store, "Security_Profile") == 0
    assert count(store, "Security_Rule") == 0


def test_a_database_constraint_is_409_and_writes_nothing(store: Store) -> None:
    store.write(insert_zone("dup"))
    before = generation(store)
    with pytest.raises(errors.Conflict) as raised:
        store.write(insert_zone("dup"))  # the schema's unique index on name
    assert raised.value.status == 409
    assert generation(store) == before
    assert count(store, "Transport_Zone") == 1


# ---- the database goes away and comes back ------------------------------------------------------


def test_unavailable_while_the_database_is_down_then_recovers(
    store: Store, admin: ApiClient, config_db: OvsdbServer
) -> None:
    switch = admin.create(SWITCHES, {"name": "before"})
    acknowledged = generation(store)

    config_db.kill9()
    wait_for(lambda: not store.connected, "the store to notice the database is gone")

    listed = admin.get(SWITCHES)
    assert listed.status_code == 503
    assert listed.get_json()["error"] == "database_unavailable"
    created = admin.post(SWITCHES, {"name": "during"})
    assert created.status_code == 503
    assert created.get_json()["error"] in {"database_unavailable", "outcome_unknown"}
    health = admin.get(f"{API}/health")
    assert (health.status_code, health.get_json()["status"]) == (503, "degraded")
    assert admin.get(f"{API}/status").status_code == 503
    with pytest.raises(errors.Unavailable):
        store.read(lambda view: view.generation())

    config_db.restart()
    assert store.wait_connected(TIMEOUT), "the store did not reconnect by itself"

    assert admin.get(f"{API}/health").status_code == 200
    names = {s["name"] for s in admin.get(SWITCHES).get_json()["items"]}
    assert names == {"before"}  # the acknowledged change survived; the refused one never was
    assert admin.get(f"{SWITCHES}/{switch['id']}").status_code == 200
    after = admin.post(SWITCHES, {"name": "after"})
    assert after.status_code == 201
    assert int(after.headers["X-Loom-Config-Generation"]) == acknowledged + 1


def test_write_while_down_is_refused_not_queued(store: Store, config_db: OvsdbServer) -> None:
    config_db.kill9()
    wait_for(lambda: not store.connected, "the store to notice the database is gone")
    with pytest.raises(errors.Unavailable):
        store.write(insert_zone("never"))
    config_db.restart()
    assert store.wait_connected(TIMEOUT)
    assert count(store, "Transport_Zone") == 0
    assert generation(store) == 0


def test_read_view_is_consistent(store: Store) -> None:
    store.write(insert_zone("a"))

    def snapshot(view: ReadView) -> tuple[int, int]:
        return view.generation(), view.count("Transport_Zone")

    assert store.read(snapshot) == (1, 1)


def test_the_first_read_is_a_table_at_a_time(
    store: Store, admin: ApiClient, config_db: OvsdbServer
) -> None:
    """A store started on a populated database reads it one table at a time (each widened
    only once the one before is in), counts as connected only when all are read, and
    then holds every row."""
    switch = admin.create(SWITCHES, {"name": "s"})
    for i in range(3):
        admin.create(f"{SWITCHES}/{switch['id']}/ports", {"name": f"p{i}"})
    admin.create(PROFILES, {"name": "web", "rules": [{"direction": "ingress"}]})
    tables = ("Logical_Switch", "Logical_Switch_Port", "Security_Profile", "Security_Rule")
    expected = {t: count(store, t) for t in tables}
    assert all(expected.values())

    second = Store(config_db.remote, store_schema(), reconnect_grace=0.5, timeout=5.0)
    idl = second._idl
    widened: list[tuple[str, list[str]]] = []  # (table, the tables read before it)
    change = idl.cond_change

    def recorded(table: str, cond: list[Any]) -> int:
        if cond == [True]:
            read = [t for t, v in idl.tables.items() if v.condition_state.acked == [True]]
            widened.append((table, read))
            assert not second.connected
        return int(change(table, cond))

    idl.cond_change = recorded
    second.start()
    try:
        assert second.wait_connected(TIMEOUT)
        assert {t: count(second, t) for t in tables} == expected
        order = [t for t, _ in widened]
        assert sorted(order) == sorted(t for t in idl.tables if t != "Loom_Global")
        for i, (_table, read) in enumerate(widened):
            assert sorted(read) == sorted(["Loom_Global", *order[:i]])
    finally:
        second.stop()


def test_parent_and_children_deleted_in_one_write(store: Store, admin: ApiClient) -> None:
    switch = admin.create("/api/v1/logical-switches", {"name": "doomed"})
    for i in range(3):
        admin.create(f"/api/v1/logical-switches/{switch['id']}/ports", {"name": f"p{i}"})

    def delete_all(view: WriteView) -> None:
        for port in list(view.rows("Logical_Switch_Port")):
            view.delete(port)
        for row in list(view.rows("Logical_Switch")):
            view.delete(row)

    before = generation(store)
    assert store.write(delete_all).generation == before + 1
    assert count(store, "Logical_Switch_Port") == 0
    assert count(store, "Logical_Switch") == 0
    again = admin.create("/api/v1/logical-switches", {"name": "after"})
    port = admin.create(f"/api/v1/logical-switches/{again['id']}/ports", {"name": "p"})
    assert port["port_key"] == 1


def test_a_write_that_changes_nothing_keeps_the_generation(store: Store) -> None:
    store.write(insert_zone("first"))
    before = generation(store)
    assert store.write(lambda view: None).generation == before
    assert generation(store) == before
