"""The desired-table bookkeeping (pure) and its push to a real ovs-vswitchd: natively (the
encoder and the kept channel) and with `ovs-ofctl`, which must install the same table."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_common.testing import wait_for
from loom_ovs.channel import ChannelError, Deposed
from loom_ovs.openflow import (
    MARK,
    Flow,
    FlowTable,
    Mod,
    OpenFlowError,
    Switch,
    bulk_adds,
    bundle_lines,
    cookie,
    parse_diff,
)
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


def test_shared_tables_hold_one_copy_of_a_recurring_flow() -> None:
    """Two `shared` tables given equal flows (equal, not the same strings: as the engine's
    rows come) keep one key and one actions string between them; plain tables two."""

    def flow() -> Flow:  # strings made at run time, as a conversion makes them
        return Flow(37, 100, ",".join(["metadata=0x5", "reg15=0x2"]), "".join(["output:", "7"]))

    def strings(table: FlowTable) -> tuple[str, str]:
        [(key, (_, actions))] = table._single.items()
        return key, actions

    shared = [FlowTable(shared=True), FlowTable(shared=True)]
    plain = [FlowTable(), FlowTable()]
    for table in shared + plain:
        table.add(flow())
    (k1, a1), (k2, a2) = map(strings, shared)
    assert k1 is k2
    assert a1 is a2
    (k3, a3), (k4, a4) = map(strings, plain)
    assert k3 == k4
    assert k3 is not k4
    assert a3 is not a4
    assert list(shared[0]) == list(plain[0]) == [flow()]


def test_a_key_wanted_again_and_released_keeps_one_flow() -> None:
    table = FlowTable()
    flow = Flow(0, 100, "in_port=1", "resubmit(,8)")
    other = Flow(0, 100, "in_port=1", "resubmit(,8)", cookie(3))
    table.add(flow)
    table.add(other)
    assert len(table) == 1
    assert table.candidates(flow.key) == sorted(
        [(flow.cookie, flow.actions), (other.cookie, other.actions)]
    )
    assert table.conflicts() == []  # the same actions under two cookies
    table.remove(flow)
    assert list(table) == [other]
    assert table.candidates(flow.key) == [(other.cookie, other.actions)]
    table.remove(flow)  # not wanted any more: nothing changes
    assert list(table) == [other]
    table.remove(other)
    assert len(table) == 0
    assert table.get(flow.key) is None
    assert bundle_lines([("delete", flow)]) == ["flow delete_strict table=0,priority=100,in_port=1"]
    assert cookie(0xABCDEF) == 0xABCDEF << 32 | MARK


@pytest.mark.ovs
def test_push_and_replace_on_a_real_switch(tmp_path: Path) -> None:
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.add_vif("vm", "vif", "50:54:00:00:00:01")
        switch = Switch(node.openflow)
        switch.ensure_tlv_map()
        switch.ensure_tlv_map()  # idempotent
        keep = Flow(0, 100, "in_port=1,reg0=5", "resubmit(,8)", cookie(1))
        gone = Flow(8, 10, "metadata=0x1", "drop", cookie(2))
        changed = Flow(8, 30, "ip,metadata=0x2,nw_src=10.0.0.0/8", "drop", cookie(4))
        moved = Flow(8, 40, "metadata=0x3", "drop", cookie(6))
        # An empty bridge: its table is sent whole (nothing to compare).
        assert switch.replace([keep, gone]) == [("add", keep), ("add", gone)]
        switch.apply([("add", changed), ("add", moved)])
        assert len(switch.dump()) == 4
        # A second old: a flow deleted and added again would be younger than before.
        wait_for(lambda: min(node.flow_ages().values()) > 1.0, 10, "the flows a second old")
        ages = node.flow_ages()
        # (spelled differently from what the switch prints: the same flow, no difference)
        same = Flow(0, 100, "reg0=0x5,in_port=1", "resubmit(,8)", cookie(1))
        new = Flow(8, 20, "metadata=0x1,tun_metadata0=0xffff/0xffff", "drop", cookie(3))
        now = Flow(8, 30, "metadata=0x2,ip,nw_src=10.0.0.0/8", "resubmit(,9)", cookie(4))
        recookied = Flow(8, 40, "metadata=0x3", "drop", cookie(7))
        wanted = [same, new, now, recookied]
        mods = switch.replace(wanted)
        assert sorted((op, flow.table, flow.priority) for op, flow in mods) == [
            ("add", 8, 20), ("add", 8, 40), ("delete", 8, 10), ("modify", 8, 30)]  # fmt: skip
        assert switch.fallbacks == 0  # (the difference went on the channel)
        dumped = switch.dump()
        assert len(dumped) == 4
        assert any("tun_metadata0=0xffff" in line for line in dumped)
        assert not any("priority=10," in line for line in dumped)
        assert "resubmit(,9)" in next(line for line in dumped if "priority=30" in line)
        assert f"cookie={cookie(7):#x}" in next(line for line in dumped if "priority=40" in line)
        # kept, and modified in place: neither is younger than before
        after = {flow.split(" actions=")[0]: age for flow, age in node.flow_ages().items()}
        before = {flow.split(" actions=")[0]: age for flow, age in ages.items()}
        for priority in ("priority=100", "priority=30"):
            flow = next(f for f in after if priority in f)
            assert after[flow] >= before[flow], flow
        assert switch.replace(wanted) == []
        switch.close()


@pytest.mark.ovs
def test_a_pre_encoded_table_loads_whole_and_a_refused_flow_is_named(tmp_path: Path) -> None:
    """`Switch.load`: chunks made once (`bulk_adds`) go to an empty bridge as they are; a
    bridge that holds flows is reconciled instead; a refused flow is named and nothing of
    the bundle is applied."""
    flows = [Flow(0, 100, f"in_port={i},reg0=5", "resubmit(,8)", cookie(i)) for i in range(1, 40)]
    chunks = [bulk_adds(flows[:20]), bulk_adds(flows[20:])]
    assert chunks[0] == bulk_adds(flows[:20])  # the same bytes for every switch
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.add_vif("vm", "vif", "50:54:00:00:00:01")  # (br-int made)
        switch = Switch(node.openflow)
        switch.load(flows, chunks)
        assert len(switch.dump()) == len(flows)
        switch.load(flows[:10], [bulk_adds(flows[:10])])  # not empty: only the difference
        assert len(switch.dump()) == 10
        switch.replace([])
        bad = Flow(9, 1, "reg0=1", "ct(commit,zone=1)", cookie(99))  # (ct needs an IP match)
        with pytest.raises(OpenFlowError, match="table=9"):
            switch.load([*flows, bad], [*chunks, bulk_adds([bad])])
        assert switch.dump() == []
        switch.close()


def test_a_diff_is_read_as_changes() -> None:
    """`ovs-ofctl diff-flows` output (as OVS 3.1 prints it) -> the changes to make."""
    diff = """-priority=110,tun_metadata0=0xffff/0xffff,in_port=7 cookie=0x4c4d actions=resubmit(,6)
