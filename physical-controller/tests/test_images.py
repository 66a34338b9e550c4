"""The nodes' tables as shared parts (`loom_physical.images`): pure, no daemon.

A node's push is the change of its parts since it last got them; replaying the pushes
onto a fake flow table must leave exactly the table the parts make (the property the
controller relies on), whatever the order of changes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from loom_ovs.openflow import MARK, Flow, Key, Mod
from loom_physical.images import Images, Row, node_parts


def apply(table: dict[Key, Flow], mods: list[Mod]) -> None:
    """What a switch does with a bundle (OpenFlow add replaces, delete_strict removes)."""
    for op, flow in mods:
        if op == "delete":
            table.pop(flow.key, None)
        else:
            table[flow.key] = flow


def row(dp: int, source: str, flows: list[str], local: list[str] = ()) -> Row:  # type: ignore[assignment]
    return Row(dp, source, 1, frozenset(flows), frozenset(local))


def test_a_datapath_is_one_part_whatever_its_nodes() -> None:
    images = Images()
    images.set_row("u1", row(1, "sw", ["ingress\tls_in_acl\t0\t\tresubmit(,@next)"]))
    images.set_row(
        "u2",
        row(
            1,
            "p1",
            [
                "ingress\tls_in_l2_lkup\t50\tdl_dst=00:00:00:00:00:01\t"
                "set_field:0x1->reg15,resubmit(,@egress)"
            ],
            ["ingress\tls_in_port_sec_l2\t50\treg14=0x1\tresubmit(,@next)"],
        ),
    )
    hv1 = node_parts("hv1", {1}, {"p1"})
    hv2 = node_parts("hv2", {1}, set())
    assert hv1 == {("node", "hv1"), ("dp", 1), ("dp", 0), ("port", "p1")}
    assert images.size(hv1) == 3
    assert images.size(hv2) == 2
    # the datapath's flows are the same objects for both nodes
    assert list(images.flows([("dp", 1)])) == sorted(images.flows([("dp", 1)]))


def test_only_a_datapaths_bytes_are_kept_for_the_next_node() -> None:
    images = Images()
    images.set_row(
        "u1",
        row(
            1,
            "p1",
            ["ingress\tls_in_acl\t0\t\tresubmit(,@next)"],
            ["ingress\tls_in_port_sec_l2\t50\treg14=0x1\tresubmit(,@next)"],
        ),
    )
    first = images.encoded([("dp", 1), ("port", "p1")])
    again = images.encoded([("dp", 1), ("port", "p1")])
    assert first is not None
    assert again == first
    assert again[0] is first[0], "a datapath's part is encoded once for every node"
    assert again[1] is not first[1], "a port's part (one node's) is not kept"
    images.set_row("u1", None)
    assert images.encoded([("dp", 1), ("port", "p1")]) == []


def test_pushes_replayed_make_the_parts_table() -> None:
    images = Images()
    images.set_row("u1", row(1, "sw", ["ingress\tls_in_acl\t0\t\tresubmit(,@next)"]))
    installed: set = set()
    node: dict[Key, Flow] = {}
    desired = node_parts("hv1", {1}, set())
    apply(node, images.mods(installed, desired))
    installed = desired
    images.settle()
    # a change to the datapath: only the difference goes
    images.set_row("u1", row(1, "sw", ["ingress\tls_in_acl\t0\t\tdrop"]))
    mods = images.mods(installed, desired)
    assert [op for op, _ in mods] == ["add"]
    apply(node, mods)
    images.settle()
    assert node == {f.key: f for f in images.flows(desired)}
    # the node loses the datapath: its flows go, as the node held them
    images.set_row("u1", None)
    mods = images.mods(installed, node_parts("hv1", set(), set()))
    apply(node, mods)
    assert node == {}


FLOWS = [f"ingress\tls_in_acl\t{p}\ttcp,tp_dst={p}\t{a}" for p in range(1, 6)
         for a in ("drop", "resubmit(,@next)")]  # fmt: skip


def local(port: int) -> list[str]:
    """Port `port`'s possible own flows (`local_flows`: they match its key), some naming an
    identifier (`set_binding`)."""
    return [f"ingress\tls_in_port_sec_l2\t{p}\treg14=0x{port + 1}\t{a}" for p in (50, 90)
            for a in ("drop", "resubmit(,@next)", "set_field:${mac:G}->eth_dst")]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_incremental_pushes_equal_a_whole_table(data: st.DataObject) -> None:
    """Random rows (their flows and local flows), bindings, datapaths, ports and node flows
    change over several passes; a node pushed incrementally each pass (or skipped, then
    pushed whole) ends with the parts' table."""
    rng = random.Random(data.draw(st.integers(0, 1 << 30)))
    images = Images()
    installed: set = set()
    node: dict[Key, Flow] = {}
    for _ in range(data.draw(st.integers(1, 8))):
        for _ in range(rng.randrange(1, 5)):
            uuid = f"u{rng.randrange(4)}"
            if rng.random() < 0.3:
                images.set_row(uuid, None)
            else:
                texts = rng.sample(FLOWS, rng.randrange(0, 4))
                port = rng.randrange(3)
                images.set_row(uuid, row(rng.choice([1, 2]), f"p{port}", texts,
                                         rng.sample(local(port), rng.randrange(0, 3))))  # fmt: skip
        if rng.random() < 0.3:
            images.set_binding("mac:G", rng.choice([None, "00:00:00:00:00:01",
                                                    "00:00:00:00:00:02"]))  # fmt: skip
        if rng.random() < 0.5:
            flow = Flow(64, 100, f"metadata={rng.choice([1, 2])}", "drop", MARK)
            (images.add if rng.random() < 0.7 else images.remove)(("node", "hv1"), flow)
        desired = node_parts("hv1", set(rng.sample([1, 2], rng.randrange(0, 3))),
                             {f"p{i}" for i in range(3) if rng.random() < 0.5})  # fmt: skip
        apply(node, images.mods(installed, desired))
        installed = desired
        images.settle()
        assert node == {f.key: f for f in images.flows(desired)}


