"""Controllers outlive their databases' and ZooKeeper's restarts.

Both controllers run as their own processes, as `loom up` runs them (each a one-member
cluster in ZooKeeper), with two simulated hypervisors dialling the physical controller and a
VM on each. Each test crashes one dependency with SIGKILL, leaves it down for `OUTAGE`
seconds (the fault's length: the controllers try to reconnect meanwhile and fail), and starts
it again on its own files: the config DB (standalone, or the RAFT leader of a 3-member
cluster), the universal DB, ZooKeeper. Quietly, or while a writer creates ports through the
API. Afterwards a port made after the restart must become reachable from the other
hypervisor's VM, every generation the API acknowledged must be realized on the nodes, both
controller processes must still run, and their logs must say the connection was lost and
came back.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.store import Store
from loom_api.testing import ApiClient, running_store
from loom_common.cluster import membership
from loom_common.liveness import LEASE_S
from loom_common.ovsdb import OvsdbCluster, OvsdbServer, free_port
from loom_common.procs import Daemon, listens_on
from loom_common.testing import register_log, wait_for
from loom_common.zookeeper import ZooKeeperServer
from loom_logical.controller import LogicalController
from loom_ovs import packets
from loom_ovs.sandbox import OvsNode, Sandbox
from loom_physical.controller import PhysicalController
from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

pytestmark = [pytest.mark.ovs, pytest.mark.zk, pytest.mark.system]

TOKEN = "admin-secret"
OUTAGE = 1.5
"""Seconds a crashed dependency stays down before it is started again."""
SESSION = 4.0
"""The controllers' ZooKeeper session timeout (a ZooKeeper outage shorter than this keeps
their sessions; the test's is shorter)."""
WAIT = 60.0


def mac(i: int) -> str:
    return f"50:54:00:00:02:{i:02x}"


@dataclass
class Site:
    """A running deployment: the API (in-process), the controller processes, two nodes."""

    api: ApiClient
    store: Store
    config: OvsdbServer | OvsdbCluster
    universal: OvsdbServer
    zk: ZooKeeperServer
    controllers: dict[str, Daemon]
    hv1: OvsNode
    hv2: OvsNode
    switch: str
    ports: int = 2

    def add_port(self, node: OvsNode) -> str:
        """A new port on the switch, its VM on `node`; return the VM's port name."""
        self.ports += 1
        i = self.ports
        self.api.create(f"/api/v1/logical-switches/{self.switch}/ports", {
            "name": f"p{i}", "mac": mac(i), "ips": [f"10.0.0.{i}"],
            "attachment": {"type": "vif", "vif_id": f"vif-{i}"}})  # fmt: skip
        node.add_vif(f"p{i}", f"vif-{i}", mac(i))
        return f"p{i}"

    def reachable(self, port: str, timeout: float = WAIT) -> None:
        """Wait until a packet from hv1's VM p1 reaches `port` on hv2."""
        i = int(port[1:])
        packet = packets.icmp_echo(mac(1), mac(i), "10.0.0.1", f"10.0.0.{i}")

        def delivered() -> bool:
            before = self.hv2.tx_packets(port)
            self.hv1.receive("p1", packet)
            return _arrived(self.hv2, port, before, 0.5)

        wait_for(delivered, timeout, f"a packet from p1 on hv1 to reach {port} on hv2")

    def generation(self) -> int:
        return int(self.api.get("/api/v1/status").get_json()["config_generation"])

    def realized(self, generation: int, timeout: float = WAIT) -> None:
        def done() -> bool:
            body = self.api.get(f"/api/v1/realization?generation={generation}").get_json()
            return bool(body["realized"])

        wait_for(done, timeout, f"generation {generation} realized on the nodes")


