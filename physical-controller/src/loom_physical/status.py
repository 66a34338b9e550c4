"""What a physical controller reports, as database operations (pure: no I/O).

The controller writes them: `Port_Binding.chassis`/`up` into the universal DB (the logical
controller reads where each VIF is), and into the config DB each node's status
(`Transport_Node.status`), each port's (`Logical_Switch_Port.status`), where each gateway
service is active (`Gateway_Service.status`) and the generation every node has realized
(`Loom_Global.realized_generation`).

A node's status changes when the node does (`loom_common.realized`): its row is written
when it was pushed something, or its message, BFD verdicts or connection changed, and each
controller publishes once per change the generation every node it masters has realized.
(Rewriting every node's `realized_generation` made each change a transaction of a row per
node mastered, 1,500 at NVP's scale, read back by the API server and every controller.)
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from loom_common.ovsdb.codec import omap, optional_text, to_map, to_set
from loom_common.ovsdb.ops import Op, mutate, set_keys, update, where_uuid
from loom_common.realized import PUBLISHED, as_generation

PORT_GONE = {"up": "false", "realized": "false", "transport_node": ""}
"""A port's status when its VIF is on no node this controller masters."""


class NodeReport(NamedTuple):
    """What a controller says of a node it masters (a named tuple: a pass may advance a
    thousand of them, and a frozen dataclass is several times dearer to make)."""

    realized: int
    """The universal generation its table realizes."""
    message: str
    """What keeps it from realizing more ("" when nothing)."""
    bfd: Mapping[str, bool]
    """Its BFD sessions' verdicts, by peer."""
    synced: bool
    """Its whole table has been pushed since it connected or was taken over."""
    lost: bool = False
    """The table pushed to it is not known to be its switch's any more (its ovs-vswitchd
    restarted, or may have: `core.table_unknown`); it realizes nothing (`realized` 0) until
    its whole table is in again."""


def binding_ops(
    bindings: Mapping[str, Mapping[str, Any]],
    located: Mapping[str, str],
    check: Iterable[str],
    masters: set[str],
    synced: set[str],
    uuids: Mapping[str, str],
) -> list[Op]:
    """Universal DB updates of `Port_Binding.chassis`/`up` for the ports in `check`:
    `located` says where each VIF is among the nodes mastered (`masters`); a port is up
    once its node's table is whole (`synced`). Rows are named by uuid (`uuids`: port ->
    its row's): ovsdb-server finds a row by `_uuid` at once, by another column by
    looking at every row (15,000 updates at cold start, S=0.5: quadratic)."""
    ops: list[Op] = []
    for port in check:
        row = bindings.get(port)
        if row is None:
            continue
        node = located.get(port)
        chassis = optional_text(row["chassis"])
        where = where_uuid(uuids[port])
        if node is not None and node in synced:
            if chassis != node or row["up"] is not True:
                ops.append(update("Port_Binding", where, {"chassis": node, "up": True}))
        elif node is None and chassis in masters and row["type"] == "vif":
            # its VIF left a node this controller masters
            ops.append(update("Port_Binding", [*where, ["chassis", "==", chassis]],
                              {"chassis": to_set([]), "up": False}))  # fmt: skip
    return ops


def node_status(controller: str, report: NodeReport) -> dict[str, str]:
    """`Transport_Node.status` of a node mastered by `controller` (`synced` "false" until its
    whole table is in: what its controller publishes does not count for it till then)."""
    return {
        "connected": "true", "controller": controller,
        "realized_generation": str(report.realized), "message": report.message,
        **({} if report.synced else {"synced": "false"}),
        **{f"bfd:{peer}": "up" if up else "down" for peer, up in report.bfd.items()},
    }  # fmt: skip


def node_status_ops(
    transport_nodes: Mapping[str, Mapping[str, Any]],
    controller: str,
    reports: Mapping[str, NodeReport],
    connected: AbstractSet[str],
    seen: set[str],
    touched: set[str],
) -> list[Op]:
    """Config DB updates of the status of the nodes `reports` covers (mastered here), and
    of those that were connected here (`seen`) and are not any more (`connected`). A node's
    `realized_generation` alone is written only if it is in `touched` (pushed something
    since the last report: see the module docstring)."""
    ops: list[Op] = []
    for uuid, row in transport_nodes.items():
        system_id = str(row["system_id"])
        said = omap(row["status"])
        if system_id not in connected:  # gone: say so if it was connected here
            mine = said.get("controller") == controller and system_id in seen
            if mine and said.get("connected") == "true":
                ops.append(set_status("Transport_Node", uuid, {
                    **{k: str(v) for k, v in said.items()}, "connected": "false",
                    "message": "not connected to any physical controller"}))  # fmt: skip
            continue
        report = reports.get(system_id)
        if report is None:
            continue
        status = node_status(controller, report)
        if said == status:
            continue
        if system_id in touched or _but_realized(said) != _but_realized(status):
            ops.append(set_status("Transport_Node", uuid, status))
    return ops


def gateway_status_ops(
    services: Mapping[str, Mapping[str, Any]],
    active: Mapping[str, str],
    masters: AbstractSet[str],
    synced: Callable[[str], bool],
    live: Callable[[str], bool],
) -> list[Op]:
    """Config DB updates of `Gateway_Service.status` (`services`: its rows by uuid), whose
    `active_node` names the node each service is active on (`active`: service uuid -> node,
    the rules' `ActiveGateway`, which every controller computes alike). The controller that
    masters that node writes it, once the node's whole table is in (`synced`): what the
    status names is what forwards. A service active nowhere is cleared by the master of the
    node it names, or by any controller once that node is not `live` (connected to none:
    no master is left to say so)."""
    ops: list[Op] = []
    for uuid, row in services.items():
        status = omap(row["status"])
        said = status.get("active_node")
        node = active.get(uuid)
        if node is not None:
            if said != node and node in masters and synced(node):
                ops.append(set_status("Gateway_Service", uuid, {**status, "active_node": node}))
        elif said is not None and (said in masters or not live(said)):
            rest = {k: v for k, v in status.items() if k != "active_node"}
            ops.append(set_status("Gateway_Service", uuid, rest))
    return ops


