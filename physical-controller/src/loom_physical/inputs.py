"""The physical rules' inputs from the universal DB's rows (OVSDB JSON, as a monitor sends
them): one function per input relation, shared by the controller (row by row, as updates
arrive) and the snapshot tests (the whole database at once)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from loom_ovs.manager import atoms, omap

Row = tuple[Any, ...]


def opt(value: Any) -> str:
    """An optional string column ("" when empty)."""
    found = atoms(value)
    return str(found[0]) if found and isinstance(found[0], str) and found[0] != "set" else ""


def binding(row: Mapping[str, Any]) -> Row:
    """The `Binding` row of a `Port_Binding` row."""
    vlan = atoms(row["vlan"])
    return (
        row["logical_port"], row["datapath"], row["port_key"], row["type"],
        opt(row["vif_id"]), opt(row["peer"]), opt(row["chassis"]),
        opt(row["gateway_service"]), vlan[0] if vlan and vlan[0] != "set" else None,
    )  # fmt: skip


def marking(row: Mapping[str, Any]) -> Row | None:
    """The `Marking` row of a `Port_Binding` row (None: its QoS marks nothing)."""
    dscp = omap(row.get("qos", ["map", []])).get("dscp")
    return (row["logical_port"], int(dscp)) if dscp is not None else None


def datapaths(rows: Iterable[Mapping[str, Any]]) -> set[Row]:
    """The `Datapath` rows of the `Datapath` table."""
    return {(row["key"], row["kind"], row["config_id"], opt(row.get("encap", ["set", []])))
            for row in rows}  # fmt: skip


def endpoints(rows: Iterable[Mapping[str, Any]]) -> set[Row]:
    """The `Endpoint` rows of the `Node_Endpoint` table."""
    return {(row["node"], row["encap"], row["ip"]) for row in rows}


def gateways(rows: Iterable[Mapping[str, Any]]) -> tuple[set[Row], set[Row]]:
    """The `Gateway` and `GatewayNode` rows of the `Gateway_Assignment` table."""
    services, nodes = set(), set()
    for row in rows:
        services.add((row["service"], row["kind"], opt(row["uplink_next_hop"]),
                      opt(row["uplink_mac"]), opt(row["uplink_ip"])))  # fmt: skip
        for weight, node in omap(row["nodes"]).items():
            nodes.add((row["service"], int(weight), node))
    return services, nodes


def service_nodes(rows: Iterable[Mapping[str, Any]]) -> set[Row]:
    """The `ServiceNode` rows of the `Replication_Set` table (switches in service-node mode)."""
    found = set()
    for row in rows:
        if row["mode"] == "service-node":
            for weight, node in omap(row["service_nodes"]).items():
                found.add((row["datapath"], int(weight), node))
    return found
