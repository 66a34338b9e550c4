"""The physical controller's pure core without any daemon: `Localizer` (universal rows and
node facts -> each node's desired state), `NodeZones`, the status reports, `GroupFeed`."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from physical_rows import binding as _binding
from physical_rows import universal as _universal

from loom_common.group_feed import GroupFeed
from loom_common.realized import node_realized
from loom_ddlog import EngineError, Program
from loom_physical import rules, status
from loom_physical.core import Localizer, NodeFacts, TableSignals, liveness, table_unknown
from loom_physical.rules import main_file
from loom_physical.zones import ZONES, NodeZones


def _program() -> Program:
    return Program.load([main_file()], workers=1, internal=False)


def _settle(core: Localizer) -> int:
    """Compute until nothing feeds back; the number of rounds."""
    rounds = 0
    while True:
        rounds += 1
        if not core.compute() or not core.feeds_back():
            return rounds


def _core(*nodes: str, program: Program | None = None) -> Localizer:
    """A core computing `nodes`, on `program` (by default the rules as a controller runs
    them: the flows counted, not kept in the engine)."""
    core = Localizer(program or rules.load())
    core.universal(_universal())
    vifs = {"hv1": {"vif-1": 5}, "hv2": {"vif-2": 7}}
    for node in nodes:
        core.node(node, NodeFacts(vifs=vifs[node], tunnels={"loom-geneve": 20}))
    core.set_computed(set(nodes))
    core.set_liveness(set(nodes), set())
    _settle(core)
    return core


def test_a_node_gets_its_datapaths_its_ports_and_its_own_flows() -> None:
    core = _core("hv1", "hv2")
    assert core.generation == 3
    assert core.desired_parts("hv1") == {("node", "hv1"), ("dp", 1), ("dp", 0), ("port", "p1")}
    assert core.located("hv1") == {"p1"}
    assert core.located("hv2") == {"p2"}
    flows = core.flows("hv1")
    texts = [f"table={f.table},{f.match} {f.actions}" for f in flows]
    # the switch's flows, translated once: the same in both nodes' tables
    assert any("table=12,metadata=0x1" in t for t in texts)
    shared = set(core.images.flows({("dp", 1)}))
    assert shared
    assert shared <= set(flows)
    assert shared <= set(core.flows("hv2"))
    # p1's own flow only where p1 is; the way to p2 (on hv2) by the flow-based tunnel
    assert any("reg15=0x1" in t and "table=44" in t for t in texts)
    assert not any("reg15=0x1" in t and "table=44" in t for t in map(str, core.flows("hv2")))
    assert any("192.168.0.2->tun_dst" in t for t in texts)
    assert [s.port_name for s in core.tunnel_specs("hv1")] == ["loom-geneve"]


def test_a_new_node_reaches_the_others_by_the_tunnel_port_number_it_asks_for() -> None:
    """Before its node says what number its flow-based port got, the core takes the one
    the port asks for (`ofport_request`): the first table pushed already has the way out;
    when the node says another number, the flows follow it."""
    core = Localizer(_program())
    core.universal(_universal())
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={}))
    core.node("hv2", NodeFacts(vifs={"vif-2": 7}, tunnels={}))
    core.set_computed({"hv1", "hv2"})
    core.set_liveness({"hv1", "hv2"}, set())
    _settle(core)
    (spec,) = core.tunnel_specs("hv1")
    assert spec.ofport_request == 65001
    assert spec.ofport_request is not None
    assert ("hv1", "geneve", spec.ofport_request) in core.program.dump("FlowTunnel")
    assert len(_ways_to(core, "hv1", 2)) == 1
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 31}))
    _settle(core)
    assert [r for r in core.program.dump("FlowTunnel") if r[0] == "hv1"] == [("hv1", "geneve", 31)]


def _ways_to(core: Localizer, node: str, key: int) -> list[str]:
    """The flows in node `node`'s table that send a packet for port key `key` by tunnel."""
    return [f.actions for f in core.flows(node)
            if f"reg15={key:#x}" in f.match and "tun_dst" in f.actions]  # fmt: skip


