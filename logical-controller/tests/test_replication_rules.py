"""The replication rules (`rules/logical/replication.dl`) in the engine: a switch that
names no mode replicates through service nodes where its transport zone has some and at the
source where it has none (no warning: nothing was asked that cannot be had), following
service nodes as they come and go; a switch that names a mode keeps it. And the programming
model: hoverboard where asked (by the switch or the deployment's default) and a Hoverboard
is in the switch's zone, `auto` by the number of nodes the switch's VIFs are on."""

from __future__ import annotations

from typing import Any

from loom_ddlog import Program
from loom_logical.rules import main_file


def _node(uuid: str, kind: str, zone: str) -> tuple[Any, ...]:
    return (uuid, uuid, kind, uuid, {zone}, set())


def _switch(
    uuid: str, key: int, mode: str | None, zone: str | None = "tz", model: str | None = None
) -> tuple[Any, ...]:
    return (uuid, "t", uuid, zone, mode, model, True, key)


def _port(uuid: str, switch: str, key: int) -> tuple[Any, ...]:
    return (uuid, switch, "t", uuid, f"0a:00:00:00:00:{key:02x}", set(), False, True, None,
            set(), "vif", f"vif-{uuid}", None, None, None, key)  # fmt: skip


def _replication(program: Program) -> dict[int, tuple[str, list[str]]]:
    """Datapath -> (mode in effect, its service nodes in order)."""
    return {int(dp): (str(mode), [str(n) for _, n in nodes])
            for dp, mode, nodes in program.dump("Replication_Set")}  # fmt: skip


def _warnings(program: Program) -> list[tuple[str, str]]:
    return sorted((str(s), str(k)) for s, k, _ in program.dump("Warning") if k == "replication")


def test_the_default_is_source_without_service_nodes_and_service_nodes_where_there_are() -> None:
    program = Program.load([main_file()], internal=True)
    with program.transaction() as txn:
        txn.insert("Transport_Zone", ("tz", "tz", "geneve"))
        txn.insert("Transport_Zone", ("tz2", "tz2", "geneve"))
        for hv in ("hv1", "hv2"):
            txn.insert("Transport_Node", _node(hv, "hypervisor", "tz"))
        txn.insert("Logical_Switch", _switch("default", 1, None))
        txn.insert("Logical_Switch", _switch("source", 2, "source"))
        txn.insert("Logical_Switch", _switch("asks", 3, "service-node"))
        txn.insert("Logical_Switch", _switch("elsewhere", 4, None, "tz2"))
        txn.insert("Logical_Switch", _switch("zoneless", 5, None, None))
        txn.commit()
    # As the demo: hypervisors, no service node. The default replicates at the source,
    # and only the switch that asked for service nodes is warned about.
    assert _replication(program) == {dp: ("source", []) for dp in (1, 2, 3, 4, 5)}
    assert _warnings(program) == [("asks", "replication")]
    # A service node joins zone tz: the default switches there (and the one with no zone,
    # which spans every node) take it; the source switch stays; tz2's has none.
    with program.transaction() as txn:
        txn.insert("Transport_Node", _node("sn1", "service-node", "tz"))
        txn.commit()
    assert _replication(program) == {
        1: ("service-node", ["sn1"]), 2: ("source", []), 3: ("service-node", ["sn1"]),
        4: ("source", []), 5: ("service-node", ["sn1"]),
    }  # fmt: skip
    assert _warnings(program) == []
    # It leaves again: back to source, with no warning for the default switches.
    with program.transaction() as txn:
        txn.delete_key("Transport_Node", "sn1")
        txn.commit()
    assert _replication(program) == {dp: ("source", []) for dp in (1, 2, 3, 4, 5)}
    assert _warnings(program) == [("asks", "replication")]


