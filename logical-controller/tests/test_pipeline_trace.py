"""What the universal flows *do*: packets traced through one switch by a real ovs-vswitchd.

The snapshot tests pin the flows' text; these pin their behaviour. A scenario's universal
flows are localized by the physical rules for `loom trace`'s ideal node, which has every
port of the packet's datapaths (each VIF a dummy port, an L3 gateway's uplink one more:
`loom_physical.trace.ideal_node`), loaded on `loom trace`'s scratch ovs-vswitchd (dummy
datapath, `loom_physical.scratch`), and `ofproto/trace` follows packets from port to port,
with conntrack's verdicts given by `--ct-next`; a broadcast reaches each port whose egress
pipeline lets it out: port security (MAC, IP, ARP, ND), the ACL stages (stateful and stateless
profiles, default deny, established/related/invalid), the ARP responder, loopback; and,
through a distributed router between two switches, routing (TTL, MAC rewrite, no route,
TTL expiry) and the router's own ARP and ICMP echo answers; with an L3 gateway whose
uplink is on the same node, SNAT and floating IPs out, DNAT in, and the uplink's ARP
answers for NAT addresses.

The switch's ports (all on switch `sw`, 10.0.0.0/24):

| port | MAC | IP | port security | profile |
| --- | --- | --- | --- | --- |
| a | 00:00:00:00:00:0a | 10.0.0.10 | yes | `web`: stateful; in tcp 22, out any IPv4 |
| b | 00:00:00:00:00:0b | 10.0.0.11 | yes | none |
| c | 00:00:00:00:00:0c | 10.0.0.12 | no | none |
| d | 00:00:00:00:00:0d | 10.0.0.13 | yes | `dns`: stateless; in udp 53, out any IPv4 |
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from loom_ddlog import Program
from loom_logical import pipeline
from loom_physical import trace
from loom_physical.rules import main_file
from loom_physical.scratch import Scratch
from loom_physical.universal import UniversalReplica

PORTS = {
    "a": ("00:00:00:00:00:0a", "10.0.0.10", True, ["web"]),
    "b": ("00:00:00:00:00:0b", "10.0.0.11", True, []),
    "c": ("00:00:00:00:00:0c", "10.0.0.12", False, []),
    "d": ("00:00:00:00:00:0d", "10.0.0.13", True, ["dns"]),
}
ROUTED = {  # a router between two switches: port -> (switch, MAC, IP)
    "vm1": ("net1", "00:00:00:00:00:01", "10.0.1.10"),
    "vm2": ("net2", "00:00:00:00:00:02", "10.0.2.10"),
}
ROUTER_PORTS = {
    "net1": ("00:00:00:aa:00:01", "10.0.1.1"),
    "net2": ("00:00:00:aa:00:02", "10.0.2.1"),
}
NEXTHOP_MAC = "00:00:00:00:00:fe"
"""What the L3 gateway's physical next hop answers ARP with (`${nexthop_mac:G}`)."""
UPLINK = {"ip": "172.16.0.2", "next_hop": "172.16.0.1", "floating_ip": "172.16.0.102"}
ANY_IPV4 = {"direction": "egress", "ethertype": "IPv4"}


def _node() -> list[dict[str, Any]]:
    return [
        {"create": "transport-zones", "as": "tz", "body": {"name": "tz"}},
        {"create": "transport-nodes", "as": "hv1", "body": {
            "name": "hv1", "node_type": "hypervisor", "system_id": "hv1",
            "transport_zone_ids": ["{tz}"],
            "tunnel_endpoints": [{"encap": "geneve", "ip": "192.168.0.1"}]}},
    ]  # fmt: skip