def test_the_way_to_a_port_no_chassis_names_goes_out_with_its_vif() -> None:
    """A port's VIF found (no chassis written yet: a cold start, a port added): the way to
    it is in the other nodes' tables in the same computation, and its chassis, once
    written, changes nothing; a VIF on two nodes before that: one way, to the least."""
    core = _core("hv1", "hv2")
    assert len(way := _ways_to(core, "hv1", 2)) == 1
    assert "192.168.0.2->tun_dst" in way[0]
    core.images.settle()
    bindings = core.program.dump("Port_Binding")
    core.universal([("Port_Binding", "b2", _binding("p2", 1, 2, "vif-2", chassis="hv2"))])
    _settle(core)
    assert _ways_to(core, "hv1", 2) == way
    assert core.images.changed() == set()
    # the chassis reaches the rules as VifChassis alone, and not even there when it names
    # the node the VIF is seen on: the engine has nothing to do
    assert core.program.dump("Port_Binding") == bindings
    assert ("p2", 1, 2, "") in core.program.dump("VifChassis")
    assert core.compute() is False
    # its VIF unplugged, the chassis (still naming hv2) is what places it
    core.node("hv2", NodeFacts(vifs={}, tunnels={"loom-geneve": 20}))
    assert _settle(core) == 2
    assert ("p2", 1, 2, "hv2") in core.program.dump("VifChassis")
    assert _ways_to(core, "hv1", 2) == way
    # a chassis naming another node than the one the VIF is seen on places it there
    core.node("hv2", NodeFacts(vifs={"vif-2": 7}, tunnels={"loom-geneve": 20}))
    core.universal([("Port_Binding", "b2", _binding("p2", 1, 2, "vif-2", chassis="hv1"))])
    _settle(core)
    assert ("p2", 1, 2, "hv1") in core.program.dump("VifChassis")
    assert ["192.168.0.1->tun_dst" in w for w in _ways_to(core, "hv2", 2)] == [True]
    core.universal([("Port_Binding", "b2", None)])
    _settle(core)
    assert [row for row in core.program.dump("VifChassis") if row[0] == "p2"] == []

    two = Localizer(_program())
    two.universal(_universal())
    two.node("hv1", NodeFacts(vifs={"vif-1": 5, "vif-2": 9}, tunnels={"loom-geneve": 20}))
    two.node("hv2", NodeFacts(vifs={"vif-2": 7}, tunnels={"loom-geneve": 20}))
    two.set_computed({"hv1", "hv2"})
    two.set_liveness({"hv1", "hv2"}, set())
    _settle(two)
    assert len(way := _ways_to(two, "hv2", 2)) == 1
    assert "192.168.0.1->tun_dst" in way[0]


NODES = ("hv1", "hv2", "hv3")
IPS = {"hv1": "192.168.0.1", "hv2": "192.168.0.2", "hv3": "192.168.0.3"}
WHERE_STEP = st.one_of(
    st.tuples(st.just("chassis"), st.sampled_from(("", *NODES))),
    st.tuples(st.just("plugged"), st.frozensets(st.sampled_from(NODES))),
    st.tuples(st.just("computed"), st.frozensets(st.sampled_from(NODES[1:]))),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(WHERE_STEP, max_size=8))
def test_the_way_to_a_port_is_where_its_chassis_says_else_where_its_vif_is_seen(
    steps: list[tuple[str, Any]],
) -> None:
    """Whatever the order of chassis writes, VIFs plugged and unplugged and nodes computed
    here or not, the way to p2 goes to the node its chassis names, else to the least node
    computed here with its VIF (`PortAt`; the core feeds a chassis that names that node as
    none: `_feed_chassis`), and the table is what a fresh core computes."""
    endpoint = ("Node_Endpoint", "e3", {"node": "hv3", "encap": "geneve", "ip": IPS["hv3"]})
    chassis, plugged, computed = "", frozenset({"hv2"}), frozenset(NODES)

    def place(core: Localizer) -> None:
        for node in NODES:
            vifs = {"vif-1": 5} if node == "hv1" else {}
            core.node(node, NodeFacts(vifs=vifs | ({"vif-2": 7} if node in plugged else {}),
                                      tunnels={"loom-geneve": 20}))  # fmt: skip
        core.set_computed(set(computed))
        core.set_liveness(set(NODES), set())

    def binding() -> list[Any]:
        return [("Port_Binding", "b2", _binding("p2", 1, 2, "vif-2", chassis=chassis))]

    core = Localizer(_program())
    core.universal([*_universal(), endpoint])
    place(core)
    _settle(core)
    for kind, value in steps:
        if kind == "chassis":
            chassis = value
            core.universal(binding())
        elif kind == "plugged":
            plugged = value
            place(core)
        else:
            computed = value | {"hv1"}  # (hv1 is the node looked at)
            place(core)
        _settle(core)
        at = chassis or min(plugged & computed, default=None)
        ways = _ways_to(core, "hv1", 2)
        assert [f"{IPS[at]}->tun_dst" in w for w in ways] == ([] if at is None else [True])
    fresh = Localizer(_program())
    fresh.universal([*_universal(with_p2=False), endpoint, *binding()])
    place(fresh)
    _settle(fresh)
    assert _zoneless(core.flows("hv1")) == _zoneless(fresh.flows("hv1"))
    assert set(core.program.dump("VifChassis")) == set(fresh.program.dump("VifChassis"))


def _zoneless(flows: list[Any]) -> list[str]:
    """Flows as text, each conntrack zone number as Z (they are given in the order ports
    are found, which a fresh core need not share)."""
    return sorted(re.sub(r"set_field:\d+->reg13", "set_field:Z->reg13", str(f)) for f in flows)


def test_what_changed_is_said_once() -> None:
    core = _core("hv1", "hv2")
    changed = core.take_changed()
    assert changed.located == {"hv1", "hv2"}
    assert {"p1", "p2"} <= changed.ports
    assert changed.status
    assert core.take_changed().located == set()


