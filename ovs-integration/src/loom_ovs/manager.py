"""The passive OVSDB manager: transport nodes' ovsdb-servers dial in; one replica each.

A node's `Open_vSwitch.manager_options` names the physical controllers (`tcp:IP:PORT`,
`max_backoff` 1000 ms); its ovsdb-server connects to each and serves its database over that
connection. `Manager` listens, accepts, and wraps every accepted socket in a
`loom_common.ovsdb.RawConnection` (python-ovs's `Idl` serves one connection per passive
remote: a second node replaces the first, as measured when Loom began); a `NodeSession`
keeps a replica of the node's switch tables by `monitor` on it and writes by `transact`.

What a session learns (`NodeSession`): the node's `system-id`; its VIFs (interfaces of
`br-int` with `external_ids:iface-id`, their `attached-mac` and `ofport`); the tunnel ports
Loom made (`external_ids:loom-peer`), their ofports and BFD state; where its OpenFlow is
(`external_ids:loom-openflow`: the bridge's management socket path, which only the node
knows, or `ssl:IP:PORT` — `tcp:IP:PORT` in tests — where the bridge is to listen for the
controller) and its datapath type (`external_ids:loom-datapath-type`).

What it writes, in one transaction and only what differs: `NodeSession.configure_ops`
builds the operations (`configure` runs them):
`br-int` (fail mode secure, OpenFlow 1.3 and 1.5, no in-band; listening on `pssl:PORT:IP`
for an `ssl:IP:PORT` OpenFlow address, `ptcp:` for `tcp:`), one tunnel port per remote
node and encapsulation (`key=flow`; BFD where the tunnel leads to a service or gateway node),
and the removal of tunnel ports no longer wanted.

Fencing (`NodeSession.claim`): with several physical controllers, the node's master first
records its fencing token (the ZooKeeper assignment's zxid, the one it claims the OpenFlow
master role with) in `Open_vSwitch` `external_ids:loom-fence`, by compare-and-set, never over
a newer one; every write after that starts with a `wait` that fails the whole transaction
once the node holds another token. A deposed master whose ZooKeeper session has not yet
told it so can then change nothing of the node's OVSDB (tunnel ports, conntrack zone
records, QoS), as the switch already refuses its OpenFlow.

Operations and transactions apart (ovsdbapp's command / transaction split): each write
has a method that returns its operations from what the replica shows (`claim_ops`,
`configure_ops`, `zone_ops`, `qos_ops`) and one that runs them (`transact`, `send`: behind
the fence); `claim`, `configure`, `save_zones` and `configure_qos` do both.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from loom_common import unixsock
from loom_common.errors import LoomError
from loom_common.ovsdb import Change, RawConnection, Replica, TransactError
from loom_common.ovsdb.codec import atoms, omap, to_map, to_named_uuid, to_set, to_uuid
from loom_common.ovsdb.ops import (
    Op,
    add_elements,
    delete,
    delete_keys,
    insert,
    insert_entries,
    mutate,
    remove_elements,
    set_keys,
    update,
    wait,
    where_uuid,
)
from loom_common.pki import peer_name
from loom_ovs.tunnels import FLOW, FLOW_TUNNEL_OFPORTS, TunnelSpec

__all__ = [
    "BRIDGE", "DB", "FENCE_KEY", "FLOW", "FLOW_TUNNEL_OFPORTS", "NODE_TABLES", "PROTOCOLS",
    "ZONE_KEY", "Fenced", "Manager", "NodeSession", "TunnelSpec", "VifInfo", "atoms",
    "omap", "openflow_listener",
]  # fmt: skip
"""(`atoms`, `omap`: `loom_common.ovsdb.codec`'s; `TunnelSpec`: `loom_ovs.tunnels`')"""

log = logging.getLogger(__name__)

DB = "Open_vSwitch"
BRIDGE = "br-int"
NODE_TABLES: dict[str, list[str]] = {
    "Open_vSwitch": ["external_ids", "bridges", "other_config"],
    "Bridge": ["name", "ports", "fail_mode", "datapath_type", "protocols", "other_config",
               "external_ids", "controller"],
    "Controller": ["target"],
    "Port": ["name", "interfaces", "qos"],
    "Interface": ["name", "type", "options", "external_ids", "ofport", "error", "bfd",
                  "bfd_status", "ingress_policing_rate", "ingress_policing_burst"],
    "QoS": ["type", "other_config", "queues", "external_ids"],
    "Queue": ["other_config"],
}  # fmt: skip
PROTOCOLS = ["OpenFlow13", "OpenFlow15"]
HANDSHAKE_S = 5.0
"""The longest a node's TLS handshake may take."""
HANDSHAKERS = 4
"""Threads doing nodes' TLS handshakes (OpenSSL's work runs outside the GIL)."""
BACKLOG = 4096
"""Connections waiting to be accepted (at cold start every node dials at once)."""
ZONE_KEY = "loom-zone-"
FENCE_KEY = "loom-fence"
"""`Open_vSwitch` external_ids key: the fencing token of the node's last claimed master."""


