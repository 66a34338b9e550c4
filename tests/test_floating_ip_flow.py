"""Floating IPs the ordinary OpenStack way, against `loom up --demo`, with packets.

openstacksdk (`--neutron-auth noauth`) builds what every OpenStack client builds: an
external network without provider attributes and its subnet, a tenant network, a router
with its gateway on the external network and an interface on the tenant subnet, a port,
and a floating IP for the port. The demo's one L3 gateway service (on gw1) is the
deployment's default, so it serves the external network: the floating IP is ACTIVE once
realized. Then a demo VM (red/vm1, a network namespace on hv1) gets a floating IP through
its router, and packets cross the gateway's uplink (a port of gw1 whose transmissions are
captured and into which the test injects what the physical network sends): a host outside
pings the floating IP and the VM answers, and the VM pings the outside host and gets the
answer, its packets leaving from the floating IP.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import openstack
import pytest

from loom_common.ovsdb import free_port, tool
from loom_common.testing import loom_up, wait_for
from loom_ovs import packets

pytestmark = [
    pytest.mark.ovs,
    pytest.mark.zk,
    pytest.mark.system,
    pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning"),
]

WAIT = 60.0
OUTSIDE = "203.0.113.7"
"""A host beyond the uplink's next hop (the Internet, to the deployment)."""