def test_a_vif_unplugged_takes_its_port_away_and_a_node_gone_leaves_nothing() -> None:
    core = _core("hv1", "hv2")
    core.take_changed()
    core.node("hv1", NodeFacts(vifs={}, tunnels={"loom-geneve": 20}))
    _settle(core)
    assert core.located("hv1") == set()
    assert ("port", "p1") not in core.desired_parts("hv1")
    assert core.take_changed().located == {"hv1"}
    core.node_gone("hv2")
    _settle(core)
    assert core.desired_parts("hv2") == set()
    # with no node needing switch 1, its flows are not asked for any more
    assert core.needed_datapaths() == {0}


def test_a_port_deleted_in_the_database_leaves_its_node() -> None:
    core = _core("hv1", "hv2")
    assert any("192.168.0.2->tun_dst" in f.actions for f in core.flows("hv1"))
    core.universal([("Port_Binding", "b2", None)])
    _settle(core)
    assert core.located("hv2") == set()
    # nothing of hv1's leads to p2 any more (nor does hv2 keep the switch)
    assert not any("192.168.0.2->tun_dst" in f.actions for f in core.flows("hv1"))
    assert ("dp", 1) not in core.desired_parts("hv2")


def test_a_vif_gets_its_zone_in_the_same_round_and_loses_it_when_unplugged() -> None:
    """A new VIF's port is given its zone before the rules ask (no round of its own), the
    classifier loads it; unplugged, the zone is released (its record removed after the
    flows that used it)."""
    core = Localizer(_program())
    core.universal(_universal())
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 20}))
    core.set_computed({"hv1"})
    core.set_liveness({"hv1"}, set())
    _settle(core)
    zones = core.zones("hv1")
    assert zones.zones == {"p1": 1}
    assert core.zone_rounds == 0, "the zone took a round of its own"
    assert zones.take_record() == ({"p1": 1}, set())
    assert any("set_field:1->reg13" in f.actions for f in core.flows("hv1") if f.table == 0)
    core.node("hv1", NodeFacts(vifs={}, tunnels={"loom-geneve": 20}))
    _settle(core)
    assert zones.zones == {}
    assert zones.take_record() == ({}, {"p1"})


def test_a_standby_node_has_its_masters_zones_and_gives_its_own_on_takeover() -> None:
    """A node this controller computes but does not master gets no zone (nor the flows
    that load one) until its master's record comes; mastered, it gives them."""
    core = Localizer(_program())
    core.universal(_universal())
    core.set_masters(set())
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 20}))
    core.set_computed({"hv1"})
    core.set_liveness({"hv1"}, set())
    _settle(core)
    assert core.zones("hv1").zones == {}
    assert not any("->reg13" in f.actions for f in core.flows("hv1") if f.table == 0)
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 20}), {"p1": 9})
    _settle(core)
    assert core.zones("hv1").zones == {"p1": 9}
    assert any("set_field:9->reg13" in f.actions for f in core.flows("hv1") if f.table == 0)
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 20}), {})
    core.set_masters({"hv1"})  # the master's record was removed; now ours
    _settle(core)
    assert core.zones("hv1").zones == {"p1": 9}, "a zone given is kept"
    assert core.zones("hv1").take_record() == ({"p1": 9}, set()), "and recorded again"


def test_a_rebuilt_core_keeps_a_standbys_zones_and_not_its_waiting_owners() -> None:
    """After an engine failure the zones given are carried over; owners that waited for a
    record are not (the new engine asks for those it needs), so a takeover gives none to an
    owner nothing asks for any more."""
    old = Localizer(_program())
    old.universal(_universal())
    old.set_masters(set())
    old.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 20}))
    old.set_computed({"hv1"})
    _settle(old)
    assert old.zones("hv1").waiting == {"p1"}
    new = Localizer(_program())
    new.node("hv1", NodeFacts(vifs={}, tunnels={"loom-geneve": 20}))
    new.carry_zones("hv1", old)
    assert new.zones("hv1").waiting == set()
    new.set_masters({"hv1"})
    assert new.zones("hv1").zones == {}


def test_the_engine_rows_feed_a_fresh_engine_to_the_same_tables() -> None:
    """The baseline: every input row the core fed, into a new engine, gives the same
    outputs."""
    core = _core("hv1", "hv2", program=_program())
    fresh = _program()
    with fresh.transaction() as txn:
        for relation, rows in core.engine_rows().items():
            for row in rows:
                txn.insert(relation, row)
        txn.commit()
    for relation in ("NodeFlow", "DpFlow", "NodeDatapath", "Bound", "Located"):
        assert sorted(fresh.dump(relation)) == sorted(core.program.dump(relation)), relation


def test_flows_counted_by_the_engine_are_the_flows_it_would_keep() -> None:
    """`rules.COUNTED`: the engine gives the flows as counts of derivations and keeps no
    copy; the nodes' tables are those of an engine that keeps them, also after a change."""
    counted, kept = _core("hv1", "hv2"), _core("hv1", "hv2", program=_program())
    with pytest.raises(EngineError, match="NodeFlow is counted"):
        counted.program.dump("NodeFlow")
    for core in (counted, kept):
        core.node("hv2", NodeFacts(vifs={}, tunnels={"loom-geneve": 20}))
        _settle(core)
    for node in ("hv1", "hv2"):
        assert counted.desired_parts(node) == kept.desired_parts(node)
        assert sorted(counted.flows(node)) == sorted(kept.flows(node)), node


