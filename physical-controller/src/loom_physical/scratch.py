"""The scratch switch a physical controller traces packets on (`loom_physical.trace`).

One `ovsdb-server` + `ovs-vswitchd` on the dummy datapath, private to the controller: no
manager, no controller, no packet ever forwarded — only `ofproto/trace`. It is started on
the first trace (most controllers never trace), from the one thread that runs every trace
(`Tracer`): its daemons die with that thread (`PR_SET_PDEATHSIG`), so a controller killed
with `kill -9` leaves none behind, and traces never overlap on it.

Each trace makes `br-int` anew with the table's ports at their ofports (one `ovs-vsctl`
transaction), loads the flows in one bundle (the Geneve option Loom's tunnels carry is
mapped once, when ovs-vswitchd starts), and runs `ofproto/trace` (with `--ct-next` for what
conntrack is to answer).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from loom_common.ovsdb import tool
from loom_common.procs import DaemonError
from loom_ovs.openflow import GENEVE_TLV
from loom_ovs.sandbox import OvsNode, SandboxError
from loom_physical.trace import ScratchPort, Table

T = TypeVar("T")
log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
"""The longest one OVS command of a trace may take."""
TUNNEL_UDP_FROM = 10000
"""The scratch switch's tunnel ports' UDP ports, one each from this one on (`_ports`)."""


class ScratchError(Exception):
    """OVS refused what a trace asked of the scratch switch."""


class ScratchDown(Exception):
    """The scratch switch could not start, or a trace could not be run on it now."""


class Scratch:
    """The scratch switch (see the module docstring). Use from one thread (`Tracer`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.node: OvsNode | None = None
        self._mapped = False
        """The Geneve option is mapped (once per ovs-vswitchd: it outlives the bridge)."""

    def _started(self) -> OvsNode:
        """The scratch switch, started if it is not running.

        Raises:
            ScratchDown: it could not start.
        """
        if self.node is None or not self.node.running:
            if self.node is not None:
                self.node.stop()
            self.node = None
            node = OvsNode(self.root, "trace", 0, private=True)
            try:
                self.node, self._mapped = node.start(), False
            except (DaemonError, SandboxError, OSError) as exc:
                raise ScratchDown(f"the scratch switch did not start: {exc}") from None
        return self.node

    def trace(
        self, table: Table, flow: str, ct: Sequence[str] = ()
    ) -> tuple[str, dict[int, ScratchPort]]:
        """Load `table` and trace `flow` (with `in_port`) through it: the trace's text, and
        datapath port number -> the scratch port it is (to read the datapath actions).

        Raises:
            ScratchError: OVS refused the ports, the flows or the packet.
            ScratchDown: the scratch switch could not start.
        """
        node = self._started()
        self._ports(node, table.ports)
        # A tunnel's packet as the kernel datapath would get it (`set(tunnel(...)),PORT`,
        # which says the destination): the scratch switch has no underlay to route a
        # native tunnel push over (and the datapath is made anew with the bridge).
        self._run([tool("ovs-appctl"), "-t", str(node.ctl), "dpif/set-dp-features", "br-int",
                   "tnl_push_pop", "false"], "the datapath's features")  # fmt: skip
        if not self._mapped:
            self._run([tool("ovs-ofctl"), "-O", "OpenFlow15", "add-tlv-map", node.openflow,
                       GENEVE_TLV], "the Geneve option map")  # fmt: skip
            self._mapped = True
        flows = "".join(f"{line}\n" for line in table.flows)
        self._run([tool("ovs-ofctl"), "-O", "OpenFlow15", "--bundle", "replace-flows",
                   node.openflow, "/dev/stdin"], "the flows", stdin=flows)  # fmt: skip
        argv = [tool("ovs-appctl"), "-t", str(node.ctl), "ofproto/trace"]
        for state in ct:
            argv += ["--ct-next", state]
        text = self._run([*argv, "br-int", flow], "the packet")
        show = self._run([tool("ovs-appctl"), "-t", str(node.ctl), "dpif/show"], "the ports")
        by_name = {p.name: p for p in table.ports}
        dp_ports = {}
        for line in show.splitlines():
            m = re.match(r"\s+(\S+) (\d+)/(\d+):", line)
            if m and m.group(1) in by_name:
                dp_ports[int(m.group(3))] = by_name[m.group(1)]
        return text, dp_ports

    def _ports(self, node: OvsNode, ports: Sequence[ScratchPort]) -> None:
        """`br-int` anew with exactly `ports`, in one transaction."""
        args = ["--if-exists", "del-br", "br-int", "--", "add-br", "br-int", "--", "set",
                "Bridge", "br-int", "fail_mode=secure", "protocols=OpenFlow15"]  # fmt: skip
        # OVS's userspace datapath has one port per tunnel type and UDP port, which every
        # tunnel port of that type shares (a node's flow-based port and its BFD ports alike):
        # each gets a UDP port of its own here, so the datapath actions say which one the
        # flow output to.
        udp = iter(range(TUNNEL_UDP_FROM, TUNNEL_UDP_FROM + len(ports)))
        for p in ports:
            args += ["--", "add-port", "br-int", p.name, "--", "set", "Interface", p.name,
                     f"type={p.type}", f"ofport_request={p.ofport}"]  # fmt: skip
            options = dict(p.options)
            if p.role == "tunnel":
                options["dst_port"] = str(next(udp))
            args += [f"options:{k}={v}" for k, v in sorted(options.items())]
        try:
            node.vsctl(*args)
        except SandboxError as exc:  # (what ovs-vsctl said)
            raise ScratchError(f"the ports: {self._said(str(exc))}") from None

    def _run(self, argv: list[str], what: str, stdin: str | None = None) -> str:
        """Run an OVS tool; its output.

        Raises:
            ScratchError: it failed or took over `TIMEOUT_S` (what it said, without the
                scratch switch's paths).
        """
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                                  timeout=TIMEOUT_S, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise ScratchError(f"{what}: no answer in {TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            raise ScratchError(f"{what}: {self._said(done.stderr or done.stdout)}")
        return done.stdout

    def _said(self, text: str) -> str:
        """An OVS tool's complaint, without the lines that name the scratch switch's files."""
        lines = [line for line in text.strip().splitlines() if str(self.root) not in line]
        return " ".join(lines)[:1000] or "refused"

    def stop(self) -> None:
        """Stop the daemons and remove their files."""
        if self.node is not None:
            self.node.stop()
            self.node = None
        shutil.rmtree(self.root, ignore_errors=True)


PREFIX = "loom-trace-"
"""A scratch switch's directory in the temporary directory (`mkdtemp`: mode 0700): this
prefix, the PID of the process it is private to, a dash and a random part."""


def _sweep() -> None:
    """Remove the scratch directories of processes that are gone (killed: their daemons died
    with them, their files did not)."""
    for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        pid = path.name.removeprefix(PREFIX).partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:  # (alive, another user's)
            pass


class Tracer:
    """Runs traces one at a time on a thread of their own, which owns the scratch switch
    (started on the first trace, stopped by `stop`). One trace runs and one more may wait;
    a third is refused (`ScratchDown`), so a burst of requests queues no work."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="loom-trace")
        self._scratch: Scratch | None = None
        self._slots = threading.Semaphore(2)
        self._futures: set[concurrent.futures.Future[Any]] = set()
        """The traces submitted and not done."""

    def run(self, work: Callable[[Scratch], T], timeout: float) -> T:
        """`work(scratch)` on the trace thread; its result (or its exception).

        Raises:
            ScratchDown: two traces are running or waiting already, or the tracer stopped.
            TimeoutError: it did not finish within `timeout` seconds (it is cancelled if it
                has not started).
        """
        if not self._slots.acquire(blocking=False):
            raise ScratchDown("busy: a trace is running and another waits")
        try:
            future = self._pool.submit(self._with_scratch, work)
        except RuntimeError:  # (shut down)
            self._slots.release()
            raise ScratchDown("the controller is stopping") from None
        self._futures.add(future)

        def done(_: concurrent.futures.Future[T]) -> None:
            self._futures.discard(future)
            self._slots.release()

        future.add_done_callback(done)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def _with_scratch(self, work: Callable[[Scratch], T]) -> T:
        if self._scratch is None:
            _sweep()
            root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
            self._scratch = Scratch(root)
        return work(self._scratch)

    def stop(self) -> None:
        """Stop the scratch switch (on the trace thread, which started it, after the trace
        running if any; waiting ones are cancelled) and the thread."""

        def stop_scratch() -> None:
            if self._scratch is not None:
                self._scratch.stop()
                self._scratch = None

        for future in list(self._futures):
            future.cancel()  # (a waiting trace; the running one finishes)
        stopping = self._pool.submit(stop_scratch)
        self._pool.shutdown(wait=False)
        try:
            stopping.result(TIMEOUT_S * 2)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            log.warning("the scratch switch did not stop in time (its daemons end with us)")
