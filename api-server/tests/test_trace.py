"""`GET /api/v1/trace`: the packet a caller describes (parsed, refused with the column at
fault, completed from its port and switch), the controller's answer told in the
configuration's names, and the refusals that need no controller. (The trace itself, asked
of a physical controller against real packets: tests/test_loom_up.py.)"""

from __future__ import annotations

import socket
import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from loom_api import errors
from loom_api.service import trace
from loom_api.service.trace import Neighbour, parse_packet

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

API = "/api/v1"
VM = Neighbour("50:54:00:00:00:02", ("10.0.0.2",))
ROUTER = Neighbour("00:00:00:aa:00:01", ("10.0.0.1/24",), router=True)


def flow(
    text: str, ips: tuple[str, ...] = ("10.0.0.1",), nearby: tuple[Neighbour, ...] = (VM, ROUTER)
) -> str:
    return trace.microflow(parse_packet(text), "50:54:00:00:00:01", ips, nearby)


def test_a_packet_is_completed_from_its_port_and_switch() -> None:
    # To a port of the same switch: its MAC; to elsewhere: the router port's.
    assert flow("ip4.dst == 10.0.0.2 && tcp.dst == 22") == (
        "tcp,dl_dst=50:54:00:00:00:02,dl_src=50:54:00:00:00:01,nw_dst=10.0.0.2,"
        "nw_src=10.0.0.1,nw_ttl=64,tp_dst=22,tp_src=40000"
    )
    assert flow("ip4.dst == 8.8.8.8 && icmp4") == (
        "icmp,dl_dst=00:00:00:aa:00:01,dl_src=50:54:00:00:00:01,icmp_code=0,icmp_type=8,"
        "nw_dst=8.8.8.8,nw_src=10.0.0.1,nw_ttl=64"
    )
    # What is said wins over the defaults; a bare protocol word is enough.
    assert "nw_ttl=1" in flow("ip4.dst == 10.0.0.2 && udp && ip.ttl == 1")
    assert "dl_src=50:54:00:00:00:99" in flow("eth.src == 50:54:00:00:00:99 && ip4.dst == 1.2.3.4")
    assert flow("arp && arp.tpa == 10.0.0.2") == (
        "arp,arp_op=1,arp_sha=50:54:00:00:00:01,arp_spa=10.0.0.1,arp_tpa=10.0.0.2,"
        "dl_dst=ff:ff:ff:ff:ff:ff,dl_src=50:54:00:00:00:01"
    )
    assert (
        flow("eth.dst == ff:ff:ff:ff:ff:ff") == "dl_dst=ff:ff:ff:ff:ff:ff,dl_src=50:54:00:00:00:01"
    )
    assert flow("ip6.dst == fe80::1 && tcp", ips=("2001:db8::5",)).startswith(
        "tcp6,dl_dst=00:00:00:aa:00:01,dl_src=50:54:00:00:00:01,ipv6_dst=fe80::1,"
        "ipv6_src=2001:db8::5,nw_ttl=64")  # fmt: skip


def test_a_packet_is_said_as_what_it_is() -> None:
    """`icmp4` is an echo request; a packet naming no transport is IPv4 protocol 0, which
    no rule allowing ICMP or TCP lets in (the answer's `described` says so)."""

    def said(text: str) -> str:
        return trace.summary(*trace.filled(parse_packet(text), "50:54:00:00:00:01",
                                           ("10.0.0.1",), (VM, ROUTER)))  # fmt: skip

    assert said("ip4.dst == 10.0.0.2") == (
        "IPv4 protocol 0, no transport header, from 10.0.0.1 to 10.0.0.2, TTL 64")  # fmt: skip
    assert said("ip4.dst == 8.8.8.8 && icmp4") == (
        "ICMPv4 echo request (type 8 code 0) from 10.0.0.1 to 8.8.8.8, TTL 64")  # fmt: skip
    assert said("ip4.dst == 10.0.0.2 && tcp.dst == 22") == (
        "TCP from 10.0.0.1:40000 to 10.0.0.2:22, TTL 64")  # fmt: skip
    assert said("arp && arp.tpa == 10.0.0.2") == "ARP request: who has 10.0.0.2, tell 10.0.0.1"
    assert said("eth.dst == ff:ff:ff:ff:ff:ff") == "Ethernet to ff:ff:ff:ff:ff:ff, no IP header"