LIVENESS = st.tuples(
    st.sampled_from(["hv1", "hv2", "gw1"]),
    st.booleans(),
    st.frozensets(st.tuples(st.sampled_from(["hv1", "hv2"]), st.booleans()), max_size=2),
)
"""One node's liveness as a controller gives it: (node, live, {(peer, up)})."""


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(LIVENESS, st.lists(LIVENESS, max_size=3)), max_size=8))
def test_liveness_given_node_by_node_is_what_the_engine_holds(
    steps: list[Any],
) -> None:
    """The controller gives the liveness of the nodes whose status changed, one by one;
    `set_liveness` gives all (every node not named is not live). Either way the engine's
    `Live` and `Bfd` rows are the nodes' latest."""
    core = Localizer(_program())
    want: dict[str, tuple[bool, set[tuple[str, str, bool]]]] = {}
    for step in steps:
        if isinstance(step, tuple):
            node, live, peers = step
            bfd = {(node, peer, up) for peer, up in peers}
            core.set_node_liveness(node, live, bfd)
            want[node] = (live, bfd)
        else:
            want = {}
            for node, live, peers in step:
                bfd = {(node, peer, up) for peer, up in peers}
                old_live, old_bfd = want.get(node, (False, set()))
                want[node] = (old_live or live, old_bfd | bfd)
            core.set_liveness({n for n, (live, _) in want.items() if live},
                              set().union(*(b for _, b in want.values())))  # fmt: skip
        core.compute()
        assert set(core.program.dump("Live")) == {(n,) for n, (live, _) in want.items() if live}
        assert set(core.program.dump("Bfd")) == set().union(*(b for _, b in want.values()))


def test_liveness_reads_connected_nodes_and_their_bfd() -> None:
    nodes = [
        {"system_id": "gw1", "status": ["map", [["connected", "true"], ["bfd:hv1", "up"]]]},
        {"system_id": "gw2", "status": ["map", [["connected", "false"], ["bfd:hv1", "up"]]]},
    ]
    live, bfd = liveness(nodes, ["hv1"])
    assert live == {"hv1", "gw1"}
    assert bfd == {("gw1", "hv1", True)}


# ---- zones ----


def test_zones_are_stable_recorded_first_and_reused_after_release() -> None:
    zones = NodeZones("hv1")
    zones.need("a")
    zones.need("b")
    assert zones.zones == {"a": 1, "b": 2}
    assert zones.take_changes() == [(1, ("hv1", "a", 1)), (1, ("hv1", "b", 2))]
    assert zones.take_record() == ({"a": 1, "b": 2}, set())
    zones.need("a")  # again: the same zone, nothing to feed
    assert zones.take_changes() == []
    zones.release("a")
    assert zones.take_changes() == [(-1, ("hv1", "a", 1))]
    assert zones.take_record() == ({}, {"a"})
    zones.need("c")
    assert zones.zones["c"] == 1  # a released zone is handed out again
    # another master's record is adopted (not overridden), and its numbers are not reused
    zones.adopt({"d": 7, "c": 1})
    zones.need("d")
    zones.need("e")
    assert zones.zones["d"] == 7
    assert zones.zones["e"] == 8


def test_zones_given_before_the_record_was_read_give_way_to_it() -> None:
    # Zones given before the node's record was read (never recorded by this controller):
    # the record wins, so the ports keep the zones their connections are tracked in.
    standby = NodeZones("hv1")
    for owner in ("a", "b", "c"):
        standby.need(owner)
    standby.take_changes()
    assert standby.zones == {"a": 1, "b": 2, "c": 3}
    standby.adopt({"a": 2, "b": 1, "x": 3})  # "c" not recorded yet, on "x"'s number
    assert standby.zones["a"] == 2
    assert standby.zones["b"] == 1
    assert standby.zones["c"] not in (1, 2, 3)
    assert standby.take_record() == ({"c": standby.zones["c"]}, set())
    fed = dict.fromkeys(("a", "b", "c"), 0)
    for weight, (_, owner, zone) in standby.take_changes():
        fed[owner] = zone if weight > 0 else fed[owner]
    assert fed == {"a": 2, "b": 1, "c": standby.zones["c"]}
    standby.need("d")  # a zone neither given nor recorded
    others = {zone for owner, zone in standby.zones.items() if owner != "d"}
    assert standby.zones["d"] not in others | {1, 2, 3}


def test_a_standby_gives_no_zone_and_takes_its_masters() -> None:
    """A standby waits for the master's record: the zones it feeds the engine are the
    master's from the start (none renumbered), it records nothing, and a takeover gives
    the owners still waiting theirs."""
    standby = NodeZones("hv1", master=False)
    for owner in ("a", "b", "c"):
        standby.need(owner)
    standby.speculate("d")
    assert standby.zones == {}
    assert standby.take_changes() == []
    standby.adopt({"a": 7, "b": 3, "x": 1})
    assert standby.zones == {"a": 7, "b": 3}
    assert sorted(standby.take_changes()) == [(1, ("hv1", "a", 7)), (1, ("hv1", "b", 3))]
    assert standby.take_record() == ({}, set())
    standby.release_unasked()  # "d" was given beforehand and never asked for
    standby.set_master(True)  # takeover: "c" waited, "d" needs none
    assert set(standby.zones) == {"a", "b", "c"}
    assert standby.zones["c"] not in (7, 3, 1)
    assert standby.take_record() == ({"c": standby.zones["c"]}, set())


