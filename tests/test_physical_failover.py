"""Physical controller failover with a real ZooKeeper: two controller processes, every node
dialling both (its Manager rows). The nodes are the cluster's shards; each has a master
that writes to it and a hot standby. kill -9 the master of a node carrying a steady stream
of packets: no packet is lost (the dataplane keeps its flows: fail mode secure), the standby
takes the node over within the session timeout plus a tick, reconciles without re-adding a
flow, and goes on realizing changes."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.testing import ApiClient, running_store
from loom_common.ovsdb import OvsdbServer, free_port
from loom_common.procs import Daemon, listens_on
from loom_common.testing import wait_for
from loom_common.zookeeper import ZooKeeperServer
from loom_logical.controller import LogicalController
from loom_ovs import packets
from loom_ovs.sandbox import OvsNode, Sandbox

pytestmark = [pytest.mark.ovs, pytest.mark.zk, pytest.mark.system]

SESSION = 2.0
TOKEN = "admin-secret"


def mac(i: int) -> str:
    return f"50:54:00:00:01:{i:02x}"


def controller(tmp_path: Path, name: str, config: OvsdbServer, universal: OvsdbServer,
               zk: ZooKeeperServer) -> tuple[Daemon, int]:  # fmt: skip
    port = free_port()
    daemon = Daemon(name, [
        sys.executable, "-m", "loom_physical", "--name", name, "--listen",
        f"ptcp:{port}:127.0.0.1", "--universal-db", universal.remote, "--config-db",
        config.remote, "--zookeeper", zk.hosts, "--session-timeout", str(SESSION),
    ], tmp_path / name)  # fmt: skip
    return daemon, port


def start_controllers(tmp_path: Path, config: OvsdbServer, universal: OvsdbServer,
                      zk: ZooKeeperServer, procs: dict[str, Daemon]) -> list[str]:  # fmt: skip
    """Start physical controllers pc1 and pc2, each put in `procs` before it starts (the
    caller stops them); return the manager targets nodes dial."""
    targets = []
    for name in ("pc1", "pc2"):
        daemon, port = controller(tmp_path, name, config, universal, zk)
        procs[name] = daemon
        targets.append(f"tcp:127.0.0.1:{port}")
        daemon.start(ready=_listens(daemon, port), timeout=60)
    return targets


def node_status(api: ApiClient) -> dict[str, dict[str, Any]]:
    items = api.get("/api/v1/transport-nodes").get_json()["items"]
    return {n["name"]: n["status"] for n in items}


@pytest.fixture
def api(config_db: OvsdbServer) -> Iterator[ApiClient]:
    with running_store(config_db.remote) as store:
        app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
        yield ApiClient(app.test_client(), TOKEN)


@pytest.mark.timeout(180)
def test_kill9_master_no_packet_lost(
    tmp_path: Path,
    zk: ZooKeeperServer,
    config_db: OvsdbServer,
    universal_db: OvsdbServer,
    api: ApiClient,
) -> None:
    logical = LogicalController(config_db.remote, universal_db.remote).start()
    procs: dict[str, Daemon] = {}
    try:
        targets = start_controllers(tmp_path, config_db, universal_db, zk, procs)
        with Sandbox(tmp_path / "nodes") as sandbox:
            zone = api.create("/api/v1/transport-zones", {"name": "tz"})["id"]
            for name in ("hv1", "hv2"):
                node = sandbox.add_node(name, targets)
                api.create("/api/v1/transport-nodes", {
                    "name": name, "node_type": "hypervisor", "system_id": name,
                    "transport_zone_ids": [zone],
                    "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})  # fmt: skip
            sw = api.create("/api/v1/logical-switches", {"name": "sw", "tenant": "t"})["id"]
            for i, hv in ((1, "hv1"), (2, "hv2")):
                api.create(f"/api/v1/logical-switches/{sw}/ports", {
                    "name": f"p{i}", "mac": mac(i), "ips": [f"10.0.0.{i}"],
                    "attachment": {"type": "vif", "vif_id": f"vif-{i}"}})  # fmt: skip
                sandbox.nodes[hv].add_vif(f"p{i}", f"vif-{i}", mac(i))
            hv1, hv2 = sandbox.nodes["hv1"], sandbox.nodes["hv2"]
            packet = packets.icmp_echo(mac(1), mac(2), "10.0.0.1", "10.0.0.2")

            def delivered() -> bool:
                before = hv2.tx_packets("p2")
                hv1.receive("p1", packet)
                return _arrived(hv2, "p2", before, 1.0)

            # Ready: both nodes have a master, and packets cross (the mesh follows the VIFs).
            wait_for(lambda: all(s.get("controller") in procs for s in node_status(api).values())
                     and delivered(), 60, "both nodes mastered and forwarding")  # fmt: skip
            victim = node_status(api)["hv1"]["controller"]
            survivor = next(n for n in procs if n != victim)
            before = hv1.flow_ages()

            sent = [0]
            stop = threading.Event()
            start_count = hv2.tx_packets("p2")

            def stream() -> None:
                while not stop.is_set():
                    hv1.receive("p1", packet)
                    sent[0] += 1
                    stop.wait(0.05)

            streamer = threading.Thread(target=stream)
            streamer.start()
            try:
                procs[victim].kill9()
                killed = time.monotonic()
                wait_for(lambda: all(s.get("controller") == survivor
                                     for s in node_status(api).values()),
                         SESSION + 15, "the survivor to master both nodes")  # fmt: skip
                took = time.monotonic() - killed
                print(
                    f"takeover seen in node status {took:.2f}s after kill -9 (session {SESSION}s)"
                )
                time.sleep(0.5)  # the stream runs on a while under the new master
            finally:
                stop.set()
                streamer.join()
            wait_for(lambda: hv2.tx_packets("p2") - start_count >= sent[0], 10,
                     f"all {sent[0]} streamed packets delivered")  # fmt: skip
            assert hv2.tx_packets("p2") - start_count == sent[0]
            after = hv1.flow_ages()
            assert sorted(after) == sorted(before)
            assert [f for f in before if after[f] < before[f]] == []

            # The new master goes on realizing changes: a third port on hv2.
            api.create(f"/api/v1/logical-switches/{sw}/ports", {
                "name": "p3", "mac": mac(3), "ips": ["10.0.0.3"],
                "attachment": {"type": "vif", "vif_id": "vif-3"}})  # fmt: skip
            hv2.add_vif("p3", "vif-3", mac(3))
            third = packets.icmp_echo(mac(1), mac(3), "10.0.0.1", "10.0.0.3")

            def reaches_third() -> bool:
                before = hv2.tx_packets("p3")
                hv1.receive("p1", third)
                return _arrived(hv2, "p3", before, 1.0)

            wait_for(reaches_third, 30, "a port added after the failover to be reachable")
    finally:
        for proc in procs.values():
            proc.stop()
        logical.stop()


def test_a_gateway_services_active_node_follows_it_across_controllers(
    tmp_path: Path,
    zk: ZooKeeperServer,
    config_db: OvsdbServer,
    universal_db: OvsdbServer,
    api: ApiClient,
) -> None:
    """A gateway service on two gateway nodes, each mastered by another controller: its
    `status.active_node` is written by the master of the node it is active on. The active
    node goes (both its daemons stopped): the other node's master names that one; both
    gone: it is cleared; the first back: it takes the service back (preemptive), and its
    master says so."""
    logical = LogicalController(config_db.remote, universal_db.remote).start()
    procs: dict[str, Daemon] = {}
    try:
        targets = start_controllers(tmp_path, config_db, universal_db, zk, procs)
        with Sandbox(tmp_path / "nodes") as sandbox:
            zone = api.create("/api/v1/transport-zones", {"name": "tz"})["id"]
            ids = []
            for name in ("gw1", "gw2"):
                node = sandbox.add_node(name, targets)
                made = api.create("/api/v1/transport-nodes", {
                    "name": name, "node_type": "gateway", "system_id": name,
                    "transport_zone_ids": [zone],
                    "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})  # fmt: skip
                ids.append(made["id"])
            service = api.create("/api/v1/gateway-services", {
                "name": "l2", "type": "l2", "gateway_node_ids": ids})["id"]  # fmt: skip

            def active() -> str | None:
                body = api.get(f"/api/v1/gateway-services/{service}").get_json()
                return body["status"]["active_node"]  # type: ignore[no-any-return]

            def mastered() -> dict[str, str]:
                return {n: s.get("controller", "") for n, s in node_status(api).items()
                        if s.get("connected")}  # fmt: skip

            wait_for(
                lambda: set(mastered().values()) == set(procs) and active() is not None,
                60,
                "each gateway mastered by a controller of its own, the service active",
            )
            first = active()
            assert first in ("gw1", "gw2")
            (second,) = {"gw1", "gw2"} - {first}
            sandbox.nodes[first].stop()
            wait_for(lambda: active() == second, 30, f"active_node {second} (by its master)")
            sandbox.nodes[second].stop()
            wait_for(lambda: active() is None, 30, "active_node cleared: no gateway is left")
            sandbox.nodes[first].start(targets)
            wait_for(lambda: active() == first, 30, f"active_node {first} again (preemptive)")
    finally:
        for proc in procs.values():
            proc.stop()
        logical.stop()


def _listens(daemon: Daemon, port: int) -> Callable[[], bool]:
    return lambda: daemon.pid is not None and listens_on(daemon.pid, port)


def _arrived(node: OvsNode, port: str, before: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.tx_packets(port) > before:
            return True
        time.sleep(0.02)
    return False