def test_the_universal_datapath_carries_the_mode_as_configured() -> None:
    """What the switch asked for (none: the default) is in the universal `Datapath`; the
    mode in effect is its `Replication_Set`'s."""
    program = Program.load([main_file()], internal=True)
    with program.transaction() as txn:
        txn.insert("Transport_Zone", ("tz", "tz", "geneve"))
        txn.insert("Logical_Switch", _switch("default", 1, None))
        txn.insert("Logical_Switch", _switch("source", 2, "source"))
        txn.commit()
    modes = {int(row[0]): row[5] for row in program.dump("Datapath") if row[1] == "switch"}
    assert modes == {1: None, 2: "source"}


def _tunnels(program: Program) -> set[tuple[str, str]]:
    """The per-peer tunnels the nodes need (before endpoints: these have none)."""
    return {(str(a), str(b)) for a, b, _ in program.dump("NeedTunnel")}


def test_the_programming_model_asked_default_and_auto() -> None:
    program = Program.load([main_file()], internal=True)
    with program.transaction() as txn:
        txn.insert("Transport_Zone", ("tz", "tz", "geneve"))
        for hv in ("hv1", "hv2", "hv3"):
            txn.insert("Transport_Node", _node(hv, "hypervisor", "tz"))
        txn.insert("Logical_Switch", _switch("asks", 1, None, model="hoverboard"))
        txn.insert("Logical_Switch", _switch("pre", 2, None, model="preprogrammed"))
        txn.insert("Logical_Switch", _switch("default", 3, None))
        txn.insert("Logical_Switch", _switch("auto", 4, None, model="auto"))
        txn.commit()
    # No Hoverboard yet: every switch is preprogrammed; the one that asked is warned about.
    assert {dp for dp, (mode, _) in _replication(program).items() if mode == "hoverboard"} == set()
    warned = sorted(s for s, k, _ in program.dump("Warning") if k == "programming-model")
    assert warned == ["asks"]
    with program.transaction() as txn:
        txn.insert("Transport_Node", _node("hb1", "hoverboard", "tz"))
        txn.insert("Transport_Node", _node("hb2", "hoverboard", "tz"))
        txn.commit()
    modes = _replication(program)
    assert modes[1][0] == "hoverboard"
    assert sorted(modes[1][1]) == ["hb1", "hb2"]
    assert [modes[dp][0] for dp in (2, 3, 4)] == ["source"] * 3
    assert not [k for _, k, _ in program.dump("Warning") if k == "programming-model"]
    # The deployment's default: hoverboard for the switch that names none.
    with program.transaction() as txn:
        txn.insert("Loom_Global", ("g", "hoverboard", 2))
        txn.commit()
    assert [_replication(program)[dp][0] for dp in (1, 2, 3, 4)] == [
        "hoverboard", "source", "hoverboard", "source"]  # fmt: skip
    # `auto`: hoverboard once its VIFs are on more than hoverboard_span (2) nodes.
    with program.transaction() as txn:
        for i, hv in enumerate(("hv1", "hv2", "hv2", "hv3"), start=1):
            txn.insert("Logical_Switch_Port", _port(f"p{i}", "auto", i))
            if i < 4:
                txn.insert("Port_Location", (f"p{i}", hv))
        txn.commit()
    assert _replication(program)[4][0] == "source"  # (on hv1 and hv2: 2 nodes)
    # The switch's hosts have tunnels to the Hoverboards only once it is hoverboard.
    assert not {pair for pair in _tunnels(program) if "hb1" in pair}
    with program.transaction() as txn:
        txn.insert("Port_Location", ("p4", "hv3"))
        txn.commit()
    assert _replication(program)[4][0] == "hoverboard"
    assert {("hv1", "hb1"), ("hb1", "hv1"), ("hv3", "hb2"), ("hb2", "hv3")} <= _tunnels(program)
    # Back under the span: preprogrammed again.
    with program.transaction() as txn:
        txn.delete_key("Port_Location", "p4")
        txn.commit()
    assert _replication(program)[4][0] == "source"
