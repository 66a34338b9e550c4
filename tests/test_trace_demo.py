"""`loom trace` against `loom up --demo` north-south: the demo's default L3 gateway service
(on gw1, with an uplink) serves red's router with SNAT and a floating IP; every packet the
test sends through the gateway — from each VM of both tenants to the physical network, and
from the physical network (injected into gw1's uplink) to the floating IP, the SNAT address
and an address nobody has, and its ARP for each — is traced, and the verdict must be what
the real packet did (left by the uplink from the translated address; reached which VM; went
back out; was answered). Through a node's installed table (`--on-node`: a hypervisor's, and
gw1's from its uplink), a packet that leaves by tunnel is said to leave by the port its flow
outputs to on that node (the gateway's BFD tunnels and the flow-based port are all Geneve).
Everything is stopped by the fixture, even on failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_common.ovsdb import free_port, tool
from loom_common.testing import loom_up, wait_for
from loom_lab.demo import CAPTURE, CONNECT, SUBNETS, TENANTS, VMS
from loom_ovs import packets

pytestmark = [pytest.mark.ovs, pytest.mark.zk, pytest.mark.system]

LOOM = Path(sys.executable).parent / "loom"
TOKEN = "t"
NEXT_HOP = "172.16.0.1"
SNAT_IP = "172.16.0.3"
FLOATING_IP = "172.16.0.102"
FLOATING_VM = "red/vm2"
NOBODY = "172.16.0.200"
WINDOW = 1.0
"""Seconds a packet is given to show where it goes (a delivered one takes a small fraction)."""


@contextlib.contextmanager
def _demo(state: Path) -> Iterator[int]:
    """`loom up --demo` in `state`; yields the API port once the demo has run."""
    port = free_port()
    with loom_up("--demo", "--api-port", str(port), "--manager-port", str(free_port()),
                 "--admin-token", TOKEN, "--state-dir", str(state)) as (proc, said):  # fmt: skip
        assert proc.poll() is None, said
        assert "demo: every outcome held" in said, said
        yield port


class Api:
    """The demo's API with the admin token."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.base}{path}", data=data, method=method,
                                         headers={"Authorization": f"Bearer {TOKEN}",
                                                  "Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=90) as reply:
                return int(reply.status), json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, json.loads(exc.read() or b"{}")

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        assert status < 300, (method, path, status, answer)
        return answer

    def trace(self, source: str, packet: str, node: str | None = None) -> dict[str, Any]:
        query = {"from": source, "packet": packet, **({"node": node} if node else {})}
        return dict(self.ok("GET", f"/trace?{urllib.parse.urlencode(query)}"))


def _ipv4(frame: bytes) -> tuple[str, str, int, int]:
    """(source, destination, protocol, TCP destination port or 0) of an untagged IPv4 frame."""
    if frame[12:14] != b"\x08\x00":
        return "", "", 0, 0
    ip = frame[14:]
    l4 = ip[(ip[0] & 15) * 4 :]
    dport = int.from_bytes(l4[2:4], "big") if ip[9] == 6 else 0
    return socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20]), ip[9], dport


class Gateway:
    """gw1's uplink as the demo left it (`demo.json`'s `uplink`): what left by it, and a way
    to send it the physical network's packets."""

    def __init__(self, uplink: dict[str, str]) -> None:
        self.uplink = uplink
        self.pcap = Path(uplink["pcap"])

    def frames(self) -> list[bytes]:
        return packets.read_pcap(self.pcap) if self.pcap.exists() else []

    def receive(self, frame: str) -> None:
        subprocess.run([tool("ovs-appctl"), "-t", self.uplink["ctl"], "netdev-dummy/receive",
                        self.uplink["port"], frame], check=True, capture_output=True)  # fmt: skip

    def left(self, before: int, match: Any, read: Any = None) -> list[Any]:
        """The frames after the first `before`, each read by `read` (default `_ipv4`), that
        `match`, once one has left or `WINDOW` has passed."""
        deadline = time.monotonic() + WINDOW
        while True:
            found = [h for h in map(read or _ipv4, self.frames()[before:]) if h and match(h)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.02)


