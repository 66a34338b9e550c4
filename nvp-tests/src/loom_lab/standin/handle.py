"""Starting, driving and measuring a fleet of stand-in nodes from another process.

`Fleet(run_dir, nodes, managers).start()` writes the nodes file and runs
`python -m loom_lab.standin` as a supervised child (`loom_common.procs.Daemon`: stopped by
PID with `stop()`, its log in `run_dir/standin.log`); ready once its control socket
answers (every node's rows written, its OpenFlow socket listening, its managers being
dialled). The methods are the control requests of `loom_lab.standin.fleet`, and the
process's CPU seconds and memory read from `/proc`, apart from the controllers'.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from loom_common.errors import LoomError
from loom_common.procs import Daemon
from loom_common.procstat import ProcessUsage
from loom_lab.standin.fleet import NodeSpec


class StandinError(LoomError):
    """The stand-in fleet refused a request or did not answer."""

    message = "stand-in fleet: %(detail)s"


class Fleet:
    """A handle on a stand-in fleet process (see the module docstring)."""

    def __init__(
        self,
        run_dir: Path,
        nodes: Iterable[NodeSpec],
        managers: Iterable[str] = (),
        *,
        probe: float = 5.0,
        dial_rate: float = 0.0,
    ) -> None:
        """Describe the fleet; `start()` runs it.

        Args:
            run_dir: its sockets (`<system-id>.mgmt`, `control.sock`), nodes file and log.
            nodes: the nodes and their VIFs at start.
            managers: the targets every node dials (`tcp:IP:PORT`, `unix:PATH`).
            probe: the manager connections' inactivity probe, seconds (the Manager rows
                say 5).
            dial_rate: nodes per second that first dial their managers, at start and at
                `set_managers` (0: all at once).
        """
        self.run_dir = run_dir.resolve()
        self.nodes = {spec.system_id: spec for spec in nodes}
        self.managers = list(managers)
        self.control_path = self.run_dir / "control.sock"
        self._daemon = Daemon(
            "standin",
            [sys.executable, "-m", "loom_lab.standin", "--dir", str(self.run_dir),
             "--nodes-file", str(self.run_dir / "nodes.json"),
             "--managers", ",".join(self.managers), "--probe", str(probe),
             "--dial-rate", str(dial_rate)],
            self.run_dir,
        )  # fmt: skip
        self._sock: socket.socket | None = None
        self._reader: Any = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The fleet process's PID while it runs."""
        return self._daemon.pid

    @property
    def log_path(self) -> Path:
        """The fleet process's log."""
        return self._daemon.log_path

    def openflow(self, node: str) -> str:
        """Where node `node` takes OpenFlow (its `external_ids:loom-openflow`)."""
        return f"unix:{self.run_dir / f'{node}.mgmt'}"

    def start(self, timeout: float = 120.0) -> Fleet:
        """Run the fleet; return once its control socket answers.

        Raises:
            loom_common.procs.DaemonError: it exited or did not answer within `timeout`.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "nodes.json").write_text(
            json.dumps([spec.to_json() for spec in self.nodes.values()])
        )
        self._daemon.start(ready=self._answers, timeout=timeout)
        return self

    def _answers(self) -> bool:
        if not self.control_path.exists():
            return False
        try:
            self.request({"ping": True})
        except (OSError, StandinError):
            self._disconnect()
            return False
        return True

    def stop(self) -> None:
        """Stop the fleet process (SIGTERM, then SIGKILL)."""
        self._disconnect()
        self._daemon.stop()

    def _disconnect(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._reader = None

    def request(self, message: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        """Send one control request; its answer.

        Raises:
            StandinError: the fleet answered an error, or the connection failed.
        """
        with self._lock:
            try:
                if self._sock is None:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    sock.settimeout(timeout)
                    sock.connect(str(self.control_path))
                    self._sock, self._reader = sock, sock.makefile("rb")
                assert self._sock is not None
                assert self._reader is not None
                self._sock.sendall(json.dumps(message).encode() + b"\n")
                line = self._reader.readline()
            except OSError as exc:
                self._disconnect()
                raise StandinError(detail=f"control socket: {exc}") from exc
        if not line:
            self._disconnect()
            raise StandinError(detail="the control socket closed")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise StandinError(detail=str(answer["error"]))
        return answer

    def add_vif(self, node: str, name: str, iface_id: str, mac: str,
                ofport_request: int | None = None) -> int | None:  # fmt: skip
        """Plug a VIF into node `node`'s br-int; its ofport. The node's managers have the
        new rows when this returns."""
        vif: dict[str, Any] = {"name": name, "iface_id": iface_id, "mac": mac}
        if ofport_request is not None:
            vif["ofport_request"] = ofport_request
        ofport: int | None = self.request({"node": node, "add_vif": vif})["ofport"]
        return ofport

    def remove_vif(self, node: str, name: str) -> bool:
        """Unplug VIF `name` from node `node`; False if it was not plugged."""
        removed: bool = self.request({"node": node, "remove_vif": {"name": name}})["removed"]
        return removed

    def stats(self, node: str | None = None) -> dict[str, Any]:
        """Node `node`'s counters, or (None) the fleet's sums and its process's CPU."""
        return self.request({"stats": node})

    def digest(self, node: str) -> str:
        """The digest of node `node`'s flow table (`flows.expected_digest` to compare)."""
        digest: str = self.request({"digest": node})["digest"]
        return digest

    def rows(self, node: str, table: str) -> dict[str, dict[str, Any]]:
        """Node `node`'s rows of `table` (uuid -> the columns that are not default)."""
        rows: dict[str, dict[str, Any]] = self.request({"rows": {"node": node, "table": table}})[
            "rows"
        ]
        return rows

    def flows(self, node: str) -> list[list[Any]]:
        """Node `node`'s flows: [table, priority, match hex, cookie, instructions hex]."""
        flows: list[list[Any]] = self.request({"flows": node})["flows"]
        return flows

    def commits(
        self, since: float, nodes: Iterable[str] | None = None
    ) -> dict[str, list[tuple[float, int]]]:
        """Every node's (or only `nodes`') bundle commits at or after wall-clock time
        `since`: node -> [(time, flow mods)] (the latest few of each)."""
        request: dict[str, Any] = {"commits": since}
        if nodes is not None:
            request["nodes"] = list(nodes)
        found = self.request(request)["commits"]
        return {node: [(float(t), int(n)) for t, n in entries] for node, entries in found.items()}

    def await_commit(self, node: str, since: float, timeout: float) -> CommitWait:
        """Ask to be told of node `node`'s first bundle commit at or after wall-clock time
        `since` (or that none came within `timeout` seconds), on a connection of its own:
        the caller waits on `CommitWait.fileno()` with whatever else it waits for.

        Raises:
            StandinError: the control socket cannot be reached.
        """
        return CommitWait(self.control_path, node, since, timeout)

    def select(self, node: str) -> dict[str, list[dict[str, Any]]]:
        """Node `node`'s rows of the tables a controller reads, as OVSDB `select`s give
        them (`NodeSession.snapshot` reads them as a controller does)."""
        rows: dict[str, list[dict[str, Any]]] = self.request({"select": node})["select"]
        return rows

    def set_managers(self, managers: Iterable[str]) -> None:
        """Point every node at `managers` (their Manager rows replaced, dialled anew)."""
        self.managers = list(managers)
        self.request({"set_managers": self.managers})

    def cpu_seconds(self) -> float:
        """The fleet process's CPU time so far (user and system), from `/proc`.

        Raises:
            StandinError: it is not running.
        """
        return self._usage().cpu_seconds

    def rss_bytes(self) -> int:
        """The fleet process's resident memory now (`VmRSS`).

        Raises:
            StandinError: it is not running.
        """
        return round(self._usage().rss_mib * 1024 * 1024)

    def _usage(self) -> ProcessUsage:
        pid = self.pid
        if pid is None:
            raise StandinError(detail="not running")
        return ProcessUsage.of(pid)

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class FleetGroup:
    """Stand-in nodes served by several fleet processes (`Fleet`s), as one: a single
    process serializes what thousands of machines do at once -- at NVP's scale the
    controllers' pushes of a cold start waited on one stand-in process busy at a whole
    core. Node `i` (in the order given) is served by process `i % processes`, under
    `run_dir/p<k>`. Requests about a node go to its process; the others are put to
    every process and their answers combined. The controllers see the same nodes, each
    with its own connections, whatever the number of processes."""

    def __init__(
        self,
        run_dir: Path,
        nodes: Iterable[NodeSpec],
        managers: Iterable[str] = (),
        *,
        processes: int = 2,
        probe: float = 5.0,
        dial_rate: float = 0.0,
    ) -> None:
        """Describe the group; `start()` runs it (arguments as `Fleet`'s, and how many
        processes serve the nodes)."""
        specs = list(nodes)
        count = max(1, min(processes, len(specs)))
        self.run_dir = run_dir.resolve()
        self.fleets = [
            Fleet(self.run_dir / f"p{k}", specs[k::count], managers, probe=probe,
                  dial_rate=dial_rate / count)
            for k in range(count)
        ]  # fmt: skip
        self._of = {name: fleet for fleet in self.fleets for name in fleet.nodes}

    @property
    def pids(self) -> list[int]:
        """The fleet processes' PIDs (those running)."""
        return [pid for fleet in self.fleets if (pid := fleet.pid) is not None]

    def fleet(self, node: str) -> Fleet:
        """The process serving node `node`.

        Raises:
            StandinError: no process serves it.
        """
        found = self._of.get(node)
        if found is None:
            raise StandinError(detail=f"no stand-in node {node!r}")
        return found

    def openflow(self, node: str) -> str:
        """Where node `node` takes OpenFlow."""
        return self.fleet(node).openflow(node)

    def start(self, timeout: float = 120.0) -> FleetGroup:
        """Run every process; return once all answer (stopping those started if one
        fails)."""
        try:
            for fleet in self.fleets:
                fleet.start(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process."""
        for fleet in self.fleets:
            fleet.stop()

    def request(self, message: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        """A control request about one node (`{"digest": ID}`, `{"node": ID, ...}`, ...),
        sent to the process serving it.

        Raises:
            StandinError: it names no node, or the process refused it.
        """
        for key in ("node", "digest", "stats", "flows", "select"):
            if isinstance(message.get(key), str):
                return self.fleet(message[key]).request(message, timeout)
        rows = message.get("rows")
        if isinstance(rows, dict) and isinstance(rows.get("node"), str):
            return self.fleet(rows["node"]).request(message, timeout)
        raise StandinError(detail=f"a request about no one node: {sorted(message)}")

    def digest(self, node: str) -> str:
        """As `Fleet.digest`."""
        return self.fleet(node).digest(node)

    def stats(self, node: str | None = None) -> dict[str, Any]:
        """Node `node`'s counters, or (None) the sums over every process (the numbers
        of `Fleet.stats(None)` added)."""
        if node is not None:
            return self.fleet(node).stats(node)
        totals: dict[str, Any] = {}
        for fleet in self.fleets:
            for key, value in fleet.stats().items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    totals[key] = totals.get(key, 0) + value
        return totals

    def flows(self, node: str) -> list[list[Any]]:
        """As `Fleet.flows`."""
        return self.fleet(node).flows(node)

    def select(self, node: str) -> dict[str, list[dict[str, Any]]]:
        """As `Fleet.select`."""
        return self.fleet(node).select(node)

    def rows(self, node: str, table: str) -> dict[str, dict[str, Any]]:
        """As `Fleet.rows`."""
        return self.fleet(node).rows(node, table)

    def add_vif(self, node: str, name: str, iface_id: str, mac: str,
                ofport_request: int | None = None) -> int | None:  # fmt: skip
        """As `Fleet.add_vif`."""
        return self.fleet(node).add_vif(node, name, iface_id, mac, ofport_request)

    def remove_vif(self, node: str, name: str) -> bool:
        """As `Fleet.remove_vif`."""
        return self.fleet(node).remove_vif(node, name)

    def commits(
        self, since: float, nodes: Iterable[str] | None = None
    ) -> dict[str, list[tuple[float, int]]]:
        """As `Fleet.commits`, from every process (or those serving `nodes`)."""
        found: dict[str, list[tuple[float, int]]] = {}
        if nodes is None:
            for fleet in self.fleets:
                found.update(fleet.commits(since))
            return found
        by_fleet: dict[int, list[str]] = {}
        for node in nodes:
            by_fleet.setdefault(self.fleets.index(self.fleet(node)), []).append(node)
        for index, names in by_fleet.items():
            found.update(self.fleets[index].commits(since, names))
        return found

    def await_commit(self, node: str, since: float, timeout: float) -> CommitWait:
        """As `Fleet.await_commit`, of the process serving `node`."""
        return self.fleet(node).await_commit(node, since, timeout)

    def set_managers(self, managers: Iterable[str]) -> None:
        """As `Fleet.set_managers`, on every process."""
        targets = list(managers)
        for fleet in self.fleets:
            fleet.set_managers(targets)

    def cpu_seconds(self) -> float:
        """The processes' CPU time so far, summed."""
        return sum(fleet.cpu_seconds() for fleet in self.fleets)

    def rss_bytes(self) -> int:
        """The processes' resident memory now, summed."""
        return sum(fleet.rss_bytes() for fleet in self.fleets)

    def __enter__(self) -> FleetGroup:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class CommitWait:
    """An `await_commit` request sent on a connection of its own (`Fleet.await_commit`):
    readable (`fileno`) once its answer came."""

    def __init__(self, control_path: Path, node: str, since: float, timeout: float) -> None:
        """Connect and send the request."""
        self.node = node
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout + 10.0)  # (the fleet answers at `timeout`)
            self._sock.connect(str(control_path))
            request = {"await_commit": since, "node": node, "timeout": timeout}
            self._sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            self._sock.close()
            raise StandinError(detail=f"control socket: {exc}") from exc
        self._reader = self._sock.makefile("rb")

    def fileno(self) -> int:
        """The connection's descriptor: readable once the answer came."""
        return self._sock.fileno()

    def result(self) -> list[tuple[float, int]]:
        """The node's commits at or after `since` (empty: none within the timeout); blocks
        until the answer comes.

        Raises:
            StandinError: the fleet answered an error, or the connection failed.
        """
        try:
            line = self._reader.readline()
        except OSError as exc:
            raise StandinError(detail=f"control socket: {exc}") from exc
        if not line:
            raise StandinError(detail="the control socket closed")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise StandinError(detail=str(answer["error"]))
        return [(float(t), int(n)) for t, n in answer["commits"].get(self.node, [])]

    def close(self) -> None:
        """Close the connection."""
        self._reader.close()
        self._sock.close()

    def __enter__(self) -> CommitWait:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