-table=10 priority=0,metadata=0x8 cookie=0x12344c4d actions=resubmit(,11)
+table=10 priority=0,metadata=0x8 cookie=0x12344c4d actions=ct_clear,resubmit(,11)
-table=10 priority=0,metadata=0x9 cookie=0x12344c4d actions=resubmit(,11)
+table=10 priority=0,metadata=0x9 cookie=0x12354c4d actions=resubmit(,11)
+table=77 priority=5,reg0=0x5 cookie=0x4c4d actions=drop
+table=3 reg1=0x1 actions=drop
-table=4 priority=10,tcp,tp_dst=80 cookie=0x2ffff idle_timeout=30 actions=drop
-table=5 priority=7,reg2=0x2 cookie=0x4c4d hard_timeout=9 actions=drop
+table=5 priority=7,reg2=0x2 cookie=0x4c4d actions=drop
-table=6  actions=drop
-table=7 cookie=0x9 actions=drop
"""
    assert parse_diff(diff) == [
        ("modify", Flow(10, 0, "metadata=0x8", "ct_clear,resubmit(,11)", 0x12344C4D)),
        ("add", Flow(10, 0, "metadata=0x9", "resubmit(,11)", 0x12354C4D)),
        ("add", Flow(77, 5, "reg0=0x5", "drop", MARK)),
        ("add", Flow(3, 32768, "reg1=0x1", "drop", 0)),
        ("add", Flow(5, 7, "reg2=0x2", "drop", MARK)),  # (a modify would keep the timeout)
        ("delete", Flow(0, 110, "tun_metadata0=0xffff/0xffff,in_port=7", "resubmit(,6)", MARK)),
        ("delete", Flow(4, 10, "tcp,tp_dst=80", "drop", 0x2FFFF)),
        ("delete", Flow(6, 32768, "", "drop", 0)),
        ("delete", Flow(7, 32768, "", "drop", 9)),
    ]
    assert parse_diff("") == []
    with pytest.raises(OpenFlowError):
        parse_diff("+ovs-ofctl: something else\n")


def _parse(line: str) -> Flow:
    head, _, actions = line.partition(" actions=")
    parts = head.split(",")
    fields = dict(p.split("=", 1) for p in parts[:3])
    return Flow(int(fields["table"]), int(fields["priority"]), ",".join(parts[3:]), actions,
                int(fields["cookie"], 0))  # fmt: skip


BR_INT = ("--may-exist", "add-br", "br-int", "--", "set", "bridge", "br-int", "fail-mode=secure",
          "protocols=OpenFlow13,OpenFlow15")  # fmt: skip

UNTAGGED = "table=0,priority=90,cookie=0x4c4d,in_port=9,vlan_tci=0x0000/0x1000 actions=resubmit(,8)"
"""A match `ovs-ofctl` says in NXM only (OVS takes NXM fields inside an OXM match)."""


@pytest.mark.ovs
def test_native_push_installs_what_ovs_ofctl_installs(tmp_path: Path) -> None:
    corpus = Path(__file__).with_name("corpus.flows").read_text()  # (test_ofp's)
    lines = [*corpus.splitlines(), UNTAGGED]
    flows = [_parse(line) for line in lines]
    with Sandbox(tmp_path) as sandbox:
        nodes = [sandbox.add_node(name) for name in ("hv1", "hv2")]
        for node in nodes:
            node.vsctl(*BR_INT)
        native, ofctl = (Switch(node.openflow) for node in nodes)
        try:
            for switch in (native, ofctl):
                switch.ensure_tlv_map()
            native.apply([("add", flow) for flow in flows])
            assert native.fallbacks == 0
            ofctl._ofctl("bundle", ofctl.remote, "-",
                         stdin="".join(f"{line}\n" for line in bundle_lines(
                             [("add", flow) for flow in flows])))  # fmt: skip
            assert len(native.dump()) == len(flows)
            assert sorted(native.dump()) == sorted(ofctl.dump())
            # deletes, natively, leave what ovs-ofctl's deletes leave
            gone: list[Mod] = [("delete", flow) for flow in flows[::2]]
            native.apply(gone)
            ofctl._ofctl("bundle", ofctl.remote, "-",
                         stdin="".join(f"{line}\n" for line in bundle_lines(gone)))  # fmt: skip
            assert len(native.dump()) == len(flows) - len(gone)
            assert sorted(native.dump()) == sorted(ofctl.dump())
        finally:
            native.close()
            ofctl.close()


@pytest.mark.ovs
def test_a_refused_bundle_changes_nothing_and_the_channel_survives_the_switch(
    tmp_path: Path,
) -> None:
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.vsctl(*BR_INT)
        switch = Switch(node.openflow)
        try:
            fine = Flow(0, 100, "in_port=1", "resubmit(,8)", cookie(1))
            # tun_metadata0 without the TLV map that gives it a width: OVS refuses the flow
            refused = Flow(0, 110, "in_port=2,tun_metadata0=0x1", "drop", cookie(2))
            with pytest.raises(OpenFlowError, match="tun_metadata0"):
                switch.apply([("add", fine), ("add", refused)])
            assert switch.dump() == []  # atomic: the good flow is not in either
            # the switch drops every OpenFlow connection (its bridge is re-created): the next
            # push connects again
            node.vsctl("del-br", "br-int", "--", *BR_INT[1:])
            switch.apply([("add", fine)])
            assert len(switch.dump()) == 1
            # a construct the encoder does not know goes by ovs-ofctl
            learn = Flow(1, 5, "ip", "learn(table=2,NXM_OF_ETH_SRC[])", cookie(3))
            switch.apply([("add", learn)])
            assert switch.fallbacks == 1
            assert any("learn(" in line for line in switch.dump())
        finally:
            switch.close()


@pytest.mark.ovs
def test_a_bundle_larger_than_the_socket_buffer_after_an_idle_read(tmp_path: Path) -> None:
    """The channel reads without blocking before each bundle; the bundle after it, larger
    than the socket's buffer, must still be sent whole (it was refused with EAGAIN)."""
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.vsctl(*BR_INT)
        switch = Switch(node.openflow)
        try:
            switch.apply([("add", Flow(0, 1, "in_port=1", "drop", cookie(1)))])
            many: list[Mod] = [
                ("add", Flow(5, 10, f"metadata={i:#x},ip", "resubmit(,6)", cookie(i)))
                for i in range(20_000)
            ]
            switch.apply(many)
            assert len(switch.dump()) == 20_001
        finally:
            switch.close()


