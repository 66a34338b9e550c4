"""`loom_physical.trace` without a daemon: what a trace loads (the ideal node, computed by
the physical rules; a node's ports), and how its text is read back (steps, stages,
objects, conntrack's answers, the verdict). `traces/` holds `ofproto/trace` output of the
demo's topology: red/vm1 (hv1, 10.0.1.11) to red/vm3 (hv3, 10.0.2.13) over the tenant's
router, TCP to port 23, which vm3's security profile does not allow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom_ddlog import Program
from loom_ovs.openflow import MARK
from loom_physical import trace
from loom_physical.rules import main_file
from loom_physical.trace import IDEAL, ScratchPort, TraceRefused
from loom_schemas.pipeline import Table

TRACES = Path(__file__).parent / "traces"
ROUTER = 1 << 23


def _binding(port: str, dp: int, key: int, kind: str = "vif", *, vif: str = "",
             peer: str = "", chassis: str = "") -> dict[str, Any]:  # fmt: skip
    """A Port_Binding row as the universal replica holds it."""
    return {"logical_port": port, "datapath": dp, "port_key": key, "type": kind,
            "vif_id": vif or ["set", []], "peer": peer or ["set", []],
            "chassis": chassis or ["set", []], "up": False, "gateway_service": ["set", []],
            "vlan": ["set", []], "qos": ["map", []]}  # fmt: skip


def _rows() -> dict[str, dict[str, dict[str, Any]]]:
    """Two switches (keys 1, 2) joined by a router, and a third switch on its own; vm1 on
    switch 1 (on hv1), vm2 on switch 2 (hv2), vm9 on switch 3."""
    bindings = {
        "b1": _binding("vm1", 1, 1, vif="vif-1", chassis="hv1"),
        "b2": _binding("vm2", 2, 1, vif="vif-2", chassis="hv2"),
        "b9": _binding("vm9", 3, 1, vif="vif-9", chassis="hv2"),
        "r1": _binding("rp1", ROUTER, 1, "router", peer="rp1-peer"),
        "r2": _binding("rp2", ROUTER, 2, "router", peer="rp2-peer"),
        "s1": _binding("rp1-peer", 1, 2, "router", peer="rp1"),
        "s2": _binding("rp2-peer", 2, 2, "router", peer="rp2"),
    }
    flow = (
        "ingress\tls_in_l2_lkup\t50\tdl_dst=00:00:00:00:00:02\t"
        "set_field:0x1->reg15,resubmit(,@egress)"
    )
    kinds = {k: "switch" if k < ROUTER else "router" for k in (1, 2, 3, ROUTER)}
    return {
        "Datapath": {f"d{k}": {"key": k, "kind": kind, "config_id": f"c{k}", "encap": "geneve"}
                     for k, kind in kinds.items()},
        "Port_Binding": bindings,
        "Gateway_Assignment": {},
        "Replication_Set": {},
        "Universal_Global": {"g": {"generation": 1, "realized_generation": 0}},
        "Node_Endpoint": {"e2": {"node": "hv2", "encap": "geneve", "ip": "192.168.0.2"}},
        "Flow": {uuid: {"datapath": dp, "source": source, "cookie": cookie, "flows": {flow},
                        "local_flows": set()}
                 for uuid, dp, source, cookie in (("f2", 2, "vm2", 22), ("f3", 3, "vm9", 33))},
    }  # fmt: skip


def test_a_packets_datapaths_are_those_routers_join_to_its_switch() -> None:
    rows = _rows()["Port_Binding"].values()
    assert trace.component(rows, 1) == {1, 2, ROUTER}
    assert trace.component(rows, ROUTER) == {1, 2, ROUTER}
    assert trace.component(rows, 3) == {3}


def test_the_ideal_node_has_every_vif_of_the_packets_datapaths_and_no_tunnel() -> None:
    ideal = trace.ideal_node(_rows(), "vm1")
    assert ideal.datapaths == {1, 2, ROUTER}
    assert [(p.name, p.ofport, p.port) for p in ideal.ports] == [("v100", 100, "vm1"),
                                                                 ("v101", 101, "vm2")]  # fmt: skip
    assert ideal.in_port == 100
    assert dict(ideal.facts.vifs) == {"vif-1": 100, "vif-2": 101}
    # no other switch's rows, and no chassis: every port is on the ideal node
    fed = {(table, uuid) for table, uuid, _ in ideal.changes}
    assert ("Flow", "f2") in fed
    assert ("Flow", "f3") not in fed
    assert ("Port_Binding", "b9") not in fed
    assert all(row["chassis"] == ["set", []] for table, _, row in ideal.changes
               if table == "Port_Binding")  # fmt: skip
    # a walk that may not enter the router stays on the port's switch
    assert trace.ideal_node(_rows(), "vm1", allowed={1}).datapaths == {1}

    flows = trace.ideal_flows(Program.load([main_file()], workers=1, internal=False), ideal)
    texts = [f.text() for f in flows]
    # each VIF enters here, and a packet for vm2 runs its egress here, never a tunnel
    assert any(f"table={Table.CLASSIFIER}" in t and "in_port=100" in t for t in texts), texts
    assert any(f"table={Table.CLASSIFIER}" in t and "in_port=101" in t for t in texts), texts
    assert any(f"table={Table.DELIVER}" in t and "output:101" in t for t in texts), texts
    assert not any("tun_dst" in t for t in texts), texts
    assert any("dl_dst=00:00:00:00:00:02" in t for t in texts)  # switch 2's universal flow
    assert not any(IDEAL in t for t in texts)


def test_the_flows_a_trace_lacks_are_named_and_taken_in() -> None:
    """Switch 1 and the router have no flow row here, switch 2 is not followed: a trace
    from vm1 needs them read (datapath 0 too, which no row holds); what is read replaces
    what the replica had of those datapaths."""
    rows = _rows()
    ideal = trace.ideal_node(rows, "vm1")
    missing = trace.missing_flows(ideal, rows["Flow"].values(), {0, 1, 3, ROUTER})
    assert missing == {0, 1, 2, ROUTER}
    read = {"f9": {"datapath": 2, "source": "vm2", "cookie": 9, "flows": "x", "local_flows": ()}}
    taken = trace.with_flows(ideal, {2}, read)
    flows = {uuid: row for table, uuid, row in taken.changes if table == "Flow"}
    assert flows == read
    assert (taken.in_port, taken.ports) == (ideal.in_port, ideal.ports)


def test_a_trace_from_a_routers_uplink_and_its_next_hop() -> None:
    """A router's uplink (an L3 gateway port) is a start: the packet enters by the ideal
    node's uplink, sent to the uplink's MAC. The service's next hop, learned by ARP on
    its active node, is resolved at the stand-in MAC; a static one at its own."""
    rows = _rows()
    rows["Port_Binding"]["u"] = {**_binding("r-uplink", ROUTER, 0xFFFE, "l3-gateway"),
                                 "gateway_service": "gw"}  # fmt: skip
    rows["Gateway_Assignment"]["a"] = {
        "service": "gw", "kind": "l3", "nodes": ["map", [[0, "gw1"]]],
        "uplink_ip": "172.16.0.2/24", "uplink_next_hop": "172.16.0.1",
        "uplink_mac": "0a:00:00:00:00:01"}  # fmt: skip
    ideal = trace.ideal_node(rows, "r-uplink")
    assert (ideal.in_port, ideal.uplink_mac) == (trace.UPLINK_OFPORT, "0a:00:00:00:00:01")
    assert ideal.stand_ins == ["172.16.0.1"]
    assert dict(ideal.facts.neighbours) == {"172.16.0.1": trace.STAND_IN_MAC}
    static = trace.ideal_node(rows, "vm1", {"172.16.0.1": "00:00:00:00:99:01"})
    assert static.stand_ins == []
    assert dict(static.facts.neighbours) == {"172.16.0.1": "00:00:00:00:99:01"}
    # On a real node: by its uplink (none: refused); a VIF's port is no uplink's.
    ports = [ScratchPort("eth1", 3, role="uplink"), ScratchPort("tap1", 5, port="vm1")]
    assert trace.uplink_entry(rows, "r-uplink", ports, "gw1") == (3, "0a:00:00:00:00:01")
    assert trace.uplink_entry(rows, "vm1", ports, "gw1") is None
    with pytest.raises(TraceRefused) as no_uplink:
        trace.uplink_entry(rows, "r-uplink", ports[1:], "hv1")
    assert (no_uplink.value.status, no_uplink.value.error) == (409, "not_on_node")
    assert (
        trace.microflow("ip", 90, "0a:00:00:00:00:01") == "in_port=90,ip,dl_dst=0a:00:00:00:00:01"
    )
    assert trace.microflow("ip,dl_dst=0a:00:00:00:00:09", 90, "0a:00:00:00:00:01") == (
        "in_port=90,ip,dl_dst=0a:00:00:00:00:09")  # fmt: skip


def test_a_trace_starts_at_a_vif_the_controller_knows() -> None:
    rows = _rows()
    rows["Port_Binding"]["b0"] = _binding("vm0", 1, 3, vif="vif-1")  # (vm1's VIF id too)
    with pytest.raises(TraceRefused) as shared:
        trace.ideal_node(rows, "vm1")
    assert (shared.value.status, shared.value.error) == (409, "conflict")
    with pytest.raises(TraceRefused) as unknown:
        trace.ideal_node(_rows(), "nobody")
    assert unknown.value.status == 404
    with pytest.raises(TraceRefused) as router:
        trace.ideal_node(_rows(), "rp1")
    assert router.value.status == 400
    assert "router port" in router.value.message
    assert "a trace starts at a VIF or a router's uplink" in router.value.message


def test_the_flow_and_conntrack_answers_are_checked() -> None:
    assert trace.microflow("tcp,tp_dst=22", 7) == "in_port=7,tcp,tp_dst=22"
    for bad in ("in_port=3,tcp", "tcp;rm -rf", "tcp tp_dst=2"):
        with pytest.raises(TraceRefused):
            trace.microflow(bad, 7)
    assert trace.ct_states(["trk,est", "trk, est,rpl", "trk,new,snat"]) == [
        "trk,est", "trk, est,rpl", "trk,new,snat"]  # fmt: skip
    # as OVS reads --ct-next: commas only; every flag tracked; new, est, rpl, inv apart
    for bad in (
        "trk,bogus",
        "",
        ",",
        "+trk+rpl",
        "trk|new",
        "est",
        "trk,new,est",
        "trk,new,rpl",
        "trk,inv,est",
        "trk," * 20,
    ):
        with pytest.raises(TraceRefused):
            trace.ct_states([bad])


def test_a_nodes_ports_for_the_scratch_switch() -> None:
    def iface(name: str, ofport: int, kind: str = "", **more: Any) -> dict[str, Any]:
        options, ids = more.get("options", {}), more.get("ids", {})
        return {"name": name, "ofport": ofport, "type": kind,
                "options": ["map", [[k, v] for k, v in options.items()]],
                "external_ids": ["map", [[k, v] for k, v in ids.items()]]}  # fmt: skip

    ports = trace.node_layout([
        iface("br-int", 65534, "internal"),
        iface("tap1", 5, ids={"iface-id": "vif-1"}),
        iface("loom-geneve", 1, "geneve", options={"remote_ip": "flow", "key": "flow"}),
        iface("lt0001", 2, "geneve", options={"remote_ip": "192.168.0.9"}),
        iface("eth1", 3, ids={"loom-uplink": "true"}),
        iface("unplugged", ["set", []]),
    ], {"vif-1": "vm1"})  # fmt: skip
    assert ports == [
        ScratchPort("loom-geneve", 1, "geneve", {"remote_ip": "flow", "key": "flow"},
                    role="tunnel"),
        ScratchPort("lt0001", 2, "geneve", {"remote_ip": "192.168.0.9", "key": "flow"},
                    role="tunnel"),
        ScratchPort("eth1", 3, role="uplink"),
        ScratchPort("tap1", 5, port="vm1"),
    ]  # fmt: skip


COOKIES = {0x6DAB7086: "vm3-uuid"}


def test_an_ideal_nodes_trace_read_back() -> None:
    passes = trace.parse((TRACES / "ideal_routed_tcp23.txt").read_text(), COOKIES)
    # Two conntrack recirculations: the sender's zone, then the receiver's.
    assert [p["ct_state"] for p in passes] == [None, "trk|new", "trk|new"]
    first = passes[0]["steps"]
    assert (first[0]["table"], first[0]["stage"], first[0]["source"]) == (0, "CLASSIFIER", None)
    assert [s["stage"] for s in first[1:]] == [
        "ls_in_port_sec_l2",
        "ls_in_port_sec_ip",
        "ls_in_port_sec_nd",
        "ls_in_pre_acl",
    ]
    # The router's stages are told apart from the switch's at the same tables by metadata.
    second = passes[1]["steps"]
    routed = [s for s in second if s["datapath"] == ROUTER]
    assert [s["stage"] for s in routed][:4] == ["lr_in_admission", "lr_in_ip_input",
                                                "lr_in_dnat", "lr_in_ip_routing"]  # fmt: skip
    assert {s["pipeline"] for s in routed} == {"ingress", "egress"}
    lookup = next(s for s in second if s["stage"] == "ls_in_l2_lkup" and s["datapath"] == 2)
    assert lookup["source"] == "vm3-uuid"  # its cookie's universal row
    assert lookup["cookie"] == f"{0x6DAB7086 << 32 | MARK:#018x}"
    assert lookup["actions"] == ["set_field:0x2->reg15", "resubmit(,70)"]
    assert [s["source"] for s in first if s["stage"] == "ls_in_port_sec_nd"] == [""]  # unknown
    # Dropped by the receiver's ACL: what no rule of its profile allows.
    last = passes[2]["steps"][-1]
    assert (last["table"], last["stage"], last["datapath"]) == (41, "ls_out_acl", 2)
    verdict = trace.verdict(passes, {}, {}, {})
    assert verdict["outcome"] == "dropped"
    assert verdict["ended_at"] == last


def test_a_nodes_trace_says_which_node_and_port_its_tunnel_reaches() -> None:
    passes = trace.parse((TRACES / "hv1_routed_tcp23.txt").read_text(), COOKIES)
    tunnel = ScratchPort("loom-geneve", 1, "geneve", role="tunnel")
    verdict = trace.verdict(passes, {6081: tunnel}, {"172.31.0.4": "hv3"},
                            {(2, 2): "vm3-uuid"})  # fmt: skip
    assert verdict["outcome"] == "tunneled"
    assert verdict["tunneled"] == [{"node": "hv3", "ip": "172.31.0.4", "datapath": 2,
                                    "port": "vm3-uuid", "via": "loom-geneve"}]  # fmt: skip
    assert passes[-1]["steps"][-1]["stage"] == "TUNNEL_GENEVE"


def test_a_verdict_names_each_port_the_packet_left_by() -> None:
    passes = [{"steps": [], "datapath_actions": "set(eth(dst=ff:ff:ff:ff:ff:ff)),3,4,2"},
              {"steps": [], "datapath_actions": "clone(5),drop"}]  # fmt: skip
    dp_ports = {
        2: ScratchPort("uplink", 90, role="uplink"),
        3: ScratchPort("v100", 100, port="a"),
        4: ScratchPort("v101", 101, port="b"),
        5: ScratchPort("v102", 102, port="c"),
    }
    verdict = trace.verdict(passes, dp_ports, {}, {})
    assert verdict["delivered"] == ["a", "b", "c"]  # (c's copy inside a clone)
    assert verdict["uplink"] is True
    assert verdict["uplink_source"] is None  # (nothing translated it)
    assert verdict["outcome"] == "delivered+uplink"
    snat = [{"steps": [], "datapath_actions": "ct(commit,zone=4,nat(src=172.16.0.3)),recirc(0x5)"},
            {"steps": [], "datapath_actions": "2"}]  # fmt: skip
    assert trace.verdict(snat, dp_ports, {}, {})["uplink_source"] == "172.16.0.3"
    to_flood = ("set(tunnel(tun_id=0x7,dst=10.1.1.1,geneve({class=0x102,type=0x80,len=4,"
                "0x1ffff}),flags(df|key))),6081")  # fmt: skip
    geneve = {6081: ScratchPort("loom-geneve", 1, "geneve", role="tunnel")}
    flood = trace.verdict([{"steps": [], "datapath_actions": to_flood}], geneve, {}, {})
    assert flood["tunneled"] == [{"node": "", "ip": "10.1.1.1", "datapath": 7, "port": "flood",
                                  "via": "loom-geneve"}]  # fmt: skip


def test_a_steps_category_is_the_one_its_cookie_carries() -> None:
    text = (
        'Flow: tcp,in_port=100\n\nbridge("br-int")\n----------------\n'
        " 0. in_port=100, priority 100, cookie 0x4c4d\n    resubmit(,8)\n"
        " 8. reg14=0x2,metadata=0x1, priority 50, cookie 0x6d1c360700014c4d\n"
        "    resubmit(,9)\n"
        "12. ip,reg14=0x2,metadata=0x1, priority 1001, cookie 0x6d1c360700024c4d\n"
        "    drop\n"
    )
    steps = trace.parse(text, {0x6D1C3607: "vm1"})[0]["steps"]
    assert [(s["stage"], s["source"], s["category"]) for s in steps] == [
        ("CLASSIFIER", None, None),  # the physical tier's own flow says none
        ("ls_in_port_sec_l2", "vm1", "port_security"),
        ("ls_in_acl", "vm1", "acl"),
    ]