def test_a_packet_from_an_uplink_says_its_source() -> None:
    """From the physical network there is no port to take defaults from: the source
    address is said; `eth.dst` is left to the controller (the uplink's MAC)."""
    ping = parse_packet("ip4.src == 8.8.8.8 && ip4.dst == 172.16.0.102 && icmp4")
    assert trace.uplink_microflow(ping) == (
        "icmp,icmp_code=0,icmp_type=8,nw_dst=172.16.0.102,nw_src=8.8.8.8,nw_ttl=64"
    )
    who_has = parse_packet("arp && arp.spa == 172.16.0.1 && arp.tpa == 172.16.0.102")
    assert trace.uplink_microflow(who_has) == (
        "arp,arp_op=1,arp_spa=172.16.0.1,arp_tpa=172.16.0.102,dl_dst=ff:ff:ff:ff:ff:ff"
    )
    for text, missing in (("ip4.dst == 172.16.0.102", "ip4.src: required"),
                          ("icmp4 && ip4.src == 8.8.8.8", "ip4.dst: required"),
                          ("eth.dst == ff:ff:ff:ff:ff:ff", "IPv4 or ARP")):  # fmt: skip
        with pytest.raises(errors.ValidationFailed) as refused:
            trace.uplink_microflow(parse_packet(text))
        assert refused.value.field == "packet"
        assert missing in refused.value.text, refused.value.text


@pytest.mark.parametrize(("text", "said"), [
    ("ip4.dst = 10.0.0.2", "column 1: expected FIELD == VALUE"),
    ("ip4.dst == 10.0.0.2 && tcp.dport == 22", "column 24: unknown field 'tcp.dport'"),
    ("ip4.dst == 10.0.0.300", "column 12: ip4.dst == 10.0.0.300"),
    ("tcp.dst == 65536", "column 12: tcp.dst == 65536: not a 16-bit number"),
    ("tcp && udp", "column 8: udp contradicts tcp"),
    ("ip6.src == ::1 && icmp4", "column 19: ip4 contradicts ip6"),
    ("arp && tcp.dst == 1", "column 8: an ARP packet has no tcp"),
    ("ip4.dst == 10.0.0.2 && ip4.dst == 10.0.0.3", "column 24: ip4.dst given twice"),
    ("ip4 &&", "column 6: nothing after &&"),
    ("sctp", "column 1: unknown protocol 'sctp'"),
    ("x" * 1001, "longer than 1000 characters"),
])  # fmt: skip
def test_a_bad_description_names_the_column(text: str, said: str) -> None:
    with pytest.raises(errors.ValidationFailed) as refused:
        parse_packet(text)
    assert refused.value.field == "packet"
    assert said in refused.value.text, refused.value.text


def test_what_the_defaults_cannot_supply_is_asked_for() -> None:
    for text, ips, said in (("ip4.dst == 10.9.9.9", (), "ip4.src: the port has no IPv4"),
                            ("ip6.dst == ::2", ("10.0.0.1",), "ip6.src: the port has no IPv6"),
                            ("udp", ("10.0.0.1",), "eth.dst: required")):  # fmt: skip
        with pytest.raises(errors.ValidationFailed) as refused:
            flow(text, ips=ips)
        assert said in refused.value.text
    with pytest.raises(errors.ValidationFailed) as alone:  # no router on the switch
        flow("ip4.dst == 8.8.8.8", nearby=(VM,))
    assert "no port of the switch has 8.8.8.8, and no router joins it" in alone.value.text


def test_conntrack_answers_are_checked() -> None:
    assert trace.ct_states("trk,est; trk,est,rpl") == ["trk,est", "trk,est,rpl"]
    assert trace.ct_states(None) == []
    for bad in (
        "trk,bogus",
        "trk;;est",
        ";".join(["trk"] * 9),
        "+trk+rpl",
        "est",
        "trk,new,est",
        "trk,inv,rel",
    ):
        with pytest.raises(errors.ValidationFailed) as refused:
            trace.ct_states(bad)
        assert refused.value.field == "ct"


def test_the_answer_is_told_in_the_configurations_names() -> None:
    step: dict[str, Any] = {"table": 41, "datapath": 2, "match": "conj_id=77,ip,metadata=0x2",
                            "source": "", "actions": ["drop"]}  # fmt: skip
    body = {"passes": [{"steps": [
        {"table": 8, "datapath": 2, "match": "reg14=0x1", "source": "port-uuid"},
        {"table": 9, "datapath": 2, "match": "metadata=0/0x800000", "source": "switches"},
        {"table": 70, "datapath": 2, "match": "reg15=0x2", "source": None},
        {"table": 12, "datapath": 5, "match": "ip", "source": ""},
        step]}],
        "verdict": {"delivered": [{"port": "port-uuid", "node": "hv3"}],
                    "tunneled": [{"node": "hv2", "port": "port-uuid"},
                                 {"node": "hv2", "port": "flood"}],
                    "ended_at": dict(step)}}  # fmt: skip
    names = {"port-uuid": {"kind": "port", "id": "port-uuid", "name": "red/vm3"}}
    rule = {"kind": "security rule", "id": "r", "name": "web: ingress IPv4 tcp 22"}
    net = {"key": 2, "kind": "switch", "name": "net"}
    said = trace.describe(body, names.get, {2: net}.get, {77: rule}.get)
    steps = said["passes"][0]["steps"]
    assert [s["object"] for s in steps] == [
        names["port-uuid"], {"kind": "every switch", "id": None, "name": None}, None,
        {"kind": "security rules", "id": None, "name": "conjunctions"}, rule]  # fmt: skip
    assert steps[0]["datapath"]["name"] == "net"
    assert steps[3]["datapath"] == {"key": 5}  # (unknown here)
    assert said["verdict"]["ended_at"]["object"] == rule
    assert said["verdict"]["delivered"] == [{"port": "port-uuid", "node": "hv3",
                                             "name": "red/vm3", "kind": "port"}]  # fmt: skip
    assert said["verdict"]["tunneled"][0]["port"]["name"] == "red/vm3"
    assert said["verdict"]["tunneled"][1]["port"] == "flood"