def test_a_ports_part_is_translated_when_taken() -> None:
    """A port's part keeps its rows, not their translation; what a node holds of it is
    the translation as of the last settle, with the bindings of then."""
    images = Images()
    flow = "ingress\tls_in_port_sec_l2\t50\treg14=0x1\tset_field:${mac:G}->eth_dst"
    images.set_binding("mac:G", "00:00:00:00:00:01")
    images.set_row("u1", row(1, "p1", [], [flow]))
    part = images.parts[("port", "p1")]
    assert len(part) == 1
    [held] = images.flows([("port", "p1")])
    assert "00:00:00:00:00:01" in held.actions
    images.settle()
    images.set_binding("mac:G", "00:00:00:00:00:02")
    mods = images.mods({("port", "p1")}, {("port", "p1")})
    assert [(op, "00:00:00:00:00:02" in f.actions) for op, f in mods] == [("add", True)]
    images.settle()
    images.set_row("u1", None)
    assert [op for op, _ in images.mods({("port", "p1")}, set())] == ["delete"]
    images.settle()
    assert ("port", "p1") not in images.parts


def test_a_malformed_flow_is_counted_once_a_version_of_its_row() -> None:
    """A malformed flow is counted (and logged) once each time its row is placed: a
    datapath's when placed, a port's own when its part is first translated -- not at every
    push of the part, and not left out because the row's datapath flow was malformed too."""
    bad = "egress\tls_out_deliver\t0\t\tresubmit(,@next)"  # @next after the last stage
    good = "ingress\tls_in_port_sec_l2\t50\treg14=0x1\tdrop"
    images = Images()
    images.set_row("u1", row(1, "p1", [bad], [bad, good]))
    assert images.malformed == 1  # the datapath's flow; the port's part is not translated
    assert images.size([("port", "p1")]) == 1
    assert images.malformed == 2
    images.encoded([("port", "p1")])
    images.settle()
    images.encoded([("port", "p1")])
    assert images.malformed == 2
    images.set_row("u1", row(1, "p1", [], [bad]))  # a new version of the row
    assert images.size([("port", "p1")]) == 0
    assert images.malformed == 3


LOOKUP = (
    "ingress\tls_in_l2_lkup\t50\tdl_dst=00:00:00:00:00:0{k}\tset_field:0x{k}->reg15,"
    "resubmit(,@egress)"
)
OWN = "ingress\tls_in_port_sec_l2\t50\treg14=0x{k}\tresubmit(,@next)"


def test_a_hoverboard_switchs_lookups_are_their_ports_and_its_hoverboards() -> None:
    """In a switch programmed by Hoverboards a port's `flows` leave the datapath's part:
    a host that looks at the port has them, a Hoverboard has every port's; moved either way
    as the rules say (`set_lookups`), the parts are what placing the rows afresh makes, and a
    node's pushes across the move leave exactly its new table."""
    images = Images()
    images.set_row("s", row(1, "sw", ["ingress\tls_in_acl\t0\t\tresubmit(,@next)"]))
    for k in (1, 2):
        images.set_row(f"p{k}", row(1, f"p{k}", [LOOKUP.format(k=k)], [OWN.format(k=k)]))
    host = node_parts("hv1", {1}, {"p1"}, looks={"p1"})
    board = node_parts("hb1", {1}, set(), hoverboard={1})
    before = {n: {f.key: f for f in images.flows(parts)} for n, parts in
              (("hv1", host), ("hb1", board))}  # fmt: skip
    images.settle()
    images.set_lookups(1, "p1", True)
    images.set_lookups(1, "p2", True)
    # hv1: the switch's flow, p1's own and its lookup; not p2's lookup. hb1: both lookups.
    lookups = [f.match for f in images.flows(host) if "dl_dst" in f.match]
    assert lookups == ["metadata=0x1,dl_dst=00:00:00:00:00:01"]
    assert len(list(images.flows(host))) == 3
    assert {f.match for f in images.flows(board) if "dl_dst" in f.match} == {
        "metadata=0x1,dl_dst=00:00:00:00:00:01",
        "metadata=0x1,dl_dst=00:00:00:00:00:02",
    }
    fresh = Images()
    fresh.set_lookups(1, "p1", True)
    fresh.set_lookups(1, "p2", True)
    fresh.set_row("s", row(1, "sw", ["ingress\tls_in_acl\t0\t\tresubmit(,@next)"]))
    for k in (1, 2):
        fresh.set_row(f"p{k}", row(1, f"p{k}", [LOOKUP.format(k=k)], [OWN.format(k=k)]))
    for parts in (host, board):
        assert sorted(images.flows(parts)) == sorted(fresh.flows(parts))
    # A node's push across the move: the changes of its parts leave its new table.
    for name, parts, old in (("hv1", host, before["hv1"]), ("hb1", board, before["hb1"])):
        table = dict(old)
        apply(table, images.mods(parts, parts))
        assert table == {f.key: f for f in images.flows(parts)}, name
    # And back to preprogrammed: every node with the switch has every lookup again.
    images.settle()
    images.set_lookups(1, "p2", False)
    assert any("00:00:00:00:00:02" in f.match for f in images.flows(node_parts("hv1", {1}, ())))