@settings(max_examples=60, deadline=None)
@given(st.permutations("abcdefg"), st.permutations("abcdefg"), st.integers(0, 7))
def test_a_standby_ends_with_its_masters_zones_whatever_the_order(
    master_order: list[str], standby_order: list[str], recorded_after: int
) -> None:
    master, standby = NodeZones("hv1"), NodeZones("hv1", master=False)
    for owner in master_order:
        master.need(owner)
    record, _ = master.take_record()
    for i, owner in enumerate(standby_order):
        if i == recorded_after:
            standby.adopt(record)
        standby.need(owner)
    standby.adopt(record)
    assert standby.zones == master.zones
    assert all(weight > 0 for weight, _ in standby.take_changes()), "a zone renumbered"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["ask", "speculate", "transaction"]), st.sampled_from("abcde")),
        max_size=20,
    ),
    st.integers(0, 20),
)
def test_a_standby_keeps_every_owner_asked_whatever_it_speculates(
    ops: list[tuple[str, str]], recorded_after: int
) -> None:
    """The rules asking for an owner's zone before a new VIF's port is given one
    beforehand (`speculate`), on a standby that waits for the record: the owner still has
    the record's zone when it comes (a transaction's `release_unasked` took it as never
    asked, and the standby's flows lacked its ports' classifier until a takeover pushed
    that table to the node)."""
    record = {owner: i + 1 for i, owner in enumerate("abcde")}
    standby, asked = NodeZones("hv1", master=False), set()
    for i, (op, owner) in enumerate(ops):
        if i == recorded_after:
            standby.adopt(record)
        if op == "ask":
            standby.asked(owner)
            asked.add(owner)
        elif op == "speculate":
            standby.speculate(owner)
        else:  # (the engine's transaction ends: what was given beforehand and not asked)
            standby.release_unasked()
    standby.release_unasked()
    standby.adopt(record)
    assert standby.zones == {owner: record[owner] for owner in asked}


def test_a_zone_the_record_gives_another_is_not_shared() -> None:
    """A standby holds owner b's zone from a record; its master releases b and gives the
    number to a: the standby gives b's zone back (b waits for the record), and a takeover
    gives b another."""
    standby = NodeZones("hv1", master=False)
    standby.asked("b")
    standby.adopt({"b": 5})
    standby.asked("a")
    standby.adopt({"a": 5})
    assert standby.zones == {"a": 5}
    assert standby.waiting == {"b"}
    standby.set_master(True)
    assert standby.zones["a"] == 5
    assert standby.zones["b"] != 5
    assert standby.take_record() == ({"b": standby.zones["b"]}, set())


def test_a_zone_released_and_taken_again_from_a_record_is_not_given_out() -> None:
    zones = NodeZones("hv1")
    zones.need("c")
    zones.release("c")  # its zone is free here ...
    zones.adopt({"e": 1})
    zones.need("e")  # ... and the node records it for e, which takes it
    zones.adopt({})  # (e's record removed: it keeps its zone)
    zones.need("f")
    assert zones.zones == {"e": 1, "f": 2}


@settings(max_examples=150, deadline=None)
@given(
    st.booleans(),
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["ask", "release", "speculate"]), st.sampled_from("abcde")),
            st.tuples(
                st.just("adopt"),
                st.dictionaries(st.sampled_from("abcdexy"), st.integers(1, 8), max_size=5).filter(
                    lambda record: len(set(record.values())) == len(record)
                ),
            ),
            st.tuples(st.just("master"), st.booleans()),
        ),
        max_size=25,
    ),
)
def test_no_two_owners_share_a_zone_whatever_the_records(
    master: bool, ops: list[tuple[str, Any]]
) -> None:
    """Masters and standbys, fed asks, releases, speculations, records that come and go and
    changes of mastership in any order: no zone is held by two owners."""
    zones = NodeZones("hv1", master=master)
    for op, arg in ops:
        if op == "ask":
            zones.asked(arg)
        elif op == "release":
            zones.release(arg)
        elif op == "speculate":
            zones.speculate(arg)
        elif op == "adopt":
            zones.adopt(arg)
        else:
            zones.set_master(arg)
        held = list(zones.zones.values())
        assert len(set(held)) == len(held), (op, arg, zones.zones)


def test_a_speculative_zone_not_asked_for_goes_back() -> None:
    zones = NodeZones("hv1")
    zones.speculate("p")
    zones.speculate("q")
    zones.asked("q")
    zones.release_unasked()
    assert zones.zones == {"q": 2}
    assert ("hv1", "p", 1) not in zones.rows()