def _steps() -> list[dict[str, Any]]:
    profiles = [
        {"create": "security-profiles", "as": "web", "body": {
            "name": "web", "tenant": "t1", "stateful": True, "rules": [
                {"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
                 "port_range_min": 22, "port_range_max": 22}, ANY_IPV4]}},
        {"create": "security-profiles", "as": "dns", "body": {
            "name": "dns", "tenant": "t1", "stateful": False, "rules": [
                {"direction": "ingress", "ethertype": "IPv4", "protocol": "udp",
                 "port_range_min": 53, "port_range_max": 53}, ANY_IPV4]}},
    ]  # fmt: skip
    switch = [
        {"create": "logical-switches", "as": "sw",
         "body": {"name": "sw", "tenant": "t1", "replication_mode": "source"}},
    ]  # fmt: skip
    ports = []
    for name, (mac, ip, secured, profs) in PORTS.items():
        ports.append({"create": "logical-switches/{sw}/ports", "as": name, "body": {
            "name": name, "mac": mac, "ips": [ip], "port_security": secured,
            "attachment": {"type": "vif", "vif_id": f"vif-{name}"},
            "security_profile_ids": [f"{{{p}}}" for p in profs]}})  # fmt: skip
        ports.append({"locate": {"port": name, "node": "hv1"}})
    return _node() + profiles + switch + ports


def _routed_steps(*, gateway: bool = False) -> list[dict[str, Any]]:
    steps = _node()
    router: dict[str, Any] = {"name": "r1", "tenant": "t1"}
    if gateway:  # an L3 gateway service, a floating IP for vm1 and SNAT for the rest
        steps += [
            {"create": "transport-nodes", "as": "gw1", "body": {
                "name": "gw1", "node_type": "gateway", "system_id": "gw1",
                "transport_zone_ids": ["{tz}"],
                "tunnel_endpoints": [{"encap": "geneve", "ip": "192.168.2.1"}]}},
            {"create": "gateway-services", "as": "l3", "body": {
                "name": "l3", "type": "l3", "gateway_node_ids": ["{gw1}"],
                "uplink_ip": f"{UPLINK['ip']}/24", "uplink_next_hop": UPLINK["next_hop"]}},
        ]  # fmt: skip
        router["gateway_service_id"] = "{l3}"
    for net in ROUTER_PORTS:
        body = {"name": net, "tenant": "t1", "replication_mode": "source"}
        steps.append({"create": "logical-switches", "as": net, "body": body})
    steps.append({"create": "logical-routers", "as": "r1", "body": router})
    for net, (mac, ip) in ROUTER_PORTS.items():
        steps.append({"create": "logical-routers/{r1}/ports", "as": f"r1-{net}", "body": {
            "name": f"r1-{net}", "ip_prefix": f"{ip}/24", "logical_switch_id": f"{{{net}}}",
            "mac": mac}})  # fmt: skip
    for name, (net, mac, ip) in ROUTED.items():
        steps.append({"create": f"logical-switches/{{{net}}}/ports", "as": name, "body": {
            "name": name, "mac": mac, "ips": [ip], "port_security": True,
            "attachment": {"type": "vif", "vif_id": f"vif-{name}"}}})  # fmt: skip
        steps.append({"locate": {"port": name, "node": "hv1"}})
    if gateway:
        steps += [
            {"create": "logical-routers/{r1}/nat-rules", "as": "fip", "body": {
                "type": "floating-ip", "external_ip": UPLINK["floating_ip"],
                "internal_ip": ROUTED["vm1"][2], "logical_port_id": "{vm1}"}},
            {"create": "logical-routers/{r1}/nat-rules", "as": "snat", "body": {
                "type": "snat", "external_ip": UPLINK["ip"], "internal_ip": "10.0.0.0/16"}},
        ]  # fmt: skip
    return steps


@dataclass
class Traced:
    """A scenario's ideal node on the scratch switch: `out(from, packet)` is the set of
    ports a packet leaves by."""

    scratch: Scratch
    table: trace.Table
    ofports: dict[str, int]
    """Test name of a port ("uplink": the L3 gateway's) -> its ofport on the ideal node."""
    names: dict[str, str]
    """Logical port id -> its test name."""

    def trace(self, src: str, packet: str, ct: str | None = None) -> str:
        text, self.dp_ports = self.scratch.trace(
            self.table, f"in_port={self.ofports[src]},{packet}", [ct] if ct else []
        )
        return text

    def actions(self, src: str, packet: str, ct: str | None = None) -> str:
        """The datapath actions the packet ends with ("drop" if none): those of the last
        pass, after any conntrack recirculation."""
        text = self.trace(src, packet, ct)
        passes = _datapath_actions(text)
        assert passes, text
        return passes[-1]

    def out(self, src: str, packet: str, ct: str | None = None) -> set[str]:
        passes = trace.parse(self.trace(src, packet, ct), {})
        verdict = trace.verdict(passes, self.dp_ports, {}, {})
        assert not verdict["tunneled"], verdict  # (the ideal node has every port)
        return {self.names[p] for p in verdict["delivered"]} | (
            {"uplink"} if verdict["uplink"] else set()
        )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    """`loom trace`'s scratch switch, for the module."""
    switch = Scratch(tmp_path_factory.mktemp("scratch"))
    try:
        yield switch
    finally:
        switch.stop()


