"""The stand-in fleet's process: N simulated transport nodes served by one asyncio loop.

    python -m loom_lab.standin --dir D --nodes-file F --managers tcp:IP:PORT[,tcp:...]

Each node (`Node`) has its database (`loom_lab.standin.db`), its vswitchd's share of it
(`loom_lab.standin.vswitch`) and its br-int (`loom_lab.standin.switch`). It dials every
manager target, as `ovs-vsctl set-manager` makes ovsdb-server do, and serves its
database on each connection (`OvsdbSession`: the JSON-RPC methods `monitor`,
`monitor_cancel`, `transact`, `echo`, `get_schema`, `list_dbs`; others are answered
"unknown method" and logged); a dropped connection is dialled again every second
(`max_backoff` 1000 ms; a new connection starts with no monitors, as on OVS), and one
silent for 5 s is probed with an `echo` and dropped after 5 s more without an answer (the
Manager rows' `inactivity_probe`, as ovsdb-server does). After every
commit each monitoring connection gets its `update` before the reply to the transaction
(ovsdb-server flushes monitors before replying); vswitchd's writes follow as a
transaction of their own once the loop has sent the reply. The node takes OpenFlow on
`D/<system-id>.mgmt` (its `external_ids:loom-openflow`) from the start.

Every node dials at once unless `--dial-rate R` spreads the first dials (at start and at
`set_managers`) over time, R nodes a second. The loop logs when it falls more than a
second behind (`stalls` in the counters): a fleet that cannot keep up would slow the
controllers down, and must say so.

The control socket `D/control.sock` takes one JSON object a line and answers one:

- `{"ping": true}` -> `{"ok": true, "nodes": N}`;
- `{"node": ID, "add_vif": {"name": ..., "iface_id": ..., "mac": ..., "ofport_request": N?}}`
  -> `{"ok": true, "ofport": P}` once the VIF is in the database with its ofport (the
  controllers' monitors have the update before the answer is sent);
- `{"node": ID, "remove_vif": {"name": ...}}` -> `{"ok": true, "removed": bool}`;
- `{"stats": ID}` -> the node's counters; `{"stats": null}` -> their sums, the nodes'
  manager connections and the process's CPU seconds;
- `{"digest": ID}` -> `{"digest": HEX, "flows": N}` (`loom_lab.standin.flows`);
- `{"rows": {"node": ID, "table": NAME}}` -> `{"rows": {uuid: row}}` (columns as stored);
- `{"flows": ID}` -> `{"flows": [[table, priority, match hex, cookie, instructions hex]]}`;
- `{"set_managers": [TARGET, ...]}` -> every node's Manager rows replaced, dialled anew;
- `{"commits": T, "nodes": [ID, ...]?}` -> `{"commits": {ID: [[time, flow mods], ...]}}`:
  every node's (or the nodes named's) bundle commits at or after wall-clock time T (the
  latest `switch.COMMIT_LOG` of each);
- `{"await_commit": T, "node": ID, "timeout": S}` -> as `{"commits": T, "nodes": [ID]}`, but
  answered once node ID has a bundle commit at or after T (`{"commits": {}}` after S
  seconds without one): a benchmark waits for a change to reach a node on its socket
  rather than asking a thousand times a second (CPU taken from the processes it measures).
  The connection answers nothing else until then;
- `{"select": ID}` -> `{"select": {TABLE: [row, ...]}}`: the rows of the tables a
  controller reads (`loom_ovs.manager.NODE_TABLES`) as an OVSDB `select` returns them.

An error is answered `{"error": "..."}`. With `LOOM_STANDIN_PROFILE=FILE` in its
environment the process runs under cProfile and writes its statistics to FILE when it
stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import json
import logging
import os
import resource
import signal
import socket
import sys
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson

from loom_lab.standin import vswitch
from loom_lab.standin.db import Change, Database, Monitor
from loom_lab.standin.flows import parts, table_digest
from loom_lab.standin.schema import OvsdbFailure, Schema
from loom_lab.standin.switch import Bridge, Connection
from loom_lab.standin.vswitch import Vswitchd
from loom_ovs.manager import NODE_TABLES
from loom_ovs.sandbox import VSWITCH_SCHEMA

log = logging.getLogger(__name__)

SCHEMA = VSWITCH_SCHEMA
RECONNECT = 1.0
"""Seconds between a lost or refused manager connection and the next try (a node's
Manager rows say `max_backoff` 1000 ms)."""
TICK = 1.0
"""Seconds between the fleet's checks of its connections."""
PROBE = 5.0
"""A manager connection's inactivity probe (the Manager rows' `inactivity_probe`, 5000 ms):
after this long with nothing received the node sends an `echo`, and after as long again
it disconnects and dials anew, as ovsdb-server does. (Without it a connection the
manager's full accept queue dropped, which the node took as established, stays dead.)"""


