"""`python -m loom_lab.demo`: Loom doing its job on simulated transport nodes.

Started by `loom up --demo` beside the deployment. It starts the transport nodes (a
`Sandbox` on the dummy datapath: 3 hypervisors and 1 gateway node, each dialling the
physical controller), registers them through the API, builds a two-tenant topology through
the API (per tenant: two switches, a router between them, a stateful security profile), plugs
the tenants' VMs into the hypervisors (the two tenants use identical IP and MAC addresses),
gives the gateway node an uplink and the deployment its default L3 gateway service on it
(`UPLINK`: what an external network created without provider attributes gets),
waits for realization, then sends packets between every pair of VMs and prints a
connectivity matrix: expected against observed, tenant isolation included. ICMP echo and
TCP to port 22 are allowed by the profile, TCP to port 23 is not.

The results go to `<state-dir>/demo.json`, with where the uplink is (the gateway node's
unixctl socket and the uplink's capture: a test injects the physical network's packets
there) and each VM's network namespace. Without `--check` the nodes stay up until SIGTERM;
with it, the nodes are stopped and the exit code says whether every outcome held.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from loom_common.apiclient import Http
from loom_common.pki import Pki
from loom_ovs import packets
from loom_ovs.sandbox import Sandbox, Vif

TENANTS = ("red", "blue")
SUBNETS = {"a": "10.0.1", "b": "10.0.2"}
ROUTER_MAC = {"a": "00:00:00:aa:00:01", "b": "00:00:00:aa:00:02"}
VMS = (("vm1", "a", "hv1", 11), ("vm2", "a", "hv2", 12), ("vm3", "b", "hv3", 13))
"""(name, subnet, hypervisor, host number): the same for both tenants."""
NODES = (("hv1", "hypervisor"), ("hv2", "hypervisor"), ("hv3", "hypervisor"), ("gw1", "gateway"))
UPLINK = {"name": "demo-uplink", "type": "l3", "uplink_ip": "172.16.0.2/24",
          "uplink_next_hop": "172.16.0.1", "default": True}  # fmt: skip
"""The default L3 gateway service, on gw1 (its uplink's physical network: 172.16.0.0/24)."""
NEXT_HOP_MAC = "00:00:00:00:99:01"
"""The MAC of the uplink's next hop (a static neighbour of gw1)."""
WAIT = 60.0
BLOCKED_AFTER = 0.5
"""Seconds after which a packet that has not left its destination's port counts as blocked
(a delivered one takes a small fraction of it)."""


class Api:
    """Loom's API for the demo (`loom_common.apiclient.Http`): any refusal ends the demo."""

    def __init__(self, url: str, token: str) -> None:
        self.http = Http(url, token)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request; return the decoded answer (exit with the error on 4xx/5xx)."""
        reply = self.http.request(method, path, body)
        if reply.status == 0:
            raise ConnectionError(f"demo: {method} {path}: {reply.body}")
        if reply.status >= 400:
            raise SystemExit(f"demo: {method} {path}: {reply.status} {json.dumps(reply.body)}")
        return reply.body

    def create(self, path: str, body: Any) -> str:
        """The id of the object named `body["name"]` under `path`, created if missing (a
        deployment's state persists: the demo runs again on what it built before)."""
        for item in self.call("GET", path)["items"]:
            same_tenant = "tenant" not in body or item.get("tenant") == body["tenant"]
            if item.get("name") == body["name"] and same_tenant:
                return str(item["id"])
        return str(self.call("POST", path, body)["id"])


@dataclass(frozen=True)
class Vm:
    """One demo VM: its tenant, name, subnet (`a`/`b`), node and addresses."""

    tenant: str
    name: str
    subnet: str
    node: str
    ip: str
    mac: str

    @property
    def label(self) -> str:
        """`tenant/name`."""
        return f"{self.tenant}/{self.name}"


def build(api: Api, sandbox: Sandbox, managers: list[str]) -> list[Vm]:
    """Start the nodes (dialling `managers`), register them, create both tenants'
    networks, plug the VMs."""
    zone = api.create("/transport-zones", {"name": "demo-zone"})
    ids = {}
    for name, kind in NODES:
        encap_ip = sandbox.add_node(name, managers).encap_ip
        ids[name] = api.create("/transport-nodes", {
            "name": name, "node_type": kind, "system_id": name, "transport_zone_ids": [zone],
            "tunnel_endpoints": [{"encap": "geneve", "ip": encap_ip}]})  # fmt: skip
    api.create("/gateway-services", {**UPLINK, "gateway_node_ids": [ids["gw1"]]})
    vms = []
    for tenant in TENANTS:
        profile = api.create("/security-profiles", {
            "name": "web", "tenant": tenant, "stateful": True, "rules": [
                {"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
                 "port_range_min": 22, "port_range_max": 22},
                {"direction": "ingress", "ethertype": "IPv4", "protocol": "icmp"},
                {"direction": "egress", "ethertype": "IPv4"}]})  # fmt: skip
        router = api.create("/logical-routers", {"name": f"{tenant}-router", "tenant": tenant})
        switches = {}
        for subnet, prefix in SUBNETS.items():
            # (no replication mode: the default, source replication where no service
            # node is, as in this demo)
            switches[subnet] = api.create("/logical-switches", {
                "name": f"{tenant}-net-{subnet}", "tenant": tenant})  # fmt: skip
            api.create(f"/logical-routers/{router}/ports", {
                "name": f"{tenant}-r-{subnet}", "ip_prefix": f"{prefix}.1/24",
                "logical_switch_id": switches[subnet], "mac": ROUTER_MAC[subnet]})  # fmt: skip
        for name, subnet, node, host in VMS:
            vm = Vm(tenant, name, subnet, node, f"{SUBNETS[subnet]}.{host}",
                    f"50:54:00:00:00:{host:02x}")  # fmt: skip
            api.create(f"/logical-switches/{switches[subnet]}/ports", {
                "name": vm.label, "mac": vm.mac, "ips": [vm.ip],
                "security_profile_ids": [profile],
                "attachment": {"type": "vif", "vif_id": f"{tenant}-{name}"}})  # fmt: skip
            sandbox.nodes[node].add_vif(f"{tenant}-{name}", f"{tenant}-{name}", vm.mac,
                                        f"{vm.ip}/24", f"{SUBNETS[subnet]}.1")  # fmt: skip
            vms.append(vm)
    return vms


def wait_realized(api: Api, vms: list[Vm]) -> None:
    """Wait until the configuration is realized and every VM's port is up."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        status = api.call("GET", "/status")
        ports = []
        for switch in api.call("GET", "/logical-switches")["items"]:
            ports += api.call("GET", f"/logical-switches/{switch['id']}/ports")["items"]
        up = sum(1 for p in ports if p.get("status", {}).get("up") is True)
        if status["realized_generation"] >= status["config_generation"] and up >= len(vms):
            return
        time.sleep(0.2)
    raise SystemExit("demo: the topology was not realized in time")


def probe(sandbox: Sandbox, src: Vm, dst: Vm, kind: str) -> bool:
    """Send `kind` (`icmp`, `tcp/22`, `tcp/23`) from `src` to `dst`; True if it got there."""
    if sandbox.datapath == "netdev":
        return _probe_netns(sandbox, src, dst, kind)
    dst_mac = dst.mac if src.subnet == dst.subnet else ROUTER_MAC[src.subnet]
    if kind == "icmp":
        packet = packets.icmp_echo(src.mac, dst_mac, src.ip, dst.ip)
    else:
        port = 22 if kind == "tcp/22" else 23
        packet = packets.tcp_syn(src.mac, dst_mac, src.ip, dst.ip, 40000, port)
    node, port_name = sandbox.nodes[dst.node], f"{dst.tenant}-{dst.name}"
    before = node.tx_packets(port_name)
    sandbox.nodes[src.node].receive(f"{src.tenant}-{src.name}", packet)
    deadline = time.monotonic() + BLOCKED_AFTER
    while time.monotonic() < deadline:
        if node.tx_packets(port_name) > before:
            return True
        time.sleep(0.02)
    return False


def _vif(sandbox: Sandbox, vm: Vm) -> Vif:
    return sandbox.nodes[vm.node].vifs[f"{vm.tenant}-{vm.name}"]


CONNECT = (
    "import socket,sys\n"
    "s=socket.socket()\n"
    "s.settimeout(float(sys.argv[3]))\n"
    "try:\n"
    "    s.connect((sys.argv[1],int(sys.argv[2])))\n"
    "except ConnectionRefusedError:\n"
    "    print('refused')\n"
    "except OSError:\n"
    "    print('timeout')\n"
    "else:\n"
    "    print('connected')\n"
)
"""A TCP connect from inside a VM: `refused` means the SYN reached the VM (nothing listens),
`timeout` that it did not."""


CAPTURE = (
    "import socket,sys,time\n"
    "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0800))\n"
    "s.bind(('eth0',0))\n"
    "s.settimeout(0.05)\n"
    "dst=socket.inet_aton(sys.argv[1]);proto=int(sys.argv[2]);port=int(sys.argv[3])\n"
    "print('ready',flush=True)\n"
    "end=time.monotonic()+float(sys.argv[4]);n=0\n"
    "while time.monotonic()<end:\n"
    "    try:\n"
    "        f=s.recv(2048)\n"
    "    except socket.timeout:\n"
    "        continue\n"
    "    ip=f[14:]\n"
    "    if ip[9]!=proto or ip[16:20]!=dst:\n"
    "        continue\n"
    "    l4=ip[(ip[0]&15)*4:]\n"
    "    if proto==1 and l4[0]==8 or proto==6 and int.from_bytes(l4[2:4],'big')==port:\n"
    "        n+=1\n"
    "        break\n"
    "print(n,flush=True)\n"
)
"""Counts, inside a VM, the frames that reach its eth0 and are the probe: IPv4 to its address,
an ICMP echo request or TCP to the port."""


def _probe_netns(sandbox: Sandbox, src: Vm, dst: Vm, kind: str) -> bool:
    """Across tenants the addresses overlap: `dst`'s address is also a VM of `src`'s own
    tenant, which answers. What counts is whether the probe reached `dst`'s interface, as a
    capture inside `dst` sees it."""
    vif, target = _vif(sandbox, src), _vif(sandbox, dst)
    proto, port = (1, 0) if kind == "icmp" else (6, int(kind.split("/")[1]))
    capture = subprocess.Popen(
        ["ip", "netns", "exec", target.netns or "", "python3", "-c", CAPTURE, dst.ip,
         str(proto), str(port), str(BLOCKED_AFTER + 0.2)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert capture.stdout is not None
        capture.stdout.readline()  # "ready"
        if kind == "icmp":
            vif.run("ping", "-c", "1", "-W", str(BLOCKED_AFTER), dst.ip, check=False)
        else:
            vif.run("python3", "-c", CONNECT, dst.ip, str(port), str(BLOCKED_AFTER), check=False)
        return int(capture.stdout.readline() or 0) > 0
    finally:
        capture.kill()
        capture.wait()


def warm_up(sandbox: Sandbox, vms: list[Vm]) -> None:
    """Each VM resolves its gateway (its first ARP), as any VM does when it boots."""
    if sandbox.datapath != "netdev":
        return
    for vm in vms:
        gateway = f"{SUBNETS[vm.subnet]}.1"
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if " 1 received" in _vif(sandbox, vm).run("ping", "-c", "1", "-W", "1", gateway,
                                                       check=False):  # fmt: skip
                break


SERVE = (
    "import socket,sys\n"
    "l=socket.socket()\n"
    "l.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
    "l.bind(('0.0.0.0',int(sys.argv[1])))\n"
    "l.listen(1)\n"
    "print('ready',flush=True)\n"
    "c,_=l.accept()\n"
    "n=0\n"
    "while (b:=c.recv(65536)):\n"
    "    n+=len(b)\n"
    "print(n,flush=True)\n"
)
SEND = (
    "import socket,sys,time\n"
    "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=10)\n"
    "t=time.monotonic()\n"
    "s.sendall(b'x'*int(sys.argv[3]))\n"
    "s.close()\n"
    "print(time.monotonic()-t)\n"
)


def transfer(sandbox: Sandbox, src: Vm, dst: Vm, size: int = 10 << 20) -> dict[str, Any]:
    """A TCP transfer of `size` bytes from `src` to `dst`'s port 22 (netdev VMs)."""
    server = subprocess.Popen(
        ["ip", "netns", "exec", _vif(sandbox, dst).netns or "", "python3", "-c", SERVE, "22"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "ready"
        seconds = float(_vif(sandbox, src).run("python3", "-c", SEND, dst.ip, "22", str(size)))
        received = int(server.stdout.readline() or 0)
    finally:
        server.kill()
        server.wait()
    return {"src": src.label, "dst": dst.label, "bytes": received, "sent": size,
            "seconds": round(seconds, 3)}  # fmt: skip


def matrix(sandbox: Sandbox, vms: list[Vm]) -> list[dict[str, Any]]:
    """Every (src, dst, kind): expected and observed."""
    # The tunnel mesh follows the VIFs' locations (a feedback through the logical
    # controller): wait until the first expected path carries a packet.
    first = vms[0], vms[1]
    deadline = time.monotonic() + WAIT
    while not probe(sandbox, *first, "icmp"):
        if time.monotonic() > deadline:
            break
    results = []
    for src in vms:
        for dst in vms:
            if src == dst:
                continue
            for kind in ("icmp", "tcp/22", "tcp/23"):
                expected = src.tenant == dst.tenant and kind != "tcp/23"
                observed = probe(sandbox, src, dst, kind)
                results.append({"src": src.label, "dst": dst.label, "kind": kind,
                                "expected": expected, "observed": observed})  # fmt: skip
    return results


def render(results: list[dict[str, Any]]) -> str:
    """The matrix as text: one line per pair, `ok` where observed == expected."""
    lines = [f"{'from':<10} {'to':<10} {'icmp':<12} {'tcp/22':<12} {'tcp/23':<12}"]
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        pairs.setdefault((r["src"], r["dst"]), {})[r["kind"]] = r
    for (src, dst), kinds in pairs.items():
        cells = []
        for kind in ("icmp", "tcp/22", "tcp/23"):
            r = kinds[kind]
            mark = "ok" if r["expected"] == r["observed"] else "WRONG"
            cells.append(f"{'pass' if r['observed'] else 'blocked'} {mark}".ljust(12))
        lines.append(f"{src:<10} {dst:<10} {' '.join(cells)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the demo (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m loom_lab.demo", description=__doc__)
    parser.add_argument("--api", required=True, help="the API's base URL")
    parser.add_argument("--token", help="the admin token (visible in ps: prefer the environment's "
                        "LOOM_ADMIN_TOKEN, which `loom up` sets)")  # fmt: skip
    parser.add_argument("--manager", required=True,
                        help="the physical controllers (tcp:IP:PORT, comma-separated)")  # fmt: skip
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--pki-dir", type=Path,
                        help="the nodes' certificates' PKI (ssl: managers)")  # fmt: skip
    parser.add_argument("--check", action="store_true", help="stop the nodes and exit 0/1")
    parser.add_argument(
        "--datapath", choices=["auto", "dummy", "netdev"], default="auto",
        help="netdev: VMs in network namespaces, real ping and TCP (root); dummy: packets "
        "injected into OVS; auto (default): netdev when root",
    )  # fmt: skip
    args = parser.parse_args(argv)
    token = args.token or os.environ.get("LOOM_ADMIN_TOKEN")
    if not token:
        parser.error("no admin token: set LOOM_ADMIN_TOKEN (or give --token)")
    state = Path(args.state_dir)
    stopped = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopped
        stopped = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    api = Api(args.api, token)
    datapath = args.datapath
    if datapath == "auto":
        datapath = "netdev" if os.geteuid() == 0 and shutil.which("ping") else "dummy"
    pki = Pki(args.pki_dir) if args.pki_dir is not None else None
    with Sandbox(state / "nodes", datapath=datapath, pki=pki) as sandbox:
        vms = build(api, sandbox, [m for m in args.manager.split(",") if m])
        wait_realized(api, vms)
        gateway = sandbox.nodes["gw1"]  # (its br-int is the controller's by now)
        gateway.add_uplink()
        gateway.set_neighbour(str(UPLINK["uplink_next_hop"]), NEXT_HOP_MAC)
        warm_up(sandbox, vms)
        results = matrix(sandbox, vms)
        good = all(r["expected"] == r["observed"] for r in results)
        transfers = []
        if datapath == "netdev":  # routed, across hypervisors, in each tenant
            for tenant in TENANTS:
                src, dst = (
                    next(v for v in vms if v.label == f"{tenant}/{n}") for n in ("vm1", "vm3")
                )
                transfers.append(transfer(sandbox, src, dst))
            good = good and all(t["bytes"] == t["sent"] for t in transfers)
        uplink = {
            "node": "gw1",
            "ctl": str(gateway.ctl),
            "port": "uplink",
            "pcap": str(gateway.run_dir / "uplink-tx.pcap"),
            "next_hop_mac": NEXT_HOP_MAC,
        }
        netns = {vm.label: _vif(sandbox, vm).netns for vm in vms}
        report = {"ok": good, "datapath": datapath, "results": results, "transfers": transfers,
                  "uplink": uplink, "netns": netns}  # fmt: skip
        (state / "demo.json").write_text(json.dumps(report, indent=1))
        print(f"datapath: {datapath}", flush=True)
        print(render(results), flush=True)
        for t in transfers:
            print(f"TCP {t['src']} -> {t['dst']}: {t['bytes']} of {t['sent']} bytes "
                  f"in {t['seconds']} s", flush=True)  # fmt: skip
        print(f"demo: {'every outcome held' if good else 'SOME OUTCOMES DIFFER'}", flush=True)
        if args.check:
            return 0 if good else 1
        while not stopped:
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