Install = Callable[[list[dict[str, Any]], list[str]], Traced]


@pytest.fixture
def install(
    scenario: Callable[[list[dict[str, Any]]], Any],
    scratch: Scratch,
    dump: Callable[[str], dict[str, list[dict[str, Any]]]],
) -> Install:
    """`install(steps, names)`: run the scenario `steps` and make the ideal node of a trace
    from the port `names[0]` (every port of its datapaths is there; "uplink" is the router
    r1's uplink, its L3 gateway active there, the next hop `NEXTHOP_MAC`)."""

    def run(steps: list[dict[str, Any]], names: list[str]) -> Traced:
        scenario_run = scenario(steps)
        ids = scenario_run.ids
        keys = [d["key"] for d in dump(scenario_run.universal.remote)["Datapath"]]
        replica = UniversalReplica(scenario_run.universal.remote)
        try:
            replica.start([*keys, 0])
        finally:
            replica.close()
        ideal = trace.ideal_node(replica.rows, ids[names[0]], {UPLINK["next_hop"]: NEXTHOP_MAC})
        program = Program.load([main_file()], workers=1, internal=False)
        flows = [f.text() for f in trace.ideal_flows(program, ideal)]
        named = {ids[name]: name for name in names if name != "uplink"}
        assert {p.port for p in ideal.ports if p.port} == set(named)
        ofports = {named.get(p.port, "uplink"): p.ofport for p in ideal.ports}
        return Traced(scratch, trace.Table(ideal.ports, flows, ideal.in_port), ofports, named)

    return run


@pytest.fixture
def traced(install: Install) -> Traced:
    """One switch with ports a-d (see the module's docstring)."""
    return install(_steps(), list(PORTS))


@pytest.fixture
def routed(install: Install) -> Traced:
    """Router r1 between net1 (vm1) and net2 (vm2), all on one node."""
    return install(_routed_steps(), list(ROUTED))


@pytest.fixture
def natted(install: Install) -> Traced:
    """As `routed`, with an L3 gateway (its uplink on this node), vm1's floating IP and
    SNAT of 10.0.0.0/16 to the uplink's address."""
    return install(_routed_steps(gateway=True), [*ROUTED, "uplink"])


def eth(src: str, dst: str) -> str:
    return f"dl_src={mac(src)},dl_dst={mac(dst)}"


def mac(port: str) -> str:
    return PORTS[port][0] if port in PORTS else ROUTED[port][1]


def ip(port: str) -> str:
    return PORTS[port][1] if port in PORTS else ROUTED[port][2]


def tcp(src: str, dst: str, dport: int, *, nw_src: str | None = None) -> str:
    return (
        f"{eth(src, dst)},tcp,nw_src={nw_src or ip(src)},nw_dst={ip(dst)},"
        f"nw_ttl=64,tp_src=40000,tp_dst={dport}"
    )


def udp(src: str, dst: str, dport: int) -> str:
    return (
        f"{eth(src, dst)},udp,nw_src={ip(src)},nw_dst={ip(dst)},nw_ttl=64,"
        f"udp_src=40000,udp_dst={dport}"
    )


