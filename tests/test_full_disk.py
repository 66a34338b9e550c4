"""A full disk under the config DB: the API answers 503 `storage_full`, and everything comes
back by itself once space returns, standalone and clustered, with no acknowledged write lost.

Each database lives on a small tmpfs made for the test (`loom_common.testing.SmallDisk`,
root only), filled with one file and freed by deleting it, while a real API server process
creates transport zones through it as fast as it can. A standalone ovsdb-server recovers by
itself; the RAFT members fail for good (`loom_common.ovsdb`'s docstring) and are restarted
by the supervisor `loom up` runs, on their health checks (`loom_common.supervise`), once
their filesystem has room again.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loom_common.ovsdb import OvsdbCluster, OvsdbServer, free_port
from loom_common.procs import Daemon
from loom_common.supervise import HealthPolicy, Supervisor
from loom_common.testing import SmallDisk, register_log, wait_for
from loom_schemas import CONFIG_SCHEMA, schema_path

pytestmark = pytest.mark.ovs

TOKEN = "full-disk-token"
WAIT = 60.0
BACK_WITHIN = {"standalone": 5.0, "clustered": 20.0}
"""Seconds from space coming back to the first acknowledged write (bounds; measured below)."""
UNAVAILABLE = {"storage_full", "database_unavailable", "outcome_unknown"}


@dataclass
class Reply:
    status: int
    body: Any
    retry_after: str | None = None


class Client:
    """A tiny JSON client of the API on 127.0.0.1:`port`."""

    def __init__(self, port: int) -> None:
        self.port = port

    def call(self, method: str, path: str, body: Any = None) -> Reply:
        """One request; status 0 if nobody answered."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            response = conn.getresponse()
            data = response.read()
            return Reply(response.status, json.loads(data) if data else None,
                         response.getheader("Retry-After"))  # fmt: skip
        except (OSError, http.client.HTTPException) as exc:
            return Reply(0, str(exc))
        finally:
            conn.close()

    def zone_names(self) -> set[str] | None:
        """Every zone's name; None while the API cannot read (503)."""
        reply = self.call("GET", "/api/v1/transport-zones?limit=1000")
        if reply.status == 503:
            return None
        assert reply.status == 200, reply
        assert reply.body["next_cursor"] is None
        return {item["name"] for item in reply.body["items"]}

    def has_all(self, names: set[str]) -> bool:
        """Whether every one of `names` is stored (False while the API cannot read)."""
        stored = self.zone_names()
        return stored is not None and names <= stored


class Api(Client):
    """A `python -m loom_api` process, and its client."""

    def __init__(self, db_remote: str, state: Path) -> None:
        super().__init__(free_port())
        command = [sys.executable, "-m", "loom_api", "--db", db_remote,
                   "--listen", f"127.0.0.1:{self.port}"]  # fmt: skip
        self.daemon = Daemon("api-server", command, state, env={"LOOM_ADMIN_TOKEN": TOKEN})

    def start(self) -> Api:
        self.daemon.start(ready=lambda: self.call("GET", "/api/v1/health").status == 200,
                          timeout=WAIT)  # fmt: skip
        return self


@dataclass
class Writer:
    """Creates transport zones z-0, z-1, ... and remembers what was acknowledged and
    refused, and when."""

    api: Client
    acked: list[tuple[float, str]] = field(default_factory=list)
    refused: list[tuple[float, Reply]] = field(default_factory=list)
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
            name = f"z-{i}"
            i += 1
            reply = self.api.call("POST", "/api/v1/transport-zones",
                                  {"name": name, "description": "x" * 200})  # fmt: skip
            with self.progress:
                if reply.status == 201:
                    self.acked.append((time.monotonic(), name))
                else:
                    self.refused.append((time.monotonic(), reply))
                self.progress.notify_all()
            if reply.status != 201:
                self.stop.wait(0.05)  # a refused client backs off a little, as any would

    def wait_for(self, what: str, predicate: Any, timeout: float = WAIT) -> None:
        with self.progress:
            assert self.progress.wait_for(lambda: predicate(self), timeout=timeout), (
                f"{what}: {len(self.acked)} acked, last refusals {self.refused[-3:]}"
            )

    def acked_after(self, instant: float) -> list[float]:
        with self.progress:
            return [at for at, _ in self.acked if at > instant]

    def finish(self) -> set[str]:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(timeout=WAIT)
        return {name for _, name in self.acked}


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    assert os.geteuid() == 0, "a full disk is a tmpfs the test mounts: it runs as root"
    with SmallDisk(tmp_path / "disk", "16m") as small:
        yield small