@pytest.mark.ovs
def test_a_newer_master_fences_the_old_one(tmp_path: Path) -> None:
    """Two controllers' channels to one bridge: the one claiming the newer generation is
    master; the other's pushes are refused (it is a slave now), and its claim is stale."""
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.vsctl(*BR_INT)
        old, new = Switch(node.openflow), Switch(node.openflow)
        try:
            old.channel.claim(5)
            old.apply([("add", Flow(0, 1, "in_port=1", "drop", cookie(1)))])
            new.channel.claim(6)
            new.apply([("add", Flow(0, 2, "in_port=2", "drop", cookie(2)))])
            with pytest.raises(OpenFlowError, match="bad request"):
                old.apply([("add", Flow(0, 3, "in_port=3", "drop", cookie(3)))])
            with pytest.raises(Deposed):
                old.channel.claim(5)
            assert sorted(line.split(" actions")[0].split(",")[-1] for line in new.dump()) == [
                "in_port=1", "in_port=2"]  # fmt: skip
            # nor push by ovs-ofctl (a flow the encoder does not know): it asks first
            with pytest.raises(OpenFlowError, match="stale"):
                old.apply([("add", Flow(0, 5, "in_port=5", "note:01", cookie(5)))])
            # nor may it reconcile the table (a replace-flows connection was never demoted)
            with pytest.raises(OpenFlowError, match="bad request"):
                old.replace([Flow(0, 1, "in_port=1", "drop", cookie(1))])
            # the new master reconnects (its claim is renewed on the new connection)
            new.channel.close()
            new.apply([("add", Flow(0, 4, "in_port=4", "drop", cookie(4)))])
            assert len(new.dump()) == 3
        finally:
            old.close()
            new.close()