@pytest.mark.ovs
def test_stateful_profile(traced: Traced) -> None:
    # To a: tcp 22 is allowed; other new connections are not; replies and related traffic
    # are, invalid never. An established connection's packet in its original direction is
    # checked against the rules again (a rule removed stops the connections it allowed).
    assert traced.out("b", tcp("b", "a", 22)) == {"a"}
    assert traced.out("b", tcp("b", "a", 23)) == set()
    assert traced.out("b", tcp("b", "a", 23), ct="trk,est,rpl") == {"a"}
    assert traced.out("b", tcp("b", "a", 23), ct="trk,est") == set()
    assert traced.out("b", tcp("b", "a", 22), ct="trk,est") == {"a"}
    assert traced.out("b", tcp("b", "a", 23), ct="trk,rel") == {"a"}
    assert traced.out("b", tcp("b", "a", 22), ct="trk,inv") == set()
    # From a: its egress rule allows any IPv4 (through a's conntrack).
    assert traced.out("a", tcp("a", "b", 5555)) == {"b"}
    assert traced.out("a", tcp("a", "b", 5555), ct="trk,inv") == set()


@pytest.mark.ovs
def test_stateless_profile(traced: Traced) -> None:
    assert traced.out("b", udp("b", "d", 53)) == {"d"}
    assert traced.out("b", udp("b", "d", 54)) == set()
    # d's ACL is stateless: a verdict of a's conntrack (the sender's zone) admits nothing.
    assert traced.out("a", udp("a", "d", 54), ct="trk,est") == set()
    assert traced.out("a", udp("a", "d", 53), ct="trk,est") == {"d"}


@pytest.mark.ovs
def test_no_profile_no_acl(traced: Traced) -> None:
    assert traced.out("c", tcp("c", "b", 23)) == {"b"}
    assert traced.out("b", tcp("b", "c", 23)) == {"c"}


@pytest.mark.ovs
def test_port_security_ingress(traced: Traced) -> None:
    # a secured port sends only from its MAC and IP; an unsecured one from anything.
    assert traced.out("b", tcp("b", "c", 80, nw_src="10.0.0.99")) == set()
    spoofed_mac = f"dl_src=00:00:00:00:00:99,dl_dst={mac('c')},ip,nw_src={ip('b')},nw_dst={ip('c')}"
    assert traced.out("b", spoofed_mac) == set()
    assert traced.out("c", tcp("c", "b", 80, nw_src="10.0.0.99")) == {"b"}
    # DHCP discovery before the port has an address: flooded, it reaches c; a's and d's
    # profiles let no DHCP in.
    dhcp = (
        f"dl_src={mac('b')},dl_dst=ff:ff:ff:ff:ff:ff,udp,nw_src=0.0.0.0,"
        "nw_dst=255.255.255.255,udp_src=68,udp_dst=67"
    )
    assert traced.out("b", dhcp) == {"c"}
    # IPv6 from the link-local address derived from the MAC, or :: (DAD); nothing else.
    lla = f"dl_src={mac('b')},dl_dst={mac('c')},ipv6,ipv6_src=fe80::200:ff:fe00:b,ipv6_dst=fe80::1"
    assert traced.out("b", lla) == {"c"}
    dad = f"dl_src={mac('b')},dl_dst={mac('c')},ipv6,ipv6_src=::,ipv6_dst=fe80::1"
    assert traced.out("b", dad) == {"c"}
    other6 = f"dl_src={mac('b')},dl_dst={mac('c')},ipv6,ipv6_src=2001:db8::9,ipv6_dst=fe80::1"
    assert traced.out("b", other6) == set()