@dataclass(frozen=True)
class VifSpec:
    """A VM's VIF on a stand-in node."""

    name: str
    iface_id: str
    mac: str
    ofport_request: int | None = None


@dataclass(frozen=True)
class NodeSpec:
    """A stand-in node: its system-id, tunnel endpoint and VIFs at start."""

    system_id: str
    encap_ip: str
    vifs: tuple[VifSpec, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The node as the nodes file has it."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> NodeSpec:
        """A node from the nodes file."""
        vifs = tuple(VifSpec(**vif) for vif in doc.get("vifs", []))
        return cls(doc["system_id"], doc["encap_ip"], vifs)


@dataclass
class NodeCounters:
    """What a node's OVSDB side has done."""

    transactions: int = 0
    """Transactions the controllers sent."""
    failed: int = 0
    vswitchd_writes: int = 0
    connects: int = 0
    """Manager connections made (reconnects included)."""
    monitors: int = 0


class _JsonFramer:
    """Cuts a JSON-RPC byte stream into messages (they have no delimiter).

    A message may be complete when its braces balance (counted per chunk, in C) or when
    the bytes received end with one (braces inside strings unbalance the count); a parse
    is tried then (orjson; several messages at once are split by the standard library's
    decoder).
    """

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._depth = 0
        self._decoder = json.JSONDecoder()

    def feed(self, data: bytes) -> list[Any]:
        self._chunks.append(data)
        self._size += len(data)
        self._depth += data.count(b"{") - data.count(b"}")
        if self._depth > 0 and not data.rstrip().endswith(b"}"):
            return []  # incomplete (braces in strings may fool the count, not the end)
        buf = b"".join(self._chunks)
        try:
            message = orjson.loads(buf)
        except orjson.JSONDecodeError:
            return self._split(buf)
        self._chunks, self._size, self._depth = [], 0, 0
        return [message]

    def _split(self, buf: bytes) -> list[Any]:
        text = buf.decode("utf-8", errors="surrogateescape")
        messages, at = [], 0
        while True:
            while at < len(text) and text[at].isspace():
                at += 1
            if at >= len(text):
                break
            try:
                message, at = self._decoder.raw_decode(text, at)
            except json.JSONDecodeError:
                break
            messages.append(message)
        rest = text[at:].encode("utf-8", errors="surrogateescape")
        self._chunks = [rest] if rest else []
        self._size = len(rest)
        self._depth = rest.count(b"{") - rest.count(b"}")
        return messages


class OvsdbSession(asyncio.Protocol):
    """A node's connection to one manager: the node serves its database on it."""

    def __init__(self, node: Node, link: ManagerLink) -> None:
        self.node = node
        self.link = link
        self.monitors: dict[str, tuple[Any, Monitor]] = {}
        """Monitor id (as JSON) -> (the id, the monitor)."""
        self.transport: asyncio.Transport | None = None
        self._framer = _JsonFramer()
        self.heard = time.monotonic()
        """When something last arrived (the inactivity probe's clock)."""
        self.probed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """The manager accepted the node's connection."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.node.sessions.append(self)
        self.node.counters.connects += 1

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection ended: its monitors go; the link dials again."""
        if self in self.node.sessions:
            self.node.sessions.remove(self)
        self.monitors.clear()
        self.transport = None
        self.link.lost()

    def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message."""
        if self.transport is not None:
            self.transport.write(orjson.dumps(message))

    def data_received(self, data: bytes) -> None:
        """Answer the requests received."""
        began = time.thread_time()
        self.heard, self.probed = time.monotonic(), False
        try:
            messages = self._framer.feed(data)
        except ValueError as exc:
            log.warning("node %s: bad JSON from a manager: %s", self.node.spec.system_id, exc)
            if self.transport is not None:
                self.transport.close()
            return
        for message in messages:
            self._handle(message)
        self.node.fleet.cpu["ovsdb"] += time.thread_time() - began

    def _handle(self, message: Any) -> None:
        if not isinstance(message, dict) or "method" not in message:
            return  # a reply (to nothing we asked) or junk
        method, params, request_id = message["method"], message.get("params"), message.get("id")
        if request_id is None:
            return  # a notification ("cancel"): nothing to cancel, nothing waits
        node = self.node
        db_name = node.db.schema.name
        try:
            if method == "echo":
                result: Any = params
            elif method == "list_dbs":
                result = [db_name]
            elif method == "get_schema":
                self._check_db(params, 0)
                result = node.db.schema.doc
            elif method == "monitor":
                result = self._monitor(params)
            elif method == "monitor_cancel":
                key = json.dumps(params[0] if isinstance(params, list) and params else None)
                if self.monitors.pop(key, None) is None:
                    raise OvsdbFailure("unknown monitor", f"no monitor {key}")
                result = {}
            elif method == "transact":
                self._check_db(params, 0)
                result = node.commit(params[1:] if isinstance(params, list) else [], origin=self)
            else:
                log.warning("node %s: a manager called %r (not served by the stand-in)",
                            node.spec.system_id, method)  # fmt: skip
                self.send({"id": request_id, "result": None, "error": "unknown method"})
                return
        except OvsdbFailure as failure:
            self.send({"id": request_id, "result": None, "error": failure.to_json()})
            return
        self.send({"id": request_id, "result": result, "error": None})

    def probe(self, now: float) -> None:
        """The inactivity probe (`PROBE`): echo after a silence, disconnect after another."""
        if self.transport is None or now - self.heard < self.node.fleet.probe:
            return
        if not self.probed:
            self.probed = True
            self.heard = now
            self.send({"id": "echo", "method": "echo", "params": []})
        else:
            log.info("node %s: no answer to the inactivity probe from %s, disconnecting",
                     self.node.spec.system_id, self.link.target)  # fmt: skip
            self.transport.abort()

    def _check_db(self, params: Any, at: int) -> None:
        if not isinstance(params, list) or len(params) <= at:
            raise OvsdbFailure("syntax error", "missing parameters")
        if params[at] != self.node.db.schema.name:
            raise OvsdbFailure("unknown database", f"no database {params[at]!r}")

    def _monitor(self, params: Any) -> Any:
        self._check_db(params, 0)
        if len(params) != 3:
            raise OvsdbFailure("syntax error", "monitor takes [db, id, requests]")
        key = json.dumps(params[1])
        if key in self.monitors:
            raise OvsdbFailure("duplicate monitor ID", key)
        monitor = Monitor(self.node.db.schema, params[2])
        self.monitors[key] = (params[1], monitor)
        self.node.counters.monitors += 1
        return monitor.initial(self.node.db)


class ManagerLink:
    """A node's Manager row: one target it keeps dialling."""

    def __init__(self, node: Node, target: str) -> None:
        self.node = node
        self.target = target
        self.session: OvsdbSession | None = None
        self.closed = False

    def dial(self) -> None:
        """Connect now (in the background)."""
        if not self.closed:
            asyncio.get_running_loop().create_task(self._dial())

    async def _dial(self) -> None:
        loop = asyncio.get_running_loop()
        kind, _, where = self.target.partition(":")
        session = OvsdbSession(self.node, self)
        try:
            if kind == "tcp":
                host, _, port = where.rpartition(":")
                await loop.create_connection(lambda: session, host.strip("[]"), int(port))
            elif kind == "unix":
                await loop.create_unix_connection(lambda: session, where)
            else:
                log.error("node %s: manager target %r is not tcp: or unix:",
                          self.node.spec.system_id, self.target)  # fmt: skip
                return
        except OSError:
            self.lost()
            return
        self.session = session

    def lost(self) -> None:
        """The connection failed or ended: dial again after the backoff."""
        self.session = None
        if not self.closed:
            asyncio.get_running_loop().call_later(RECONNECT, self.dial)

    def close(self) -> None:
        """Stop dialling; close the connection."""
        self.closed = True
        if self.session is not None and self.session.transport is not None:
            self.session.transport.close()


class OpenFlowSession(asyncio.Protocol):
    """One OpenFlow connection to a node's br-int."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.conn: Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A controller connected: say HELLO."""
        assert isinstance(transport, asyncio.Transport)
        self.conn = Connection(self.node.bridge, transport.write, transport.close)
        self.conn.start()

    def data_received(self, data: bytes) -> None:
        """Handle the messages received."""
        if self.conn is not None:
            began = time.thread_time()
            self.conn.receive(data)
            self.node.fleet.cpu["openflow"] += time.thread_time() - began

    def connection_lost(self, exc: Exception | None) -> None:
        """The controller went: its bundles are discarded."""
        if self.conn is not None:
            self.conn.lost()


class Node:
    """One stand-in transport node."""

    def __init__(self, fleet: FleetServer, spec: NodeSpec) -> None:
        self.fleet = fleet
        self.spec = spec
        self.db = Database(fleet.schema)
        self.vswitchd = Vswitchd()
        self.bridge = Bridge(zlib.crc32(spec.system_id.encode()), intern=fleet.intern)
        self.sessions: list[OvsdbSession] = []
        self.links: list[ManagerLink] = []
        self.counters = NodeCounters()
        self.socket_path = fleet.run_dir / f"{spec.system_id}.mgmt"
        self._server: asyncio.AbstractServer | None = None
        self._settle_due = False

    @property
    def openflow(self) -> str:
        """Where the node's br-int takes OpenFlow (`external_ids:loom-openflow`)."""
        return f"unix:{self.socket_path}"

    async def start(self, managers: list[str], delay: float = 0.0) -> None:
        """Write the node's own rows and VIFs, take OpenFlow, dial the managers (after
        `delay` seconds)."""
        spec = self.spec
        self._local(vswitch.node_ops(spec.system_id, spec.encap_ip, self.openflow, managers))
        for vif in spec.vifs:
            self.add_vif(vif)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(lambda: OpenFlowSession(self),
                                                     str(self.socket_path))  # fmt: skip
        self._dial_later(managers, delay)

    def _dial_later(self, managers: list[str], delay: float) -> None:
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self.dial, managers)
        else:
            self.dial(managers)

    def dial(self, managers: Iterable[str]) -> None:
        """Dial `managers` (closing the links to the previous ones)."""
        for link in self.links:
            link.close()
        self.links = [ManagerLink(self, target) for target in managers]
        for link in self.links:
            link.dial()

    def set_managers(self, managers: list[str], delay: float = 0.0) -> None:
        """Replace the node's Manager rows and dial the new targets (after `delay`)."""
        self._local(vswitch.set_managers_ops(self.db, managers))
        for link in self.links:
            link.close()
        self.links = []
        self._dial_later(managers, delay)

    def close(self) -> None:
        """Stop dialling, close every connection, stop taking OpenFlow."""
        for link in self.links:
            link.close()
        if self._server is not None:
            self._server.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def commit(self, ops: list[Any], origin: OvsdbSession | None = None) -> list[Any]:
        """Run a transaction; publish what it changed to every monitor (before `origin`
        gets the results returned); vswitchd writes next, after the reply."""
        self.counters.transactions += origin is not None
        results, changes = self.db.transact(ops)
        if not changes:
            self.counters.failed += origin is not None and any(
                isinstance(r, dict) and "error" in r for r in results
            )
            return results
        self._publish(changes)
        if Vswitchd.due(changes) and not self._settle_due:
            self._settle_due = True
            asyncio.get_running_loop().call_soon(self._settle)
        return results

    def _publish(self, changes: list[Change]) -> None:
        for session in self.sessions:
            for monitor_id, monitor in session.monitors.values():
                update = monitor.update(changes)
                if update is not None:
                    session.send({"id": None, "method": "update", "params": [monitor_id, update]})

    def _settle(self) -> None:
        """vswitchd's writes after the last commits (ofports, BFD status)."""
        began = time.thread_time()
        self._settle_due = False
        ops = self.vswitchd.writes(self.db, time.monotonic())
        if ops:
            self.counters.vswitchd_writes += 1
            self._local(ops, settle=False)
        self.fleet.cpu["ovsdb"] += time.thread_time() - began

    def _local(self, ops: list[Any], *, settle: bool = True) -> list[Any]:
        """A transaction of the node's own (hypervisor or vswitchd); vswitchd settles at
        once after it (the answer to a control request has the ofports)."""
        results, changes = self.db.transact(ops)
        errors = [r for r in results if isinstance(r, dict) and "error" in r]
        if errors:
            raise OvsdbFailure(errors[0]["error"], errors[0].get("details", ""))
        self._publish(changes)
        if settle and Vswitchd.due(changes):
            self._settle()
        return results

    def add_vif(self, vif: VifSpec) -> int | None:
        """Plug a VIF; its ofport."""
        self._local(vswitch.add_vif_ops(self.db, vif.name, vif.iface_id, vif.mac,
                                        vif.ofport_request))  # fmt: skip
        iface = self.db.find("Interface", "name", vif.name)
        ofport = self.db.get("Interface", iface, "ofport") if iface is not None else None
        return ofport if isinstance(ofport, int) else None

    def remove_vif(self, name: str) -> bool:
        """Unplug a VIF; False if it was not plugged."""
        ops = vswitch.remove_vif_ops(self.db, name)
        if ops:
            self._local(ops)
        return bool(ops)

    def stats(self) -> dict[str, Any]:
        """The node's counters."""
        return {**asdict(self.bridge.counters), **asdict(self.counters),
                "flows": len(self.bridge.flows), "managers": len(self.sessions),
                "openflow": len(self.bridge.connections)}  # fmt: skip


