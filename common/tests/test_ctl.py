"""The `loom` client commands' pure parts: kinds, FIELD=VALUE bodies, tables, the `show`
tree, the `status` summary, and where the API and the token come from."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from loom_common import ctl
from loom_common.cli import parse_args, write_client_file
from loom_common.ctl import (
    CLIENT_FILE,
    KINDS,
    CtlError,
    Topology,
    connection,
    kind,
    parse_fields,
    show_lines,
    status_lines,
    table,
)


@pytest.mark.parametrize(("name", "want"), [
    ("switch", "switch"), ("switches", "switch"), ("ports", "port"), ("router_port", "router-port"),
    ("router-ports", "router-port"), ("NAT-RULES", "nat-rule"), ("qos-queues", "qos-queue"),
])  # fmt: skip
def test_a_kind_is_known_singular_or_plural(name: str, want: str) -> None:
    assert kind(name).name == want


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(CtlError, match="unknown kind 'bridge'; one of: zone, node, switch"):
        kind("bridge")


def test_child_kinds_name_their_parent_kind() -> None:
    children = {k.name: k.parent for k in KINDS.values() if k.parent}
    assert children == {"port": "switch", "subnet": "switch", "router-port": "router",
                        "route": "router", "nat-rule": "router"}  # fmt: skip
    assert all("{parent}" in KINDS[k].path for k in children)


def test_fields_are_json_where_they_parse_and_nest_by_dots() -> None:
    body = parse_fields(["name=web", 'ips=["10.0.0.5"]', "min_rate=100",
                         "admin_state_up=false", "attachment.type=vif",
                         "attachment.vif_id=vif-1", "tenant=null"])  # fmt: skip
    assert body == {"name": "web", "ips": ["10.0.0.5"], "min_rate": 100,
                    "admin_state_up": False, "tenant": None,
                    "attachment": {"type": "vif", "vif_id": "vif-1"}}  # fmt: skip


@pytest.mark.parametrize(("args", "error"), [
    (["name"], "expected FIELD=VALUE, got 'name'"),
    (["=x"], "expected FIELD=VALUE"),
    (["name=a", "name=b"], "name given twice"),
    (["a=1", "a.b=2"], "a.b: a is given a value and fields"),
])  # fmt: skip
def test_bad_fields_are_refused_by_name(args: list[str], error: str) -> None:
    with pytest.raises(CtlError, match=error):
        parse_fields(args)


def test_a_table_aligns_columns_and_shows_nested_lists_and_booleans() -> None:
    items: list[dict[str, Any]] = [
        {"id": "1", "name": "web", "ips": ["10.0.0.5", "10.0.0.6"], "status": {"up": True}},
        {"id": "22", "name": None, "ips": [], "status": {}},
    ]
    assert table(items, ("id", "name", "ips", "status.up")) == [
        "ID  NAME  IPS                UP",
        "1   web   10.0.0.5,10.0.0.6  yes",
        "22  -     -                  -",
    ]


def _topology() -> Topology:
    web = {"id": "s1", "name": "web", "tenant": "t1", "tunnel_key": 5}
    db = {"id": "s2", "name": "db", "tenant": "t2", "tunnel_key": 6}
    port = {"name": "p1", "mac": "50:54:00:00:00:01", "ips": ["10.0.0.5"],
            "attachment": {"type": "vif"},
            "status": {"transport_node": "hv1", "up": True}}  # fmt: skip
    unbound: dict[str, Any] = {"name": "p2", "mac": "50:54:00:00:00:02", "ips": [],
                               "attachment": None,
                               "status": {"transport_node": None, "up": False}}  # fmt: skip
    peer = {"name": "p3", "mac": "00:00:00:aa:00:01", "ips": ["10.0.0.1"],
            "attachment": {"type": "router"}, "status": {"up": False}}  # fmt: skip
    router = {"id": "r1", "name": "edge", "tenant": "t1", "tunnel_key": 7}
    rport = {"name": "rp1", "mac": "00:00:00:aa:00:01", "ip_prefix": "10.0.0.1/24",
             "logical_switch_id": "s1"}  # fmt: skip
    return Topology(
        [web, db], {"s1": [port, unbound, peer], "s2": []}, [router], {"r1": [rport]},
        {"r1": [{"prefix": "0.0.0.0/0", "next_hop": "10.0.0.254"}]},
        {"r1": [{"type": "snat", "external_ip": "172.16.0.2", "internal_ip": "10.0.0.0/24"}]},
    )  # fmt: skip


def test_show_draws_each_tenant_with_its_switches_ports_and_routers() -> None:
    assert show_lines(_topology()) == [
        "tenant t1",
        "    switch web (s1) key 5",
        "        port p1: 50:54:00:00:00:01 10.0.0.5 (vif) on hv1, up",
        "        port p2: 50:54:00:00:00:02 - (none) on not bound, down",
        "        port p3: 00:00:00:aa:00:01 10.0.0.1 (router)",
        "    router edge (r1) key 7",
        "        port rp1: 00:00:00:aa:00:01 10.0.0.1/24 -> switch web",
        "        route 0.0.0.0/0 via 10.0.0.254",
        "        nat snat 172.16.0.2 <-> 10.0.0.0/24",
        "tenant t2",
        "    switch db (s2) key 6",
    ]


def test_status_says_the_lag_who_masters_which_node_and_what_is_wrong() -> None:
    warning = {"kind": "conflict", "source": "port p1", "message": "same MAC"}
    status = {"config_generation": 12, "logical_generation": 12, "realized_generation": 10,
              "warnings": [warning]}  # fmt: skip
    nodes = [
        {"name": "hv2", "status": {"connected": True, "controller": "physical-0"}},
        {"name": "hv1", "status": {"connected": True, "controller": "physical-0"}},
        {"name": "gw1", "status": {"connected": False,
                                   "message": "its controller physical-1 is silent"}},
    ]  # fmt: skip
    assert status_lines(status, nodes) == [
        "configuration generation 12: computed 12 (lag 0), realized on every node 10 (lag 2)",
        "nodes: 3, connected 2",
        "    physical controller physical-0: 2 node(s): hv1, hv2",
        "not connected:",
        "    gw1: its controller physical-1 is silent",
        "warnings: 1",
        "    conflict port p1: same MAC",
    ]


def _args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    return parse_args(["show", "--state-dir", str(tmp_path), *argv])


def test_the_api_and_token_come_from_flags_environment_or_loom_ups_client_file(
    tmp_path: Path,
) -> None:
    with pytest.raises(CtlError, match="where is the API"):
        connection(_args(tmp_path), {})
    with pytest.raises(CtlError, match="no token"):
        connection(_args(tmp_path, "--url", "http://127.0.0.1:1"), {})
    http = connection(_args(tmp_path), {"LOOM_URL": "http://x:1/", "LOOM_TOKEN": "env"})
    assert (http.url, http.token) == ("http://x:1", "env")

    client = write_client_file(tmp_path, "http://127.0.0.1:8080", "from-up")
    assert client == tmp_path / CLIENT_FILE
    assert json.loads(client.read_text())["url"] == "http://127.0.0.1:8080"
    assert (tmp_path / "admin-token").stat().st_mode & 0o077 == 0
    http = connection(_args(tmp_path), {})
    assert (http.url, http.token) == ("http://127.0.0.1:8080", "from-up")
    mine = tmp_path / "mine"
    mine.write_text("flagged\n")
    http = connection(_args(tmp_path, "--token-file", str(mine), "--url", "http://y:2"),
                      {"LOOM_TOKEN": "env"})  # fmt: skip
    assert (http.url, http.token) == ("http://y:2", "flagged")
    with pytest.raises(CtlError, match="token file"):
        connection(_args(tmp_path, "--token-file", str(tmp_path / "missing")), {})


def test_a_token_is_never_an_argument() -> None:
    with pytest.raises(SystemExit):
        parse_args(["show", "--token", "secret"])


def test_fields_may_follow_options() -> None:
    args = parse_args(["create", "port", "--parent", "web", "name=p1", "mac=m", "--wait"])
    assert (args.kind, args.parent, args.wait) == ("port", "web", True)
    assert args.fields == ["name=p1", "mac=m"]
    with pytest.raises(SystemExit):
        parse_args(["show", "extra"])


def test_flows_says_whether_a_node_holds_what_is_computed_and_what_differs() -> None:
    from loom_common.ctl import flows_lines

    body = {"node": "hv1", "controller": "physical-0", "computed_flows": 2,
            "installed_flows": 3, "in_sync": False,
            "changes": [{"op": "delete", "flow": "table=99,priority=1 actions=drop"}],
            "computed": ["f1", "f2"], "installed": ["f1", "f2", "f3"]}  # fmt: skip
    assert flows_lines(body) == [
        "node hv1 (physical controller physical-0): 2 flows computed, 3 installed, "
        "1 change(s) to make",
        "  delete table=99,priority=1 actions=drop",
        "computed:", "  f1", "  f2",
        "installed:", "  f1", "  f2", "  f3",
    ]  # fmt: skip
    synced = {**body, "in_sync": True, "changes": [], "installed_flows": 2}
    del synced["computed"], synced["installed"]
    assert flows_lines(synced) == [
        "node hv1 (physical controller physical-0): 2 flows computed, 2 installed, in sync"
    ]
    # a gateway's next-hop MAC, learned by its datapath: shown, and no change to make
    mac = "table=65, priority=100,metadata=0x800001 actions=set_field:00:00:00:00:99:01->eth_dst"
    gateway = {**synced, "installed_flows": 3, "learned": [mac]}
    assert flows_lines(gateway) == [
        "node hv1 (physical controller physical-0): 2 flows computed, 3 installed "
        "(1 learned by the node), in sync",
        f"  learned {mac}",
    ]


def test_trace_tells_each_table_conntracks_answers_and_the_verdict() -> None:
    from loom_common.ctl import trace_lines

    switch = {"key": 2, "kind": "switch", "id": "s", "name": "net-b"}
    drop = {
        "table": 41,
        "stage": "ls_out_acl",
        "datapath": switch,
        "priority": 1,
        "match": "ip,reg10=0x80/0x80",
        "actions": ["drop"],
        "depth": 0,
        "object": {"kind": "every switch", "id": None, "name": None},
    }
    body = {"from": "red/vm1", "packet": "ip4.dst == 10.0.2.13 && tcp.dst == 23",
            "node": None, "controller": "physical-0", "flow": "in_port=100,tcp,tp_dst=23",
            "passes": [
                {"ct_state": None, "steps": [
                    {"table": 0, "stage": "CLASSIFIER", "datapath": None, "priority": 100,
                     "match": "in_port=100", "actions": ["resubmit(,8)"], "depth": 0,
                     "object": None},
                    {"table": 40, "stage": "ls_out_pre_acl", "datapath": switch,
                     "priority": 100, "match": "ip,reg15=0x2", "depth": 0,
                     "actions": ["ct(table=41)", "-> A clone of the packet is forked"],
                     "object": {"kind": "port", "id": "p", "name": "red/vm3"}}]},
                {"ct_state": "trk|new", "steps": [drop]}],
            "verdict": {"outcome": "dropped", "delivered": [], "tunneled": [],
                        "uplink": False, "ended_at": drop}}  # fmt: skip
    assert trace_lines(body) == [
        "red/vm1: ip4.dst == 10.0.2.13 && tcp.dst == 23",
        "  through the universal flows on an ideal node (physical controller physical-0)",
        "  flow: in_port=100,tcp,tp_dst=23",
        "    0 classifier           100  in_port=100",
        "        resubmit(,8)",
        "switch net-b (key 2):",
        "   40 ls_out_pre_acl       100  ip,reg15=0x2  [port red/vm3]",
        "        ct(table=41)",
        "        -> A clone of the packet is forked",
        "conntrack answered trk|new, the packet resumes:",
        "   41 ls_out_acl             1  ip,reg10=0x80/0x80  [every switch]",
        "        drop",
        "verdict: dropped at table 41 ls_out_acl by every switch: ip,reg10=0x80/0x80",
    ]  # fmt: skip
    on_node = {**body, "node": "hv1", "passes": [], "verdict": {
        "outcome": "tunneled+delivered", "uplink": False, "ended_at": None,
        "delivered": [{"port": "p9", "name": "red/vm9", "node": "hv1"}],
        "tunneled": [{"node": "hv3", "ip": "172.31.0.4", "via": "loom-geneve",
                      "port": {"id": "p", "name": "red/vm3"}}]}}  # fmt: skip
    lines = trace_lines(on_node)
    assert lines[1] == "  through node hv1's installed table (physical controller physical-0)"
    assert lines[-1] == ("verdict: delivered to red/vm9 (bound on hv1); tunneled to hv3 for "
                         "red/vm3 (out of loom-geneve)")  # fmt: skip


def test_reference_fields_holding_names_are_found_at_any_depth() -> None:
    zone = "5b0c3f5e-8f7e-4a3e-9a51-3f1c2e7d9a10"
    profiles = 'security_profile_ids=["web", "' + zone + '"]'
    body = parse_fields(["name=p1", "attachment.type=l3-gateway",
                         "attachment.gateway_service_id=gw-ext", f"transport_zone_id={zone}",
                         profiles, "qos_queue_id=null"])  # fmt: skip
    found = {(field, what.name) for _, field, what in ctl.references(body)}
    assert found == {("gateway_service_id", "gateway-service"), ("security_profile_ids", "profile")}


def test_a_name_resolves_to_its_one_object_or_lists_the_candidates() -> None:
    items = [{"id": "id-1", "name": "web", "tenant": "acme"},
             {"id": "id-2", "name": "web", "tenant": "blue"},
             {"id": "id-3", "name": "db", "tenant": "acme", "parent": "acme-net"}]  # fmt: skip
    switch = ctl.KINDS["switch"]
    assert ctl.Client._one(items, "db", switch) == "id-3"
    assert ctl.Client._one(items, "id-2", switch) == "id-2"
    with pytest.raises(ctl.CtlError) as ambiguous:
        ctl.Client._one(items, "web", switch)
    assert str(ambiguous.value) == (
        "several switches named 'web': id-1 (tenant acme); id-2 (tenant blue); give the id"
    )
    with pytest.raises(ctl.CtlError, match="no switch 'nope'"):
        ctl.Client._one(items, "nope", switch)
