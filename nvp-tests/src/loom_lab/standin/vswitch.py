"""What writes a stand-in node's OVSDB besides its controllers: the hypervisor (its
installer and its VMs' VIFs, as `loom_ovs.sandbox` writes a real node's with `ovs-vsctl`)
and ovs-vswitchd (the ofports it gives interfaces, the BFD status it reports). Pure: each
function returns the operations of one transaction; the fleet runs them.

- `node_ops`: the `Open_vSwitch` row a real node's installer writes (`ovs-vsctl init` and
  `set Open_vSwitch . external_ids:...` in `OvsNode.start`): `system-id`, `loom-openflow`
  (where the stand-in's OpenFlow socket is), `loom-encap-ip`, `loom-datapath-type`, and one
  `Manager` row per controller (`max_backoff` 1000 ms, `inactivity_probe` 5000 ms). The
  sandbox's underlay bridge `br-phy` is not made (no controller reads it).
- `add_vif_ops` / `remove_vif_ops`: a VM's VIF plugged into and unplugged from `br-int`,
  as `OvsNode.add_vif` does: `--may-exist add-br br-int` with fail mode secure (the
  hypervisor makes br-int if the controller has not yet), `add-port` with
  `external_ids:iface-id`, `attached-mac`, `iface-status=active`; `--if-exists del-port`
  (the Port and its Interface are then garbage collected).
- `Vswitchd.writes`: after a commit that changed bridges, ports or interfaces, the
  ofports (a bridge's own interface gets OFPP_LOCAL, 65534; others `ofport_request` if
  free, else OVS's allocator, `ofproto.c` `alloc_ofp_port`: the next number after the last
  one given, wrapping at 32768, passing over numbers freed in the last hour; so a VIF
  unplugged and plugged again gets a new number, as on OVS) and `bfd_status` (a session
  enabled reports `forwarding=true`, `state=up`, flap count 1: the stand-in pretends the
  peer runs BFD and answers; a real session is down until the peer's comes up). Nothing
  else vswitchd writes (`datapath_id`, `Interface` status columns, `cur_cfg`, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loom_lab.standin.db import Database

BRIDGE = "br-int"
OFPP_LOCAL = 65534
MAX_AUTO_OFPORT = 32768
"""OVS gives automatic numbers below this (the upper half is for controllers' requests)."""
REUSE_AFTER = 3600.0
"""Seconds before OVS gives a freed ofport again (when it must, the least recently freed)."""
BFD_UP = ["map", [["diagnostic", "No Diagnostic"], ["flap_count", "1"], ["forwarding", "true"],
                  ["remote_diagnostic", "No Diagnostic"], ["remote_state", "up"],
                  ["state", "up"]]]  # fmt: skip
NO_MAP = ["map", []]
NO_SET = ["set", []]


def _map(items: dict[str, str]) -> list[Any]:
    return ["map", [[k, v] for k, v in sorted(items.items())]]


def _by_uuid(uuid: str) -> list[Any]:
    return [["_uuid", "==", ["uuid", uuid]]]


def _atoms(value: Any) -> list[Any]:
    if isinstance(value, list) and value and value[0] == "set":
        atoms: list[Any] = value[1]
        return atoms
    return [value]


def node_ops(system_id: str, encap_ip: str, openflow: str, managers: Iterable[str]) -> list[Any]:
    """The transaction that makes a new node's `Open_vSwitch` row and `Manager` rows."""
    targets = sorted(managers)
    ops: list[Any] = [
        {"op": "insert", "table": "Manager", "uuid-name": f"m{i}",
         "row": {"target": target, "max_backoff": 1000, "inactivity_probe": 5000}}
        for i, target in enumerate(targets)
    ]  # fmt: skip
    ids = {"system-id": system_id, "loom-openflow": openflow, "loom-encap-ip": encap_ip,
           "loom-datapath-type": "system"}  # fmt: skip
    managers_ref = ["set", [["named-uuid", f"m{i}"] for i in range(len(targets))]]
    ops.append({"op": "insert", "table": "Open_vSwitch",
                "row": {"external_ids": _map(ids), "manager_options": managers_ref}})  # fmt: skip
    return ops


def set_managers_ops(db: Database, managers: Iterable[str]) -> list[Any]:
    """The transaction that replaces the node's `Manager` rows (`set_managers`)."""
    targets = sorted(managers)
    ops: list[Any] = [
        {"op": "insert", "table": "Manager", "uuid-name": f"m{i}",
         "row": {"target": target, "max_backoff": 1000, "inactivity_probe": 5000}}
        for i, target in enumerate(targets)
    ]  # fmt: skip
    managers_ref = ["set", [["named-uuid", f"m{i}"] for i in range(len(targets))]]
    ops.append({"op": "update", "table": "Open_vSwitch", "where": [],
                "row": {"manager_options": managers_ref}})  # fmt: skip
    return ops


def bridge_uuid(db: Database, name: str = BRIDGE) -> str | None:
    """The uuid of bridge `name`, if the node has it."""
    return db.find("Bridge", "name", name)


def _ensure_bridge(db: Database) -> tuple[list[Any], list[Any]]:
    """`--may-exist add-br br-int -- set Bridge br-int fail-mode=secure`: the operations,
    and the reference to br-int for later ones."""
    uuid = bridge_uuid(db)
    if uuid is not None:
        secure = {"op": "update", "table": "Bridge", "where": _by_uuid(uuid),
                  "row": {"fail_mode": "secure"}}  # fmt: skip
        return [secure], ["uuid", uuid]
    ops: list[Any] = [
        {"op": "insert", "table": "Interface", "uuid-name": "brif",
         "row": {"name": BRIDGE, "type": "internal"}},
        {"op": "insert", "table": "Port", "uuid-name": "brport",
         "row": {"name": BRIDGE, "interfaces": ["named-uuid", "brif"]}},
        {"op": "insert", "table": "Bridge", "uuid-name": "br",
         "row": {"name": BRIDGE, "fail_mode": "secure", "ports": ["named-uuid", "brport"]}},
        {"op": "mutate", "table": "Open_vSwitch", "where": [],
         "mutations": [["bridges", "insert", ["set", [["named-uuid", "br"]]]]]},
    ]  # fmt: skip
    return ops, ["named-uuid", "br"]


def add_vif_ops(db: Database, name: str, iface_id: str, mac: str,
                ofport_request: int | None = None) -> list[Any]:  # fmt: skip
    """The transaction that plugs VIF `name` (a VM's port, `iface-id`, MAC) into br-int."""
    ops, bridge = _ensure_bridge(db)
    ids = {"iface-id": iface_id, "attached-mac": mac, "iface-status": "active"}
    iface: dict[str, Any] = {"name": name, "external_ids": _map(ids)}
    if ofport_request is not None:
        iface["ofport_request"] = ofport_request
    ops += [
        {"op": "insert", "table": "Interface", "uuid-name": "vif", "row": iface},
        {"op": "insert", "table": "Port", "uuid-name": "vifport",
         "row": {"name": name, "interfaces": ["named-uuid", "vif"]}},
        {"op": "mutate", "table": "Bridge", "where": [["_uuid", "==", bridge]],
         "mutations": [["ports", "insert", ["set", [["named-uuid", "vifport"]]]]]},
    ]  # fmt: skip
    return ops


def remove_vif_ops(db: Database, name: str) -> list[Any]:
    """The transaction that unplugs VIF `name` from br-int (none if it is not there)."""
    bridge = bridge_uuid(db)
    port = db.find("Port", "name", name)
    if bridge is None or port is None:
        return []
    return [{"op": "mutate", "table": "Bridge", "where": _by_uuid(bridge),
             "mutations": [["ports", "delete", ["set", [["uuid", port]]]]]}]  # fmt: skip


@dataclass
class _Allocator:
    """One bridge's OpenFlow port numbers (ofproto's `alloc_port_no` and `ofport_usage`)."""

    last: int = 0
    used: dict[int, float] = field(default_factory=dict)
    """Port -> when it was freed (inf: in use)."""
    given: dict[str, int] = field(default_factory=dict)
    """Interface uuid -> its port."""

    def allocate(self, requested: int | None, now: float) -> int | None:
        if requested is not None and self.used.get(requested, 0.0) != float("inf"):
            self.used[requested] = float("inf")
            return requested
        start, oldest, oldest_at = self.last, None, float("inf")
        while True:
            self.last = self.last + 1 if self.last + 1 < MAX_AUTO_OFPORT else 1
            freed = self.used.get(self.last)
            if freed is None or freed < now - REUSE_AFTER:
                self.used[self.last] = float("inf")
                return self.last
            if freed < oldest_at:
                oldest, oldest_at = self.last, freed
            if self.last == start or (start == 0 and self.last == MAX_AUTO_OFPORT - 1):
                if oldest is not None:
                    self.used[oldest] = float("inf")
                return oldest

    def free(self, port: int, now: float) -> None:
        if port < OFPP_LOCAL:
            self.used[port] = now


class Vswitchd:
    """ovs-vswitchd's share of one node's database (see the module docstring)."""

    def __init__(self) -> None:
        self._bridges: dict[str, _Allocator] = {}
        self._settled: dict[str, dict[str, Any]] = {}
        """Interface uuid -> its row as last found needing nothing (rows are replaced,
        never changed in place: the same object is the same row)."""

    @staticmethod
    def due(changes: Iterable[tuple[str, str, Any, Any]]) -> bool:
        """Whether a commit's changes may give vswitchd something to write: a bridge
        made, removed or given other ports, a port's interfaces, an interface."""
        for table, _, old, new in changes:
            if table in ("Port", "Interface"):
                return True
            if table == "Bridge" and (old is None or new is None
                                      or old.get("ports") != new.get("ports")):  # fmt: skip
                return True
        return False

    def writes(self, db: Database, now: float) -> list[Any]:
        """The operations vswitchd would write now: ofports, BFD status."""
        ops: list[Any] = []
        for uuid, bridge in db.rows["Bridge"].items():
            allocator = self._bridges.setdefault(uuid, _Allocator())
            on_bridge = _interfaces(db, bridge)
            for gone in [u for u in allocator.given if u not in on_bridge]:
                allocator.free(allocator.given.pop(gone), now)
            for iface_uuid, row in on_bridge.items():
                if self._settled.get(iface_uuid) is row:
                    continue
                want = _iface_writes(allocator, iface_uuid, row, bridge.get("name"), now)
                if want:
                    ops.append({"op": "update", "table": "Interface",
                                "where": _by_uuid(iface_uuid), "row": want})  # fmt: skip
                else:
                    self._settled[iface_uuid] = row
        for gone in [u for u in self._settled if u not in db.rows["Interface"]]:
            del self._settled[gone]
        for gone in [u for u in self._bridges if u not in db.rows["Bridge"]]:
            del self._bridges[gone]
        return ops


def _interfaces(db: Database, bridge: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Interface rows of a bridge's ports, by uuid."""
    found = {}
    for port_ref in _atoms(bridge.get("ports", NO_SET)):
        port = db.rows["Port"].get(port_ref[1])
        for iface_ref in _atoms(port.get("interfaces", NO_SET)) if port else []:
            row = db.rows["Interface"].get(iface_ref[1])
            if row is not None:
                found[iface_ref[1]] = row
    return found


def _iface_writes(allocator: _Allocator, uuid: str, row: dict[str, Any], bridge_name: Any,
                  now: float) -> dict[str, Any]:  # fmt: skip
    """What vswitchd writes to one interface of a bridge: its ofport (given once), its BFD
    status."""
    want: dict[str, Any] = {}
    ofport = allocator.given.get(uuid)
    if ofport is None:
        if row.get("name") == bridge_name:
            ofport = OFPP_LOCAL
        else:
            requested = row.get("ofport_request")
            ofport = allocator.allocate(requested if isinstance(requested, int) else None, now)
        if ofport is not None:
            allocator.given[uuid] = ofport
    if row.get("ofport", NO_SET) != (ofport or NO_SET):
        want["ofport"] = ofport if ofport is not None else NO_SET
    bfd = {k: v for k, v in row.get("bfd", NO_MAP)[1]}
    status = BFD_UP if bfd.get("enable") == "true" and ofport else NO_MAP
    if row.get("bfd_status", NO_MAP) != status:
        want["bfd_status"] = status
    return want