class Uplink:
    """The gateway node's uplink as the physical network sees it (from `demo.json`)."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.ctl, self.port = report["ctl"], report["port"]
        self.pcap = Path(report["pcap"])
        self.next_hop_mac: str = report["next_hop_mac"]

    def send(self, frame: str) -> None:
        """Inject `frame` (hex) as if the physical network sent it."""
        subprocess.run([tool("ovs-appctl"), "-t", self.ctl, "netdev-dummy/receive", self.port,
                        frame], check=True, capture_output=True)  # fmt: skip

    def sent(self) -> list[bytes]:
        """Every frame Loom has sent out of the uplink."""
        return packets.read_pcap(self.pcap) if self.pcap.exists() else []


def ipv4(frame: bytes) -> tuple[str, str, int]:
    """(source, destination, protocol) of an untagged IPv4 frame; ("", "", 0) for others."""
    if frame[12:14] != b"\x08\x00":
        return "", "", 0
    ip = frame[14:]
    return ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20])), ip[9]


def icmp_type(frame: bytes) -> int:
    ip = frame[14:]
    return ip[(ip[0] & 15) * 4]


def checksum(data: bytes) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data.ljust(len(data) + len(data) % 2, b"\0")))
    total = (total >> 16) + (total & 0xFFFF)
    return int(~(total + (total >> 16)) & 0xFFFF)


def echo_reply(request: bytes, src_mac: str) -> str:
    """The answer (hex) of an outside host to ICMP echo request `request` (a whole frame,
    as it left the uplink): addresses swapped, from `src_mac` (the next hop)."""
    ip = request[14:]
    header_len = (ip[0] & 15) * 4
    total = int.from_bytes(ip[2:4], "big")
    icmp = bytearray(ip[header_len:total])
    icmp[0], icmp[2:4] = 0, b"\0\0"
    icmp[2:4] = struct.pack("!H", checksum(bytes(icmp)))
    header = bytearray(ip[:header_len])
    header[12:16], header[16:20] = ip[16:20], ip[12:16]
    header[8], header[10:12] = 64, b"\0\0"
    header[10:12] = struct.pack("!H", checksum(bytes(header)))
    dst_mac = ":".join(f"{b:02x}" for b in request[6:12])
    return packets.ethernet(src_mac, dst_mac, 0x0800, bytes(header) + bytes(icmp))


@pytest.mark.timeout(420)
def test_the_ordinary_floating_ip_flow_translates_through_the_demos_gateway(
    tmp_path: Path,
) -> None:
    state, port = tmp_path / "s", free_port()
    with loom_up("--demo", "--neutron-auth", "noauth", "--api-port", str(port),
                 "--manager-port", str(free_port()), "--admin-token", "t",
                 "--state-dir", str(state)) as (proc, said):  # fmt: skip
        assert proc.poll() is None, said
        report = json.loads((state / "demo" / "demo.json").read_text())
        assert report["datapath"] == "netdev", "the VMs are network namespaces: run as root"
        conn = openstack.connect(
            auth_type="none", network_endpoint_override=f"http://127.0.0.1:{port}"
        )
        try:
            net: Any = conn.network
            # The ordinary flow: no provider attributes anywhere.
            public = net.create_network(name="public", is_router_external=True)
            net.create_subnet(network_id=public.id, ip_version=4, cidr="172.16.0.0/24",
                              name="public-v4")  # fmt: skip
            web = net.create_network(name="web", project_id="acme")
            subnet = net.create_subnet(network_id=web.id, ip_version=4, cidr="10.5.0.0/24",
                                       project_id="acme")  # fmt: skip
            router = net.create_router(name="acme-r", project_id="acme",
                                       external_gateway_info={"network_id": public.id})  # fmt: skip
            net.add_interface_to_router(router, subnet_id=subnet.id)
            vm_port = net.create_port(network_id=web.id, binding_host_id="hv1",
                                      project_id="acme")  # fmt: skip
            fip = net.create_ip(floating_network_id=public.id, port_id=vm_port.id,
                                project_id="acme")  # fmt: skip
            assert fip.router_id == router.id
            assert fip.fixed_ip_address == vm_port.fixed_ips[0]["ip_address"]
            gateway = net.get_router(router.id).external_gateway_info
            # (the uplink's own address, 172.16.0.2, is never handed out)
            assert gateway["external_fixed_ips"][0]["ip_address"] not in (
                "172.16.0.1", "172.16.0.2", fip.floating_ip_address)  # fmt: skip
            wait_for(lambda: net.get_ip(fip.id).status == "ACTIVE", WAIT, "the floating IP ACTIVE")

            # A demo VM's floating IP, through its router given a gateway the same way.
            red = next(net.routers(name="red-router"))
            net.update_router(red, external_gateway_info={"network_id": public.id})
            (vm1,) = net.ports(name="red/vm1")
            floating = net.create_ip(floating_network_id=public.id, port_id=vm1.id,
                                     project_id="red")  # fmt: skip
            assert floating.router_id == red.id
            address = floating.floating_ip_address
            wait_for(lambda: net.get_ip(floating.id).status == "ACTIVE", WAIT, "ACTIVE")
        finally:
            conn.close()
        uplink = Uplink(report["uplink"])
        netns = report["netns"]["red/vm1"]

        # Outside in: who has the floating IP? (the uplink answers, with its MAC)
        def arp_reply() -> bytes | None:
            uplink.send(packets.arp_request(uplink.next_hop_mac, "172.16.0.1", address))
            return next(
                (
                    f
                    for f in uplink.sent()
                    if f[12:14] == b"\x08\x06"
                    and f[20:22] == b"\x00\x02"
                    and f[28:32] == packets_ip(address)
                ),
                None,
            )

        wait_for(lambda: arp_reply() is not None, WAIT, f"an ARP reply for {address}")
        reply = arp_reply()
        assert reply is not None
        uplink_mac = ":".join(f"{b:02x}" for b in reply[22:28])

        # ... an outside host pings it: DNAT'ed to vm1, whose answer leaves from it.
        def answered() -> bool:
            uplink.send(packets.icmp_echo(uplink.next_hop_mac, uplink_mac, OUTSIDE, address))
            return any(ipv4(f) == (address, OUTSIDE, 1) and icmp_type(f) == 0
                       for f in uplink.sent())  # fmt: skip

        wait_for(answered, WAIT, f"vm1's echo reply from {address}")
        # Inside out: vm1 pings the outside host; the request leaves from the floating IP
        # to the next hop, and the host's answer reaches vm1's ping.
        ping = subprocess.Popen(["ip", "netns", "exec", netns, "ping", "-c", "1", "-W", "20",
                                 OUTSIDE], stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:

            def request() -> bytes | None:
                return next(
                    (
                        f
                        for f in uplink.sent()
                        if ipv4(f) == (address, OUTSIDE, 1) and icmp_type(f) == 8
                    ),
                    None,
                )

            wait_for(lambda: request() is not None, WAIT, f"vm1's echo request from {address}")
            frame = request()
            assert frame is not None
            assert frame[0:6] == bytes.fromhex(uplink.next_hop_mac.replace(":", ""))
            uplink.send(echo_reply(frame, uplink.next_hop_mac))
            out, _ = ping.communicate(timeout=30)
        finally:
            if ping.poll() is None:
                ping.kill()
                ping.wait()
        assert " 1 received" in out, out


def packets_ip(address: str) -> bytes:
    return bytes(int(part) for part in address.split("."))