def _arp_reply_from(ip: str) -> Any:
    """A reader of frames: an ARP reply saying who has `ip` (its sender MAC), else None."""

    def read(frame: bytes) -> str | None:
        if frame[12:14] != b"\x08\x06" or frame[20:22] != b"\x00\x02":
            return None
        return frame[22:28].hex(":") if socket.inet_ntoa(frame[28:32]) == ip else None

    return read


def _from_vm(netns: str, kind: str) -> None:
    """`kind` (`icmp` or `tcp/PORT`) from inside a VM to the uplink's next hop."""
    if kind == "icmp":
        argv = ["ping", "-c", "1", "-W", str(WINDOW), NEXT_HOP]
    else:
        argv = ["python3", "-c", CONNECT, NEXT_HOP, kind.split("/")[1], str(WINDOW)]
    subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, timeout=30)


@contextlib.contextmanager
def _captures(netns: dict[str, str], vms: dict[str, str], proto: int,
              port: int) -> Iterator[dict[str, int]]:  # fmt: skip
    """A capture in each VM of `vms` (label -> its address) of the frames to its address
    (`proto`, TCP `port`); after the block, each VM's count (within `WINDOW`)."""
    running = {}
    counts: dict[str, int] = {}
    try:
        for vm, ip in vms.items():
            running[vm] = subprocess.Popen(
                ["ip", "netns", "exec", netns[vm], "python3", "-c", CAPTURE, ip, str(proto),
                 str(port), str(WINDOW + 0.5)], stdout=subprocess.PIPE, text=True)  # fmt: skip
        for capture in running.values():
            assert capture.stdout is not None
            assert capture.stdout.readline().strip() == "ready"
        yield counts
        for vm, capture in running.items():
            assert capture.stdout is not None
            counts[vm] = int(capture.stdout.readline() or 0)
    finally:
        for capture in running.values():
            capture.kill()
            capture.wait()
            if capture.stdout is not None:
                capture.stdout.close()


def _output_port(body: dict[str, Any]) -> int:
    """The OpenFlow port the last table of the trace output to."""
    steps = [s for p in body["passes"] for s in p["steps"]]
    outputs = [a for s in steps for a in s["actions"] if re.fullmatch(r"output:\d+", a)]
    assert outputs, body["trace"]
    return int(outputs[-1].split(":")[1])


VMS_AT = {f"{t}/{name}": (f"{SUBNETS[subnet]}.{host}", node)
          for t in TENANTS for name, subnet, node, host in VMS}  # fmt: skip
"""Each demo VM's address and hypervisor."""


@pytest.mark.timeout(600)
def test_trace_verdicts_are_the_north_south_packets(tmp_path: Path) -> None:
    state = tmp_path / "s"
    with _demo(state) as port:
        api = Api(port)
        demo = json.loads((state / "demo" / "demo.json").read_text())
        services = api.ok("GET", "/gateway-services")["items"]
        assert len(services) == 1, services  # (the demo's default L3 service, on gw1)
        routers = {r["name"]: r for r in api.ok("GET", "/logical-routers")["items"]}
        red = routers["red-router"]["id"]
        api.ok("PATCH", f"/logical-routers/{red}", {"gateway_service_id": services[0]["id"]})
        for rule in ({"type": "snat", "external_ip": SNAT_IP, "internal_ip": "10.0.0.0/16"},
                     {"type": "floating-ip", "external_ip": FLOATING_IP,
                      "internal_ip": VMS_AT[FLOATING_VM][0]}):  # fmt: skip
            api.ok("POST", f"/logical-routers/{red}/nat-rules", rule)
        generation = api.ok("GET", "/status")["config_generation"]
        wait_for(lambda: api.ok("GET", "/status")["realized_generation"] >= generation, 60,
                 "the gateway's configuration realized")  # fmt: skip
        gateway = Gateway(demo["uplink"])
        _out_to_the_physical_network(api, gateway, demo["netns"])
        _in_from_the_physical_network(api, gateway, demo["netns"])
        _through_each_hypervisors_table(api, Path(demo["uplink"]["ctl"]).parent.parent)
        _as_loom_trace_prints_them(state)