@pytest.fixture
def api_on(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    started: list[Api] = []

    def make(remote: str) -> Api:
        api = Api(remote, tmp_path / "api")
        register_log(request, api.daemon.log_path)
        started.append(api)
        return api.start()

    yield make
    for api in started:
        api.daemon.stop()


def _fill_and_free(
    disk: SmallDisk, writer: Writer, full_for: float, meanwhile: Callable[[], object] = lambda: None
) -> tuple[float, float]:
    """Fill the disk once the writer runs, keep it full `full_for` seconds past the first
    refusal (calling `meanwhile` then), free it; return when it was filled and freed."""
    writer.wait_for("writes before the disk fills", lambda w: len(w.acked) >= 20)
    disk.fill()
    filled = time.monotonic()
    writer.wait_for("a refusal while full", lambda w: any(at > filled for at, _ in w.refused))
    first_refusal = next(at for at, _ in writer.refused if at > filled)
    meanwhile()
    wait_for(lambda: time.monotonic() > first_refusal + full_for, full_for + 5, "the full spell")
    disk.free()
    return filled, time.monotonic()


def _storage_full_refusals(writer: Writer, filled: float, freed: float) -> list[Reply]:
    return [reply for at, reply in writer.refused if filled < at < freed]


@pytest.mark.timeout(180)
def test_standalone_full_disk_503_storage_full_then_recovers_by_itself(
    disk: SmallDisk, api_on: Any, request: pytest.FixtureRequest
) -> None:
    server = OvsdbServer(disk.path / "config-db", schema_path(CONFIG_SCHEMA))
    register_log(request, server.log_path)
    try:
        server.start()
        api = api_on(server.unix_remote)
        writer = Writer(api).start()
        neutron: list[Reply] = []
        filled, freed = _fill_and_free(disk, writer, full_for=3.0, meanwhile=lambda: neutron.append(
            api.call("POST", "/v2.0/networks", {"network": {"name": "n"}})))  # fmt: skip
        assert neutron[0].status == 503, neutron  # the Neutron API says so its own way
        assert neutron[0].body["NeutronError"]["type"] == "ServiceUnavailable"
        assert neutron[0].retry_after == "5"
        while_full = _storage_full_refusals(writer, filled, freed)
        reply = while_full[-1]
        assert reply.status == 503, reply
        assert reply.body["error"] == "storage_full", reply
        assert "No space left on device" in reply.body["message"]
        assert reply.retry_after == "5"
        assert {r.body["error"] for r in while_full} == {"storage_full"}, while_full
        assert api.call("GET", "/api/v1/transport-zones?limit=1").status == 200  # reads go on
        writer.wait_for("writes again after space returned", lambda w: bool(w.acked_after(freed)))
        back = writer.acked_after(freed)[0] - freed
        acked = writer.finish()
        print(json.dumps({"standalone_full_s": round(freed - filled, 2),
                          "refused_while_full": len(while_full),
                          "freed_to_first_write_s": round(back, 3)}))  # fmt: skip
        assert back < BACK_WITHIN["standalone"]
        assert api.has_all(acked)
        server.restart()  # what the server wrote around the failed writes reads back whole
        wait_for(lambda: api.has_all(acked), WAIT, "every acknowledged zone after a restart")
    finally:
        server.stop()


@pytest.mark.timeout(180)
def test_clustered_full_disk_members_restarted_on_health_once_space_returns(
    disk: SmallDisk, api_on: Any, request: pytest.FixtureRequest
) -> None:
    cluster = OvsdbCluster(disk.path / "config-cluster", schema_path(CONFIG_SCHEMA))
    names = {f"config DB member {i}": m for i, m in enumerate(cluster.members)}
    for member in cluster.members:
        register_log(request, member.log_path)
    supervisor = Supervisor(names, lambda name: True, health=HealthPolicy(),
                            where=str(disk.path))  # fmt: skip
    said: list[str] = []
    done = threading.Event()

    def supervise() -> None:  # as `loom up`'s wait loop does
        while not done.wait(0.25):
            said.extend(supervisor.tick())

    ticking = threading.Thread(target=supervise, daemon=True)
    try:
        cluster.start()
        supervisor.start_checking()
        ticking.start()
        api = api_on(cluster.unix_remote)
        writer = Writer(api).start()
        filled, freed = _fill_and_free(disk, writer, full_for=6.0)
        while_full = _storage_full_refusals(writer, filled, freed)
        # The members do not say why they left their cluster: the API cannot tell a full
        # disk from an election, and answers what it knows.
        assert {r.status for r in while_full} == {503}, while_full
        assert {r.body["error"] for r in while_full} <= UNAVAILABLE, while_full
        held = [line for line in said if "a restart waits for" in line]
        assert held, said
        assert not [line for line in said if "restarted (" in line], said
        writer.wait_for("writes again after space returned", lambda w: bool(w.acked_after(freed)))
        back = writer.acked_after(freed)[0] - freed
        acked = writer.finish()
        print(json.dumps({"clustered_full_s": round(freed - filled, 2),
                          "refused_while_full": len(while_full),
                          "errors_while_full": sorted({r.body["error"] for r in while_full}),
                          "freed_to_first_write_s": round(back, 3),
                          "rejoined": sorted(str(torn.relative_to(disk.path)) for torn in
                                             disk.path.glob("*/*/*.torn-*")),
                          "supervisor": said}))  # fmt: skip
        assert back < BACK_WITHIN["clustered"]
        assert [line for line in said if "restarted (" in line], said
        assert api.has_all(acked)
        for member in cluster.members:
            cluster.wait_member(member, WAIT)
    finally:
        done.set()
        if ticking.is_alive():
            ticking.join(timeout=WAIT)
        supervisor.stop_checking()
        cluster.stop()


@pytest.mark.timeout(300)
def test_loom_up_db_cluster_restarts_failed_members_once_space_returns(tmp_path: Path) -> None:
    """The same through `loom up --db-cluster` itself: its wait loop runs the health checks
    and says each step."""
    assert os.geteuid() == 0, "a full disk is a tmpfs the test mounts: it runs as root"
    state = tmp_path / "s"
    port = free_port()
    loom = Path(sys.executable).parent / "loom"
    with SmallDisk(state / "config-db-cluster", "16m") as disk:
        proc = subprocess.Popen(
            [str(loom), "up", "--db-cluster", "--api-port", str(port), "--state-dir", str(state)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "LOOM_ADMIN_TOKEN": TOKEN},
        )  # fmt: skip
        said: list[str] = []
        banner = threading.Event()

        def read() -> None:
            for line in proc.stdout or []:
                said.append(line)
                if "Ctrl-C stops everything." in line:
                    banner.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            # (a loaded machine starts loom up's controllers slowly; it gives up on its own)
            assert banner.wait(3 * WAIT) or proc.poll() is not None, "".join(said)
            assert proc.poll() is None, "".join(said)
            client = Client(port)
            writer = Writer(client).start()
            filled, freed = _fill_and_free(disk, writer, full_for=5.0)
            writer.wait_for("writes again", lambda w: bool(w.acked_after(freed)))
            back = writer.acked_after(freed)[0] - freed
            acked = writer.finish()
            print(json.dumps({"loom_up_full_s": round(freed - filled, 2),
                              "freed_to_first_write_s": round(back, 3)}))  # fmt: skip
            assert back < BACK_WITHIN["clustered"]
            assert client.has_all(acked)

            def told() -> bool:
                text = "".join(said)
                return "; restarting it once that passes" in text and bool(
                    re.search(r"loom: config DB member \d restarted \(", text))  # fmt: skip

            wait_for(told, 10, "loom up's lines: the members held, then restarted")
            assert proc.poll() is None, "".join(said)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # loom up stops what it started, by PID
            proc.wait(timeout=60)
            reader.join(timeout=10)  # it reads to the end of loom up's output
            assert proc.stdout is not None
            proc.stdout.close()
    assert proc.returncode == 0, "".join(said)  # Ctrl-C stopped it, health checks and all
    assert "Loom stopped." in "".join(said)