def test_a_lost_record_is_sent_again_whole() -> None:
    zones = NodeZones("hv1")
    zones.need("a")
    zones.take_record()
    zones.need("b")
    zones.record_lost()
    assert zones.take_record()[0] == {"a": 1, "b": 2}


def test_zones_run_out_without_handing_one_out_twice() -> None:
    zones = NodeZones("hv1", next_zone=ZONES[1] - 1)
    zones.need("a")
    zones.need("b")
    assert zones.zones == {"a": ZONES[1] - 1}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from("abcdefg")), max_size=40))
def test_zones_never_share_a_number(ops: list[tuple[bool, str]]) -> None:
    zones = NodeZones("hv1")
    for need, owner in ops:
        (zones.need if need else zones.release)(owner)
        assert len(set(zones.zones.values())) == len(zones.zones)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefg"), max_size=7, unique=True),
    st.dictionaries(st.sampled_from("abcdefgxyz"), st.integers(1, 12), max_size=8).filter(
        lambda record: len(set(record.values())) == len(record)
    ),
)
def test_an_adopted_record_wins_and_zones_stay_distinct(
    given: list[str], record: dict[str, int]
) -> None:
    zones = NodeZones("hv1")
    for owner in given:
        zones.need(owner)
    zones.adopt(record)
    assert all(zones.zones[o] == z for o, z in record.items() if o in zones.zones)
    assert len(set(zones.zones.values())) == len(zones.zones)
    rows: set[tuple[str, str, int]] = set()
    for weight, row in zones.take_changes():  # what the engine was fed adds up to the zones
        (rows.add if weight > 0 else rows.discard)(row)
    assert rows == zones.rows()


# ---- status ----


def test_port_bindings_follow_where_vifs_are() -> None:
    bindings = {"p1": {"chassis": ["set", []], "up": False, "type": "vif"},
                "p2": {"chassis": "hv2", "up": True, "type": "vif"}}  # fmt: skip
    uuids = {"p1": "u1", "p2": "u2"}
    ops = status.binding_ops(bindings, {"p1": "hv1"}, ["p1", "p2"], {"hv1", "hv2"}, {"hv1"}, uuids)
    assert ops == [
        {"op": "update", "table": "Port_Binding", "where": [["_uuid", "==", ["uuid", "u1"]]],
         "row": {"chassis": "hv1", "up": True}},
        {"op": "update", "table": "Port_Binding",
         "where": [["_uuid", "==", ["uuid", "u2"]], ["chassis", "==", "hv2"]],
         "row": {"chassis": ["set", []], "up": False}},
    ]  # fmt: skip
    # not before the node's whole table is in
    assert status.binding_ops(bindings, {"p1": "hv1"}, ["p1"], {"hv1"}, set(), uuids) == []


def _book(**reports: status.NodeReport) -> status.ReportBook:
    book = status.ReportBook()
    for node, report in reports.items():
        book.put(node, report)
    return book


def test_the_realized_generation_is_the_least_of_every_member() -> None:
    reports = _book(hv1=status.NodeReport(5, "", {}, True))
    published = {"realized_generation:pc2": "4", "realized_generation:gone": "1"}
    assert reports.realized(6, published, ["pc2"]) == 4
    assert _book().realized(6, published, []) == 6  # (masters none)
    # a member that has published nothing yet: not known
    assert reports.realized(6, published, ["pc2", "pc3"]) is None
    unsynced = _book(hv1=status.NodeReport(5, "", {}, False))
    assert unsynced.realized(6, published, ["pc2"]) is None
    ops = status.published_ops(published, "g", "pc1", 5)
    assert ops[0]["op"] == "mutate"
    assert ops[0]["mutations"][1] == ["external_ids", "insert",
                                      ["map", [["realized_generation:pc1", "5"]]]]  # fmt: skip
    assert status.published_ops({"realized_generation:pc1": "5"}, "g", "pc1", 5) == []


def test_a_node_that_lost_its_table_realizes_nothing_and_nor_does_the_configuration() -> None:
    """A switch restarted (its table gone) is not realized while its OVSDB is connected, and
    the generation every node has realized is 0 until its table is in again, whatever the
    other members published (the API's `/realization` says not realized)."""
    published = {"realized_generation:pc2": "6"}
    lost = _book(hv1=status.NodeReport(0, "its OpenFlow connection closed", {}, False, True),
                 hv2=status.NodeReport(6, "", {}, True))  # fmt: skip
    assert lost.any_lost()
    assert not lost.all_synced()
    assert lost.own_realized(6) == 0
    assert lost.realized(6, published, ["pc2"]) == 0
    said = status.node_status("pc1", lost.reports["hv1"])
    assert said["realized_generation"] == "0"
    assert said["synced"] == "false"
    assert node_realized(said, {"realized_generation:pc1": "6"}) == 0
    lost.put("hv1", status.NodeReport(6, "", {}, True))  # its whole table pushed again
    assert not lost.any_lost()
    assert lost.realized(6, published, ["pc2"]) == 6


