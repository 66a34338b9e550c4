"""A logical controller paused past its ZooKeeper session under write load (issue 41): a
writer creates and deletes ports through the API while the controller process is stopped
(SIGSTOP), so that rows come and go between two of its reads; resumed, it must go on
without a failed pass (it used to crash-loop on `no row with key ... in relation
Logical_Switch_Port`: a port created and deleted while it was stopped reached the engine
as a delete alone), and the universal DB must equal a fresh controller's computation."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from loom_api.testing import ApiClient
from loom_common.ovsdb import OvsdbServer
from loom_common.procs import Daemon
from loom_common.testing import wait_for
from loom_common.zookeeper import ZooKeeperServer
from loom_logical.controller import LogicalController

SESSION = 2.0
Dump = Callable[[str], dict[str, list[dict[str, Any]]]]


class Writer:
    """Creates ports on a few switches through the API and deletes each soon after (the
    oldest of the last few), from a thread of its own, until stopped."""

    def __init__(self, admin: ApiClient, switches: list[str]) -> None:
        self.admin = admin
        self.switches = switches
        self.generation = 0
        self.writes = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="port-writer")

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_writes(self, more: int, timeout: float) -> None:
        """Wait until the writer has made `more` writes more than now."""
        target = self.writes + more
        wait_for(lambda: self.writes >= target or self.error is not None, timeout,
                 f"{more} more writes")  # fmt: skip
        assert self.error is None, self.error

    def _run(self) -> None:
        live: list[tuple[str, str]] = []
        try:
            for i in range(1_000_000):
                if self._stop.is_set():
                    return
                sw = self.switches[i % len(self.switches)]
                response = self.admin.post(f"/api/v1/logical-switches/{sw}/ports", {
                    "mac": f"02:00:00:00:{i // 256 % 256:02x}:{i % 256:02x}",
                    "attachment": {"type": "vif", "vif_id": f"w{i}"},
                })  # fmt: skip
                assert response.status_code == 201, response.get_json()
                live.append((sw, response.get_json()["id"]))
                self._wrote(response)
                if len(live) > 3:
                    old_sw, old = live.pop(0)
                    response = self.admin.delete(f"/api/v1/logical-switches/{old_sw}/ports/{old}")
                    assert response.status_code == 204, response.get_json()
                    self._wrote(response)
        except BaseException as exc:
            self.error = exc

    def _wrote(self, response: Any) -> None:
        self.generation = int(response.headers["X-Loom-Config-Generation"])
        self.writes += 1


@pytest.fixture
def zk_client(zk: ZooKeeperServer) -> Iterator[KazooClient]:
    """A ZooKeeper client for looking at the cluster's nodes, stopped at teardown."""
    client = KazooClient(hosts=zk.hosts)
    client.start(timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def realized(universal: OvsdbServer, dump: Dump) -> int:
    rows = dump(universal.remote).get("Universal_Global", [])
    return int(rows[0]["generation"]) if rows else -1


def flows(tables: dict[str, list[dict[str, Any]]]) -> list[str]:
    return sorted(
        repr(sorted((k, v) for k, v in r.items() if k not in ("_uuid", "_version")))
        for r in tables.get("Universal_Flow", [])
    )


@pytest.mark.ovs
@pytest.mark.zk
@pytest.mark.timeout(180)
def test_a_controller_paused_past_its_session_under_write_load_resumes_cleanly(
    tmp_path: Path,
    zk: ZooKeeperServer,
    zk_client: KazooClient,
    config_db: OvsdbServer,
    universal_db: OvsdbServer,
    universal_db_2: OvsdbServer,
    admin: ApiClient,
    dump: Dump,
) -> None:
    """The only logical controller is stopped twice while ports come and go: past its
    ZooKeeper session (its membership node vanishes; resumed, it joins again and claims its
    shards back), then also past the config DB's inactivity probe (the server drops the
    connection; resumed, it reads the config again)."""
    switches = [admin.create("/api/v1/logical-switches", {"name": f"s{i}", "tenant": "t"})["id"]
                for i in range(3)]  # fmt: skip
    name = "lc1"
    proc = Daemon(
        name,
        [sys.executable, "-m", "loom_logical", "--name", name,
         "--config-db", config_db.remote, "--universal-db", universal_db.remote,
         "--zookeeper", zk.hosts, "--session-timeout", str(SESSION)],
        tmp_path / name,
    )  # fmt: skip
    member = f"/loom/logical/members/{name}"
    probe_drops = "no response to inactivity probe"
    try:
        proc.start(ready=lambda: zk_client.exists(member) is not None)
        with Writer(admin, switches) as writer:
            writer.wait_writes(10, 30)
            before = writer.generation
            wait_for(lambda: realized(universal_db, dump) >= before, 30,
                     "realization before the pauses")  # fmt: skip
            for past_probe in (False, True):
                assert proc.pid is not None
                os.kill(proc.pid, signal.SIGSTOP)
                try:
                    wait_for(lambda: zk_client.exists(member) is None, SESSION * 5,
                             "the paused controller's session to expire")  # fmt: skip
                    writer.wait_writes(30, 30)
                    if past_probe:
                        wait_for(lambda: probe_drops in config_db.log_path.read_text(), 30,
                                 "the config DB to drop the paused controller")  # fmt: skip
                        writer.wait_writes(10, 30)
                finally:
                    os.kill(proc.pid, signal.SIGCONT)
                proc.wait_until(lambda: zk_client.exists(member) is not None, 30,
                                what="back in the cluster")  # fmt: skip
                writer.wait_writes(10, 30)
        assert writer.error is None, writer.error
        generation = writer.generation
        proc.wait_until(lambda: realized(universal_db, dump) >= generation, 60,
                        what=f"realized generation {generation}")  # fmt: skip
        after = dump(universal_db.remote)
        assert proc.running
    finally:
        proc.stop()
    log_text = proc.log_path.read_text()
    assert "pass failed" not in log_text, proc.log_tail(60)
    assert "Loom_Config reconnected" in log_text  # the second pause cost the connection

    fresh = LogicalController(config_db.remote, universal_db_2.remote, name="fresh").start()
    try:
        assert fresh.wait_generation(generation, 30) >= generation
        recomputed = dump(universal_db_2.remote)
    finally:
        fresh.stop()
    assert flows(after) == flows(recomputed)
    ports = sorted(r["logical_port"] for r in after.get("Port_Binding", []))
    assert ports == sorted(r["logical_port"] for r in recomputed.get("Port_Binding", []))