@pytest.mark.ovs
def test_the_flow_count_and_the_tlv_map_are_asked_on_the_channel(tmp_path: Path) -> None:
    """No `ovs-ofctl` run for either: the aggregate statistics' flow count is what
    `ovs-ofctl dump-aggregate` says, and the TLV map (a flow using tun_metadata0 is taken
    after it) is fenced like a bundle."""
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.vsctl(*BR_INT)

        def ofctl_count() -> int:
            return int(node.ofctl("dump-aggregate").split("flow_count=")[1].split()[0])

        switch, other = Switch(node.openflow), Switch(node.openflow)
        try:
            assert switch.flow_count() == 0 == ofctl_count()
            assert "tun_metadata0" not in node.ofctl("dump-tlv-map")
            switch.ensure_tlv_map()
            switch.ensure_tlv_map()  # mapped already, the same: nothing to do
            assert "0x102" in node.ofctl("dump-tlv-map")
            flows = [
                Flow(0, 100, "in_port=1,tun_metadata0=0x10002", "resubmit(,8)", cookie(1)),
                *(Flow(8, 10, f"metadata={i:#x}", "drop", cookie(2)) for i in range(5)),
            ]
            switch.apply([("add", flow) for flow in flows])
            assert switch.flow_count() == len(flows) == ofctl_count()
            # index 0 means another option: refused, and the error names what it maps
            with pytest.raises(ChannelError, match=r"tun_metadata0 is not.*switch maps"):
                switch.channel.map_tlv((0x102, 0x81, 4, 0))
            # the same option on another index: refused (OVS: a duplicate entry)
            with pytest.raises(ChannelError, match="tun_metadata1 is not"):
                switch.channel.map_tlv((0x102, 0x80, 4, 1))
            # a deposed master may read the count, not write the map
            switch.channel.claim(5)
            other.channel.claim(6)
            assert switch.flow_count() == len(flows)
            with pytest.raises(OpenFlowError, match="bad request"):
                switch.ensure_tlv_map()
            other.ensure_tlv_map()
        finally:
            switch.close()
            other.close()


@pytest.mark.ovs
def test_an_idle_channel_sees_its_switch_restart_and_claims_it_again(tmp_path: Path) -> None:
    """A kept channel read only when it is readable (`check`) answers the switch and sees
    it go (kill -9 of ovs-vswitchd: its end is the only sign, the OVSDB saying nothing); the
    switch is back with an empty table, no master and no TLV map, and the next exchange
    connects again (counted: `connections`) and claims the master role with the same
    generation before anything else."""
    with Sandbox(tmp_path) as sandbox:
        node = sandbox.add_node("hv1")
        node.vsctl(*BR_INT)
        switch, rival = Switch(node.openflow), Switch(node.openflow)
        try:
            switch.channel.claim(7)
            switch.ensure_tlv_map()
            switch.apply([("add", Flow(0, 1, "in_port=1", "drop", cookie(1)))])
            assert switch.channel.connections == 1
            assert switch.channel.fileno() is not None
            assert switch.channel.check()  # (nothing to read: still there)
            node.vswitchd.kill9()
            wait_for(lambda: not switch.channel.check(), 5.0, "the channel's end seen")
            assert not switch.channel.connected
            assert switch.channel.fileno() is None
            sandbox.restart_vswitchd(node)
            wait_for(lambda: _connects(switch), 10.0, "the switch back")
            assert switch.channel.connections == 2
            assert switch.flow_count() == 0
            assert "tun_metadata0" not in node.ofctl("dump-tlv-map")
            with pytest.raises(Deposed):  # (the reconnection claimed it with generation 7)
                rival.channel.claim(6)
        finally:
            switch.close()
            rival.close()


def _connects(switch: Switch) -> bool:
    try:
        switch.flow_count()
    except OpenFlowError:
        return False
    return True
