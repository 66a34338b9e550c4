"""Simulated transport nodes: real ovsdb-server + ovs-vswitchd instances, each in its own
run directory, for tests and `loom up`.

Two kinds of node:

- **dummy** (default; no root, no namespaces): ovs-vswitchd runs `--enable-dummy=system`
  (not `=override`, which turns tunnels into dummy devices). Every node has a bridge
  `br-phy` whose port `br-phy_n1` is a unix stream socket into one extra OVS instance,
  the *underlay* (`net`, bridge `n1`, NORMAL switching). The node's tunnel endpoint is
  `br-phy`'s address (`netdev-dummy/ip4addr`), neighbours are static (`tnl/neigh/set`):
  nothing answers ARP on the dummy underlay. A VIF is a dummy port of `br-int` that packets
  are injected into (`netdev-dummy/receive`) and that records what leaves it (`tx_pcap`,
  `ofctl dump-ports`).
- **netdev** (needs root): the userspace datapath inside a network namespace `<tag>-<id>`
  (`tag` is unique per sandbox directory, so two sandboxes never share a namespace); the
  underlay is a Linux bridge in namespace `<tag>-ul` joined by one veth per node; a VIF
  is a veth whose other end is the only interface of a "VM" namespace (`<tag>-<id>-<vif>`, TX
  offload off: the userspace datapath does not complete partial checksums), so `ping` and
  TCP between VMs are real.

What the sandbox sets on a node is what a hypervisor's installer sets: `system-id`, the
Manager row pointing at the physical controllers (`max_backoff` 1000 ms), the underlay, the
VIFs with `external_ids:iface-id`/`attached-mac`, and `external_ids:loom-openflow` (where
the controller reaches the bridge's OpenFlow: its management socket, or with a PKI, for a
dummy node, an `ssl:` address the bridge listens on with the node's certificate). `br-int` itself,
its tunnels and its flows are the physical controller's to write.

Every process is a supervised child (`loom_common.procs.Daemon`): `stop()` stops what was
started, by PID, and removes the namespaces it created.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from loom_common.errors import LoomError
from loom_common.ovsdb import OvsdbServer, free_port, tool
from loom_common.pki import Pki
from loom_common.procs import Daemon

VSWITCH_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
UNDERLAY_PREFIX = "172.31"
"""Underlay addresses: node i is 172.31.<i // 250>.<i % 250 + 1>/16."""


class SandboxError(LoomError):
    """A sandbox step failed."""

    message = "%(detail)s"


def _run(argv: list[str], *, check: bool = True, stdin: str | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, input=stdin, check=False)
    if check and done.returncode != 0:
        raise SandboxError(detail=f"{' '.join(argv)}: {done.stderr.strip() or done.stdout}")
    return done.stdout