def test_a_rule_in_words() -> None:
    def rule(**columns: Any) -> Any:
        return SimpleNamespace(**{"direction": "ingress", "ethertype": "IPv4", "protocol": [],
                                  "port_range_min": [], "port_range_max": [],
                                  "remote_prefix": [], **columns})  # fmt: skip

    assert trace.rule_label("web", rule()) == "web: ingress IPv4"
    tcp = rule(protocol=["tcp"], port_range_min=[22], port_range_max=[22])
    assert trace.rule_label("web", tcp) == "web: ingress IPv4 tcp 22"
    ranged = rule(protocol=["udp"], port_range_min=[1000], port_range_max=[2000],
                  remote_prefix=["10.0.0.0/8"], direction="egress")  # fmt: skip
    assert trace.rule_label("db", ranged) == "db: egress IPv4 udp 1000-2000 from 10.0.0.0/8"


@pytest.mark.ovs
def test_refusals_that_need_no_controller(admin: ApiClient, tenant_a: ApiClient,
                                          tenant_b: ApiClient) -> None:  # fmt: skip
    switch = tenant_a.create(f"{API}/logical-switches", {"name": "web"})["id"]
    body = {"name": "p1", "ips": ["10.0.0.5"], "attachment": {"type": "vif", "vif_id": "v1"}}
    port = tenant_a.create(f"{API}/logical-switches/{switch}/ports", body)["id"]
    tenant_a.create(f"{API}/logical-switches/{switch}/ports", {"name": "p0"})

    def asked(client: ApiClient, query: str) -> tuple[int, dict[str, Any]]:
        reply = client.get(f"{API}/trace?{query}")
        return reply.status_code, reply.get_json()

    status, body = asked(tenant_a, f"from={port}&packet=ip4.dst%20%3D%3D%201.2.3")
    assert (status, body["field"]) == (400, "packet"), body
    assert "column 12" in body["message"]
    assert asked(tenant_a, "packet=tcp")[1]["field"] == "from"
    assert asked(tenant_a, f"from={port}&bogus=1")[0] == 400
    assert asked(tenant_a, f"from={port}&ct=trk,maybe")[1]["field"] == "ct"
    status, body = asked(tenant_a, "from=p0&packet=udp")
    assert (status, body["field"]) == (400, "from"), body  # (a port attached to nothing)
    assert "a trace starts at a VIF" in body["message"]
    assert asked(tenant_a, f"from={'x' * 256}")[1]["field"] == "from"
    assert asked(admin, f"from={port}&node=")[1]["field"] == "node"
    # Another tenant's port is not found, by id or by name; only the admin names a node.
    assert asked(tenant_b, f"from={port}")[0] == 404
    assert asked(tenant_b, "from=p1")[0] == 404
    status, body = asked(tenant_a, f"from={port}&node=hv1")
    assert status == 403, body
    # No physical controller publishes an endpoint here: said, not a hang.
    status, body = asked(tenant_a, "from=p1&packet=ip4.dst%20%3D%3D%2010.0.0.9")
    assert status == 400, body  # (no router on the switch, no port with 10.0.0.9)
    tenant_a.create(f"{API}/logical-switches/{switch}/ports",
                    {"name": "p2", "ips": ["10.0.0.9"]})  # fmt: skip
    status, body = asked(tenant_a, "from=p1&packet=ip4.dst%20%3D%3D%2010.0.0.9")
    assert (status, body["error"]) == (503, "controller_unavailable"), body
    broadcast = "packet=eth.dst%20%3D%3D%20ff:ff:ff:ff:ff:ff"
    assert asked(admin, f"from={port}&{broadcast}&node=nowhere")[0] == 404
    # A router starts a trace at its uplink: one without an L3 gateway service has none.
    router = tenant_a.create(f"{API}/logical-routers", {"name": "r1"})["id"]
    inbound = "packet=ip4.src%20%3D%3D%208.8.8.8%20%26%26%20ip4.dst%20%3D%3D%201.2.3.4"
    for ref in ("r1", router):
        status, body = asked(tenant_a, f"from={ref}&{inbound}")
        assert (status, body["field"]) == (400, "from"), body
        assert "has no uplink (no L3 gateway service)" in body["message"]
    assert asked(tenant_b, f"from={router}&{inbound}")[0] == 404


