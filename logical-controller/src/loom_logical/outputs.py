"""The engine's output relations as rows of the universal database, and their shards.

Each output relation of `rules/logical` fills one `Loom_Universal` table. A row's
*identity* is what names it across recomputations: the table's index where it has one
(a `Port_Binding` is its `logical_port`, a `Universal_Flow` group its datapath and source
object, whatever their other columns become), else the whole row (a `Warning`). The writer
keys everything by (table, identity).

Shards: per-datapath rows (flows, bindings, replication sets, datapaths) belong to shard
`sNN` = datapath key mod `DATAPATH_SHARDS` (the flows every switch shares, of datapath 0,
to `s00`); the rest (tunnels, node endpoints, gateway assignments, warnings) to
`GLOBAL_SHARD`. One controller masters each shard and writes only its rows.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DATAPATH_SHARDS = 64
GLOBAL_SHARD = "global"

Identity = tuple[Any, ...]
Columns = dict[str, Any]


def datapath_shard(key: int) -> str:
    """The shard of logical datapath `key`."""
    return f"s{key % DATAPATH_SHARDS:02d}"


def all_shards() -> list[str]:
    """Every shard: the datapath shards and the global one."""
    return [datapath_shard(i) for i in range(DATAPATH_SHARDS)] + [GLOBAL_SHARD]


def _opt(value: Any) -> Any:
    """An engine Option as an OVSDB optional column (python-ovs: a list of 0 or 1)."""
    return [] if value is None else [value]


def _ranked(pairs: Any) -> dict[int, str]:
    """(weight, system-id) pairs as an OVSDB integer -> string map."""
    return {int(w): str(s) for w, s in pairs}


@dataclass(frozen=True)
class OutputTable:
    """How one output relation becomes rows of one universal table."""

    relation: str
    table: str
    columns: Callable[[tuple[Any, ...]], Columns]
    """The engine row as {column: python value} (optional and set columns as lists)."""
    identity_columns: tuple[str, ...]
    """The columns that name a row: the table's index, or all of them."""
    shard_column: str | None
    """The column holding the datapath key that decides the shard (None: global)."""
    lean: bool = False
    """The writer forgets a row's columns once the database has them (`Writer`): they are
    the engine's output, read back from it when they must be written again."""

    @property
    def shard_columns(self) -> tuple[str, ...]:
        """The columns to read to know an existing row's shard."""
        return (self.shard_column,) if self.shard_column else ()

    @property
    def updatable(self) -> bool:
        """True if a row can change without changing its identity (an update, not a new row)."""
        return self.relation != "Warning"

    def identity(self, columns: Columns) -> Identity:
        """The identity of a row given as columns."""
        return tuple(columns[c] for c in self.identity_columns)

    def shard(self, columns: Columns) -> str:
        """The shard of a row given as columns."""
        return datapath_shard(columns[self.shard_column]) if self.shard_column else GLOBAL_SHARD


class Packed(str):
    """A set column's strings as one, joined by newlines (`packed`): the writer holds every
    universal flow's text (3.2M at S=1.0), and as strings in a list a row they cost ~60
    bytes a flow more (a string's header, a list's slot). `to_json` gives the set."""

    __slots__ = ()

    def items(self) -> list[str]:
        """The strings packed."""
        return self.split("\n") if self else []


def packed(texts: Iterable[str]) -> Packed | list[str]:
    """`texts` as a `Packed` string, or as a list if one has a newline of its own."""
    items = list(texts)
    joined = Packed("\n".join(items))
    return joined if joined.count("\n") == max(len(items) - 1, 0) and items != [""] else items


def unpacked(value: Packed | list[str]) -> list[str]:
    """The strings `packed` gave."""
    return value.items() if isinstance(value, Packed) else value


def _flow_group_columns(r: tuple[Any, ...]) -> Columns:
    dp, source, flows, local_flows = r
    return {
        "datapath": dp,
        "source": source,
        "flows": packed(flows),
        "local_flows": packed(local_flows),
        "cookie": zlib.crc32(source.encode()),
    }


