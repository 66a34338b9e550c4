"""A whole deployment as `loom up` runs it, with transport nodes and VMs, in this process.

`Site` starts `loom_common.cli.Deployment` (databases, ZooKeeper, the API server, the
logical and physical controllers, as `loom up` does, each a child process of this one) and
runs `loom_common.supervise.Supervisor` on a thread, as `loom up`'s wait loop does: a daemon
killed here is restarted the way `loom up` would restart it. Transport nodes are a
`loom_ovs.sandbox.Sandbox` (netdev datapath, VMs in network namespaces, as root; dummy
otherwise) dialling every physical controller, registered through the API.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from loom_common.apiclient import Http
from loom_common.cli import UNSUPERVISED, Deployment
from loom_common.ovsdb import free_port
from loom_common.supervise import RestartPolicy, Supervisor
from loom_lab.api_bench import bump_generation
from loom_ovs.sandbox import OvsNode, Sandbox, Vif

TICK = 0.1
"""Seconds between the supervisor's looks (`loom up`'s interval is 0.25 s)."""


class Site:
    """A deployment, its supervisor, its nodes (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        db_cluster: bool = False,
        zookeeper_ensemble: bool = False,
        logical_controllers: int = 2,
        physical_controllers: int = 2,
        session_timeout: float = 4.0,
        datapath: str | None = None,
    ) -> None:
        """Describe the site; `start()` runs it.

        Args:
            root: its files (the deployment's state directory, the nodes).
            db_cluster: a 3-member RAFT config DB.
            zookeeper_ensemble: a 3-member ZooKeeper ensemble.
            logical_controllers: how many logical controllers.
            physical_controllers: how many physical controllers.
            session_timeout: the controllers' ZooKeeper session timeout, seconds.
            datapath: the nodes' datapath (default: netdev as root, else dummy).
        """
        self.token = secrets.token_urlsafe(16)
        self.deployment = Deployment(
            root / "loom", api_port=free_port(), admin_token=self.token, tenant_tokens=[],
            db_cluster=db_cluster, zookeeper_ensemble=zookeeper_ensemble,
            logical_controllers=logical_controllers, physical_controllers=physical_controllers,
            session_timeout=session_timeout, pki_dir=root / "pki",
        )  # fmt: skip
        self.session_timeout = session_timeout
        self.api = Http(self.deployment.api_url, self.token)
        self.sandbox = Sandbox(root / "nodes", datapath=datapath or (
            "netdev" if os.geteuid() == 0 else "dummy"), pki=self.deployment.pki)  # fmt: skip
        self.supervisor = Supervisor(
            self.deployment.processes, lambda name: name not in UNSUPERVISED,
            policy=RestartPolicy(), where=str(self.deployment.state_dir),
        )  # fmt: skip
        self.said: list[str] = []
        """The supervisor's lines."""
        self._stop = threading.Event()
        self._paused = threading.Lock()
        """Held while the harness itself stops and starts daemons (no restarts meanwhile)."""
        self._thread = threading.Thread(target=self._supervise, name="site-supervisor",
                                        daemon=True)  # fmt: skip
        self.zone = ""

    def start(self) -> Site:
        """Start the deployment and its supervisor (stopped again if a step fails)."""
        try:
            self.deployment.start()
            self._thread.start()
            self.supervisor.start_checking()  # the databases' health, as `loom up` checks it
            self.zone = self.api.create("/transport-zones", {"name": "site"})
        except BaseException:
            self.stop()
            raise
        return self

    def _supervise(self) -> None:
        while not self._stop.wait(TICK):
            with self._paused:
                self.said += self.supervisor.tick()

    def stop_daemons(self) -> None:
        """Stop every daemon of the deployment, newest first (the supervisor waits)."""
        self._paused.acquire()
        for proc in reversed(list(self.deployment.processes.values())):
            proc.stop()

    def start_daemons(self) -> dict[str, float]:
        """Start every daemon again on its files and ports: the databases and ZooKeeper in
        order, then the API server and the controllers at once, each waiting for its own
        readiness (as `loom up` starts them); then supervise. Returns the seconds each took
        to be ready."""
        took: dict[str, float] = {}

        def restart(name: str) -> None:
            began = time.monotonic()
            self.deployment.processes[name].restart()
            took[name] = round(time.monotonic() - began, 3)

        try:
            together = [n for n in self.deployment.processes
                        if " controller" in n or n == "API server"]  # fmt: skip
            for name in self.deployment.processes:
                if name not in together:
                    restart(name)
            with ThreadPoolExecutor(max_workers=max(1, len(together))) as pool:
                list(pool.map(restart, together))  # (raises what a restart raised)
        finally:
            self._paused.release()
        return took

    def delete_universal_db(self) -> None:
        """Remove the (stopped) universal DB's file: it starts empty."""
        server = self.process("universal DB")
        assert not server.running, "stop the universal DB first"
        server.db_path.unlink()

    def kill_and_wait_restart(self, names: list[str]) -> None:
        """kill -9 the processes `names` at once; wait until the supervisor restarted each."""
        before = {name: self.supervisor.restarts.get(name, 0) for name in names}
        for name in names:
            self.signal(name, signal.SIGKILL)
        self.wait(lambda: all(self.supervisor.restarts.get(n, 0) > before[n] for n in names),
                  120, f"{', '.join(names)} restarted")  # fmt: skip

    def bump_generation(self) -> None:
        """Count what was written to the config DB behind the API's back as one change."""
        bump_generation(self.deployment.local_db_remote)

    def add_node(self, name: str, *, register: bool = True) -> OvsNode:
        """Start transport node `name` (a hypervisor); register it unless not `register`."""
        node = self.sandbox.add_node(name, self.deployment.manager_targets)
        if not register:
            return node
        self.api.create("/transport-nodes", {
            "name": name, "node_type": "hypervisor", "system_id": name,
            "transport_zone_ids": [self.zone],
            "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})  # fmt: skip
        return node

    def add_vm(self, node: OvsNode, switch: str, name: str, number: int) -> Vif:
        """A VM on `node`, port `name` of `switch` with address 10.8.0.`number`/16."""
        mac = f"50:54:00:08:{number >> 8:02x}:{number & 0xFF:02x}"
        ip = f"10.8.{number >> 8}.{number & 0xFF}"
        self.api.create(f"/logical-switches/{switch}/ports", {
            "name": name, "mac": mac, "ips": [ip],
            "attachment": {"type": "vif", "vif_id": f"vif-{name}"}})  # fmt: skip
        return node.add_vif(name, f"vif-{name}", mac, f"{ip}/16")

    def process(self, name: str) -> Any:
        """The deployment's process `name` ("config DB", "physical controller 1", ...)."""
        return self.deployment.processes[name]

    def pid(self, name: str) -> int:
        """The PID of process `name` (it must be running)."""
        pid = self.process(name).pid
        assert pid is not None, f"{name} is not running"
        return int(pid)

    def signal(self, name: str, signum: int) -> int:
        """Send `signum` to process `name` (a child of this process); return its PID."""
        pid = self.pid(name)
        os.kill(pid, signum)
        return pid

    def controller_names(self, kind: str) -> list[str]:
        """The process names of the `kind` ("logical", "physical") controllers."""
        return [n for n in self.deployment.processes if n.startswith(f"{kind} controller")]

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        """Poll `predicate` until it holds; the seconds it took (AssertionError after
        `timeout`)."""
        began = _now()
        while not predicate():
            assert _now() - began < timeout, f"timed out after {timeout} s waiting for {what}"
            self._stop.wait(0.02)
        return _now() - began

    def stop(self) -> None:
        """Stop the supervisor, the nodes and the deployment (every PID started here)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=60)
        self.supervisor.stop_checking()
        for name in self.deployment.processes:
            pid = getattr(self.deployment.processes[name], "pid", None)
            if pid is not None:  # a process left stopped by a test: let SIGTERM reach it
                os.kill(pid, signal.SIGCONT)
        self.sandbox.stop()
        self.deployment.stop()


def _now() -> float:
    return time.monotonic()
