"""Runs the planner's plans on the nodes (`loom_physical.planner`): the physical
controller's I/O towards a transport node.

A `NodeLink` is what the shell holds open to one node: its OVSDB session
(`loom_ovs.manager.NodeSession`), its br-int's kept OpenFlow channel (`Switch`, made when
the node says where it is) and the zone record awaiting the node's answer. `Executor.run`
runs a plan's steps in order on the link, on one of the shell's push threads, and returns
an `Outcome`; it changes the link (its connections) and nothing the planner decides: the
loop thread settles the outcome (`Planner.settle`). A step that fails stops the plan; the
switch's connection is dropped then (the next push connects again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loom_common.pki import Credentials
from loom_ovs.manager import NodeSession
from loom_ovs.openflow import Switch
from loom_physical.core import NodeFacts, TableSignals
from loom_physical.images import Images
from loom_physical.planner import (
    Change,
    ClaimNode,
    ClaimSwitch,
    Configure,
    ConfirmZones,
    Outcome,
    Plan,
    Probe,
    Reading,
    Reconcile,
    RecordZones,
    Step,
    WriteQos,
)

log = logging.getLogger(__name__)

SLOW_PUSH = 0.5
"""Seconds after which a node's push is logged with where its time went."""


@dataclass
class NodeLink:
    """The shell's connections to one node."""

    session: NodeSession
    switch: Switch | None = None
    """Its br-int's OpenFlow (a kept channel), once the node said where that is."""
    unconfirmed: Callable[[], None] | None = field(default=None, repr=False)
    """Waits for the node's answer to a zone record sent and not confirmed yet."""

    def facts(self) -> NodeFacts:
        """What its OVSDB says that the rules read."""
        session = self.session
        return NodeFacts(
            vifs={vif: info.ofport for vif, info in session.vifs().items()},
            tunnels={name: ofport for name, (_, ofport, _) in session.tunnels().items()
                     if ofport is not None},
            uplinks=tuple(session.uplinks()),
            neighbours=dict(session.neighbours()),
        )  # fmt: skip

    def signals(self) -> TableSignals:
        """What says now whether its switch still holds the table pushed (`TableSignals`)."""
        channel = self.switch.channel if self.switch is not None else None
        bridge = self.session.bridge()
        return TableSignals(
            connection=channel.connections if channel is not None else 0,
            open=channel is not None and channel.connected,
            bridge=bridge[0] if bridge is not None else None,
            restoring=self.session.flow_restore_wait,
        )

    def reading(self) -> Reading:
        """What the planner reads of the node now."""
        session = self.session
        return Reading(remote=session.openflow_remote, restoring=session.flow_restore_wait,
                       bridge_created=session.bridge_created(), tunnels=session.tunnels(),
                       signals=self.signals())  # fmt: skip

    def reconnected(self, session: NodeSession) -> None:
        """The node came back on `session`: a new OpenFlow channel too."""
        self.close()
        self.session, self.switch, self.unconfirmed = session, None, None

    def close(self) -> None:
        """Close the node's connections (its OVSDB session, its OpenFlow channel)."""
        self.session.close()
        if self.switch is not None:
            self.switch.close()