def _loom(state: Path, *args: str) -> list[str]:
    """`loom ARGS` on the demo (its client file in `state`); its lines (it must succeed)."""
    done = subprocess.run([str(LOOM), *args, "--state-dir", str(state)], capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items()
                                                       if not k.startswith("LOOM_")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.rstrip().splitlines()


def _as_loom_trace_prints_them(state: Path) -> None:
    """`loom trace` says what the packet is, the address it leaves the uplink from, and a
    tunnel to the gateway as for the router's uplink."""
    bare = _loom(state, "trace", "--from", "red/vm1", f"ip4.dst == {NEXT_HOP}")
    assert bare[0] == (f"red/vm1: ip4.dst == {NEXT_HOP} (IPv4 protocol 0, no transport header, "
                       f"from 10.0.1.11 to {NEXT_HOP}, TTL 64)"), bare  # fmt: skip
    out = _loom(state, "trace", "--from", "red/vm1", f"ip4.dst == {NEXT_HOP} && icmp4")
    assert out[-1] == f"verdict: out of the gateway's uplink from {SNAT_IP}", out
    node = _loom(state, "trace", "--from", "red/vm1", "--on-node", "hv1",
                 f"ip4.dst == {NEXT_HOP} && icmp4")  # fmt: skip
    assert re.fullmatch(r"verdict: tunneled to gw1 for red-router's uplink \(out of \S+\)",
                        node[-1]), node  # fmt: skip


def _out_to_the_physical_network(api: Api, gateway: Gateway, netns: dict[str, str]) -> None:
    """Each VM to the physical network: red's SNAT'd, red/vm2 from its floating IP; blue's
    router has no uplink."""
    went = []
    for vm in VMS_AT:
        for kind, proto, dport in (("icmp", 1, 0), ("tcp/22", 6, 22)):
            wanted = "icmp4" if kind == "icmp" else f"tcp.dst == {dport}"
            body = api.trace(vm, f"ip4.dst == {NEXT_HOP} && {wanted}")
            before = len(gateway.frames())
            _from_vm(netns[vm], kind)
            seen = gateway.left(before, lambda h, p=proto, d=dport: h[1:] == (NEXT_HOP, p, d))
            assert body["verdict"]["uplink"] == bool(seen), (vm, kind, seen, body["verdict"])
            if seen:
                assert body["verdict"]["uplink_source"] == seen[0][0], (vm, kind, seen)
                assert seen[0][0] == (FLOATING_IP if vm == FLOATING_VM else SNAT_IP)
            went.append(bool(seen))
    assert sum(went) == 6  # (red's three VMs, ICMP and TCP)


def _in_from_the_physical_network(api: Api, gateway: Gateway, netns: dict[str, str]) -> None:
    """From the physical network (into gw1's uplink): to the floating IP (ICMP and TCP 22
    pass the profile, TCP 23 does not), to the SNAT address with no connection and to an
    address nobody has (both routed back out of the uplink)."""
    red_vms = {vm: ip for vm, (ip, _) in VMS_AT.items() if vm.startswith("red/")}
    went = []
    cases = ((FLOATING_IP, "icmp"), (FLOATING_IP, "tcp/22"), (FLOATING_IP, "tcp/23"),
             (SNAT_IP, "icmp"), (NOBODY, "icmp"))  # fmt: skip
    for dst, kind in cases:
        proto, dport = (1, 0) if kind == "icmp" else (6, int(kind.split("/")[1]))
        wanted = "icmp4" if kind == "icmp" else f"tcp.dst == {dport}"
        body = api.trace("red-router", f"ip4.src == {NEXT_HOP} && ip4.dst == {dst} && {wanted}")
        assert body["described"].startswith("ICMPv4 echo request" if kind == "icmp"
                                            else f"TCP from {NEXT_HOP}:40000")  # fmt: skip
        found = re.search(r"dl_dst=([0-9a-f:]+)", body["flow"])
        assert found, body["flow"]  # (the uplink's MAC, as the controller filled it in)
        source = (gateway.uplink["next_hop_mac"], found.group(1), NEXT_HOP, dst)
        frame = (packets.icmp_echo(*source) if kind == "icmp"
                 else packets.tcp_syn(*source, 40000, dport))  # fmt: skip
        before = len(gateway.frames())
        with _captures(netns, red_vms, proto, dport) as counts:
            gateway.receive(frame)
        back = gateway.left(before, lambda h, d=dst, p=proto: h[:3] == (NEXT_HOP, d, p))
        got = {vm for vm, n in counts.items() if n}
        delivered = {d["name"] for d in body["verdict"]["delivered"]}
        assert delivered == got, (dst, kind, got, body["verdict"])
        assert body["verdict"]["uplink"] == bool(back), (dst, kind, back, body["verdict"])
        went.append((sorted(got), bool(back)))
    assert went == [([FLOATING_VM], False), ([FLOATING_VM], False), ([], False), ([], True),
                    ([], True)]  # fmt: skip
    # The physical network's ARP for each address: the uplink answers for its router's
    # NAT addresses, nobody for the rest.
    for dst in (FLOATING_IP, SNAT_IP, NOBODY):
        body = api.trace("red-router", f"arp && arp.spa == {NEXT_HOP} && arp.tpa == {dst}")
        assert body["described"] == f"ARP request: who has {dst}, tell {NEXT_HOP}"
        before = len(gateway.frames())
        gateway.receive(packets.arp_request(gateway.uplink["next_hop_mac"], NEXT_HOP, dst))
        replies = gateway.left(before, lambda h: True, _arp_reply_from(dst))
        assert body["verdict"]["uplink"] == bool(replies), (dst, replies, body["verdict"])
        assert bool(replies) == (dst != NOBODY), (dst, replies)


def _through_each_hypervisors_table(api: Api, nodes: Path) -> None:
    """Through each red hypervisor's table: to the outside by tunnel to gw1, east-west by
    tunnel to the other hypervisor; through gw1's, from its uplink to the floating IP by
    tunnel to the VM's hypervisor. Each is said to leave by the port the flow outputs to
    (its ofport on the real node; `nodes`: the sandbox's directory, a node's database in
    it)."""
    red = {vm: at for vm, at in VMS_AT.items() if vm.startswith("red/")}
    traces = []
    for vm, (_, node) in red.items():
        owners = {ip: n for ip, n in red.values() if n != node} | {NEXT_HOP: "gw1"}
        for dst, owner in owners.items():
            traces.append((node, owner, api.trace(vm, f"ip4.dst == {dst} && icmp4", node)))
    inbound = f"ip4.src == {NEXT_HOP} && ip4.dst == {FLOATING_IP} && icmp4"
    traces.append(("gw1", VMS_AT[FLOATING_VM][1], api.trace("red-router", inbound, "gw1")))
    for node, owner, body in traces:
        tunneled = body["verdict"]["tunneled"]
        assert [t["node"] for t in tunneled] == [owner], (node, body["verdict"])
        via = tunneled[0]["via"]
        db = f"--db=unix:{nodes / node / 'conf.sock'}"
        ofport = subprocess.run([tool("ovs-vsctl"), db, "get", "Interface", via, "ofport"],
                                capture_output=True, text=True, check=True)  # fmt: skip
        assert int(ofport.stdout) == _output_port(body), (node, via, body["trace"])
    assert traces[-1][2]["verdict"]["tunneled"][0]["port"]["name"] == FLOATING_VM