@pytest.mark.parametrize(("installed", "now", "why"), [
    (None, (0, False, None, False), None),  # never pushed: its first push is whole anyway
    ((1, True, "b1", False), (1, True, "b1", False), None),
    ((1, True, "b1", False), (1, False, "b1", False), "OpenFlow connection closed"),
    ((1, True, "b1", False), (2, True, "b1", False), "made again"),
    ((1, True, "b1", False), (1, True, "b2", False), "br-int was made again"),
    ((1, True, "b1", False), (1, True, "b1", True), "flow-restore-wait"),
    (None, (1, True, "b1", True), "flow-restore-wait"),
])  # fmt: skip
def test_a_tables_signals_say_when_the_switch_may_not_hold_it(
    installed: tuple[int, bool, str | None, bool] | None,
    now: tuple[int, bool, str | None, bool],
    why: str | None,
) -> None:
    """The table pushed is the switch's while the channel it went on is the one open, to
    the same br-int, and ovs-vswitchd is not waiting for flows to be restored."""
    said = table_unknown(TableSignals(*installed) if installed else None, TableSignals(*now))
    assert (said is None) if why is None else (said is not None and why in said)


def test_a_node_untouched_by_a_change_keeps_its_row() -> None:
    """A new generation that pushed nothing to a node rewrites nothing of its status (its
    controller publishes the generation once); a push, a message or BFD verdicts do."""
    said = status.node_status("pc1", status.NodeReport(3, "", {}, True))
    rows = {"u1": {"system_id": "hv1", "status": ["map", sorted(said.items())]}}
    now = {"hv1": status.NodeReport(4, "", {}, True)}
    assert status.node_status_ops(rows, "pc1", now, {"hv1"}, {"hv1"}, touched=set()) == []
    ops = status.node_status_ops(rows, "pc1", now, {"hv1"}, {"hv1"}, touched={"hv1"})
    assert ["realized_generation", "4"] in ops[0]["row"]["status"][1]
    for report in (status.NodeReport(4, "waiting", {}, True),
                   status.NodeReport(4, "", {"gw1": True}, True)):  # fmt: skip
        assert status.node_status_ops(rows, "pc1", {"hv1": report}, {"hv1"}, {"hv1"}, set())
    # what a reader makes of it: the larger of the row's and its controller's
    published = {"realized_generation:pc1": "4"}
    assert node_realized(said, published) == 4
    assert node_realized({**said, "message": "waiting"}, published) == 3
    assert node_realized({**said, "connected": "false"}, published) == 3
    assert node_realized({**said, "controller": "pc2"}, published) == 3
    # a node whose whole table is not in yet (newly connected or taken over)
    unsynced = status.node_status("pc1", status.NodeReport(0, "", {}, False))
    assert node_realized(unsynced, published) == 0


def test_a_gateway_services_active_node_is_written_by_that_nodes_master() -> None:
    """`active_node` names where the service is active, written by the controller that
    masters that node once its table is in; a service active nowhere is cleared by the
    master of the node it names, or by anyone once that node is connected to none."""

    def row(**said: str) -> dict[str, Any]:
        return {"status": ["map", sorted(said.items())]}

    def ops(services: dict[str, dict[str, Any]], active: dict[str, str], masters: set[str],
            synced: set[str], live: set[str]) -> dict[str, dict[str, str]]:  # fmt: skip
        got = status.gateway_status_ops(services, active, masters, synced.__contains__,
                                        live.__contains__)  # fmt: skip
        return {op["where"][0][2][1]: dict(op["row"]["status"][1]) for op in got}

    fresh = {"s1": row()}
    assert ops(fresh, {"s1": "gw1"}, {"gw1"}, {"gw1"}, {"gw1"}) == {"s1": {"active_node": "gw1"}}
    assert ops(fresh, {"s1": "gw1"}, {"gw1"}, set(), {"gw1"}) == {}, "its table not in yet"
    assert ops(fresh, {"s1": "gw1"}, {"gw2"}, {"gw2"}, {"gw1"}) == {}, "not its master"
    # failover: gw2's master says so, gw1's (still connected) does not undo it
    moved = {"s1": row(active_node="gw1", other="kept")}
    assert ops(moved, {"s1": "gw2"}, {"gw2"}, {"gw2"}, {"gw1", "gw2"}) == {
        "s1": {"active_node": "gw2", "other": "kept"}}  # fmt: skip
    assert ops(moved, {"s1": "gw2"}, {"gw1"}, {"gw1"}, {"gw1", "gw2"}) == {}
    assert ops({"s1": row(active_node="gw2")}, {"s1": "gw2"}, {"gw2"}, {"gw2"}, {"gw2"}) == {}
    # active nowhere: cleared by gw1's master, or by anyone once gw1 is connected to none
    assert ops(moved, {}, {"gw1"}, {"gw1"}, {"gw1"}) == {"s1": {"other": "kept"}}
    assert ops(moved, {}, {"hv1"}, {"hv1"}, {"gw1"}) == {}
    assert ops(moved, {}, {"hv1"}, {"hv1"}, set()) == {"s1": {"other": "kept"}}