def parse_flow(text: str) -> dict[str, Any]:
    """One flow of `Universal_Flow.flows` ("pipeline TAB stage TAB priority TAB match TAB
    actions") as {pipeline, stage, priority, match, actions}."""
    pipeline, stage, priority, match, actions = text.split("\t")
    return {
        "pipeline": pipeline,
        "stage": stage,
        "priority": int(priority),
        "match": match,
        "actions": actions,
    }


def _binding_columns(r: tuple[Any, ...]) -> Columns:
    port, dp, name, key, ptype, mac, ips, vif, peer, gw, vlan, stateful, qos = r
    return {
        "logical_port": port,
        "datapath": dp,
        "name": name,
        "port_key": key,
        "type": ptype,
        "mac": _opt(mac),
        "ips": sorted(ips),
        "vif_id": _opt(vif),
        "peer": _opt(peer),
        "gateway_service": _opt(gw),
        "vlan": _opt(vlan),
        "stateful": stateful,
        "qos": dict(sorted(dict(qos).items())),
    }


def _datapath_columns(r: tuple[Any, ...]) -> Columns:
    key, kind, config_id, tenant, name, mode, zone, encap = r
    return {
        "key": key,
        "kind": kind,
        "config_id": config_id,
        "tenant": tenant,
        "name": name,
        "shard": datapath_shard(key),
        "replication_mode": _opt(mode),
        "transport_zone": _opt(zone),
        "encap": _opt(encap),
    }


def _replication_columns(r: tuple[Any, ...]) -> Columns:
    dp, mode, nodes = r
    return {"datapath": dp, "mode": mode, "service_nodes": _ranked(nodes)}


def _tunnel_columns(r: tuple[Any, ...]) -> Columns:
    a, b, encap, ip, bfd = r
    return {"from_node": a, "to_node": b, "encap": encap, "remote_ip": ip, "bfd": bfd}


def _endpoint_columns(r: tuple[Any, ...]) -> Columns:
    node, encap, ip = r
    return {"node": node, "encap": encap, "ip": ip}


def _gateway_columns(r: tuple[Any, ...]) -> Columns:
    service, name, kind, nodes, ip, nh, vlan, umac = r
    return {
        "service": service,
        "name": name,
        "kind": kind,
        "nodes": _ranked(nodes),
        "uplink_ip": _opt(ip),
        "uplink_next_hop": _opt(nh),
        "uplink_vlan": _opt(vlan),
        "uplink_mac": _opt(umac),
    }


def _warning_columns(r: tuple[Any, ...]) -> Columns:
    source, kind, message = r
    return {"source": source, "kind": kind, "message": message}


OUTPUTS: Mapping[str, OutputTable] = {
    t.relation: t
    for t in (
        OutputTable(
            "Flow_Group",
            "Universal_Flow",
            _flow_group_columns,
            ("datapath", "source"),
            "datapath",
            lean=True,
        ),
        OutputTable("Datapath", "Datapath", _datapath_columns, ("key",), "key"),
        OutputTable(
            "Port_Binding", "Port_Binding", _binding_columns, ("logical_port",), "datapath"
        ),
        OutputTable(
            "Replication_Set", "Replication_Set", _replication_columns, ("datapath",), "datapath"
        ),
        OutputTable("Tunnel", "Tunnel", _tunnel_columns, ("from_node", "to_node", "encap"), None),
        OutputTable("Node_Endpoint", "Node_Endpoint", _endpoint_columns, ("node", "encap"), None),
        OutputTable(
            "Gateway_Assignment", "Gateway_Assignment", _gateway_columns, ("service",), None
        ),
        OutputTable("Warning", "Warning", _warning_columns, ("source", "kind", "message"), None),
    )
}
"""Output relation name -> how it is written."""

TABLE_OUTPUT: Mapping[str, OutputTable] = {t.table: t for t in OUTPUTS.values()}
"""Universal table name -> its output relation."""


def shard_of_json(table: str, row: Mapping[str, Any]) -> str:
    """The shard of a universal-DB row read as OVSDB JSON (its shard column, if any)."""
    column = TABLE_OUTPUT[table].shard_column
    return datapath_shard(int(row[column])) if column else GLOBAL_SHARD