def _add_route(node: OvsNode, prefix: str, bridge: str, timeout: float = 10.0) -> None:
    """`ovs/route/add PREFIX BRIDGE`, again until ovs-vswitchd takes it: it refuses the
    route ("Error while inserting route") until it has learned the bridge's address, which
    on the netdev datapath comes from the kernel a moment after `ip addr add` (one demo
    start in seven failed on it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            node.appctl("ovs/route/add", prefix, bridge)
            return
        except SandboxError as exc:
            if "Error while inserting route" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)  # (polling ovs-vswitchd's state: it says nothing when it learns)


def underlay_ip(index: int) -> str:
    """The underlay address of node number `index` (0-based)."""
    return f"{UNDERLAY_PREFIX}.{index // 250}.{index % 250 + 1}"


def underlay_mac(index: int) -> str:
    """The underlay MAC of node number `index` (`br-phy`'s hwaddr)."""
    return f"aa:55:00:00:{index // 256:02x}:{index % 256:02x}"


def vm_mac(node_index: int, vif_index: int) -> str:
    """A stable MAC for a sandbox VM (tests choose their own where it matters)."""
    return f"50:54:00:{node_index // 256:02x}:{node_index % 256:02x}:{vif_index:02x}"


@dataclass
class Vif:
    """One VIF of a node: a dummy port (or a veth into VM namespace `netns`)."""

    name: str
    iface_id: str
    mac: str
    ip: str | None = None
    """The VM's address with prefix length (netdev VMs only: configured in the namespace)."""
    netns: str | None = None
    gateway: str | None = None
    """The VM's default route (netdev VMs)."""

    def run(self, *argv: str, check: bool = True, timeout: float = 30.0) -> str:
        """Run a command inside the VM's namespace (netdev VMs); return its stdout."""
        assert self.netns is not None, "a dummy VIF has no namespace"
        done = subprocess.run(["ip", "netns", "exec", self.netns, *argv], capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
        if check and done.returncode != 0:
            raise SandboxError(
                detail=f"{' '.join(argv)} in {self.netns}: {done.stderr or done.stdout}"
            )
        return done.stdout


@dataclass(eq=False)
class OvsNode:
    """One simulated transport node (see the module docstring)."""

    root: Path
    system_id: str
    index: int
    datapath: str = "dummy"
    """`dummy` or `netdev`."""
    tag: str = "loom"
    """Prefix of the node's namespaces: its sandbox's (two sandboxes never share one)."""
    vifs: dict[str, Vif] = field(default_factory=dict)
    openflow_address: str | None = None
    """Where the controller is to reach `br-int`'s OpenFlow (`external_ids:loom-openflow`):
    default its management socket (`openflow`); `ssl:127.0.0.1:PORT` for a dummy node with
    a certificate, as a node on another host would be reached."""
    private: bool = False
    """A switch private to this process (a controller's scratch switch for traces): its
    daemons die when the thread that started them ends (`Daemon`), its database listens
    on its unix socket only."""

    def __post_init__(self) -> None:
        self.run_dir = self.root / self.system_id
        self.db = OvsdbServer(
            self.run_dir,
            VSWITCH_SCHEMA,
            name="conf",
            remotes=("db:Open_vSwitch,Open_vSwitch,manager_options",),
            options=tuple(
                f"--{opt}=db:Open_vSwitch,SSL,{col}"
                for opt, col in (
                    ("private-key", "private_key"),
                    ("certificate", "certificate"),
                    ("ca-cert", "ca_cert"),
                )
            ),  # (as Debian's ovs-ctl starts it: `set_ssl`)
            die_with_parent=self.private,
            tcp=not self.private,
        )
        self.ctl = self.run_dir / "ovs-vswitchd.ctl"
        argv = [
            tool("ovs-vswitchd"), f"unix:{self.db.socket_path}", "--no-chdir",
            f"--unixctl={self.ctl}", f"--log-file={self.run_dir / 'ovs-vswitchd.log'}",
            "-vconsole:off",
        ]  # fmt: skip
        if self.datapath == "dummy":
            argv[2:2] = ["--enable-dummy=system", "--disable-system", "--disable-system-route"]
        else:  # (dummy ports too: VIFs without a VM, `add_dummy_vifs`)
            argv[2:2] = ["--enable-dummy"]
            argv = ["ip", "netns", "exec", self.netns, *argv]
        self.vswitchd = Daemon("ovs-vswitchd", argv, self.run_dir,
                               env={"OVS_RUNDIR": str(self.run_dir)},
                               die_with_parent=self.private)  # fmt: skip

    @property
    def netns(self) -> str:
        """The node's network namespace (netdev nodes)."""
        return f"{self.tag}-{self.system_id}"

    @property
    def encap_ip(self) -> str:
        """The node's tunnel endpoint on the underlay."""
        return underlay_ip(self.index)

    @property
    def openflow(self) -> str:
        """Where `ovs-ofctl` reaches `br-int` (its management socket)."""
        return f"unix:{self.run_dir / 'br-int.mgmt'}"

    @property
    def running(self) -> bool:
        """True while both daemons run."""
        return self.db.running and self.vswitchd.running

    def vsctl(self, *args: str) -> str:
        """Run ovs-vsctl against this node's database (waiting for ovs-vswitchd)."""
        return _run([tool("ovs-vsctl"), f"--db={self.db.unix_remote}", "--timeout=30", *args])

    def appctl(self, *args: str) -> str:
        """Run an ovs-appctl command on this node's ovs-vswitchd."""
        return _run([tool("ovs-appctl"), "-t", str(self.ctl), *args])

    def ofctl(self, *args: str, bridge: str = "br-int") -> str:
        """Run `ovs-ofctl -O OpenFlow15 CMD <bridge> ARGS...` (first arg is the command)."""
        command, *rest = args
        target = f"unix:{self.run_dir / f'{bridge}.mgmt'}"
        return _run([tool("ovs-ofctl"), "-O", "OpenFlow15", command, target, *rest])

    def start(self, managers: Iterable[str] = ()) -> OvsNode:
        """Start the database and ovs-vswitchd; identify the node; point it at `managers`.

        A simulated node starts empty: what an earlier run left in its directory is removed.
        """
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        try:
            self._start(managers)
        except BaseException:
            self.stop()  # what started is stopped: the caller gets the error, no daemon
            raise
        return self

    def _start(self, managers: Iterable[str]) -> None:
        self.db.start()
        dp_type = "netdev" if self.datapath == "netdev" else "system"
        self.vsctl(
            "--no-wait", "init", "--", "set", "Open_vSwitch", ".",
            f"external_ids:system-id={self.system_id}",
            f"external_ids:loom-openflow={self.openflow_address or self.openflow}",
            f"external_ids:loom-encap-ip={self.encap_ip}",
            f"external_ids:loom-datapath-type={dp_type}",
        )  # fmt: skip
        self.vswitchd.start(ready=self.ctl.exists)
        self.set_managers(managers)

    def set_ssl(self, private_key: Path, certificate: Path, ca_certificate: Path) -> None:
        """The node's key, certificate and the CA its managers' certificates must be signed
        by (`ovs-vsctl set-ssl`): its `ssl:` manager targets use them."""
        self.vsctl("set-ssl", str(private_key), str(certificate), str(ca_certificate))

    def set_managers(self, targets: Iterable[str]) -> None:
        """Replace the node's Manager rows: one per target, reconnecting within 1 s."""
        args = ["--no-wait", "--", "clear", "Open_vSwitch", ".", "manager_options"]
        for i, target in enumerate(targets):
            args += [
                "--", f"--id=@m{i}", "create", "Manager", f'target="{target}"',
                "max_backoff=1000", "inactivity_probe=5000",
                "--", "add", "Open_vSwitch", ".", "manager_options", f"@m{i}",
            ]  # fmt: skip
        self.vsctl(*args)

    def add_dummy_vifs(self, vifs: list[tuple[str, str]], batch: int = 250) -> None:
        """Plug VIFs that are dummy ports, each its own iface-id (`name`) and MAC, into
        `br-int` (created if missing), `batch` to an `ovs-vsctl` run: the ports a workload
        binds here without a VM (on either datapath; 1,500 cost ovs-vswitchd no CPU)."""
        dp = ["datapath_type=netdev"] if self.datapath == "netdev" else []
        for start in range(0, len(vifs), batch):
            args = ["--may-exist", "add-br", "br-int", "--", "set", "Bridge", "br-int",
                    "fail-mode=secure", *dp]  # fmt: skip
            for name, mac in vifs[start : start + batch]:
                args += ["--", "add-port", "br-int", name, "--", "set", "Interface", name,
                         "type=dummy", f"external_ids:iface-id={name}",
                         f"external_ids:attached-mac={mac}",
                         "external_ids:iface-status=active"]  # fmt: skip
            self.vsctl(*args)
            for name, mac in vifs[start : start + batch]:
                self.vifs[name] = Vif(name, name, mac)

    def add_vif(
        self, name: str, iface_id: str, mac: str, ip: str | None = None, gateway: str | None = None
    ) -> Vif:
        """Plug a VIF into `br-int` (created here if the controller has not yet). On netdev
        nodes the VM is a namespace with address `ip` (with prefix length) and default
        route via `gateway`."""
        vif = Vif(name, iface_id, mac, ip, gateway=gateway)
        common = [
            f"external_ids:iface-id={iface_id}", f"external_ids:attached-mac={mac}",
            "external_ids:iface-status=active",
        ]  # fmt: skip
        may_create = ["--may-exist", "add-br", "br-int", "--", "set", "Bridge", "br-int",
                      "fail-mode=secure"]  # fmt: skip
        if self.datapath == "dummy":
            self.vsctl(
                *may_create, "--", "add-port", "br-int", name, "--", "set", "Interface", name,
                "type=dummy", *common,
                f"options:tx_pcap={self.run_dir / f'{name}-tx.pcap'}",
                f"options:rxq_pcap={self.run_dir / f'{name}-rx.pcap'}",
            )  # fmt: skip
        else:
            vif.netns = f"{self.tag}-{self.system_id}-{name}"
            _make_vm(self.netns, vif)
            self.vsctl(
                *may_create, "datapath_type=netdev", "--", "add-port", "br-int", name,
                "--", "set", "Interface", name, *common,
            )  # fmt: skip
        self.vifs[name] = vif
        return vif

    def add_uplink(self, name: str = "uplink") -> None:
        """Give a gateway node its port to the physical network: a dummy port of `br-int`
        marked `external_ids:loom-uplink=true` (packets injected into it come from the
        physical network; what Loom sends there is in its `tx_pcap`)."""
        self.vsctl(
            "--may-exist", "add-br", "br-int", "--", "set", "Bridge", "br-int",
            "fail-mode=secure", "--", "add-port", "br-int", name, "--", "set", "Interface",
            name, "type=dummy", "external_ids:loom-uplink=true",
            f"options:tx_pcap={self.run_dir / f'{name}-tx.pcap'}",
            f"options:rxq_pcap={self.run_dir / f'{name}-rx.pcap'}",
        )  # fmt: skip

    def set_neighbour(self, ip: str, mac: str) -> None:
        """Tell Loom the MAC of a physical next hop on this gateway node's uplink."""
        self.vsctl("set", "Open_vSwitch", ".", f'external_ids:"loom-nexthop:{ip}"="{mac}"')

    def move_vif(self, name: str, to: OvsNode) -> Vif:
        """Move VIF `name` and its VM to node `to` (netdev: the VM's veth goes to the other
        node's namespace; the VM keeps its namespace, addresses and sockets), as a VM's
        live migration looks to the network: gone here, then there."""
        assert self.datapath == to.datapath == "netdev", "moving a VM needs netdev nodes"
        vif = self.vifs.pop(name)
        self.vsctl("--if-exists", "del-port", "br-int", name)
        _run(["ip", "-n", self.netns, "link", "set", name, "netns", to.netns])
        _run(["ip", "-n", to.netns, "link", "set", name, "up"])
        to.vsctl(
            "--may-exist", "add-br", "br-int", "--", "set", "Bridge", "br-int",
            "fail-mode=secure", "datapath_type=netdev", "--", "add-port", "br-int", name,
            "--", "set", "Interface", name, f"external_ids:iface-id={vif.iface_id}",
            f"external_ids:attached-mac={vif.mac}", "external_ids:iface-status=active",
        )  # fmt: skip
        to.vifs[name] = vif
        return vif

    def remove_vif(self, name: str) -> None:
        """Unplug VIF `name` (a VM leaving the node)."""
        self.vsctl("--if-exists", "del-port", "br-int", name)
        vif = self.vifs.pop(name, None)
        if vif is not None and vif.netns is not None:
            _run(["ip", "netns", "del", vif.netns], check=False)

    def receive(self, vif: str, packet: str) -> None:
        """Inject a packet (an ODP flow or hex) as if VM `vif` sent it (dummy nodes)."""
        self.appctl("netdev-dummy/receive", vif, packet)

    def tx_packets(self, port: str, bridge: str = "br-int") -> int:
        """Packets OVS has sent out of `port` (live OpenFlow port counters)."""
        ofport = self.vsctl("get", "Interface", port, "ofport").strip()
        text = self.ofctl("dump-ports", ofport, bridge=bridge)
        found = re.search(r"tx pkts=(\d+)", text)
        if found is None:
            raise SandboxError(detail=f"no tx counter for {port}: {text}")
        return int(found.group(1))

    def flow_ages(self, bridge: str = "br-int") -> dict[str, float]:
        """Each flow of `bridge` (as dump-flows prints it, without counters) -> its age in
        seconds: a flow deleted and added again is younger than before."""
        ages = {}
        for line in self.ofctl("dump-flows", bridge=bridge).splitlines():
            duration = re.search(r"duration=([\d.]+)s", line)
            if duration is not None:
                flow = re.sub(r"(duration|n_packets|n_bytes|idle_age|hard_age)=[^,]*, ?", "", line)
                ages[flow.strip()] = float(duration.group(1))
        return ages

    def stop(self) -> None:
        """Stop both daemons (and remove the node's VM namespaces)."""
        if self.vswitchd.running:
            _run([tool("ovs-appctl"), "-t", str(self.ctl), "exit", "--cleanup"], check=False)
        self.vswitchd.stop()
        self.db.stop()
        for vif in self.vifs.values():
            if vif.netns is not None:
                _run(["ip", "netns", "del", vif.netns], check=False)


def _make_vm(node_netns: str, vif: Vif) -> None:
    """A VM namespace whose `eth0` is a veth to `vif.name` in the node's namespace."""
    assert vif.netns is not None
    _run(["ip", "netns", "add", vif.netns])
    _run(["ip", "link", "add", vif.name, "netns", node_netns, "type", "veth",
          "peer", "name", "eth0", "netns", vif.netns])  # fmt: skip
    _run(["ip", "-n", node_netns, "link", "set", vif.name, "up"])
    vm = ["ip", "-n", vif.netns]
    _run([*vm, "link", "set", "eth0", "address", vif.mac])
    _run(["ip", "netns", "exec", vif.netns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
    _run([*vm, "link", "set", "eth0", "mtu", "1400"])
    _run([*vm, "link", "set", "eth0", "up"])
    _run([*vm, "link", "set", "lo", "up"])
    if vif.ip is not None:
        _run([*vm, "addr", "add", vif.ip, "dev", "eth0"])
    if vif.gateway is not None:
        _run([*vm, "route", "add", "default", "via", vif.gateway])
    ethtool = shutil.which("ethtool") or "/usr/sbin/ethtool"
    _run(["ip", "netns", "exec", vif.netns, ethtool, "-K", "eth0", "tx", "off"])


def namespace_tag(root: Path) -> str:
    """The prefix of the network namespaces of the sandbox whose nodes live under `root`
    (from its directory: two sandboxes never share one)."""
    return f"l{zlib.crc32(str(root.resolve()).encode()):08x}"


class Sandbox:
    """N simulated transport nodes on one underlay; a context manager that stops them."""

    def __init__(self, root: Path, *, datapath: str = "dummy", pki: Pki | None = None) -> None:
        """Describe an empty sandbox under `root`; `add_node` starts nodes.

        Args:
            root: every node's run directory is `root/<system-id>`.
            datapath: `dummy` (default) or `netdev` (root; namespaces and veths).
            pki: with it, every node gets a certificate naming its system-id and dials its
                `ssl:` managers with it, trusting the controllers' authority.
        """
        if datapath not in ("dummy", "netdev"):
            raise SandboxError(detail=f"datapath must be dummy or netdev, not {datapath!r}")
        self.root = root.resolve()
        self.datapath = datapath
        self.tag = namespace_tag(self.root)
        """Prefix of this sandbox's network namespaces."""
        self.pki = pki
        self.nodes: dict[str, OvsNode] = {}
        self.net: OvsNode | None = None
        """The dummy underlay's switch (dummy sandboxes)."""
        self._netns: list[str] = []

    def _underlay(self) -> None:
        if self.datapath == "dummy":
            if self.net is None:
                self.net = OvsNode(self.root, "underlay", index=0)  # stop() finds it if
                self.net.start()  # starting fails half-way
                self.net.vsctl("add-br", "n1")
            return
        if self.underlay_netns not in self._netns:
            _run(["ip", "netns", "add", self.underlay_netns])
            self._netns.append(self.underlay_netns)
            ul = ["ip", "-n", self.underlay_netns]
            _run([*ul, "link", "add", "ul-br", "type", "bridge"])
            _run([*ul, "link", "set", "ul-br", "up"])

    def add_node(self, system_id: str, managers: Iterable[str] = ()) -> OvsNode:
        """Start node `system_id`, wired to the underlay, pointed at `managers`."""
        self._underlay()
        node = OvsNode(
            self.root, system_id, index=len(self.nodes) + 1, datapath=self.datapath, tag=self.tag
        )
        if self.pki is not None and self.datapath == "dummy":
            # (a netdev node's ovs-vswitchd lives in the node's namespace, whose loopback the
            # controller cannot reach: its OpenFlow stays on the management socket)
            node.openflow_address = f"ssl:127.0.0.1:{free_port()}"
        self.nodes[system_id] = node
        if self.datapath == "netdev":
            _run(["ip", "netns", "add", node.netns])
            self._netns.append(node.netns)
            _run(["ip", "-n", node.netns, "link", "set", "lo", "up"])
        if self.pki is None:
            node.start(managers)
        else:  # its certificate before its managers
            node.start()
            mine = self.pki.issue(system_id, "switch")
            node.set_ssl(mine.private_key, mine.certificate, mine.peer_ca)
            node.set_managers(managers)
        self._wire(node)
        return node

    def _wire(self, node: OvsNode) -> None:
        """Connect `node`'s `br-phy` to the underlay and give it its address and neighbours."""
        hwaddr = underlay_mac(node.index)
        if self.datapath == "dummy":
            assert self.net is not None
            sock = self.net.run_dir / f"{node.system_id}.sock"
            self.net.vsctl("add-port", "n1", node.system_id, "--", "set", "Interface",
                           node.system_id, f"options:pstream=punix:{sock}")  # fmt: skip
            node.vsctl(
                "add-br", "br-phy", "--", "set", "Bridge", "br-phy",
                f'other-config:hwaddr="{hwaddr}"',
                "--", "add-port", "br-phy", "br-phy_n1", "--", "set", "Interface",
                "br-phy_n1", f"options:stream=unix:{sock}",
            )  # fmt: skip
            node.appctl("netdev-dummy/ip4addr", "br-phy", f"{node.encap_ip}/16")
        else:
            veth = f"ul{node.index}"
            _run(["ip", "link", "add", veth, "netns", self.underlay_netns, "mtu", "9000", "type",
                  "veth", "peer", "name", "eth1", "netns", node.netns, "mtu", "9000"])  # fmt: skip
            _run(["ip", "-n", self.underlay_netns, "link", "set", veth, "master", "ul-br", "up"])
            _run(["ip", "-n", node.netns, "link", "set", "eth1", "up"])
            node.vsctl(
                "add-br", "br-phy", "--", "set", "Bridge", "br-phy", "datapath_type=netdev",
                f'other-config:hwaddr="{hwaddr}"', "--", "add-port", "br-phy", "eth1",
            )  # fmt: skip
            _run(["ip", "-n", node.netns, "addr", "add", f"{node.encap_ip}/16", "dev", "br-phy"])
            _run(["ip", "-n", node.netns, "link", "set", "br-phy", "up"])
        _add_route(node, f"{node.encap_ip}/16", "br-phy")
        # Static underlay neighbours: nothing answers ARP on the dummy underlay, and on the
        # netdev one the first packet to a new peer would be dropped while OVS resolves it.
        for other in self.nodes.values():
            if other is node:
                continue
            other.appctl("tnl/neigh/set", "br-phy", node.encap_ip, hwaddr)
            node.appctl("tnl/neigh/set", "br-phy", other.encap_ip, underlay_mac(other.index))

    def restart_vswitchd(self, node: OvsNode, timeout: float = 30.0) -> None:
        """Start `node`'s ovs-vswitchd again after it died (`node.vswitchd.kill9()`: a crash;
        an OVS upgrade stops and starts it the same way), then give its underlay what a
        host's network configuration gives it when OVS starts: `br-phy`'s address (on the
        netdev datapath a new tap device), the route, the neighbours. The node's OVSDB is
        untouched (what Loom wrote there stays); its OpenFlow tables start empty."""
        node.vswitchd.stop()  # (reaped; what a crash left of its sockets goes below)
        node.ctl.unlink(missing_ok=True)
        node.vswitchd.start(ready=node.ctl.exists, timeout=timeout)
        if self.datapath == "dummy":
            node.appctl("netdev-dummy/ip4addr", "br-phy", f"{node.encap_ip}/16")
        else:
            deadline = time.monotonic() + timeout
            link = ["ip", "-n", node.netns, "link", "show", "br-phy"]
            while subprocess.run(link, capture_output=True, check=False).returncode != 0:
                if time.monotonic() > deadline:
                    raise SandboxError(detail=f"{node.system_id}: no br-phy after a restart")
                time.sleep(0.02)  # (ovs-vswitchd makes the tap device when it has read its DB)
            # (`replace`: the tap device may have outlived the crash, its address with it)
            _run(["ip", "-n", node.netns, "addr", "replace", f"{node.encap_ip}/16", "dev",
                  "br-phy"])  # fmt: skip
            _run(["ip", "-n", node.netns, "link", "set", "br-phy", "up"])
        _add_route(node, f"{node.encap_ip}/16", "br-phy")
        for other in self.nodes.values():
            if other is not node:
                node.appctl("tnl/neigh/set", "br-phy", other.encap_ip, underlay_mac(other.index))

    @property
    def underlay_netns(self) -> str:
        """The netdev underlay's namespace (a Linux bridge)."""
        return f"{self.tag}-ul"

    def stop(self) -> None:
        """Stop every node, the underlay, and remove the namespaces created."""
        for node in reversed(list(self.nodes.values())):
            node.stop()
        if self.net is not None:
            self.net.stop()
        for netns in reversed(self._netns):
            _run(["ip", "netns", "del", netns], check=False)
        self._netns.clear()

    def __iter__(self) -> Iterator[OvsNode]:
        return iter(self.nodes.values())

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def wait_for_packets(node: OvsNode, port: str, count: int, timeout: float = 10.0) -> int:
    """Wait until `count` packets have left `port` of `node`; return the count seen."""
    deadline = time.monotonic() + timeout
    seen = node.tx_packets(port)
    while seen < count and time.monotonic() < deadline:
        time.sleep(0.02)
        seen = node.tx_packets(port)
    return seen
