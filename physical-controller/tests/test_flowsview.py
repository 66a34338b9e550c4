"""`loom flows NODE`'s report: counts, in sync or not, the changes, the tables on demand."""

from __future__ import annotations

from loom_ovs.openflow import Flow
from loom_physical.flowsview import report


def test_a_node_that_holds_what_is_computed_is_in_sync() -> None:
    flows = [Flow(0, 100, "in_port=1", "resubmit(,8)"), Flow(8, 50, "", "drop")]
    body = report("hv1", "physical-0", flows, ["a", "b"], [])
    assert body == {"node": "hv1", "controller": "physical-0", "computed_flows": 2,
                    "installed_flows": 2, "in_sync": True, "changes": []}  # fmt: skip


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
