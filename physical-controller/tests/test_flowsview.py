"""`loom flows NODE`'s report: counts, in sync or not, the changes, the tables on demand."""

from __future__ import annotations

from loom_ovs.openflow import Flow
from loom_physical.flowsview import report


def test_a_node_that_holds_what_is_computed_is_in_sync() -> None:
    flows = [Flow(0, 100, "in_port=1", "resubmit(,8)"), Flow(8, 50, "", "drop")]
    body = report("hv1", "physical-0", flows, ["a", "b"], [])
    assert body == {"node": "hv1", "controller": "physical-0", "computed_flows": 2,
                    "installed_flows": 2, "in_sync": True, "changes": [],
                    "learned": []}  # fmt: skip


def test_a_flow_the_node_learned_is_listed_as_learned_not_as_a_change() -> None:
    """A gateway's next-hop MAC, written into table 65 by its datapath's `learn`: the rules
    compute its key, not its actions; under that key it is no difference, under another
    (a datapath the node no longer learns for) it is one."""
    flows = [Flow(0, 110, "in_port=9,arp", "learn(table=65,priority=100,OXM_OF_METADATA[])")]
    mac = Flow(65, 100, "metadata=0x800001", "set_field:00:00:00:00:99:01->eth_dst", 0)
    stale = Flow(65, 100, "metadata=0x800002", "set_field:00:00:00:00:99:02->eth_dst", 0)
    learned = {(65, 100, "metadata=0x800001")}
    body = report("gw1", "physical-0", flows, ["a", "b"], [("delete", mac)], learned=learned)
    assert body["in_sync"] is True
    assert body["changes"] == []
    assert body["learned"] == [mac.text()]
    body = report("gw1", "physical-0", flows, ["a", "b", "c"],
                  [("delete", mac), ("delete", stale)], learned=learned)  # fmt: skip
    assert body["in_sync"] is False
    assert body["changes"] == [{"op": "delete", "flow": stale.text()}]
    assert body["learned"] == [mac.text()]


def test_the_changes_and_both_tables_are_listed_in_order() -> None:
    late = Flow(8, 50, "", "drop")
    early = Flow(0, 100, "in_port=1", "resubmit(,8)")
    stray = Flow(99, 1, "", "drop")
    body = report("hv1", "physical-0", [late, early], ["z", "a"],
                  [("delete", stray), ("add", early)], tables=True)  # fmt: skip
    assert body["in_sync"] is False
    assert [c["op"] for c in body["changes"]] == ["add", "delete"]
    assert body["changes"][0]["flow"] == early.text()
    assert body["computed"] == [early.text(), late.text()]
    assert body["installed"] == ["a", "z"]
