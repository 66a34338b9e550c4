"""What the physical controller tells the databases, and what it reads of the config DB's
nodes and ports to say it.

`Reporter` keeps the config DB's `Transport_Node` rows indexed by node (who is live, by
its own status or another controller's; its BFD rows; its shard) and the
`Logical_Switch_Port` rows by the node their status names, and writes after each pass what
changed (`send`; the ops themselves are `loom_physical.status`'s): `Port_Binding.chassis`/
`up` in the universal DB, each mastered node's status, its ports' and gateways' status and
the realized generation in the config DB. Transactions are sent at once and their answers
awaited later (`Sent.finish`): the shell pushes the other nodes meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loom_common import metrics
from loom_common.ovsdb import RawConnection, TransactError
from loom_common.ovsdb.codec import omap
from loom_ddlog import allocator_memory
from loom_physical import status
from loom_physical.core import node_liveness, unindex
from loom_physical.planner import Life
from loom_physical.universal import DB as UNIVERSAL_DB

if TYPE_CHECKING:
    from loom_physical.controller import PhysicalController

log = logging.getLogger(__name__)

CONFIG_COLUMNS = {
    "Transport_Node": ["system_id", "status"],
    "Loom_Global": ["generation", "realized_generation", "external_ids"],
    "Logical_Switch_Port": ["status"],
    "Gateway_Service": ["status"],
}
"""What a physical controller reads of the config DB (and writes: the status columns)."""


class Reporter:
    """The status one physical controller writes, and the config rows it reads for it."""

    def __init__(self, controller: PhysicalController) -> None:
        self._c = controller
        self.due = True
        """Something `send` writes may have changed since it last ran."""
        self.recheck: set[str] = set()
        """Logical ports whose status the next report must look at again."""
        self.seen: set[str] = set()
        """Nodes that have been connected to this process (only those it reports gone)."""
        self._reported_masters: set[str] = set()
        self._said_node: dict[str, str] = {}
        """Logical_Switch_Port uuid -> the node its status names (`transport_node`)."""
        self._said_ports: dict[str, set[str]] = {}
        """Node -> the ports whose status names it."""
        self.node_rows: dict[str, tuple[str, bool, set[tuple[str, str, bool]]]] = {}
        """`Transport_Node` uuid -> its node, live by its status, its BFD rows
        (`core.node_liveness`: each row read when it changes)."""
        self.node_uuid: dict[str, str] = {}
        """System-id -> its `Transport_Node` row's uuid."""
        self.node_row_uuids: dict[str, set[str]] = {}
        """System-id -> the uuids of the `Transport_Node` rows that name it."""
        self._rows_changed: set[str] = set()
        """`Transport_Node` rows changed since the last status report (looked at again)."""
        self._last: dict[str, status.NodeReport] = {}
        """What the last status report written said of each node mastered."""
        self.book = status.ReportBook()
        """Each node mastered's report as last made."""

    # ---- the config DB's rows ----

    def port_changed(self, uuid: str) -> None:
        """`Logical_Switch_Port` row `uuid` changed: looked at again, indexed by the node
        its status names."""
        self.recheck.add(uuid)
        old = self._said_node.pop(uuid, None)
        if old is not None:
            unindex(self._said_ports, old, uuid)
        row = self._c.config.rows["Logical_Switch_Port"].get(uuid)
        node = omap(row["status"]).get("transport_node") if row is not None else None
        if node:
            self._said_node[uuid] = node
            self._said_ports.setdefault(node, set()).add(uuid)

    def node_row_changed(self, uuid: str) -> tuple[set[str], bool]:
        """`Transport_Node` row `uuid` changed: read again. The nodes whose liveness may
        have changed, and whether the shards did."""
        row = self._c.config.rows["Transport_Node"].get(uuid)
        old = self.node_rows.pop(uuid, None)
        nodes = set()
        if old is not None:
            unindex(self.node_row_uuids, old[0], uuid)
            nodes.add(old[0])
            if self.node_uuid.get(old[0]) == uuid:
                del self.node_uuid[old[0]]
        if row is not None:
            self.node_rows[uuid] = node_liveness(row)
            node = self.node_rows[uuid][0]
            self.node_uuid[node] = uuid
            self.node_row_uuids.setdefault(node, set()).add(uuid)
            nodes.add(node)
        self._rows_changed.add(uuid)
        return nodes, old is None or row is None or old[0] != self.node_rows[uuid][0]

    def liveness(self, node: str) -> tuple[bool, set[tuple[str, str, bool]]]:
        """Node `node` is live (connected here, or so its status says), and its BFD rows."""
        rows = [self.node_rows[u] for u in self.node_row_uuids.get(node, ())]
        up = [verdicts for _, live, verdicts in rows if live]
        return node in self._c.nodes or bool(up), set().union(*up)

    def live(self, node: str) -> bool:
        """Node `node` is connected here or, as its status says, to another controller."""
        rows = self.node_row_uuids.get(node, ())
        return node in self._c.nodes or any(self.node_rows[u][1] for u in rows)

    def start_over(self) -> None:
        """A new core: everything is reported again."""
        self._reported_masters = set()
        self.due = True

    def metric_samples(self) -> list[metrics.Sample]:
        """What a scrape reads (another thread: copies of what the loop keeps): nodes
        connected and mastered, each mastered node's flows as of its last push, and the
        controller's ZooKeeper membership, the native allocator's memory
        (`loom_common.metrics`)."""
        view = self._c.member.view if self._c.member is not None else None
        connected = list(self._c.nodes)
        mastered = [n for n in connected if view is None or view.may_write(n)]
        flows = dict(self._c.planner.flow_counts)
        labels = (self._c.name,)
        return [
            ("loom_physical_nodes", "Transport nodes connected to the controller, and mastered",
             ("controller", "state"),
             [((*labels, "connected"), len(connected)), ((*labels, "mastered"), len(mastered))]),
            ("loom_physical_node_flows", "Flows in a mastered node's table as of its last push",
             ("controller", "node"), [((*labels, n), flows[n]) for n in mastered if n in flows]),
            *metrics.cluster_samples("physical", self._c.name, view),
            *metrics.native_memory_samples("physical", self._c.name, allocator_memory()[0]),
        ]  # fmt: skip

    # ---- writing ----

    def send(self, masters: set[str]) -> Sent:
        """Send what changed of the masters' status to the universal and config DBs: the
        ports whose location, binding or config row changed since the last report (every
        port when the nodes mastered changed), the nodes' status, the realized generation.
        The answers are waited for by the `Sent` returned."""
        sent = Sent()
        planner = self._c.planner
        due = self.due or planner.report_due
        if not due and masters == self._reported_masters:
            return sent
        if not all(link.up for link in self._c.links):
            return sent  # written once both are back (`due` stays set)
        previous, check = self._reported_masters, self.recheck | planner.recheck
        self.recheck, planner.recheck = set(), set()
        self.due = planner.report_due = False
        self._reported_masters = set(masters)
        core = self._c.core
        gained = masters - previous
        if gained:  # their ports: located there, bound there, or said to be there
            check = check | core.bound_to(gained)
            for node in gained:
                check |= core.located(node) | self._said_ports.get(node, set())
        # (a node no longer ours: its new master writes its ports)
        located = {p: n for p in check for n in core.where(p) if n in masters}
        # (of the nodes the ports are on: only theirs is asked)
        synced = {n for n in set(located.values()) if planner.nodes[n].synced}
        ops = status.binding_ops(core.bindings, located, check, masters, synced,
                                 core.binding_uuids)  # fmt: skip
        if ops:

            def bindings_lost(exc: Exception) -> None:
                log.warning("writing port bindings failed: %s", exc)
                self.recheck |= check
                self.due = True

            sent.send(self._c.universal.conn, UNIVERSAL_DB, ops, bindings_lost)
        self._send_config(sent, masters, located, check, synced)
        return sent

    def _send_config(self, sent: Sent, masters: set[str], located: dict[str, str],
                     check: set[str], synced: set[str]) -> None:  # fmt: skip
        planner, config = self._c.planner, self._c.config
        reports, remade = self._remake(masters)
        touched = planner.take_touched()
        rows_changed, self._rows_changed = self._rows_changed, set()
        # The rows to look at: of nodes pushed something, whose report changed, whose row
        # changed, or gone (not every node's at every change).
        last = self._last
        changed = {n for n in remade if _differs(last.get(n), reports[n])}
        gone = self.seen - self._c.nodes.keys()
        look = {self.node_uuid[n] for n in touched | changed | gone
                if n in self.node_uuid} | rows_changed  # fmt: skip
        nodes = config.rows["Transport_Node"]
        ops = status.node_status_ops({u: nodes[u] for u in look if u in nodes}, self._c.name,
                                     reports, self._c.nodes.keys(), self.seen,
                                     touched)  # fmt: skip
        ops += status.port_status_ops(config.rows["Logical_Switch_Port"], located, check,
                                      masters, synced)  # fmt: skip
        ops += status.gateway_status_ops(config.rows["Gateway_Service"],
                                         self._c.core.active_gateways, masters,
                                         self._synced, self.live)  # fmt: skip
        ops += self._realized_ops(sent)

        def status_lost(exc: Exception) -> None:
            log.warning("writing status failed: %s", exc)
            self.recheck |= check
            planner.touched |= touched
            self._rows_changed |= look
            planner.marks |= remade  # compared with what was written, next time
            self.due = True

        def status_written() -> None:
            for n in last.keys() - reports.keys():
                del last[n]
            last.update((n, reports[n]) for n in remade)

        if ops:
            sent.send(config.conn, "Loom_Config", ops, status_lost, status_written)
        else:
            status_written()

    def _synced(self, node: str) -> bool:
        """Node `node` is connected here and its whole table has been pushed."""
        known = self._c.planner.nodes.get(node)
        return known is not None and known.synced

    def _remake(self, masters: set[str]) -> tuple[dict[str, status.NodeReport], set[str]]:
        """Every node mastered's report, and the nodes whose report was made again: those
        marked since the last report and those newly mastered (cost: those, not every node
        mastered, at every pass that reports)."""
        book, planner = self.book, self._c.planner
        for n in book.reports.keys() - masters:
            book.drop(n)
        marks = planner.take_marks()
        # (the idle masters: their report changed in the generation alone)
        for generation, idle in planner.take_idle().items():
            marks |= book.advance_many(idle, generation)
        remade = (marks & masters) | (masters - book.reports.keys())
        for n in remade:
            node = planner.nodes[n]
            lost = node.life is Life.LOST
            book.put(n, status.NodeReport(0 if lost else node.realized, node.message,
                                          node.bfd, node.synced, lost))  # fmt: skip
        return book.reports, remade

    def _realized_ops(self, sent: Sent) -> list[dict[str, Any]]:
        """Publish what the nodes mastered here have realized (their reports as last made);
        with what the cluster's other members published, the generation every node has
        (`Loom_Global`, and the universal DB's copy)."""
        rows = self._c.config.rows["Loom_Global"]
        book = self.book  # (asked in O(distinct generations), not O(nodes))
        if not rows or not (book.all_synced() or book.any_lost()):
            return []  # (a node that lost its table: every node's realized is 0 now)
        uuid, row = next(iter(rows.items()))
        published = omap(row.get("external_ids"))
        generation = self._c.core.generation
        ops = status.published_ops(published, uuid, self._c.name, book.own_realized(generation))
        member = self._c.member
        others = [m for m in (member.view.members if member else ()) if m != self._c.name]
        realized = book.realized(generation, published, others)
        if realized is not None:
            ops += status.generation_ops("Loom_Global", rows, realized)
            self._universal_realized(sent, realized)
        return ops

    def _universal_realized(self, sent: Sent, realized: int) -> None:
        """Copy the realized generation to `Universal_Global.realized_generation`."""
        universal = self._c.universal
        ops = status.generation_ops("Universal_Global", universal.rows["Universal_Global"],
                                    realized)  # fmt: skip

        def generation_lost(exc: Exception) -> None:
            log.warning("writing the realized generation failed: %s", exc)
            self.due = True

        if ops:
            sent.send(universal.conn, UNIVERSAL_DB, ops, generation_lost)