@pytest.mark.ovs
def test_port_security_arp_and_nd(traced: Traced) -> None:
    def arp(spa: str, sha: str, tpa: str) -> str:
        return (
            f"dl_src={mac('b')},dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,"
            f"arp_spa={spa},arp_sha={sha},arp_tpa={tpa}"
        )

    # An ARP request for an address the switch knows is answered back out of the asker.
    assert traced.out("b", arp(ip("b"), mac("b"), ip("a"))) == {"b"}
    # For an unknown one it floods (to every other port: ACLs never stop ARP); claiming
    # another's address or MAC is dropped.
    assert traced.out("b", arp(ip("b"), mac("b"), "10.0.0.77")) == {"a", "c", "d"}
    assert traced.out("b", arp("10.0.0.99", mac("b"), "10.0.0.77")) == set()
    assert traced.out("b", arp(ip("b"), "00:00:00:00:00:99", "10.0.0.77")) == set()

    def ns(sll: str) -> str:
        return (
            f"dl_src={mac('b')},dl_dst=33:33:ff:00:00:01,icmp6,ipv6_src=fe80::200:ff:fe00:b,"
            f"ipv6_dst=ff02::1:ff00:1,icmpv6_type=135,icmpv6_code=0,nd_target=fe80::1,nd_sll={sll}"
        )

    assert traced.out("b", ns(mac("b"))) == {"a", "c", "d"}
    assert traced.out("b", ns("00:00:00:00:00:00")) == {"a", "c", "d"}
    assert traced.out("b", ns("00:00:00:00:00:99")) == set()

    def na(target: str) -> str:
        return (
            f"dl_src={mac('b')},dl_dst={mac('c')},icmp6,ipv6_src=fe80::200:ff:fe00:b,"
            f"ipv6_dst=fe80::1,icmpv6_type=136,icmpv6_code=0,nd_target={target},nd_tll={mac('b')}"
        )

    assert traced.out("b", na("fe80::200:ff:fe00:b")) == {"c"}
    assert traced.out("b", na("fe80::99")) == set()


@pytest.mark.ovs
def test_port_security_egress(traced: Traced) -> None:
    # A secured port receives only its addresses (and broadcast, multicast).
    wrong_ip = f"{eth('c', 'b')},ip,nw_src={ip('c')},nw_dst=10.0.0.77"
    assert traced.out("c", wrong_ip) == set()
    assert traced.out("c", f"{eth('c', 'b')},ip,nw_src={ip('c')},nw_dst={ip('b')}") == {"b"}
    # An unsecured port receives anything addressed to its MAC.
    assert traced.out("b", f"{eth('b', 'c')},ip,nw_src={ip('b')},nw_dst=10.0.0.77") == {"c"}
    # No port receives its own packets back.
    assert traced.out("b", f"{eth('b', 'b')},ip,nw_src={ip('b')},nw_dst={ip('b')}") == set()


@pytest.mark.ovs
def test_router_forwards_between_subnets(routed: Traced) -> None:
    to_router = f"dl_src={mac('vm1')},dl_dst={ROUTER_PORTS['net1'][0]}"
    ping = f"{to_router},icmp,nw_src={ip('vm1')},nw_dst={ip('vm2')},icmp_type=8,icmp_code=0"
    actions = routed.actions("vm1", f"{ping},nw_ttl=64")
    assert routed.out("vm1", f"{ping},nw_ttl=64") == {"vm2"}
    # Routed: TTL decremented, source MAC the router's port on net2, destination vm2's.
    assert "ttl=63" in actions, actions
    assert f"src={ROUTER_PORTS['net2'][0]}" in actions, actions
    assert f"dst={mac('vm2')}" in actions, actions
    # TTL 1 would expire: dropped; so is an address no route covers.
    assert routed.out("vm1", f"{ping},nw_ttl=1") == set()
    lost = f"{to_router},icmp,nw_src={ip('vm1')},nw_dst=10.0.9.9,icmp_type=8,nw_ttl=64"
    assert routed.out("vm1", lost) == set()
    # The way back.
    back = (
        f"dl_src={mac('vm2')},dl_dst={ROUTER_PORTS['net2'][0]},icmp,nw_src={ip('vm2')},"
        f"nw_dst={ip('vm1')},icmp_type=0,icmp_code=0,nw_ttl=64"
    )
    assert routed.out("vm2", back) == {"vm1"}
    # Port security still applies on the way in: a spoofed source is not routed.
    spoofed = f"{to_router},icmp,nw_src=10.0.1.99,nw_dst={ip('vm2')},icmp_type=8,nw_ttl=64"
    assert routed.out("vm1", spoofed) == set()