class Executor:
    """Runs plans on the nodes' links (`run`: any thread, one plan per node at a time)."""

    def __init__(self, images: Callable[[], Images], tls: Credentials | None,
                 may_write: Callable[[str], bool]) -> None:  # fmt: skip
        """`images()`: the core's flow images (read while the loop waits for the pushes);
        `may_write(node)`: this controller still masters the node (asked as a plan starts:
        one deposed since it was made writes nothing)."""
        self._images = images
        self._tls = tls
        self._may_write = may_write

    def run(self, plan: Plan, link: NodeLink) -> Outcome:
        """Run `plan`'s steps in order on `link`; what they did."""
        outcome = Outcome()
        if not self._may_write(plan.node):
            outcome.skipped = True
            outcome.record_out = link.unconfirmed is not None
            return outcome
        began = time.perf_counter()
        config = 0.0
        try:
            for step in plan.steps:
                self._step(step, plan, link, outcome)
                if isinstance(step, Configure):
                    config = time.perf_counter() - began
                outcome.done += 1
        except Exception as exc:  # any failure: the node is reconciled next time
            outcome.error = exc
            if link.switch is not None:
                outcome.channel_down = not link.switch.channel.connected
                link.switch.close()  # (and on a new connection)
        outcome.record_out = link.unconfirmed is not None
        if outcome.error is None:
            _log_slow_push(plan.node, time.perf_counter() - began, config, plan.whole)
        return outcome

    def _step(self, step: Step, plan: Plan, link: NodeLink, outcome: Outcome) -> None:
        session = link.session
        match step:
            case ClaimNode(token):
                # Fencing of the node's OVSDB: its writes carry the assignment's token (a
                # compare-and-set, not itself behind the fence it replaces).
                if ops := session.claim_ops(token):
                    session.transact(ops, fenced=False)
                session.claimed(token)
            case Configure(specs):
                # (br-int's creation committed and not shown yet: the rest once it is)
                if session.creating_bridge:
                    outcome.configured = True
                elif ops := session.configure_ops(specs):
                    session.transact(ops)
                    outcome.configured = True
            case ConfirmZones():
                confirm, link.unconfirmed = link.unconfirmed, None
                if confirm is not None:
                    confirm()
            case RecordZones(zones, released):
                # sent now, its answer awaited by the next push's `ConfirmZones`
                if ops := session.zone_ops(dict(zones), released):
                    link.unconfirmed = session.send(ops)
            case WriteQos(rates):
                if ops := session.qos_ops({vif: dict(r) for vif, r in rates.items()}):
                    session.transact(ops)
            case _:
                self._openflow(step, self._switch(plan, link), link, outcome)

    def _openflow(self, step: Step, switch: Switch, link: NodeLink, outcome: Outcome) -> None:
        """The steps on the node's OpenFlow channel."""
        match step:
            case ClaimSwitch(token):
                # Fencing: the bridge's master role, claimed with the token before any
                # write; the switch refuses a deposed master's bundles and its stale claims.
                if switch.channel.generation != token:
                    switch.channel.claim(token)
            case Reconcile(parts, keep):
                images = self._images()
                switch.ensure_tlv_map()  # (a switch that lost its table forgot the option)
                # (the flows its datapath learned stay: the rules compute their keys only)
                switch.load(images.flows(parts), images.encoded(parts), keep=keep)
                outcome.sent = True
                outcome.signals = link.signals()
            case Change(mods, new):
                images = self._images()
                adds = images.encoded(new)
                if adds is None:  # (a flow the encoder does not know: by ovs-ofctl)
                    switch.apply([*mods, *(("add", flow) for flow in images.flows(new))])
                elif mods or adds:
                    switch.apply(list(mods), adds, lambda: images.flows(new))
                outcome.sent = bool(mods or adds)
                outcome.signals = link.signals()
            case Probe(frames):
                for frame, actions in frames:
                    switch.packet_out(frame, actions)

    def _switch(self, plan: Plan, link: NodeLink) -> Switch:
        """The node's OpenFlow channel at the plan's address (a new one if it moved)."""
        assert plan.remote is not None
        if link.switch is None or link.switch.remote != plan.remote:
            if link.switch is not None:
                link.switch.close()
            link.switch = Switch(plan.remote, tls=self._tls, peer=link.session.system_id)
        return link.switch


def _log_slow_push(node: str, took: float, config: float, whole: bool) -> None:
    """Say where a slow push's time went (OVSDB config; the rest: zone records, OpenFlow,
    QoS)."""
    if took <= SLOW_PUSH:
        return
    log.warning("node %s: push took %.0f ms (config %.0f ms, send %.0f ms; whole table: %s)",
                node, took * 1000, config * 1000, (took - config) * 1000, whole,
                extra={"node": node})  # fmt: skip


__all__ = ["Executor", "NodeLink"]
