"""The desired-table bookkeeping (pure) and its push to a real ovs-vswitchd."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_ovs.openflow import MARK, Flow, FlowTable, Switch, cookie
from loom_ovs.sandbox import Sandbox


def test_one_flow_per_match_and_conflicts_reported() -> None:
    table = FlowTable()
    a = Flow(8, 50, "metadata=0x1,reg14=0x1", "resubmit(,9)", cookie(7))
    b = Flow(8, 50, "metadata=0x1,reg14=0x1", "drop", cookie(9))
    table.add(a)
    table.add(a)  # wanted by two objects: installed once
    table.add(b)
    assert list(table) == [a]  # the smallest (cookie, actions) wins, whatever the order
    assert table.conflicts() == [(a.key, ["resubmit(,9)", "drop"])]
    table.remove(a)
    assert list(table) == [a]  # still wanted once
    table.remove(a)
    assert list(table) == [b]
    assert table.conflicts() == []


def test_mods_bring_installed_in_line() -> None:
    table = FlowTable()
    installed: dict[tuple[int, int, str], Flow] = {}
    flow = Flow(0, 100, "in_port=1", "resubmit(,8)")
    table.add(flow)
    assert table.mods(table.take_dirty(), installed) == [f"flow add {flow.text()}"]
    assert table.mods(table.take_dirty(), installed) == []
    table.remove(flow)
    assert table.mods(table.take_dirty(), installed) == [
        "flow delete_strict table=0,priority=100,in_port=1"
    ]
    assert installed == {}
    assert cookie(0xABCDEF) == 0xABCDEF << 32 | MARK


@pytest.mark.ovs
def test_push_and_replace_on_a_real_switch(tmp_path: Path) -> None:
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.add_vif("vm", "vif", "50:54:00:00:00:01")
        switch = Switch(node.openflow)
        switch.ensure_tlv_map()
        switch.ensure_tlv_map()  # idempotent
        keep = Flow(0, 100, "in_port=1", "resubmit(,8)", cookie(1))
        gone = Flow(8, 10, "metadata=0x1", "drop", cookie(2))
        switch.apply([f"flow add {keep.text()}", f"flow add {gone.text()}"])
        assert len(switch.dump()) == 2
        new = Flow(8, 20, "metadata=0x1,tun_metadata0=0xffff/0xffff", "drop", cookie(3))
        switch.replace([keep, new])
        dumped = switch.dump()
        assert len(dumped) == 2
        assert any("tun_metadata0=0xffff" in line for line in dumped)
        assert not any("priority=10," in line for line in dumped)