@pytest.mark.ovs
def test_a_tenants_trace_stays_in_its_own_datapaths(
    admin: ApiClient, tenant_a: ApiClient, tenant_b: ApiClient, store: Any
) -> None:
    """Two tenants' routers joined to the admin's shared switch (as Neutron's external
    networks join them): tenant a's trace may enter its switch and router, not the shared
    switch nor tenant b's (the controller is told the keys it may follow); the admin's
    reaches everything."""
    from loom_api.service.crud import Caller
    from loom_api.views.trace import _tenant_datapaths

    shared = admin.create(f"{API}/logical-switches", {"name": "ext", "tenant": "admin"})
    made = {}
    for client, tenant in ((tenant_a, "tenant-a"), (tenant_b, "tenant-b")):
        net = client.create(f"{API}/logical-switches", {"name": f"net-{tenant}"})
        side = client.create(f"{API}/logical-switches", {"name": f"side-{tenant}"})
        router = client.create(f"{API}/logical-routers", {"name": f"r-{tenant}"})
        for sw, prefix in ((net, "10.0.0.1/24"), (side, "10.0.1.1/24")):
            client.create(f"{API}/logical-routers/{router['id']}/ports", {
                "ip_prefix": prefix, "logical_switch_id": sw["id"]})  # fmt: skip
        made[tenant] = (net, router)

    def join_to_shared(view: Any) -> None:  # (each router's side port moved to the shared one)
        for rp in list(view.rows("Logical_Router_Port")):
            if rp.logical_switch.name.startswith("side-"):
                view.update(rp, logical_switch=view.get("Logical_Switch", uuid.UUID(shared["id"])))

    store.write(join_to_shared)
    (net_a, router_a), (net_b, router_b) = made["tenant-a"], made["tenant-b"]

    def keys(caller: Caller) -> set[int]:
        def read(view: Any) -> set[int]:
            switch = view.get("Logical_Switch", uuid.UUID(net_a["id"]))
            return _tenant_datapaths(view, caller, switch)

        return set(store.read(read))

    assert keys(Caller(tenant="tenant-a")) == {net_a["tunnel_key"], router_a["tunnel_key"]}
    assert keys(Caller(tenant=None)) == {  # (the admin's walk, were it limited)
        net_a["tunnel_key"], router_a["tunnel_key"], shared["tunnel_key"],
        net_b["tunnel_key"], router_b["tunnel_key"]}  # fmt: skip


def test_controllers_are_asked_in_turn_and_given_each_conntrack_answer() -> None:
    """`_ask_first`: a controller that is gone or does not hold the port passes the trace
    to the next; the query reaches it whole (every `ct` state)."""
    from loom_api.views.trace import _ask_first
    from loom_common import httpd

    asked: list[dict[str, list[str]]] = []

    def answer(rest: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        asked.append(query)
        if query["port"] == ["elsewhere"]:
            return 404, {"error": "not_found", "message": "port elsewhere has no binding"}
        if query["port"] == ["unread"]:
            return 503, {"error": "flows_unavailable", "message": "datapath(s) 3 not read"}
        return 200, {"verdict": {"outcome": "dropped"}}

    httpd.route("/trace", answer)
    try:
        host, port = httpd.serve("127.0.0.1:0")
        live = f"http://{host}:{port}"
        dead = f"http://127.0.0.1:{_closed_port()}"
        query = {"port": "p", "flow": "tcp", "ct": ["trk,est", "trk,new"]}
        body = _ask_first([("gone", dead), ("other", live), ("live", live)], query)
        assert body == {"verdict": {"outcome": "dropped"}}
        assert asked == [{"port": ["p"], "flow": ["tcp"], "ct": ["trk,est", "trk,new"]}]
        with pytest.raises(errors.ControllerUnavailable) as none:
            _ask_first([("gone", dead), ("live", live)], {**query, "port": "elsewhere"})
        assert "gone" in none.value.text
        assert "port elsewhere has no binding" in none.value.text
        # One that cannot read the flows it needs gives no verdict: the 503 is passed on.
        with pytest.raises(errors.ControllerUnavailable) as unread:
            _ask_first([("live", live)], {**query, "port": "unread"})
        assert "datapath(s) 3 not read" in unread.value.text
    finally:
        httpd.unroute("/trace")


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