def _differs(last: status.NodeReport | None, now: status.NodeReport) -> bool:
    """A node's report says something new, but for its realized generation."""
    return last is None or (last.message, last.synced, last.bfd) != (
        now.message,
        now.synced,
        now.bfd,
    )


@dataclass
class Sent:
    """Transactions sent and not yet answered (`Reporter.send`)."""

    waiting: list[tuple[RawConnection, int, Callable[[Exception], None], Callable[[], None]]] = (
        field(default_factory=list)
    )

    def send(self, conn: RawConnection | None, db: str, ops: list[dict[str, Any]],
             lost: Callable[[Exception], None],
             done: Callable[[], None] = lambda: None) -> None:  # fmt: skip
        """Send `ops` to `db` on `conn`; at `finish`, `done()` once committed, else
        `lost(error)` (at once if it cannot be sent)."""
        try:
            if conn is None:
                raise OSError("not connected")
            self.waiting.append((conn, conn.send_transact(db, ops), lost, done))
        except (TransactError, OSError) as exc:
            lost(exc)

    def finish(self) -> None:
        """Wait for every answer, in the order sent; say each outcome."""
        waiting, self.waiting = self.waiting, []
        for conn, request, lost, done in waiting:
            try:
                conn.finish_transact(request)
            except (TransactError, OSError) as exc:
                lost(exc)
            else:
                done()


__all__ = ["Reporter", "Sent"]