class Fenced(LoomError):
    """The node records a newer master's fencing token: this session may not write it."""

    message = (
        "node %(node)s: fencing token %(token)d is stale: the node records %(recorded)s, a"
        " newer master's (if ZooKeeper's data was lost and started over, remove"
        " external_ids:loom-fence from the node's Open_vSwitch row)"
    )


@dataclass(frozen=True)
class VifInfo:
    """A VIF on a node."""

    iface_id: str
    ofport: int
    mac: str | None
    name: str


@dataclass
class _Ports:
    vifs: dict[str, VifInfo]
    uplinks: list[int]
    tunnels: dict[str, tuple[str, int | None, str]]
    bfd: dict[str, bool]


class NodeSession:
    """One node's connection to this controller: a replica of its switch tables."""

    def __init__(
        self,
        conn: RawConnection,
        peer: str,
        wake: Callable[[], None],
        kept: set[NodeSession] | None = None,
    ) -> None:
        """A session on `conn`; `wake()` is called when the connection's keep-alive thread
        kept updates for `poll()`, after it adds the session to `kept`."""
        self.peer = peer
        """The address the node connected from (for logs)."""

        def woken() -> None:
            if kept is not None:
                kept.add(self)
            wake()

        self.replica = Replica(peer, DB, NODE_TABLES, wake=woken, connect=lambda: conn)
        self._conn = conn
        self.alive = True
        self._zones_read: tuple[Any, dict[str, int]] | None = None
        """(br-int's external_ids as last read, the zones they held)."""
        self._ports_read: tuple[Any, _Ports] | None = None
        """(br-int's ports as last read, its interfaces sorted); None after a Port or
        Interface row changed."""
        self.token: int | None = None
        """The fencing token this session claimed the node with (`claim`); None: unfenced
        (a controller alone writes without one)."""
        self._recheck = False
        """A write failed since the claim: the next claim reads the node's token again."""
        self._bridge_written = False
        """br-int's creation committed, and the replica may not show it yet (the node's
        update can come after the transaction's reply)."""
        self.certified: str | None = None
        """The name in the node's verified TLS certificate (None: not over TLS)."""

    @classmethod
    def snapshot(cls, selected: dict[str, list[dict[str, Any]]]) -> NodeSession:
        """A session over a node's rows read otherwise (OVSDB `select` results by table),
        not kept up to date and not connected: what a controller would read of the node,
        read by the same code (a benchmark's baseline reads every node so)."""
        session = cls(cast(RawConnection, None), "snapshot", lambda: None)
        session.alive = False
        for table in NODE_TABLES:
            session.replica.rows[table] = {
                row["_uuid"][1]: {c: v for c, v in row.items() if c not in ("_uuid", "_version")}
                for row in selected.get(table, [])
            }
        return session

    def start(self) -> list[Change]:
        """Read the node's tables (blocking; the node answers at once)."""
        return self.replica.start()

    def poll(self) -> list[Change]:
        """Apply the updates received; on a lost connection mark the session dead."""
        if not self.alive:
            return []
        try:
            changes = self.replica.poll()
        except Exception as exc:  # any failure (EOF, a broken message) ends the session
            log.info("node %s (%s) disconnected: %s", self.system_id, self.peer, exc)
            self.close()
            return []
        if any(table in ("Port", "Interface") for table, _, _ in changes):
            self._ports_read = None
        return changes

    def fileno(self) -> int:
        """The connection's descriptor."""
        return self.replica.fileno()

    def close(self) -> None:
        """Close the connection."""
        self.alive = False
        with contextlib.suppress(OSError):
            self.replica.close()
        with contextlib.suppress(OSError):
            self._conn.close()  # (a session closed before it started)

    # ---- what the node says ----

    def _table(self, name: str) -> dict[str, dict[str, Any]]:
        return self.replica.rows[name]

    @property
    def external_ids(self) -> dict[str, Any]:
        """`Open_vSwitch.external_ids`."""
        for row in self._table("Open_vSwitch").values():
            return omap(row["external_ids"])
        return {}

    @property
    def system_id(self) -> str | None:
        """The node's `external_ids:system-id` (None until it has one)."""
        value = self.external_ids.get("system-id")
        return str(value) if value else None

    @property
    def openflow_remote(self) -> str | None:
        """Where the node's `br-int` takes OpenFlow (`external_ids:loom-openflow`)."""
        value = self.external_ids.get("loom-openflow")
        return str(value) if value else None

    @property
    def flow_restore_wait(self) -> bool:
        """`Open_vSwitch other_config:flow-restore-wait` is true: the node's ovs-vswitchd
        (just started, as `ovs-ctl restart` does) waits for its flows to be put back."""
        for row in self._table("Open_vSwitch").values():
            other = omap(row.get("other_config"))  # (absent: empty)
            return str(other.get("flow-restore-wait", "false")) == "true"
        return False

    def bridge(self, name: str = BRIDGE) -> tuple[str, dict[str, Any]] | None:
        """(uuid, row) of bridge `name`, if the node has it."""
        for uuid, row in self._table("Bridge").items():
            if row["name"] == name:
                return uuid, row
        return None

    def bridge_created(self) -> bool:
        """Has ovs-vswitchd made `br-int` (its local interface has an ofport)? Until then
        the bridge takes no OpenFlow connection."""
        bridge = self.bridge()
        return bridge is not None and any(
            iface["name"] == BRIDGE and _ofport(iface) is not None
            for _, _, _, iface in self._interfaces(bridge[1])
        )

    def _interfaces(
        self, bridge: dict[str, Any]
    ) -> Iterator[tuple[str, dict[str, Any], str, dict[str, Any]]]:
        """(port uuid, port row, interface uuid, interface row) of each interface of
        `bridge`'s ports, as far as the replica has them."""
        ports, interfaces = self._table("Port"), self._table("Interface")
        for port_uuid in atoms(bridge["ports"]):
            port = ports.get(port_uuid)
            for iface_uuid in atoms(port["interfaces"]) if port is not None else []:
                iface = interfaces.get(iface_uuid)
                if port is not None and iface is not None:
                    yield port_uuid, port, iface_uuid, iface

    def interfaces(self) -> list[dict[str, Any]]:
        """`br-int`'s interfaces as the replica has them (copies of the rows)."""
        bridge = self.bridge()
        if bridge is None:
            return []
        return [dict(iface) for _, _, _, iface in self._interfaces(bridge[1])]

    def _ports(self) -> _Ports:
        """br-int's interfaces sorted into VIFs, uplinks and tunnel ports: computed again
        only after a Port or Interface row or the bridge's port list changed (a node's
        zones are recorded on its bridge, and writing them must not cost a walk of every
        interface)."""
        bridge = self.bridge()
        listed = bridge[1]["ports"] if bridge is not None else None
        if self._ports_read is not None and self._ports_read[0] == listed:
            return self._ports_read[1]
        found = _Ports({}, [], {}, {})
        walked = self._interfaces(bridge[1]) if bridge is not None else iter(())
        for _, _, _, iface in walked:
            ids = omap(iface["external_ids"])
            ofport = _ofport(iface)
            if "iface-id" in ids and ofport is not None:
                mac = ids.get("attached-mac")
                found.vifs[str(ids["iface-id"])] = VifInfo(ids["iface-id"], ofport, mac,
                                                           iface["name"])  # fmt: skip
            if ids.get("loom-uplink") == "true" and ofport is not None:
                found.uplinks.append(ofport)
            if "loom-peer" in ids:
                error = atoms(iface["error"])
                found.tunnels[iface["name"]] = (str(ids["loom-peer"]), ofport,
                                                str(error[0] if error else ""))  # fmt: skip
                forwarding = _bfd_forwarding(iface)
                if forwarding is not None:
                    found.bfd[str(ids["loom-peer"])] = forwarding
        found.uplinks.sort()
        self._ports_read = (listed, found)
        return found

    def vifs(self) -> dict[str, VifInfo]:
        """The VIFs on `br-int` with an ofport, by `iface-id` (do not modify)."""
        return self._ports().vifs

    def uplinks(self) -> list[int]:
        """The ofports of the node's uplinks (`external_ids:loom-uplink=true`: a gateway
        node's port to the physical network), sorted (do not modify)."""
        return self._ports().uplinks

    def bfd(self) -> dict[str, bool]:
        """Peer -> does this node's BFD session on its tunnel to the peer say it forwards?
        Only sessions that have come up at least once (a new session is down until both
        ends run it: that says nothing about the peer) (do not modify)."""
        return self._ports().bfd

    def neighbours(self) -> dict[str, str]:
        """The node's static neighbours on its uplink: `external_ids:loom-nexthop:IP=MAC`."""
        prefix = "loom-nexthop:"
        return {
            key[len(prefix) :]: str(value)
            for key, value in self.external_ids.items()
            if key.startswith(prefix)
        }

    def zones(self) -> dict[str, int]:
        """The conntrack zones Loom gave on this node (`br-int` `external_ids:
        loom-zone-<owner>=<zone>`, as OVN keeps `ct-zone-*`): they outlive controllers, so a
        restart or a takeover keeps every connection's zone. The same dict is returned while
        they are unchanged (callers must not modify it)."""
        bridge = self.bridge()
        if bridge is None:
            return {}
        source = bridge[1]["external_ids"]
        if self._zones_read is not None and self._zones_read[0] == source:
            return self._zones_read[1]  # (a port came or went: the zones did not change)
        found = {}
        for key, value in omap(source).items():
            if key.startswith(ZONE_KEY) and str(value).isdigit():
                found[key[len(ZONE_KEY) :]] = int(value)
        self._zones_read = (source, found)
        return found

    def zone_ops(self, zones: dict[str, int], released: Iterable[str]) -> list[Op]:
        """The operations that record `zones` (owner -> zone) on `br-int` and forget the
        `released` owners (none while the node has no `br-int`)."""
        bridge = self.bridge()
        if bridge is None:
            return []
        keys = [f"{ZONE_KEY}{owner}" for owner in [*zones, *released]]
        mutations = [delete_keys("external_ids", keys)]
        if zones:
            entries = {f"{ZONE_KEY}{owner}": str(zone) for owner, zone in zones.items()}
            mutations.append(insert_entries("external_ids", entries))
        return [mutate("Bridge", where_uuid(bridge[0]), mutations)]

    def save_zones(self, zones: dict[str, int], released: Iterable[str]) -> Callable[[], None]:
        """Record `zones` (owner -> zone) on `br-int` and forget `released` owners
        (`zone_ops`): the transaction is sent, and the function returned waits for its
        outcome (the caller pushes the flows that use the zones meanwhile: the node's
        ovsdb-server has the record before vswitchd has the flows, and the zones are not
        reported realized before the record is confirmed).

        Raises (the function returned):
            loom_common.ovsdb.TransactError: the node refused the transaction.
        """
        ops = self.zone_ops(zones, released)
        return self.send(ops) if ops else lambda: None

    def tunnels(self) -> dict[str, tuple[str, int | None, str]]:
        """Loom's tunnel ports: name -> (peer system-id, ofport or None, error) (do not
        modify)."""
        return self._ports().tunnels

    # ---- writing the node's configuration ----

    def claim_ops(self, token: int) -> list[Op]:
        """The operations that record `token` (which grows with each new master) as the
        node's fencing token, none if the node has it already; `claimed(token)` once they
        are committed (or there were none). The compare-and-set is on
        `Open_vSwitch.external_ids` as the replica has it: if it changed meanwhile the
        transaction fails and the next claim reads it again, as it does after a failed
        write (which may have failed at the fence). They are not fenced (`transact(ops,
        fenced=False)`): they replace the fence.

        Raises:
            Fenced: the node records a newer token (this controller was deposed).
            loom_common.ovsdb.TransactError: the node has no `Open_vSwitch` row.
        """
        if self.token == token and not self._recheck:
            return []  # (the replica may not show it yet)
        rows = self._table("Open_vSwitch")
        if not rows:
            raise TransactError(detail="the node has no Open_vSwitch row")
        current = next(iter(rows.values()))["external_ids"]
        recorded = omap(current).get(FENCE_KEY)
        if self.token is not None and self.token > token:  # (the replica may lag its claim)
            recorded = str(self.token)
        if recorded is not None and str(recorded).isdigit() and int(recorded) > token:
            raise Fenced(node=self.system_id, token=token, recorded=recorded)
        if recorded == str(token):
            return []
        return [
            wait("Open_vSwitch", [], columns=["external_ids"], rows=[{"external_ids": current}]),
            mutate("Open_vSwitch", [], set_keys("external_ids", {FENCE_KEY: str(token)})),
        ]

    def claimed(self, token: int) -> None:
        """`claim_ops(token)`'s operations were committed (or there were none): writes are
        fenced with `token` from now on."""
        self.token, self._recheck = token, False

    def claim(self, token: int) -> None:
        """Record `token` as the node's fencing token (`claim_ops`), unless the node has it
        already; writes after this fail once another is recorded.

        Raises:
            Fenced: the node records a newer token (this controller was deposed).
            loom_common.ovsdb.TransactError: the node refused the transaction.
        """
        ops = self.claim_ops(token)
        if ops:
            self.transact(ops, fenced=False)
        self.claimed(token)

    def fence_ops(self) -> list[Op]:
        """The fence a write starts with: a `wait` that fails the transaction unless the
        node still records this session's token (none while unfenced)."""
        if self.token is None:
            return []
        holds = ["external_ids", "includes", to_map({FENCE_KEY: str(self.token)})]
        return [wait("Open_vSwitch", [holds], columns=["_uuid"], until="!=", rows=[])]

    def transact(
        self, ops: list[Op], *, fenced: bool = True, conn: RawConnection | None = None
    ) -> list[dict[str, Any]]:
        """Run `ops` as one transaction on the node (on `conn`, default the session's),
        behind the fence (`fence_ops`) unless not `fenced`; return its results. If it fails,
        the next claim checks the node again (it may have failed at the fence).

        Raises:
            loom_common.ovsdb.TransactError: the node refused the transaction.
        """
        writer = conn or self.replica.conn
        assert writer is not None
        with self._forgetting_claim():
            results = writer.transact(DB, [*self.fence_ops(), *ops] if fenced else ops)
        if any(op["op"] == "insert" and op["table"] == "Bridge" for op in ops):
            self._bridge_written = True
        return results

    def send(self, ops: list[Op]) -> Callable[[], None]:
        """Send `ops` as one fenced transaction (`transact`) without waiting; the function
        returned waits for its outcome.

        Raises (the function returned):
            loom_common.ovsdb.TransactError: the node refused the transaction.
        """
        conn = self.replica.conn
        assert conn is not None
        request = conn.send_transact(DB, [*self.fence_ops(), *ops])

        def confirm() -> None:
            with self._forgetting_claim():
                conn.finish_transact(request)

        return confirm

    @contextlib.contextmanager
    def _forgetting_claim(self) -> Iterator[None]:
        """A write: if it fails, the next `claim` checks the node again (the write may have
        failed at the fence; writes stay fenced with the token meanwhile)."""
        try:
            yield
        except Exception:
            self._recheck = True
            raise

    def configure_ops(self, tunnels: Iterable[TunnelSpec]) -> list[Op]:
        """The operations that make `br-int` and the tunnel ports what Loom wants (none if
        they are, or while `br-int`'s creation is committed and the replica does not show
        it yet: `creating_bridge`)."""
        bridge = self.bridge()
        if bridge is None and self._bridge_written:
            return []  # written: the rest once the replica shows it
        self._bridge_written = False
        wanted = {t.port_name: t for t in tunnels}
        ops, bridge_ref, have = self._bridge_ops(bridge)
        new_ports: list[Any] = []
        for name, spec in sorted(wanted.items()):
            current = have.get(name)
            if current is not None and _tunnel_matches(current[1], spec):
                continue
            if current is not None:  # changed: replace the port
                ops.append(_remove_port(bridge_ref, current[0]))
            label = f"t{len(new_ports)}"
            ops += [
                insert("Interface", _tunnel_row(spec), uuid_name=f"{label}i"),
                insert("Port", {"name": name, "interfaces": to_named_uuid(f"{label}i"),
                                "external_ids": to_map({"loom-peer": spec.peer})},
                       uuid_name=label),
            ]  # fmt: skip
            new_ports.append(to_named_uuid(label))
        if new_ports:
            ops.append(mutate("Bridge", where_uuid(bridge_ref), [add_elements("ports", new_ports)]))
        for name, (port_uuid, _) in sorted(have.items()):
            if name not in wanted:
                ops.append(_remove_port(bridge_ref, port_uuid))
        return ops

    @property
    def creating_bridge(self) -> bool:
        """`br-int`'s creation is committed, and the replica does not show it yet."""
        return self._bridge_written and self.bridge() is None

    def configure(self, tunnels: Iterable[TunnelSpec], conn: RawConnection | None = None) -> bool:
        """Make `br-int` and the tunnel ports what Loom wants (`configure_ops`, on `conn`,
        default the session's); True if anything was written (or `br-int`'s creation is
        still to show).

        Raises:
            loom_common.ovsdb.TransactError: the node refused the transaction.
        """
        if self.creating_bridge:
            return True
        ops = self.configure_ops(tunnels)
        if not ops:
            return False
        self.transact(ops, conn=conn)
        return True

    def _bridge_ops(
        self, bridge: tuple[str, dict[str, Any]] | None
    ) -> tuple[list[Op], Any, dict[str, tuple[str, dict[str, Any]]]]:
        """The operations that make `br-int` (none yet) or fix its settings, the reference
        to it for later operations, and Loom's tunnel ports it has."""
        listener = openflow_listener(self.openflow_remote)
        if bridge is None:
            row = _bridge_row(self.external_ids.get("loom-datapath-type", "system"))
            row["ports"] = to_named_uuid("brport")
            ops: list[Op] = []
            if listener is not None:
                ops.append(_controller_insert(listener))
                row["controller"] = to_named_uuid("ctl")
            ops += [
                insert("Interface", {"name": BRIDGE, "type": "internal"}, uuid_name="briface"),
                insert("Port", {"name": BRIDGE, "interfaces": to_named_uuid("briface")},
                       uuid_name="brport"),
                insert("Bridge", row, uuid_name="br"),
                mutate("Open_vSwitch", [], [add_elements("bridges", [to_named_uuid("br")])]),
            ]  # fmt: skip
            return ops, to_named_uuid("br"), {}
        uuid, row = bridge
        fix: dict[str, Any] = {}
        ops = []
        if row["fail_mode"] != "secure":
            fix["fail_mode"] = "secure"
        if sorted(atoms(row["protocols"])) != PROTOCOLS:
            fix["protocols"] = to_set(PROTOCOLS)
        controllers = self._table("Controller")
        targets = [controllers.get(c, {}).get("target") for c in atoms(row["controller"]) if c]
        if listener is not None and targets != [listener]:
            ops.append(_controller_insert(listener))
            fix["controller"] = to_named_uuid("ctl")
        fixing = [*ops, update("Bridge", where_uuid(uuid), fix)] if fix else []
        return fixing, to_uuid(uuid), self._tunnel_ports(row)

    def qos_ops(self, wanted: dict[str, dict[str, int]]) -> list[Op]:
        """The operations that give each VIF (by `iface-id`) the rates of its port's QoS
        queue (`min_rate`, `max_rate`, kbit/s, as `Port_Binding.qos` has them), and take
        them from VIFs that have none: `max_rate` polices the VM's traffic into br-int
        (`ingress_policing_rate`, a burst of a tenth of it, at least 1000 kbit), and an HTB
        queue on the VIF's port caps the traffic to the VM at `max_rate`, guaranteeing
        `min_rate`. Loom's QoS rows carry `external_ids:loom-port`."""
        bridge = self.bridge()
        if bridge is None:
            return []
        qos_rows, queues = self._table("QoS"), self._table("Queue")
        ops: list[Op] = []
        for port_uuid, port, iface_uuid, iface in self._interfaces(bridge[1]):
            iface_id = omap(iface["external_ids"]).get("iface-id")
            if iface_id is None:
                continue
            rates = wanted.get(str(iface_id), {})
            ops += _policing_ops(iface_uuid, iface, rates.get("max_rate", 0))
            current = atoms(port["qos"])
            qos = qos_rows.get(current[0]) if current else None
            if _qos_matches(qos, queues, rates):
                continue
            if qos is not None and omap(qos["external_ids"]).get("loom-port") is None:
                continue  # an operator's QoS: left alone
            ops += _qos_ops(port_uuid, current[0] if qos is not None else None, qos,
                            str(iface_id), rates)  # fmt: skip
        return ops

    def configure_qos(self, wanted: dict[str, dict[str, int]]) -> bool:
        """Give each VIF the rates of its port's QoS queue (`qos_ops`); True if anything
        was written.

        Raises:
            loom_common.ovsdb.TransactError: the node refused the transaction.
        """
        ops = self.qos_ops(wanted)
        if not ops:
            return False
        self.transact(ops)
        return True

    def _tunnel_ports(self, bridge: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Loom's tunnel ports on `bridge`: name -> (port uuid, interface row)."""
        return {
            iface["name"]: (port_uuid, iface)
            for port_uuid, _, _, iface in self._interfaces(bridge)
            if "loom-peer" in omap(iface["external_ids"])
        }


def _bfd_forwarding(iface: dict[str, Any]) -> bool | None:
    """An interface's BFD verdict: forwarding or not; None where BFD is off or has never
    come up (`bfd_status:flap_count` counts the changes of `forwarding`)."""
    status = omap(iface["bfd_status"])
    if not status:
        return None
    forwarding = status.get("forwarding") == "true"
    flaps = str(status.get("flap_count", "0"))
    if not forwarding and (not flaps.isdigit() or int(flaps) == 0):
        return None
    return forwarding


def _ofport(iface: dict[str, Any]) -> int | None:
    value = atoms(iface["ofport"])
    if not value or not isinstance(value[0], int) or value[0] <= 0:
        return None
    return value[0]


def _bridge_row(dp_type: str) -> dict[str, Any]:
    return {
        "name": BRIDGE,
        "fail_mode": "secure",
        "datapath_type": "" if dp_type == "system" else dp_type,
        "protocols": to_set(PROTOCOLS),
        "other_config": to_map({"disable-in-band": "true"}),
    }


def openflow_listener(remote: str | None) -> str | None:
    """What `br-int` listens on for a node whose OpenFlow address is `ssl:IP:PORT`
    (`pssl:PORT:IP`) or `tcp:IP:PORT` (`ptcp:PORT:IP`); None for a management socket."""
    kind, _, where = (remote or "").partition(":")
    if kind not in ("ssl", "tcp"):
        return None
    host, _, port = where.rpartition(":")
    return f"p{kind}:{port}:{host}"


def _controller_insert(target: str) -> Op:
    return insert("Controller", {"target": target}, uuid_name="ctl")


def _tunnel_row(spec: TunnelSpec) -> dict[str, Any]:
    options = {"remote_ip": spec.remote_ip, "key": "flow"}
    row: dict[str, Any] = {
        "name": spec.port_name,
        "type": spec.encap,
        "options": to_map(options),
        "external_ids": to_map({"loom-peer": spec.peer, "loom-encap": spec.encap}),
    }
    if spec.bfd:
        row["bfd"] = to_map({"enable": "true"})
    if spec.ofport_request is not None:
        row["ofport_request"] = spec.ofport_request
    return row


def _tunnel_matches(iface: dict[str, Any], spec: TunnelSpec) -> bool:
    options = omap(iface["options"])
    bfd = omap(iface["bfd"]).get("enable") == "true"
    return (
        iface["type"] == spec.encap
        and options.get("remote_ip") == spec.remote_ip
        and omap(iface["external_ids"]).get("loom-peer") == spec.peer
        and bfd == spec.bfd
    )


def _policing_ops(iface_uuid: str, iface: dict[str, Any], rate: int) -> list[Op]:
    burst = max(rate // 10, 1000) if rate else 0
    if iface["ingress_policing_rate"] == rate and iface["ingress_policing_burst"] == burst:
        return []
    policing = {"ingress_policing_rate": rate, "ingress_policing_burst": burst}
    return [update("Interface", where_uuid(iface_uuid), policing)]


def _queue_config(rates: dict[str, int]) -> dict[str, str]:
    """A Queue's (and its QoS's) other_config for `rates` (kbit/s; OVS takes bit/s)."""
    config = {}
    if rates.get("max_rate"):
        config["max-rate"] = str(rates["max_rate"] * 1000)
    if rates.get("min_rate"):
        config["min-rate"] = str(rates["min_rate"] * 1000)
    return config


def _qos_matches(
    qos: dict[str, Any] | None, queues: dict[str, dict[str, Any]], rates: dict[str, int]
) -> bool:
    want = _queue_config(rates)
    if qos is None:
        return not want
    if omap(qos["external_ids"]).get("loom-port") is None:
        return True  # not Loom's
    queue_uuids = list(omap(qos["queues"]).values())
    queue = queues.get(queue_uuids[0]) if len(queue_uuids) == 1 else None
    return bool(want) and queue is not None and omap(queue["other_config"]) == want


def _qos_ops(
    port_uuid: str,
    old_uuid: str | None,
    old: dict[str, Any] | None,
    iface_id: str,
    rates: dict[str, int],
) -> list[Op]:
    """Point the port at a new QoS row for `rates` (or at none), deleting Loom's old one."""
    ops: list[Op] = []
    want = _queue_config(rates)
    label = f"q{port_uuid.replace('-', '_')}"
    if want:
        ops += [
            insert("Queue", {"other_config": to_map(want)}, uuid_name=f"{label}_0"),
            insert("QoS", {"type": "linux-htb",
                           "other_config": to_map({k: v for k, v in want.items()
                                                   if k == "max-rate"}),
                           "queues": to_map({0: to_named_uuid(f"{label}_0")}),
                           "external_ids": to_map({"loom-port": iface_id})},
                   uuid_name=label),
        ]  # fmt: skip
    qos_ref = to_named_uuid(label) if want else to_set([])
    ops.append(update("Port", where_uuid(port_uuid), {"qos": qos_ref}))
    if old is not None and old_uuid is not None:
        ops.append(delete("QoS", where_uuid(old_uuid)))
        for queue_uuid in omap(old["queues"]).values():
            ops.append(delete("Queue", where_uuid(queue_uuid)))
    return ops


def _remove_port(bridge_ref: Any, port_uuid: str) -> Op:
    return mutate(
        "Bridge", where_uuid(bridge_ref), [remove_elements("ports", [to_uuid(port_uuid)])]
    )


class Manager:
    """Listens for transport nodes' OVSDB connections (`ptcp:PORT:IP`, `pssl:PORT:IP` or
    `punix:PATH`).

    Over `pssl:` every connection is TLS: the node must present a certificate signed by the
    authority `tls` trusts (`loom_common.pki.server_context`), or it is refused at once; its
    certificate's name goes with its session (`NodeSession.certified`) for the controller
    to check against the `system-id` the node reports (`loom_common.pki.names_node`).
    """

    def __init__(
        self, listen: str, wake: Callable[[], None], tls: ssl.SSLContext | None = None
    ) -> None:
        """Describe the listener; `start()` binds it.

        Args:
            listen: `ptcp:PORT:IP` or `pssl:PORT:IP` (C tools' order; PORT 0 picks a free
                port) or `punix:PATH`.
            wake: called from a connection's keep-alive thread when updates arrived.
            tls: the TLS context of a `pssl:` listener (required there, refused elsewhere).
        """
        if listen.startswith("pssl:") != (tls is not None):
            raise ValueError("a pssl: listener needs a TLS context, and only it takes one")
        self.listen = listen
        self.wake = wake
        self.tls = tls
        self.refused: list[tuple[str, str]] = []
        """(peer, why) of each connection refused at the TLS handshake."""
        self.kept: set[NodeSession] = set()
        """Sessions whose keep-alive thread kept updates since the owner took them (the
        socket no longer says so: its bytes are read)."""
        self._sock: socket.socket | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._handshakes: list[Future[tuple[ssl.SSLSocket, str, str | None] | None]] = []
        self._done_r, self._done_w = os.pipe()
        os.set_blocking(self._done_r, False)
        os.set_blocking(self._done_w, False)

    def start(self) -> Manager:
        """Bind and listen (non-blocking)."""
        kind, _, where = self.listen.partition(":")
        if kind in ("ptcp", "pssl"):
            port, _, host = where.partition(":")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host or "127.0.0.1", int(port)))
        elif kind == "punix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where)
            unixsock.bind(sock, where)
        else:
            raise ValueError(f"manager listen address must be ptcp:, pssl: or punix:, "
                             f"not {self.listen!r}")  # fmt: skip
        sock.listen(BACKLOG)
        sock.setblocking(False)
        self._sock = sock
        return self

    @property
    def target(self) -> str:
        """What a node's Manager row says to reach this listener."""
        assert self._sock is not None, "start() first"
        name = self._sock.getsockname()
        if isinstance(name, tuple):
            return f"{'ssl' if self.tls is not None else 'tcp'}:{name[0]}:{name[1]}"
        return f"unix:{name}"

    def fds(self) -> list[int]:
        """What to wait on before `accept`: the listening socket, and a pipe that a
        finished TLS handshake makes readable."""
        assert self._sock is not None
        return [self._sock.fileno(), self._done_r]

    def accept(self) -> list[NodeSession]:
        """Accept every pending connection; return the new sessions (replicas not started).

        Over `pssl:` a connection's TLS handshake runs on a small pool (`HANDSHAKERS`
        threads, each `HANDSHAKE_S` at most), not here: at a cold start thousands of nodes
        dial at once, and a slow or silent peer would hold every other one up. A finished
        handshake makes one of `fds()` readable, and the next `accept` returns its session.
        """
        assert self._sock is not None
        sessions: list[NodeSession] = []
        while True:
            try:
                sock, address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            sock.setblocking(True)
            peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else "unix"
            if self.tls is None:
                sessions.append(self._session(sock, peer, None))
                continue
            if self._pool is None:
                self._pool = ThreadPoolExecutor(HANDSHAKERS, thread_name_prefix="tls-handshake")
            future = self._pool.submit(self._handshake, sock, peer)
            future.add_done_callback(self._handshake_done)
            self._handshakes.append(future)
        with contextlib.suppress(BlockingIOError):
            os.read(self._done_r, 4096)
        still: list[Future[tuple[ssl.SSLSocket, str, str | None] | None]] = []
        for future in self._handshakes:
            if not future.done():
                still.append(future)
            elif (done := future.result()) is not None:
                sessions.append(self._session(*done))
        self._handshakes = still
        return sessions

    def _handshake(self, sock: socket.socket, peer: str
                   ) -> tuple[ssl.SSLSocket, str, str | None] | None:  # fmt: skip
        """TLS on an accepted connection (a pool thread): (socket, peer, the certificate's
        name), or None if the node was refused (logged and noted in `refused`)."""
        assert self.tls is not None
        sock.settimeout(HANDSHAKE_S)
        try:
            secured = self.tls.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log.warning("node at %s refused: TLS: %s", peer, exc)
            self.refused.append((peer, str(exc)))
            sock.close()
            return None
        return secured, peer, peer_name(secured)

    def _handshake_done(self, _: object) -> None:
        with contextlib.suppress(OSError):  # (full: readable already; closed: stopping)
            os.write(self._done_w, b"x")

    def _session(self, sock: socket.socket, peer: str, certified: str | None) -> NodeSession:
        sock.settimeout(30.0)
        conn = RawConnection.accepted(sock, f"node@{peer}")
        session = NodeSession(conn, peer, self.wake, self.kept)
        session.certified = certified
        return session

    def close(self) -> None:
        """Stop listening (and handshaking)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for future in self._handshakes:  # (their sockets were never taken)
            if not future.cancelled() and (done := future.result()) is not None:
                done[0].close()
        self._handshakes = []
        for fd in (self._done_r, self._done_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
