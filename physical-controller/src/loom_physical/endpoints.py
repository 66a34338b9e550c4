"""The physical controller's HTTP endpoints beyond its metrics (`loom_common.httpd`): a
node's flows as computed and as installed (`GET /nodes/<system-id>/flows`,
`loom_physical.flowsview`) and a packet traced through its flows (`GET /trace`,
`loom_physical.trace`). They read the controller's state between its passes
(`PhysicalController.wait_pass`) and do their own I/O (the node's table by `ovs-ofctl`, the
trace on a scratch switch) on the asking thread, never on the loop's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from loom_common.ovsdb.codec import omap
from loom_common.pki import Credentials
from loom_common.reconnect import CONNECTION_ERRORS
from loom_ovs.openflow import OpenFlowError, Switch
from loom_physical import flowsview, trace
from loom_physical import rules as physical_rules
from loom_physical.inputs import opt
from loom_physical.scratch import ScratchDown, ScratchError, Tracer
from loom_physical.universal import read_flows

if TYPE_CHECKING:
    from loom_physical.controller import PhysicalController


class Endpoints:
    """The flows and trace endpoints of one physical controller."""

    def __init__(self, controller: PhysicalController, rules: Path,
                 tls: Credentials | None) -> None:  # fmt: skip
        self._c = controller
        self._rules = rules
        self._tls = tls
        self._tracer = Tracer()
        """Runs `trace_report`'s traces on a scratch switch of its own."""

    def stop(self) -> None:
        """Stop the trace thread's scratch switch."""
        self._tracer.stop()

    def flows_report(self, system_id: str, *, tables: bool = False,
                     timeout: float = 30.0) -> tuple[int, dict[str, Any]]:  # fmt: skip
        """Node `system_id`'s table as computed here, as the node holds it, and the
        difference (`loom_physical.flowsview`): (HTTP status, JSON body). The computed table
        is read between passes (`wait_pass`); the node's on this thread, by `ovs-ofctl`."""
        got: dict[str, Any] = {}

        def grab(controller: PhysicalController) -> bool:
            state = controller.nodes.get(system_id)
            if state is not None:
                got["mastered"] = system_id in controller.masters()
                got["remote"] = state.session.openflow_remote
                got["computed"] = controller.flows(system_id)
                got["learned"] = set(controller.core.learned(system_id))
            return True

        if not self._c.wait_pass(grab, timeout, wake=False):
            return 503, {"error": "busy", "message": f"{self._c.name} did not finish its pass"}
        if "computed" not in got:
            return 404, {"error": "not_found", "message": f"node {system_id} is not "
                         f"connected to {self._c.name}"}  # fmt: skip
        if not got["mastered"] or got["remote"] is None:
            return 409, {"error": "not_master", "message": f"{self._c.name} does not write "
                         f"node {system_id}'s flows now"}  # fmt: skip
        switch = Switch(got["remote"], tls=self._tls, peer=system_id)
        try:
            installed = switch.dump()
            mods = switch.difference(got["computed"])
        except OpenFlowError as exc:
            return 503, {"error": "node_unreachable", "message": str(exc)}
        finally:
            switch.close()
        return 200, flowsview.report(system_id, self._c.name, got["computed"], installed, mods,
                                     learned=got["learned"], tables=tables)  # fmt: skip

    def flows_route(self, rest: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """`GET /nodes/<system-id>/flows[?tables=true]` (`loom_common.httpd`)."""
        node, sep, what = rest.partition("/")
        if not node or sep != "/" or what != "flows":
            return 404, {"error": "not_found"}
        tables = query.get("tables", ["false"])[0] == "true"
        return self.flows_report(unquote(node), tables=tables)

    def trace_report(self, port: str, flow: str, *, node: str | None = None,
                     ct: tuple[str, ...] = (), allowed: frozenset[int] | None = None,
                     timeout: float = 30.0) -> tuple[int, dict[str, Any]]:  # fmt: skip
        """A packet from logical port `port` (`flow`: its fields in `ovs-ofctl` syntax, no
        `in_port`) traced through this controller's flows (`loom_physical.trace`): through
        the universal flows on an ideal node, or with `node` through that node's installed
        table; `ct`: what conntrack answers at each recirculation; `allowed`: the datapaths
        an ideal node's packet may be followed into (None: any). (HTTP status, JSON body.)

        The inputs are read between passes (`wait_pass`); the node's table on this thread;
        the computation and the trace on the trace thread (`Tracer`)."""
        try:
            states = trace.ct_states(ct)
            got: dict[str, Any] = {}
            inputs = lambda _: self._trace_inputs(port, node, allowed, got)  # noqa: E731
            if not self._c.wait_pass(inputs, timeout, wake=False):
                return 503, {"error": "busy", "message": f"{self._c.name} did not finish its pass"}
            if "refused" in got:
                raise got["refused"]
            if got.get("missing"):
                refused = self._read_missing(got, timeout)
                if refused is not None:
                    return refused
            installed: list[str] = []
            if node is not None:
                switch = Switch(got["remote"], tls=self._tls, peer=node)
                try:
                    installed = switch.dump()
                except OpenFlowError as exc:
                    return 503, {"error": "node_unreachable", "message": str(exc)}
                finally:
                    switch.close()
            microflow = trace.microflow(flow, got["in_port"], got.get("dl_dst", ""))
            text, dp_ports = self._tracer.run(
                lambda scratch: scratch.trace(self._trace_table(got, installed), microflow,
                                              states), timeout)  # fmt: skip
        except trace.TraceRefused as refused:
            return refused.status, refused.body()
        except ScratchError as exc:
            return 400, {"error": "trace_refused", "message": str(exc)}
        except ScratchDown as exc:
            return 503, {"error": "busy", "message": f"{self._c.name}: {exc}"}
        except TimeoutError:
            return 503, {"error": "busy", "message": f"{self._c.name}: the trace took over "
                         f"{timeout:g} s"}  # fmt: skip
        passes = trace.parse(text, got["cookies"])
        verdict = trace.verdict(passes, dp_ports, got["endpoints"], got["keys"])
        verdict["delivered"] = [{"port": p, "node": got["chassis"].get(p, "")}
                                for p in verdict["delivered"]]  # fmt: skip
        ideal = got.get("ideal")
        stand_ins = ideal.stand_ins if ideal is not None else []
        return 200, {"controller": self._c.name, "node": node, "port": port, "flow": microflow,
                     "ct": states, "passes": passes, "verdict": verdict, "trace": text,
                     "datapaths_read": sorted(got.get("missing", ())),
                     "stand_in_next_hops": stand_ins}  # fmt: skip

    def _read_missing(self, got: dict[str, Any], timeout: float) -> tuple[int, Any] | None:
        """The universal flows of the ideal node's datapaths the replica does not hold
        (`got["missing"]`), read once from the universal DB into `got` (on the asking
        thread); a 503 answer if they could not be read."""
        missing = got["missing"]
        try:
            flows = read_flows(self._c.universal.remote, missing, timeout)
        except CONNECTION_ERRORS as exc:
            keys = ", ".join(str(k) for k in sorted(missing))
            return 503, {"error": "flows_unavailable", "message": f"{self._c.name} does not "
                         f"follow the universal flows of datapath(s) {keys} (no node of "
                         f"its has them) and could not read them from the universal DB: "
                         f"{exc}"}  # fmt: skip
        got["ideal"] = ideal = trace.with_flows(got["ideal"], missing, flows)
        got["cookies"] = trace.sources(row for table, _, row in ideal.changes
                                       if table == "Flow" and row is not None)  # fmt: skip
        return None

    def _trace_inputs(self, port: str, node: str | None, allowed: frozenset[int] | None,
                      got: dict[str, Any]) -> bool:  # fmt: skip
        """Read what a trace needs (on the loop's side of `wait_pass`) into `got`; a
        refusal as `got["refused"]` (raised on the asking thread)."""
        rows = self._c.universal.rows
        bindings = rows["Port_Binding"].values()
        got["endpoints"] = {str(r["ip"]): str(r["node"]) for r in rows["Node_Endpoint"].values()}
        got["keys"] = {(int(b["datapath"]), int(b["port_key"])): str(b["logical_port"])
                       for b in bindings}  # fmt: skip
        got["chassis"] = {str(b["logical_port"]): opt(b["chassis"]) for b in bindings}
        try:
            if node is None:
                gateways = {n for g in rows["Gateway_Assignment"].values()
                            for _, n in omap(g["nodes"]).items()}  # fmt: skip
                known = [self._c.core.nodes[n].facts for n in gateways if n in self._c.core.nodes]
                neighbours = {ip: mac for facts in known for ip, mac in facts.neighbours.items()}
                ideal = trace.ideal_node(rows, port, neighbours, allowed)
                got["ideal"], got["in_port"] = ideal, ideal.in_port
                got["dl_dst"] = ideal.uplink_mac
                got["missing"] = trace.missing_flows(ideal, rows["Flow"].values(),
                                                     self._c.universal.datapaths)  # fmt: skip
                # (the flow rows it took: its datapaths' and datapath 0's)
                flow_rows = [row for table, _, row in ideal.changes if table == "Flow"]
            else:
                datapaths = self._trace_node(port, node, got) | {0}
                flow_rows = [f for f in rows["Flow"].values() if int(f["datapath"]) in datapaths]
        except trace.TraceRefused as refused:
            got["refused"] = refused
            return True
        got["cookies"] = trace.sources(row for row in flow_rows if row is not None)
        return True

    def _trace_node(self, port: str, node: str, got: dict[str, Any]) -> set[int]:
        """`_trace_inputs` for a trace on node `node`: its OpenFlow, its ports, where
        `port`'s VIF is on it (a router's uplink: the node's uplink); the datapaths it has.

        Raises:
            TraceRefused: the node is not ours to read, or the port has no VIF on it (or
                the node no uplink).
        """
        state = self._c.nodes.get(node)
        if state is None:
            raise trace.TraceRefused(404, "not_found", f"node {node} is not connected to "
                                     f"{self._c.name}")  # fmt: skip
        if node not in self._c.masters() or state.session.openflow_remote is None:
            raise trace.TraceRefused(409, "not_master", f"{self._c.name} does not write node "
                                     f"{node}'s flows now")  # fmt: skip
        bindings = self._c.universal.rows["Port_Binding"].values()
        vif_ports = {opt(b["vif_id"]): str(b["logical_port"]) for b in bindings if opt(b["vif_id"])}
        got["remote"] = state.session.openflow_remote
        got["ports"] = trace.node_layout(state.session.interfaces(), vif_ports)
        entry = trace.uplink_entry(self._c.universal.rows, port, got["ports"], node)
        if entry is not None:
            got["in_port"], got["dl_dst"] = entry
        else:
            mine = [vif for vif, bound in vif_ports.items() if bound == port]
            vif = state.session.vifs().get(mine[0]) if mine else None
            if vif is None:
                raise trace.TraceRefused(409, "not_on_node", f"port {port} has no VIF on node "
                                         f"{node}")  # fmt: skip
            got["in_port"] = vif.ofport
        view = self._c.core.nodes.get(node)
        return set(view.datapaths) if view is not None else set()

    def _trace_table(self, got: dict[str, Any], installed: list[str]) -> trace.Table:
        """The table a trace loads (on the trace thread): the ideal node's, computed by
        the physical rules on an engine of its own, or the node's installed one."""
        if "ideal" in got:
            ideal = got["ideal"]
            program = physical_rules.load(self._rules)
            flows = [f.text() for f in trace.ideal_flows(program, ideal)]
            return trace.Table(ideal.ports, flows, ideal.in_port)
        return trace.Table(got["ports"], installed, got["in_port"])

    def trace_route(self, rest: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """`GET /trace?port=P&flow=F[&node=N][&ct=S...][&datapaths=K,K...]`
        (`loom_common.httpd`)."""
        if rest not in ("", "/"):
            return 404, {"error": "not_found"}
        port, flow = query.get("port", [""])[0], query.get("flow", [""])[0]
        if not port:
            return 400, {"error": "validation_failed", "message": "port: required"}
        node = query.get("node", [None])[0] or None
        allowed = None
        if "datapaths" in query:
            keys = query["datapaths"][0].split(",")
            if not all(k.isdigit() for k in keys):
                return 400, {"error": "validation_failed", "message": "datapaths: keys, "
                             "separated by commas"}  # fmt: skip
            allowed = frozenset(int(k) for k in keys)
        return self.trace_report(port, flow, node=node, ct=tuple(query.get("ct", [])),
                                 allowed=allowed)  # fmt: skip