def _but_realized(status: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in status.items() if k != "realized_generation"}


def port_status_ops(
    ports: Mapping[str, Mapping[str, Any]],
    located: Mapping[str, str],
    check: Iterable[str],
    masters: set[str],
    synced: set[str],
) -> list[Op]:
    """Config DB updates of the status of the ports in `check` that are, or were, on the
    nodes mastered (`masters`; `ports`: the config DB's Logical_Switch_Port rows)."""
    ops: list[Op] = []
    for port in check:
        row = ports.get(port)
        if row is None:
            continue
        status = omap(row["status"])
        node = located.get(port)
        if node is not None and node in synced:
            want = {"up": "true", "realized": "true", "transport_node": node}
            if status != want:
                ops.append(set_status("Logical_Switch_Port", port, want))
        elif node is None and status.get("transport_node") in masters and status != PORT_GONE:
            ops.append(set_status("Logical_Switch_Port", port, PORT_GONE))
    return ops


class ReportBook:
    """Each node mastered's report, and what the realized generation needs of all of them
    — are they all synced, the least generation they realize — kept as reports are put and
    dropped: a pass reads them in O(distinct generations), not O(nodes mastered) (1,500
    nodes a controller at NVP's scale, at every pass that reports)."""

    def __init__(self) -> None:
        self.reports: dict[str, NodeReport] = {}
        """Node -> its report (do not modify: `put`, `drop`)."""
        self._realized: collections.Counter[int] = collections.Counter()
        self._unsynced = 0
        self._lost = 0

    def put(self, node: str, report: NodeReport) -> None:
        """Node `node`'s report is `report` now."""
        self.drop(node)
        self.reports[node] = report
        self._realized[report.realized] += 1
        self._unsynced += not report.synced
        self._lost += report.lost

    def drop(self, node: str) -> None:
        """Node `node` has no report here (not mastered any more)."""
        old = self.reports.pop(node, None)
        if old is None:
            return
        self._realized[old.realized] -= 1
        if not self._realized[old.realized]:
            del self._realized[old.realized]
        self._unsynced -= not old.synced
        self._lost -= old.lost

    def advance_many(self, nodes: Iterable[str], generation: int) -> set[str]:
        """Each of `nodes` (the idle masters of a pass) says `generation` realized now, the
        rest of its report as it was (one count moved per node, not a `put`); those the book
        has no report of."""
        reports, counts = self.reports, self._realized
        missing, moved = set(), 0
        for node in nodes:
            old = reports.get(node)
            if old is None:
                missing.add(node)
            elif old.realized != generation:
                counts[old.realized] -= 1
                if not counts[old.realized]:
                    del counts[old.realized]
                reports[node] = NodeReport(
                    generation, old.message, old.bfd, old.synced, old.lost
                )  # (dearer: `_replace`)
                moved += 1
        if moved:
            counts[generation] += moved
        return missing

    def all_synced(self) -> bool:
        """Every node here has had its whole table since it connected or was taken over."""
        return self._unsynced == 0

    def any_lost(self) -> bool:
        """A node here has lost its table (`NodeReport.lost`): every node's realized
        generation is then 0, whatever the others have (the configuration is not realized
        on every node), until its table is in again."""
        return self._lost > 0

    def own_realized(self, generation: int) -> int:
        """The generation every node mastered here has realized (`generation`, the latest,
        if it masters none; 0 while one has lost its table)."""
        if self._lost:
            return 0
        return min([generation, *self._realized])

    def realized(self, generation: int, published: Mapping[str, str],
                 others: Iterable[str]) -> int | None:  # fmt: skip
        """The generation every connected node has realized: the nodes mastered here as
        their reports say, the other controllers' (`others`: the cluster's other members)
        as they published (`published`: `Loom_Global.external_ids`); None while a node
        mastered here has not had its whole table yet, or a member has published nothing;
        0 while a node mastered here has lost its table (`any_lost`)."""
        if self._lost:
            return 0
        if not self.all_synced():
            return None
        generation = self.own_realized(generation)
        for member in others:
            said = published.get(PUBLISHED + member)
            if said is None:
                return None
            generation = min(generation, as_generation(said))
        return generation


def published_ops(
    published: Mapping[str, str], uuid: str, controller: str, realized: int
) -> list[Op]:
    """The `Loom_Global` update that publishes `realized` as what the nodes `controller`
    masters have realized (none if it says so already); other controllers' keys stay."""
    key = PUBLISHED + controller
    if published.get(key) == str(realized):
        return []
    return [mutate("Loom_Global", where_uuid(uuid), set_keys("external_ids", {key: str(realized)}))]


def generation_ops(table: str, rows: Mapping[str, Mapping[str, Any]], realized: int) -> list[Op]:
    """Updates of `realized_generation` in the rows of `table` (`Loom_Global`,
    `Universal_Global`) that do not say `realized`."""
    return [
        update(table, where_uuid(uuid), {"realized_generation": realized})
        for uuid, row in rows.items()
        if row.get("realized_generation") != realized
    ]


def set_status(table: str, uuid: str, status: Mapping[str, str]) -> Op:
    """Replace the `status` column of row `uuid` of `table`."""
    return update(table, where_uuid(uuid), {"status": to_map(status)})
