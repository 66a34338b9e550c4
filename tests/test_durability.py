"""Durability: kill -9 of the API server, of ovsdb-server, and of one RAFT member loses nothing.

A writer thread creates objects through a real API server process as fast as it can and
records every one the API acknowledged (201). Something is killed with SIGKILL in the middle
of the stream; once it is back, every acknowledged object must be there. While the database
is gone the API answers 503 with a message saying so, and it recovers by itself.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loom_common.ovsdb import OvsdbCluster, OvsdbServer, free_port
from loom_common.procs import Daemon
from loom_common.testing import register_log

pytestmark = pytest.mark.ovs

TOKEN = "durability-token"
WAIT = 60.0


class Api:
    """A `python -m loom_api` process and a tiny JSON client for it."""

    def __init__(self, db_remote: str, state: Path) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "loom_api", "--db", db_remote,
                   "--listen", f"127.0.0.1:{self.port}", "--admin-token", TOKEN]  # fmt: skip
        self.daemon = Daemon("api-server", command, state)

    def start(self) -> Api:
        self.daemon.start(
            ready=lambda: self.status("GET", "/api/v1/health")[0] == 200, timeout=WAIT
        )
        return self

    def status(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send one request; return (status, JSON body), or (0, error) if nobody answered."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            response = conn.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        except (OSError, http.client.HTTPException) as exc:
            return 0, str(exc)
        finally:
            conn.close()


@dataclass
class Writer:
    """Creates transport zones zone-0, zone-1, ... and remembers which were acknowledged."""

    api: Api
    acked: list[str] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)
    """When each acknowledgement arrived (monotonic seconds)."""
    refused: list[tuple[int, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    progress: threading.Condition = field(default_factory=threading.Condition)
    thread: threading.Thread | None = None

    def start(self) -> Writer:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            name = f"zone-{i}"
            i += 1
            status, body = self.api.status("POST", "/api/v1/transport-zones", {"name": name})
            with self.progress:
                if status == 201:
                    self.acked.append(name)
                    self.acked_at.append(time.monotonic())
                else:
                    self.refused.append((status, body))
                self.progress.notify_all()

    def wait_for(self, predicate: Any) -> None:
        """Wait until `predicate(self)` holds (or fail after WAIT seconds)."""
        with self.progress:
            assert self.progress.wait_for(lambda: predicate(self), timeout=WAIT), (
                f"writer stuck: {len(self.acked)} acked, last refusals {self.refused[-3:]}"
            )

    def finish(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(timeout=WAIT)


def stored_zone_names(api: Api) -> set[str]:
    names: set[str] = set()
    cursor = None
    while True:
        path = "/api/v1/transport-zones?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        status, body = api.status("GET", path)
        assert status == 200, body
        names.update(item["name"] for item in body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            return names


@pytest.fixture
def api_on(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A factory starting API servers on a database remote; all stopped at teardown."""
    started: list[Api] = []

    def make(remote: str) -> Api:
        api = Api(remote, tmp_path / f"api{len(started)}")
        register_log(request, api.daemon.log_path)
        started.append(api)
        return api.start()

    yield make
    for api in started:
        api.daemon.stop()


def test_kill9_api_server_loses_no_acknowledged_change(config_db: OvsdbServer, api_on: Any) -> None:
    api = api_on(config_db.remote)
    writer = Writer(api).start()
    writer.wait_for(lambda w: len(w.acked) >= 30)
    api.daemon.kill9()
    writer.finish()
    api.start()
    assert set(writer.acked) <= stored_zone_names(api)


def test_kill9_ovsdb_server_503_then_recovers_without_restart(
    config_db: OvsdbServer, api_on: Any
) -> None:
    api = api_on(config_db.remote)
    writer = Writer(api).start()
    writer.wait_for(lambda w: len(w.acked) >= 30)
    config_db.kill9()
    killed = time.monotonic()
    writer.wait_for(lambda w: any(status == 503 for status, _ in w.refused))
    status, body = api.status("GET", "/api/v1/transport-zones")
    assert status == 503
    assert body["error"] == "database_unavailable"
    assert "configuration database is unreachable" in body["message"]
    health, _ = api.status("GET", "/api/v1/health")
    assert health == 503
    acked_while_down = len(writer.acked)
    config_db.restart()
    restarted = time.monotonic()
    writer.wait_for(lambda w: len(w.acked) >= acked_while_down + 10)
    print(json.dumps({"database_restart_to_first_write_s":
                      round(writer.acked_at[acked_while_down] - restarted, 3),
                      "down_for_s": round(restarted - killed, 3)}))  # fmt: skip
    writer.finish()
    assert api.daemon.running, "the API server must recover without a restart"
    assert set(writer.acked) <= stored_zone_names(api)
    for status, body in writer.refused:
        assert status == 503, (status, body)
        assert body["error"] in {"database_unavailable", "outcome_unknown"}


def test_kill9_cluster_member_loses_no_acknowledged_change(
    config_db_cluster: OvsdbCluster, api_on: Any
) -> None:
    api = api_on(config_db_cluster.remote)
    writer = Writer(api).start()
    writer.wait_for(lambda w: len(w.acked) >= 30)
    leader = next(
        m for m in config_db_cluster.members if "Role: leader" in config_db_cluster.member_status(m)
    )
    leader.kill9()
    killed = time.monotonic()
    before = len(writer.acked)
    writer.wait_for(lambda w: len(w.acked) >= before + 30)
    print(json.dumps({"leader_killed_to_first_write_s":
                      round(writer.acked_at[before] - killed, 3)}))  # fmt: skip
    leader.restart()
    config_db_cluster.wait_member(leader, WAIT)
    writer.finish()
    assert set(writer.acked) <= stored_zone_names(api)
    for status, body in writer.refused:
        assert status == 503, (status, body)