def test_a_node_gone_is_reported_disconnected_once_by_its_controller() -> None:
    said = ["map", [["connected", "true"], ["controller", "pc1"]]]
    rows = {"u1": {"system_id": "hv1", "status": said}}
    ops = status.node_status_ops(rows, "pc1", {}, connected=set(), seen={"hv1"}, touched=set())
    assert len(ops) == 1
    assert ["connected", "false"] in ops[0]["row"]["status"][1]
    assert status.node_status_ops(rows, "pc2", {}, connected=set(), seen={"hv1"},
                                  touched=set()) == []  # fmt: skip


# ---- feeding by group ----


class _Txn:
    def __init__(self) -> None:
        self.ops: list[tuple[str, str, tuple[Any, ...]]] = []

    def insert(self, relation: str, row: tuple[Any, ...]) -> None:
        self.ops.append(("insert", relation, row))

    def delete(self, relation: str, row: tuple[Any, ...]) -> None:
        self.ops.append(("delete", relation, row))


def test_a_row_two_groups_hold_stays_until_both_let_go() -> None:
    feed = GroupFeed()
    feed.replace("a", {"R": {(1,)}})
    feed.replace("b", {"R": {(1,), (2,)}})
    txn = _Txn()
    assert feed.flush(txn) == 2
    feed.drop("a")
    assert feed.flush(_Txn()) == 0
    feed.drop("b")
    txn = _Txn()
    feed.flush(txn)
    assert sorted(txn.ops) == [("delete", "R", (1,)), ("delete", "R", (2,))]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sets(st.integers(0, 4), max_size=3)),
                max_size=12))  # fmt: skip
def test_the_engine_ends_with_the_union_of_the_groups(steps: list[tuple[str, set[int]]]) -> None:
    """Whatever the order of replacements and flushes, what was inserted and not deleted
    is the union of what the groups hold."""
    feed = GroupFeed()
    engine: set[tuple[Any, ...]] = set()
    groups: dict[str, set[int]] = {}
    for i, (group, rows) in enumerate(steps):
        feed.replace(group, {"R": {(r,) for r in rows}})
        groups[group] = rows
        if i % 2:
            txn = _Txn()
            feed.flush(txn)
            for op, _, row in txn.ops:
                assert (row in engine) == (op == "delete"), "a redundant insert or delete"
                (engine.discard if op == "delete" else engine.add)(row)
    txn = _Txn()
    feed.flush(txn)
    for op, _, row in txn.ops:
        (engine.discard if op == "delete" else engine.add)(row)
    assert engine == {(r,) for rows in groups.values() for r in rows}
    assert feed.rows().get("R", set()) == engine


def test_a_change_in_one_node_feeds_only_that_node() -> None:
    core = _core("hv1", "hv2")
    transactions = core.transactions
    core.node("hv1", NodeFacts(vifs={"vif-1": 5}, tunnels={"loom-geneve": 20}))  # no change
    assert core.compute() is False
    assert core.transactions == transactions


@pytest.mark.parametrize("ofport", [6, 9])
def test_a_vif_moving_to_another_ofport_moves_its_classifier_flow(ofport: int) -> None:
    core = _core("hv1", "hv2")
    core.node("hv1", NodeFacts(vifs={"vif-1": ofport}, tunnels={"loom-geneve": 20}))
    _settle(core)
    matches = [f.match for f in core.flows("hv1") if f.table == 0]
    assert any(f"in_port={ofport}" in m for m in matches)
    assert not any("in_port=5" in m.split(",") for m in matches)


REPORT = st.one_of(st.none(), st.integers(0, 4),
                   st.tuples(st.integers(0, 4), st.booleans(), st.booleans()),
                   st.tuples(st.integers(0, 4)))  # fmt: skip
"""A node's report (realized, synced, lost), or None: dropped, or a generation: advanced to
it, or a 1-tuple: every node named so far advanced to it at once (`advance_many`)."""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["hv1", "hv2", "hv3", "hv4"]), REPORT)))
def test_the_report_book_answers_as_a_scan_of_its_reports(
    steps: list[tuple[str, int | tuple[int] | tuple[int, bool, bool] | None]],
) -> None:
    """What the realized generation asks of every node mastered, kept as reports come and
    go, equals a scan of them."""
    book = status.ReportBook()
    for node, what in steps:
        if what is None:
            book.drop(node)
        elif isinstance(what, int):
            before = book.reports.get(node)
            assert (not book.advance_many({node}, what)) == (before is not None)
            if before is not None:  # (only its generation moves)
                assert book.reports[node] == status.NodeReport(what, "", {}, before.synced,
                                                               before.lost)  # fmt: skip
        elif len(what) == 1:
            names = {n for n, _ in steps}
            before = dict(book.reports)
            assert book.advance_many(names, what[0]) == names - before.keys()
            for n, old in before.items():  # (only their generation moves)
                assert book.reports[n] == old._replace(realized=what[0])
        else:
            book.put(node, status.NodeReport(what[0], "", {}, what[1], what[2]))
        reports = book.reports.values()
        lost = any(report.lost for report in reports)
        least = 0 if lost else min([9, *(report.realized for report in reports)])
        assert book.own_realized(9) == least
        assert book.all_synced() == all(report.synced for report in reports)
        assert book.any_lost() == lost
        assert book.realized(9, {}, []) == (least if book.all_synced() or lost else None)