def _arrived(node: OvsNode, port: str, before: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.tx_packets(port) > before:
            return True
        time.sleep(0.02)
    return False


def _controllers(
    tmp_path: Path, config_remote: str, universal: OvsdbServer, zk: ZooKeeperServer,
    request: pytest.FixtureRequest,
) -> tuple[dict[str, Daemon], str]:  # fmt: skip
    """The logical and physical controller processes (not started); the manager target."""
    port = free_port()
    common = ["--zookeeper", zk.hosts, "--session-timeout", str(SESSION)]
    logical = Daemon("logical", [
        sys.executable, "-m", "loom_logical", "--name", "logical-0", "--config-db",
        config_remote, "--universal-db", universal.remote, *common,
    ], tmp_path / "logical")  # fmt: skip
    physical = Daemon("physical", [
        sys.executable, "-m", "loom_physical", "--name", "physical-0", "--listen",
        f"ptcp:{port}:127.0.0.1", "--universal-db", universal.remote, "--config-db",
        config_remote, *common,
    ], tmp_path / "physical")  # fmt: skip
    for daemon in (logical, physical):
        register_log(request, daemon.log_path)
    return {"logical": logical, "physical": physical}, f"tcp:127.0.0.1:{port}"


@pytest.fixture
def site(request: pytest.FixtureRequest, tmp_path: Path, zk: ZooKeeperServer) -> Iterator[Site]:
    """The deployment, its config DB standalone or a 3-member RAFT cluster; all stopped at
    teardown, even on failure."""
    config: OvsdbServer | OvsdbCluster
    if request.param == "raft":
        config = OvsdbCluster(tmp_path / "config", schema_path(CONFIG_SCHEMA))
        for member in config.members:
            register_log(request, member.log_path)
    else:
        config = OvsdbServer(tmp_path / "config", schema_path(CONFIG_SCHEMA))
        register_log(request, config.log_path)
    universal = OvsdbServer(tmp_path / "universal", schema_path(UNIVERSAL_SCHEMA), name="u")
    register_log(request, universal.log_path)
    controllers, target = _controllers(tmp_path, config.remote, universal, zk, request)
    try:
        config.start()
        universal.start()
        controllers["logical"].start()
        physical = controllers["physical"]
        port = int(target.rpartition(":")[2])
        physical.start(ready=lambda: physical.pid is not None and listens_on(physical.pid, port),
                       timeout=WAIT)  # fmt: skip
        with running_store(config.remote) as store, Sandbox(tmp_path / "nodes") as sandbox:
            app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
            api = ApiClient(app.test_client(), TOKEN)
            zone = api.create("/api/v1/transport-zones", {"name": "tz"})["id"]
            nodes = []
            for name in ("hv1", "hv2"):
                node = sandbox.add_node(name, [target])
                api.create("/api/v1/transport-nodes", {
                    "name": name, "node_type": "hypervisor", "system_id": name,
                    "transport_zone_ids": [zone],
                    "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})  # fmt: skip
                nodes.append(node)
            sw = api.create("/api/v1/logical-switches", {"name": "sw", "tenant": "t"})["id"]
            hv1, hv2 = nodes
            for i, node in ((1, hv1), (2, hv2)):
                api.create(f"/api/v1/logical-switches/{sw}/ports", {
                    "name": f"p{i}", "mac": mac(i), "ips": [f"10.0.0.{i}"],
                    "attachment": {"type": "vif", "vif_id": f"vif-{i}"}})  # fmt: skip
                node.add_vif(f"p{i}", f"vif-{i}", mac(i))
            deployment = Site(api, store, config, universal, zk, controllers, hv1, hv2, sw)
            deployment.reachable("p2")
            yield deployment
    finally:
        for daemon in controllers.values():
            daemon.stop()
        universal.stop()
        config.stop()


@dataclass
class PortWriter:
    """Creates ports (without VMs) through the API until stopped; keeps the generations the
    API acknowledged. Refusals while the database is down (503) are expected and counted."""

    site: Site
    acked: list[int] = field(default_factory=list)
    refused: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def __enter__(self) -> PortWriter:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            body = {"name": f"load-{i}", "ips": [f"10.1.{i // 250}.{i % 250 + 1}"]}
            response = self.site.api.post(f"/api/v1/logical-switches/{self.site.switch}/ports",
                                          body)  # fmt: skip
            if response.status_code == 201:
                self.acked.append(int(response.headers["X-Loom-Config-Generation"]))
            else:
                assert response.status_code == 503, response.get_json()
                self.refused += 1

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(WAIT)


def _crash_config(site: Site) -> Callable[[], object]:
    config = site.config
    if isinstance(config, OvsdbCluster):
        leader = config.leader()
        assert leader is not None
        leader.kill9()
        return lambda: config.restart_member(leader)
    config.kill9()
    return config.start


def _crash_universal(site: Site) -> Callable[[], object]:
    site.universal.kill9()
    return site.universal.start


def _crash_zookeeper(site: Site) -> Callable[[], object]:
    site.zk.kill9()
    return site.zk.start


CRASHES: dict[str, tuple[Callable[[Site], Callable[[], object]], str]] = {
    "config-db": (_crash_config, "Loom_Config"),
    "universal-db": (_crash_universal, "Loom_Universal"),
    "zookeeper": (_crash_zookeeper, "ZooKeeper"),
}


def _restart(site: Site, target: str, *, load: bool) -> None:
    crash, _ = CRASHES[target]
    writer = PortWriter(site) if load else None
    if writer is not None:
        writer.__enter__()
        wait_for(lambda: len(writer.acked) >= 3, WAIT, "the writer's first ports")
    try:
        start_again = crash(site)
        time.sleep(OUTAGE)  # the fault's length, not a synchronization
        start_again()
        # (the API reconnects by itself: python-ovs's backoff)
        assert site.store.wait_connected(WAIT), "the API did not reconnect"
        if writer is not None:
            acked = len(writer.acked)
            wait_for(lambda: len(writer.acked) >= acked + 3, WAIT, "writes acknowledged again")
    finally:
        if writer is not None:
            writer.__exit__()
    if writer is not None:
        site.realized(max(writer.acked))


def _check_after(site: Site) -> None:
    """A change made now is installed; every acknowledged generation is realized; both
    controllers run and logged the outage."""
    port = site.add_port(site.hv2)
    site.reachable(port)
    site.realized(site.generation())
    for name, daemon in site.controllers.items():
        assert daemon.running, f"{name} controller exited:\n{daemon.log_tail(40)}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("load", [False, True], ids=["quiet", "load"])
@pytest.mark.parametrize(
    ("site", "target"),
    [("standalone", "config-db"), ("raft", "config-db"), ("standalone", "universal-db"),
     ("standalone", "zookeeper")],
    indirect=["site"],
)  # fmt: skip
def test_controllers_survive_a_restart(site: Site, target: str, load: bool) -> None:
    _restart(site, target, load=load)
    _check_after(site)
    if target != "zookeeper" and isinstance(site.config, OvsdbServer):
        # (a RAFT member's clients may be connected to another member: they need not notice)
        db = CRASHES[target][1]
        for name, daemon in site.controllers.items():
            log = daemon.log_path.read_text()
            assert f"{db} connection lost" in log, f"{name} did not notice the outage"
            assert f"{db} reconnected" in log, f"{name} did not say it reconnected"


@pytest.mark.timeout(120)
def test_a_controller_that_cannot_continue_leaves_the_cluster(
    tmp_path: Path,
    zk: ZooKeeperServer,
    config_db: OvsdbServer,
    universal_db: OvsdbServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Passes that keep failing make a controller give up: it leaves its cluster at once (its
    member node goes while its session lives on), and a standby masters its node."""
    fast = (0.01, 0.01)
    logical = LogicalController(config_db.remote, universal_db.remote, name="lc1",
                                zookeeper=zk.hosts, session_timeout=SESSION,
                                retry_delays=fast)  # fmt: skip
    physicals = [
        PhysicalController(universal_db.remote, config_db.remote, name=name,
                           zookeeper=zk.hosts, session_timeout=SESSION, retry_delays=fast)
        for name in ("pc1", "pc2")
    ]  # fmt: skip
    client = membership.connect(zk.hosts)
    try:
        logical.start()
        for physical in physicals:
            physical.start()
        with running_store(config_db.remote) as store, Sandbox(tmp_path / "nodes") as sandbox:
            api = ApiClient(create_app(store, Tokens(admin=TOKEN, tenants={})).test_client(), TOKEN)
            zone = api.create("/api/v1/transport-zones", {"name": "tz"})["id"]
            node = sandbox.add_node("hv1", [p.target for p in physicals])
            api.create("/api/v1/transport-nodes", {
                "name": "hv1", "node_type": "hypervisor", "system_id": "hv1",
                "transport_zone_ids": [zone],
                "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})  # fmt: skip

            def master() -> str | None:
                item = api.get("/api/v1/transport-nodes").get_json()["items"][0]
                controller: str | None = item["status"].get("controller")
                return controller

            wait_for(lambda: master() in ("pc1", "pc2"), WAIT, "hv1 mastered")
            victim = next(p for p in physicals if p.name == master())
            survivor = next(p for p in physicals if p is not victim)

            def boom() -> None:
                raise RuntimeError("a bug that fails every pass")

            for controller in (victim, logical):
                monkeypatch.setattr(controller, "_step", boom)  # (passes run every second)
            wait_for(lambda: victim.failure is not None and logical.failure is not None, WAIT,
                     "both controllers to give up")  # fmt: skip
            assert "a bug that fails every pass" in (victim.failure or "")
            assert victim.ownership.zk_connected, "its session lives on: it left, it did not expire"
            assert client.get_children("/loom/physical/members") == [survivor.name]
            assert client.get_children("/loom/logical/members") == []
            wait_for(lambda: master() == survivor.name, WAIT, "the standby to master hv1")
    finally:
        client.stop()
        client.close()
        for physical in physicals:
            physical.stop()
        logical.stop()


def _nodes_connected(site: Site) -> dict[str, bool]:
    """Each transport node's `connected`, as the API shows it."""
    items = site.api.get("/api/v1/transport-nodes").get_json()["items"]
    return {item["name"]: item["status"]["connected"] for item in items}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("site", ["standalone"], indirect=True)
def test_a_hung_physical_controller_shows_and_its_nodes_keep_forwarding(site: Site) -> None:
    """SIGSTOP of the only physical controller (a hang, longer than its ZooKeeper session):
    its nodes' status says it is gone within the lease, their flows keep forwarding; after
    SIGCONT it masters them again and a change made then is installed."""
    physical = site.controllers["physical"]
    assert physical.pid is not None
    assert _nodes_connected(site) == {"hv1": True, "hv2": True}
    os.kill(physical.pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        wait_for(lambda: _nodes_connected(site) == {"hv1": False, "hv2": False},
                 LEASE_S + 10, "the nodes shown not connected")  # fmt: skip
        shown = time.monotonic() - stopped
        items = site.api.get("/api/v1/transport-nodes").get_json()["items"]
        assert all("physical-0 has not been heard from" in item["status"]["message"]
                   for item in items)  # fmt: skip
        site.reachable("p2", timeout=10)  # the flows stay on the nodes
        wait_for(lambda: time.monotonic() - stopped > SESSION + 1, WAIT, "the session's end")
    finally:
        os.kill(physical.pid, signal.SIGCONT)
    print(f"hung controller -> nodes shown not connected after {shown:.2f} s")
    wait_for(lambda: _nodes_connected(site) == {"hv1": True, "hv2": True}, WAIT,
             "the nodes connected again")  # fmt: skip
    _check_after(site)