@dataclass
class FleetServer:
    """The nodes of one stand-in process."""

    run_dir: Path
    schema: Schema
    managers: list[str]
    nodes: dict[str, Node] = field(default_factory=dict)
    intern: dict[bytes, bytes] = field(default_factory=dict)
    probe: float = PROBE
    """The manager connections' inactivity probe, in seconds."""
    dial_rate: float = 0.0
    """Nodes per second dialling at start and at `set_managers` (0: all at once, as
    hypervisors pointed at new controllers do)."""
    stalls: int = 0
    """Times the loop was more than a second late (`_probe`)."""
    _ticked: float = 0.0
    _awaiting: dict[str, list[tuple[float, Callable[[dict[str, Any]], None]]]] = field(
        default_factory=dict
    )
    """Node -> the `await_commit`s waiting for its next commit: (since, answer)."""
    cpu: dict[str, float] = field(default_factory=lambda: {"ovsdb": 0.0, "openflow": 0.0})
    """CPU seconds spent serving the managers (vswitchd's writes included) and OpenFlow; the
    rest of the process's is the event loop's (reading sockets) and the control socket's."""

    async def start(self, specs: Iterable[NodeSpec]) -> None:
        """Start every node; probe idle manager connections from now on."""
        for i, spec in enumerate(specs):
            node = Node(self, spec)
            node.bridge.on_commit = functools.partial(self._committed, spec.system_id)
            self.nodes[spec.system_id] = node
            await node.start(self.managers, self._dial_delay(i))
        self._ticked = time.monotonic()
        asyncio.get_running_loop().call_later(TICK, self._probe)

    def _probe(self) -> None:
        """Every second: the inactivity probes; and a word in the log when the loop fell
        behind (a fleet that cannot keep up would slow the controllers down: it must
        say so)."""
        now = time.monotonic()
        late = now - self._ticked - TICK
        if late > 1.0:
            self.stalls += 1
            log.warning("the fleet's loop was %.1f s late (CPU %.1f s so far)", late,
                        time.process_time())  # fmt: skip
        self._ticked = now
        for node in self.nodes.values():
            for session in list(node.sessions):
                session.probe(now)
        asyncio.get_running_loop().call_later(TICK, self._probe)

    def close(self) -> None:
        """Close every node."""
        for node in self.nodes.values():
            node.close()

    def _node(self, name: Any) -> Node:
        node = self.nodes.get(name) if isinstance(name, str) else None
        if node is None:
            raise KeyError(f"no node {name!r}")
        return node

    def control(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one control request (see the module docstring)."""
        for kind, answer in self._answers.items():
            if kind in request:
                return answer(self, request)
        raise KeyError(f"unknown request {sorted(request)}")

    def _add_vif(self, request: dict[str, Any]) -> dict[str, Any]:
        vif = VifSpec(**request["add_vif"])
        return {"ok": True, "ofport": self._node(request.get("node")).add_vif(vif)}

    def _remove_vif(self, request: dict[str, Any]) -> dict[str, Any]:
        name = request["remove_vif"]["name"]
        return {"ok": True, "removed": self._node(request.get("node")).remove_vif(name)}

    def _stats(self, request: dict[str, Any]) -> dict[str, Any]:
        if request["stats"] is not None:
            return self._node(request["stats"]).stats()
        return self._totals()

    def _digest(self, request: dict[str, Any]) -> dict[str, Any]:
        flows = self._node(request["digest"]).bridge.flows
        return {"digest": table_digest(flows.items()), "flows": len(flows)}

    def _rows(self, request: dict[str, Any]) -> dict[str, Any]:
        node = self._node(request["rows"].get("node"))
        table = request["rows"].get("table")
        if table not in node.db.rows:
            raise KeyError(f"no table {table!r}")
        return {"rows": node.db.rows[table]}

    def _flows(self, request: dict[str, Any]) -> dict[str, Any]:
        out = []
        for key, value in sorted(self._node(request["flows"]).bridge.flows.items()):
            table, priority, match, cookie, instructions = parts(key, value)
            out.append([table, priority, match.hex(), cookie, instructions.hex()])
        return {"flows": out}

    def _commits(self, request: dict[str, Any]) -> dict[str, Any]:
        since = float(request["commits"])
        names = request.get("nodes")
        nodes = self.nodes.items() if names is None else [(n, self._node(n)) for n in names]
        found = {}
        for system_id, node in nodes:
            recent = [[t, n] for t, n in node.bridge.commits if t >= since]
            if recent:
                found[system_id] = recent
        return {"commits": found}

    def await_commit(
        self, request: dict[str, Any], answer: Callable[[dict[str, Any]], None]
    ) -> None:
        """`answer` an `await_commit` request once it is due (module docstring)."""
        system_id, since = request["node"], float(request["await_commit"])
        found = self._commits({"commits": since, "nodes": [system_id]})
        if found["commits"]:
            answer(found)
            return
        waiting = self._awaiting.setdefault(system_id, [])
        entry = (since, answer)
        waiting.append(entry)

        def expire() -> None:
            if entry in waiting:
                waiting.remove(entry)
                answer({"commits": {}})

        asyncio.get_running_loop().call_later(float(request["timeout"]), expire)

    def _committed(self, system_id: str) -> None:
        """Node `system_id` committed a bundle: answer the `await_commit`s it satisfies."""
        waiting = self._awaiting.get(system_id)
        if not waiting:
            return
        for entry in list(waiting):
            found = self._commits({"commits": entry[0], "nodes": [system_id]})
            if found["commits"]:
                waiting.remove(entry)
                entry[1](found)

    def _select(self, request: dict[str, Any]) -> dict[str, Any]:
        node = self._node(request["select"])
        tables = list(NODE_TABLES)
        results, _ = node.db.transact([{"op": "select", "table": t, "where": []} for t in tables])
        return {"select": {t: r["rows"] for t, r in zip(tables, results, strict=True)}}

    def _set_managers(self, request: dict[str, Any]) -> dict[str, Any]:
        self.managers = list(request["set_managers"])
        for i, node in enumerate(self.nodes.values()):
            node.set_managers(self.managers, self._dial_delay(i))
        return {"ok": True}

    def _dial_delay(self, index: int) -> float:
        """When node number `index` first dials (`dial_rate`; 0: every node at once)."""
        return index / self.dial_rate if self.dial_rate > 0 else 0.0

    _answers: ClassVar[dict[str, Callable[[FleetServer, dict[str, Any]], dict[str, Any]]]] = {
        "ping": lambda fleet, _request: {"ok": True, "nodes": len(fleet.nodes)},
        "add_vif": _add_vif, "remove_vif": _remove_vif, "stats": _stats, "digest": _digest,
        "rows": _rows, "flows": _flows, "set_managers": _set_managers, "commits": _commits,
        "select": _select,
    }  # fmt: skip

    def _totals(self) -> dict[str, Any]:
        totals: dict[str, Any] = {}
        for node in self.nodes.values():
            for key, value in node.stats().items():
                totals[key] = totals.get(key, 0) + value
        usage = resource.getrusage(resource.RUSAGE_SELF)
        totals["nodes"] = len(self.nodes)
        totals["connected"] = sum(1 for n in self.nodes.values() if len(n.sessions) == len(n.links))
        totals["cpu_seconds"] = usage.ru_utime + usage.ru_stime
        totals["cpu_ovsdb_seconds"] = self.cpu["ovsdb"]
        totals["cpu_openflow_seconds"] = self.cpu["openflow"]
        totals["interned"] = len(self.intern)
        totals["stalls"] = self.stalls
        return totals


class ControlSession(asyncio.Protocol):
    """One connection to the control socket: JSON lines."""

    def __init__(self, fleet: FleetServer) -> None:
        self.fleet = fleet
        self.transport: asyncio.Transport | None = None
        self._buf = b""
        self._waiting = False
        """An `await_commit` is not answered yet: the lines after it wait."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A client connected."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        """Answer each complete line, in order."""
        self._buf += data
        self._answer_lines()

    def _answer_lines(self) -> None:
        while b"\n" in self._buf and not self._waiting:
            line, self._buf = self._buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                request = orjson.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
                if "await_commit" in request:
                    self._waiting = True
                    self.fleet.await_commit(request, self._answer_awaited)
                    continue
                answer = self.fleet.control(request)
            except (KeyError, ValueError, TypeError, OvsdbFailure) as exc:
                self._waiting = False
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            self._send(answer)

    def _answer_awaited(self, answer: dict[str, Any]) -> None:
        self._waiting = False
        self._send(answer)
        self._answer_lines()

    def _send(self, answer: dict[str, Any]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(orjson.dumps(answer) + b"\n")


def _raise_file_limit() -> None:
    """Every node holds a listening socket, its manager connections and its OpenFlow
    ones: thousands of descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(run_dir: Path, specs: list[NodeSpec], managers: list[str],
                probe: float = PROBE, dial_rate: float = 0.0) -> None:  # fmt: skip
    """Run a fleet until SIGTERM or SIGINT."""
    fleet = FleetServer(run_dir, Schema.load(SCHEMA), managers, probe=probe,
                        dial_rate=dial_rate)  # fmt: skip
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    began = time.perf_counter()
    await fleet.start(specs)
    control_path = run_dir / "control.sock"
    with contextlib.suppress(FileNotFoundError):
        control_path.unlink()
    server = await loop.create_unix_server(lambda: ControlSession(fleet), str(control_path))
    log.info("%d stand-in nodes up in %.2f s", len(fleet.nodes), time.perf_counter() - began)
    try:
        await stop.wait()
    finally:
        server.close()
        fleet.close()
        with contextlib.suppress(FileNotFoundError):
            control_path.unlink()


def main(argv: list[str] | None = None) -> int:
    """`python -m loom_lab.standin`: serve a fleet of stand-in nodes."""
    parser = argparse.ArgumentParser(
        prog="python -m loom_lab.standin",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dir", type=Path, required=True,
        help="where the sockets go (D/<system-id>.mgmt, D/control.sock)",
    )  # fmt: skip
    parser.add_argument(
        "--nodes-file",
        type=Path,
        required=True,
        help="JSON: a list of {system_id, encap_ip, vifs: [{name, iface_id, mac}]}",
    )
    parser.add_argument(
        "--managers", default="", help="comma-separated manager targets (tcp:IP:PORT or unix:PATH)"
    )
    parser.add_argument(
        "--probe",
        type=float,
        default=PROBE,
        help="the manager connections' inactivity probe, seconds (default 5)",
    )
    parser.add_argument(
        "--dial-rate",
        type=float,
        default=0.0,
        help="nodes per second that first dial their managers (default 0: all at once)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    _raise_file_limit()
    args.dir.mkdir(parents=True, exist_ok=True)
    specs = [NodeSpec.from_json(doc) for doc in json.loads(args.nodes_file.read_text())]
    managers = [m.strip() for m in args.managers.split(",") if m.strip()]
    too_long = [s.system_id for s in specs if len(str(args.dir / f"{s.system_id}.mgmt")) > 107]
    if too_long:
        parser.error(f"socket paths too long under {args.dir} (unix sockets: 107 bytes)")
    profile = os.environ.get("LOOM_STANDIN_PROFILE")
    if not profile:
        asyncio.run(serve(args.dir, specs, managers, args.probe, args.dial_rate))
        return 0
    profiler = cProfile.Profile()  # where the fleet's own CPU goes (for its authors)
    try:
        fleet = serve(args.dir, specs, managers, args.probe, args.dial_rate)
        profiler.runcall(asyncio.run, fleet)
    finally:
        profiler.dump_stats(profile)
    return 0