@pytest.mark.ovs
def test_router_answers_arp_and_ping_for_its_addresses(routed: Traced) -> None:
    arp = (
        f"dl_src={mac('vm1')},dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,arp_spa={ip('vm1')},"
        f"arp_sha={mac('vm1')},arp_tpa={ROUTER_PORTS['net1'][1]}"
    )
    assert routed.out("vm1", arp) == {"vm1"}
    # ... as a reply from the router port's MAC and address to the asker.
    router_mac, router_ip = ROUTER_PORTS["net1"]
    reply = f"arp(sip={router_ip},tip={ip('vm1')},op=2,sha={router_mac},tha={mac('vm1')})"
    assert reply in routed.actions("vm1", arp)
    for net in ("net1", "net2"):  # either of the router's addresses answers a ping
        ping = (
            f"dl_src={mac('vm1')},dl_dst={ROUTER_PORTS['net1'][0]},icmp,nw_src={ip('vm1')},"
            f"nw_dst={ROUTER_PORTS[net][1]},icmp_type=8,icmp_code=0,nw_ttl=64"
        )
        assert routed.out("vm1", ping) == {"vm1"}, net
    # Other traffic to a router address is dropped.
    tcp_to_router = (
        f"dl_src={mac('vm1')},dl_dst={ROUTER_PORTS['net1'][0]},tcp,nw_src={ip('vm1')},"
        f"nw_dst={ROUTER_PORTS['net1'][1]},nw_ttl=64,tp_src=40000,tp_dst=22"
    )
    assert routed.out("vm1", tcp_to_router) == set()


@pytest.mark.ovs
def test_nat_on_the_l3_gateway(natted: Traced) -> None:
    # Out through the uplink to the next hop's MAC, the source translated: vm1 by its
    # floating IP, vm2 by SNAT. (ofproto/trace shows the ct(nat) action; it does not
    # rewrite the traced packet.)
    for vm, external in (("vm1", UPLINK["floating_ip"]), ("vm2", UPLINK["ip"])):
        router_mac = ROUTER_PORTS["net1" if vm == "vm1" else "net2"][0]
        out = (
            f"dl_src={mac(vm)},dl_dst={router_mac},icmp,nw_src={ip(vm)},nw_dst=198.51.100.7,"
            "icmp_type=8,icmp_code=0,nw_ttl=64"
        )
        assert natted.out(vm, out) == {"uplink"}, vm
        before_ct = _datapath_actions(natted.trace(vm, out))[0]
        assert f"nat(src={external})" in before_ct, before_ct
        assert f"dst={NEXTHOP_MAC}" in before_ct, before_ct
        assert "ttl=63" in before_ct, before_ct
    # In through the uplink: the floating IP's traffic is translated to vm1's address.
    uplink_mac = _uplink_mac(natted)
    inbound = (
        f"dl_src={NEXTHOP_MAC},dl_dst={uplink_mac},icmp,nw_src=198.51.100.7,"
        f"nw_dst={UPLINK['floating_ip']},icmp_type=8,icmp_code=0,nw_ttl=64"
    )
    before_ct = _datapath_actions(natted.trace("uplink", inbound))[0]
    assert f"nat(dst={ip('vm1')})" in before_ct, before_ct
    # The uplink answers ARP for the floating IP (so the next hop sends it here).
    arp = (
        f"dl_src={NEXTHOP_MAC},dl_dst=ff:ff:ff:ff:ff:ff,arp,arp_op=1,"
        f"arp_spa={UPLINK['next_hop']},arp_sha={NEXTHOP_MAC},arp_tpa={UPLINK['floating_ip']}"
    )
    assert natted.out("uplink", arp) == {"uplink"}
    assert f"sip={UPLINK['floating_ip']}" in natted.actions("uplink", arp)


def _datapath_actions(trace: str) -> list[str]:
    """Each pass's datapath actions in a trace (a `ct(table=...)` starts another pass)."""
    return [
        line.removeprefix("Datapath actions:").strip()
        for line in trace.splitlines()
        if line.startswith("Datapath actions:")
    ]


def _uplink_mac(traced: Traced) -> str:
    """The uplink's MAC, as the router's admission flow for the uplink port matches it."""
    admission = f"table={pipeline.table('lr_in_admission')},"
    flows = [f for f in traced.table.flows if f.startswith(admission)]
    m = re.search(r"reg14=0xfffe,.*dl_dst=([0-9a-f:]{17})", "\n".join(flows))
    assert m, flows
    return m.group(1)
