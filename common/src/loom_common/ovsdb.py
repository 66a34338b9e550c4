"""Deploying ovsdb-server for one of Loom's databases: standalone, or a 3-member RAFT cluster.

`OvsdbServer` runs one ovsdb-server on one database file: it creates the file from the schema
(`ovsdb-tool create`), converts an existing file when the schema changed (`ovsdb-tool
needs-conversion` / `convert`), and serves it on a loopback TCP port and a unix socket.
`OvsdbCluster` creates a RAFT cluster (`ovsdb-tool create-cluster` for the first member,
`join-cluster` for the others) and runs one `OvsdbServer` per member; clients connect to all
members (`tcp:A,tcp:B,tcp:C`) and the IDL follows the leader.

Servers are supervised children (`loom_common.procs.Daemon`), not `--detach`ed daemons: they
stop with their owner, and kill -9 / restart of one member is a method call.

Health (`OvsdbServer.health`, what `loom_common.supervise` asks every second): a server can
run and not serve. What ovsdb-server 3.1 does when its disk fills (measured on a small
tmpfs, `tests/test_full_disk.py`):

- standalone: a transaction that cannot be written fails with an `I/O error` (`io-error`:
  "No space left on device"); the log is truncated back to its last whole record, so the
  file stays readable, and once space returns the next transaction is written: the server
  recovers by itself, and a restart would not make it writable sooner. Its check is that it
  answers and still serves its database (`ovsdb-server/list-dbs`).
- a RAFT member: one that cannot append to its log enters failure mode for good
  (`cluster/status` says `Status: failed`; it logs `entering failure mode due to I/O
  error`), and one whose storage reports the error closes its database (`cluster/status`
  answers `unknown cluster`, `list-dbs` no longer lists it) while the process runs on. A
  leader fails first, the member elected next fails at its first append, the last stays a
  candidate until it fails too: the cluster has no leader, and none of this ends when space
  returns. Restarted, a member mostly reads its own log (a write that failed was truncated
  away) and rejoins, with every transaction acknowledged before the disk filled. But a
  member's log can be torn: a record of its commit index written after the entry it
  points to failed (`error reading record N ...: record N advances commit index to X but
  last log index is Y`); such a member exits at once on every start. It is mended as
  ovsdb(7) says for a member whose storage is lost: its file kept aside, a new one made by
  `ovsdb-tool join-cluster` to the others, its old server ID removed by `cluster/kick`
  (`OvsdbServer._rejoin`, when a start fails so). A member restarted while the disk is
  still full serves for a moment, then closes its database again at its first write; so
  the check holds a restart (`Verdict` `hold`) while the member's filesystem has less free
  than its database file takes (at least `MIN_FREE_BYTES`).

The API cannot tell a clustered full disk from an election: the members only say they are
not connected to their cluster, so it answers 503 `database_unavailable`; a standalone
server's `I/O error` it answers 503 `storage_full`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import select
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid as uuidlib
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from loom_common.errors import LoomError
from loom_common.pki import Credentials, client_context
from loom_common.procs import Daemon, DaemonError, listens_on
from loom_common.supervise import HEALTHY, Verdict


class OvsdbError(LoomError):
    """An ovsdb-tool or ovsdb-server step failed."""

    message = "%(detail)s"


def reachable(host: str) -> str:
    """The address this host's clients reach a listener on `host` by (a wildcard listener:
    loopback)."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""The kernel's range of local ports for outgoing connections and `bind(port 0)`."""

_given: set[int] = set()
"""Ports this process has handed out: never handed out twice."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago; see `free_ports`."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """Return `count` distinct TCP ports on 127.0.0.1 for listeners to bind, free a moment ago.

    The ports lie below the kernel's ephemeral range, so no outgoing connection takes one as
    its local port between this choice and the listener's bind (a port from `bind(port 0)`
    could: CI's api-server once failed with EADDRINUSE while the site's other daemons were
    connecting). Each is checked by binding it, all are held until every one is chosen, and
    none is handed out twice by this process.
    """
    low = _ephemeral_low()
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(100 * count + 1000):
            if len(ports) == count:
                break
            port = random.randrange(1024, low)
            if port in _given or port in ports:
                continue
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            ports.append(port)
        if len(ports) == count:
            _given.update(ports)
            return ports
    raise OvsdbError(detail=f"no {count} free TCP ports found on 127.0.0.1 below {low}")


def _ephemeral_low() -> int:
    """The lowest ephemeral port (32768 where the kernel does not say; at least 2048)."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, 2048)


def tool(name: str) -> str:
    """Return the path of an OVS tool (`ovsdb-tool`, `ovsdb-server`, ...).

    Raises:
        OvsdbError: it is not installed (Debian package `openvswitch-switch`).
    """
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if path is None:
        raise OvsdbError(detail=f"{name} not found: apt-get install openvswitch-switch")
    return path


def _run(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise OvsdbError(detail=f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def schema_name(schema: Path) -> str:
    """Return the database name a schema file declares."""
    name: str = json.loads(schema.read_text())["name"]
    return name


TORN_LOG = "ovsdb error: error reading record"
"""What ovsdb-server says, exiting, about a log it cannot read to its end."""
MIN_FREE_BYTES = 1 << 20
"""The least free space on its filesystem for an unhealthy server to be restarted."""


def health_verdict(
    db_name: str,
    *,
    clustered: bool,
    output: str | None,
    error: str | None,
    free: int,
    needed: int,
) -> Verdict:
    """Judge a server from what `ovs-appctl` answered (see the module docstring).

    Args:
        db_name: the database it serves.
        clustered: it is a RAFT member (`output` is `cluster/status DB`'s), else
            `output` is `ovsdb-server/list-dbs`'s.
        output: the command's output; None if it failed or got no answer.
        error: the command's error; None if it succeeded or got no answer.
        free: bytes free on the filesystem of its files.
        needed: bytes that must be free for a restart to help.

    Returns:
        The verdict: `fault` for a member in failure mode or a server that no longer
        serves its database (`hold` while its filesystem lacks `needed` bytes),
        `unanswered` when the command got no answer, else healthy.
    """
    fault = ""
    if output is None:
        if error is None or "unknown cluster" not in error:
            return Verdict("unanswered", f"ovs-appctl: {error or 'no answer in time'}")
        fault = "its database is closed: cluster/status says unknown cluster"
    elif clustered:
        status = re.search(r"^Status: (.*)$", output, re.MULTILINE)
        if status is not None and status.group(1).strip() == "failed":
            fault = "in failure mode after an I/O error: cluster/status says Status: failed"
    elif db_name not in output.split():
        fault = f"it no longer serves {db_name}"
    if not fault:
        return HEALTHY
    if free < needed:
        return Verdict("hold", f"{fault}; {free} bytes free on its filesystem, "
                               f"a restart waits for {needed}")  # fmt: skip
    return Verdict("fault", fault)


def check_server(
    ctl_path: Path, db_name: str, *, clustered: bool, db_path: Path, timeout: float = 2.0
) -> Verdict:
    """Ask a running ovsdb-server how it is: one `ovs-appctl` (`cluster/status DB` for a RAFT
    member, `ovsdb-server/list-dbs` otherwise) within about `timeout` seconds, judged by
    `health_verdict` with the free space beside `db_path`."""
    command = ("cluster/status", db_name) if clustered else ("ovsdb-server/list-dbs",)
    output = error = None
    try:
        result = subprocess.run(
            [tool("ovs-appctl"), f"--timeout={max(1, math.ceil(timeout))}", "-t", str(ctl_path),
             *command],
            capture_output=True, text=True, timeout=timeout + 1.0, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pass
    else:
        lines = result.stderr.strip().splitlines()
        if result.returncode == 0:
            output = result.stdout
        else:
            error = lines[0] if lines else f"exit status {result.returncode}"
    try:
        free = shutil.disk_usage(db_path.parent).free
        needed = max(MIN_FREE_BYTES, db_path.stat().st_size)
    except OSError:
        free, needed = 0, MIN_FREE_BYTES
    return health_verdict(db_name, clustered=clustered, output=output, error=error, free=free,
                          needed=needed)  # fmt: skip


@dataclass(frozen=True)
class ClusterRole:
    """How a member's database file is made: create the cluster, or join `leader_raft`."""

    raft_port: int
    leader_raft: int | None = None
    peers: tuple[int, ...] = ()
    """The other members' RAFT ports: a member whose log is torn joins them again."""


class OvsdbServer:
    """One ovsdb-server process serving one database file on 127.0.0.1 and a unix socket.

    With `tls` its TCP port takes only TLS (`pssl:`): a client presents a certificate signed
    by the authority `tls.peer_ca` names (Loom's controllers' — `loom_common.pki`), and
    a RAFT member speaks TLS to the others; the unix socket is for the processes of this
    host.
    """

    def __init__(
        self,
        state_dir: Path,
        schema: Path,
        *,
        name: str = "config",
        port: int | None = None,
        cluster: ClusterRole | None = None,
        remotes: tuple[str, ...] = (),
        options: tuple[str, ...] = (),
        tls: Credentials | None = None,
        host: str = "127.0.0.1",
        die_with_parent: bool = False,
        tcp: bool = True,
    ) -> None:
        """Describe the server; `start()` creates the database if needed and runs it.

        Args:
            state_dir: directory of the database file, socket, control socket and log.
            schema: the `.ovsschema` file.
            name: base name of the files (`<name>.db`, `<name>.sock`, ...).
            port: loopback TCP port for clients (default: a free one, kept across restarts).
            cluster: set for a RAFT member.
            remotes: further `--remote` options (an OVS node's database names its
                manager targets: `db:Open_vSwitch,Open_vSwitch,manager_options`).
            options: further command-line options (an OVS node's SSL settings, read from
                its database: `--private-key=db:Open_vSwitch,SSL,private_key`, ...).
            tls: the server's key and certificate, and the authority its TCP clients'
                certificates must be signed by: its TCP port is then `pssl:`.
            host: the address its TCP port listens on (`0.0.0.0`: every address).
            die_with_parent: killed when the thread that starts it ends (`Daemon`).
            tcp: listen on the TCP port too (False: the unix socket only, for a database
                private to one process).
        """
        self.state_dir = state_dir
        self.schema = schema
        self.db_name = schema_name(schema)
        self.name = name
        self.port = port or free_port()
        self.cluster = cluster
        self.remotes = remotes
        self.options = options
        self.tls = tls
        self.host = host
        self.die_with_parent = die_with_parent
        self.tcp = tcp
        self.db_path = state_dir / f"{name}.db"
        self.socket_path = state_dir / f"{name}.sock"
        self.ctl_path = state_dir / f"{name}.ctl"
        self._daemon: Daemon | None = None

    @property
    def remote(self) -> str:
        """The client connection string (loopback TCP: `ssl:` with `tls`)."""
        return f"{'ssl' if self.tls else 'tcp'}:{reachable(self.host)}:{self.port}"

    @property
    def _raft_kind(self) -> str:
        return "ssl" if self.tls else "tcp"

    @property
    def unix_remote(self) -> str:
        """The client connection string over the unix socket. Clients on this machine
        should use it: ovsdb-server sends no inactivity probes over unix sockets, so a
        client that reads a large database for longer than the TCP probe allows (5 s, then
        5 s more) is not disconnected and made to start over."""
        return f"unix:{self.socket_path}"

    @property
    def log_path(self) -> Path:
        """ovsdb-server's log file (its `--log-file`, and its stdout and stderr)."""
        return self.state_dir / f"{self.name}-ovsdb-server.log"

    @property
    def pid_path(self) -> Path:
        """ovsdb-server's pid file (its `--pidfile`, also written by the supervisor)."""
        return self.state_dir / f"{self.name}-ovsdb-server.pid"

    @property
    def pid(self) -> int | None:
        """The server's PID while it runs."""
        return self._daemon.pid if self._daemon is not None else None

    @property
    def running(self) -> bool:
        """True while the server process runs."""
        return self._daemon is not None and self._daemon.running

    def create_db(self) -> None:
        """Create the database file if missing; convert it if the schema changed.

        A RAFT member's file is made with `create-cluster` (the first member) or
        `join-cluster`. An existing clustered database is not converted here: that is done
        online through the cluster (`ovsdb-client convert`).

        Raises:
            OvsdbError: an `ovsdb-tool` step failed.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        ovsdb_tool = tool("ovsdb-tool")
        if not self.db_path.exists():
            if self.cluster is None:
                _run(ovsdb_tool, "create", str(self.db_path), str(self.schema))
            elif self.cluster.leader_raft is None:
                _run(ovsdb_tool, "create-cluster", str(self.db_path), str(self.schema),
                     f"{self._raft_kind}:127.0.0.1:{self.cluster.raft_port}")  # fmt: skip
            else:
                _run(ovsdb_tool, "join-cluster", str(self.db_path), self.db_name,
                     f"{self._raft_kind}:127.0.0.1:{self.cluster.raft_port}",
                     f"{self._raft_kind}:127.0.0.1:{self.cluster.leader_raft}")  # fmt: skip
        elif self.cluster is None:
            needs = _run(ovsdb_tool, "needs-conversion", str(self.db_path), str(self.schema))
            if needs == "yes":
                _run(ovsdb_tool, "convert", str(self.db_path), str(self.schema))

    def start(self, timeout: float = 30.0) -> OvsdbServer:
        """Create the database if needed, start the server, wait until it serves the database.

        Ready means: the control socket exists, this process listens on its TCP port (not
        another process that took the port meanwhile), and `ovsdb-client list-dbs` over the
        unix socket lists the database.

        Args:
            timeout: seconds to wait for readiness.

        Returns:
            self, serving.

        Raises:
            OvsdbError: creating or converting the database file failed.
            DaemonError: the server exited or was not ready in time (it is stopped then).
        """
        self.create_db()
        command = [
            tool("ovsdb-server"),
            str(self.db_path),
            f"--remote=punix:{self.socket_path}",
            *(
                [f"--remote=p{self.remote.partition(':')[0]}:{self.port}:{self.host}"]
                if self.tcp
                else []
            ),
            *self._tls_options(),
            f"--unixctl={self.ctl_path}",
            f"--log-file={self.log_path}",
            f"--pidfile={self.pid_path}",
            "--no-chdir",
            "-vconsole:off",
            *(f"--remote={remote}" for remote in self.remotes),
            *self.options,
        ]
        self._daemon = Daemon(
            f"{self.name}-ovsdb-server",
            command,
            self.state_dir,
            env={**os.environ, "LD_PRELOAD": str(JEMALLOC)} if JEMALLOC else None,
            log_path=self.log_path,
            pid_path=self.pid_path,
            die_with_parent=self.die_with_parent,
        )
        try:
            self._daemon.start(ready=self._serving, timeout=timeout)
        except DaemonError as exc:
            if self.cluster is None or not self.cluster.peers or TORN_LOG not in str(exc):
                raise
            self._rejoin(timeout)
        return self

    def _rejoin(self, timeout: float) -> None:
        """Make a member whose log cannot be read a new member of its cluster: its file is
        kept aside, a new one joins the others (`ovsdb-tool join-cluster`), and once it is
        in, its old server ID is removed from the cluster (`cluster/kick`), as ovsdb(7)
        says to mend a member whose storage is lost. Safe for what the cluster
        acknowledged: an entry is committed only once a majority has written it, and a torn
        member is one that failed to write."""
        assert self.cluster is not None
        assert self._daemon is not None
        ovsdb_tool = tool("ovsdb-tool")
        old_sid = _run(ovsdb_tool, "db-sid", str(self.db_path))
        self.db_path.rename(self.db_path.with_name(f"{self.db_path.name}.torn-{old_sid}"))
        _run(ovsdb_tool, "join-cluster", str(self.db_path), self.db_name,
             f"{self._raft_kind}:127.0.0.1:{self.cluster.raft_port}",
             *(f"{self._raft_kind}:127.0.0.1:{port}" for port in self.cluster.peers))  # fmt: skip
        self._daemon.start(ready=self._serving, timeout=timeout)

        def kicked() -> bool:
            try:
                status = self.appctl("cluster/status", self.db_name)
                if "Status: cluster member" not in status:
                    return False
                if old_sid[:4] not in status.partition("Servers:")[2]:
                    return True
                self.appctl("cluster/kick", self.db_name, old_sid)
            except OvsdbError:
                return False
            return False

        self._daemon.wait_until(kicked, timeout, what=f"joined again, its old ID {old_sid} "
                                                      "removed from the cluster")  # fmt: skip

    def _tls_options(self) -> list[str]:
        if self.tls is None:
            return []
        return [f"--private-key={self.tls.private_key}", f"--certificate={self.tls.certificate}",
                f"--ca-cert={self.tls.peer_ca}"]  # fmt: skip

    def _serving(self) -> bool:
        pid = self.pid
        if pid is None or not self.ctl_path.exists():
            return False
        if self.tcp and not listens_on(pid, self.port):
            return False
        result = subprocess.run(
            [tool("ovsdb-client"), "--timeout=2", "list-dbs", self.unix_remote],
            capture_output=True,
            text=True,
            check=False,
        )
        return result.returncode == 0 and self.db_name in result.stdout.split()

    def wait_until(self, predicate: Callable[[], bool], timeout: float, *, what: str) -> None:
        """Poll `predicate` until it holds (see `Daemon.wait_until`).

        Raises:
            DaemonError: the server is not running, exited, or `timeout` passed.
        """
        if self._daemon is None:
            raise DaemonError(name=f"{self.name}-ovsdb-server", detail="never started")
        self._daemon.wait_until(predicate, timeout, what=what)

    def appctl(self, *command: str) -> str:
        """Run `ovs-appctl -t <ctl> COMMAND...` against this server; return its output."""
        return _run(tool("ovs-appctl"), "-t", str(self.ctl_path), *command)

    def health(self, timeout: float = 2.0) -> Verdict:
        """Check that it serves its database, and a RAFT member that it is not in failure
        mode (`check_server`), within about `timeout` seconds."""
        return check_server(self.ctl_path, self.db_name, clustered=self.cluster is not None,
                            db_path=self.db_path, timeout=timeout)  # fmt: skip

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        if self._daemon is not None:
            self._daemon.stop()

    def kill9(self) -> None:
        """Kill the server with SIGKILL, as a crash would."""
        if self._daemon is not None:
            self._daemon.kill9()

    def restart(self, timeout: float = 30.0) -> OvsdbServer:
        """Start again on the same database file and port (after stop() or kill9())."""
        self.stop()
        return self.start(timeout)

    def db_size(self) -> int:
        """Return the size of the database file in bytes."""
        return self.db_path.stat().st_size

    def compact(self) -> None:
        """Ask the server to compact its database file now."""
        self.appctl("ovsdb-server/compact")

    def __enter__(self) -> OvsdbServer:
        return self.start() if not self.running else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class OvsdbCluster:
    """A RAFT cluster of `size` ovsdb-server members of one database, all on loopback."""

    def __init__(
        self,
        state_dir: Path,
        schema: Path,
        *,
        size: int = 3,
        name: str = "config",
        tls: Credentials | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """Describe the cluster; `start()` creates the members' files and runs them.

        Args:
            state_dir: member `i` lives in `state_dir/member<i>`.
            schema: the `.ovsschema` file.
            size: number of members (3 tolerates the loss of one).
            name: base name of each member's files.
            tls: the members' credentials: clients' TCP and the members' RAFT traffic are
                then TLS (`OvsdbServer`).
            host: the address the members' client ports listen on.

        Raises:
            ValueError: `size` is less than 1.
        """
        if size < 1:
            raise ValueError("a cluster needs at least one member")
        ports = free_ports(2 * size)
        raft, client = ports[:size], ports[size:]
        self.members = [
            OvsdbServer(
                state_dir / f"member{i}",
                schema,
                name=name,
                port=client[i],
                cluster=ClusterRole(
                    raft_port=raft[i],
                    leader_raft=None if i == 0 else raft[0],
                    peers=tuple(p for p in raft if p != raft[i]),
                ),
                tls=tls,
                host=host,
            )
            for i in range(size)
        ]
        self.db_name = schema_name(schema)

    @property
    def remote(self) -> str:
        """The client connection string listing every member."""
        return ",".join(m.remote for m in self.members)

    @property
    def unix_remote(self) -> str:
        """The same over the members' unix sockets (for clients on this machine)."""
        return ",".join(m.unix_remote for m in self.members)

    def start(self, timeout: float = 60.0) -> OvsdbCluster:
        """Start every member and wait until each has joined and sees a leader.

        Raises:
            OvsdbError: creating a member's database file failed.
            DaemonError: a member exited or did not join within `timeout`.
        """
        for member in self.members:
            member.start(timeout)
        for member in self.members:
            self.wait_member(member, timeout)
        return self

    def member_status(self, member: OvsdbServer) -> str:
        """Return `ovs-appctl cluster/status` of one member.

        Raises:
            OvsdbError: the member does not answer.
        """
        return member.appctl("cluster/status", self.db_name)

    def leader(self) -> OvsdbServer | None:
        """Return the running member that reports itself leader, if any."""
        for member in self.members:
            if not member.running:
                continue
            try:
                if "Role: leader" in self.member_status(member):
                    return member
            except OvsdbError:
                continue
        return None

    def restart_member(self, member: OvsdbServer, timeout: float = 60.0) -> None:
        """Restart one member on its existing database file; wait until it has rejoined."""
        member.restart(timeout)
        self.wait_member(member, timeout)

    def wait_member(self, member: OvsdbServer, timeout: float) -> None:
        """Wait until `member` is a cluster member that knows the leader.

        Raises:
            DaemonError: it exited, or did not join within `timeout`.
        """

        def joined() -> bool:
            try:
                status = self.member_status(member)
            except OvsdbError:
                return False
            return "Status: cluster member" in status and "Leader: unknown" not in status

        member.wait_until(joined, timeout, what="joined to the cluster with a leader")

    def stop(self) -> None:
        """Stop every member."""
        for member in self.members:
            member.stop()

    def __enter__(self) -> OvsdbCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class TransactError(OvsdbError):
    """An OVSDB transaction failed (an operation's error, or the connection's)."""


class ConnectionClosed(TransactError):
    """The server closed the connection (it stopped, or a RAFT member left its cluster)."""


JEMALLOC = next(iter(sorted(Path("/usr/lib").glob("*/libjemalloc.so.2"))), None)
"""Debian's jemalloc (`libjemalloc2`), which Loom's ovsdb-servers run with where it is
installed (`make install` installs it). ovsdb-server spends a quarter of a large write in
glibc's malloc; with jemalloc preloaded, writing the full-scale NVP workload's 3.2M
universal flows took 11.6 s of its CPU instead of 16.8 s."""

RECV_SIZE = 1 << 20
QUIET = 0.2
"""Seconds without more data after which a blocked reader tries to parse what it has."""


KEEPALIVE_IDLE = 2.0
"""Seconds a replica's connection may sit unused before its keep-alive thread answers the
server (ovsdb-server probes after 5 s of silence and gives up 5 s later)."""


def _checked(result: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A transaction's results, raising `TransactError` on the first failed operation."""
    for index, op in enumerate(result):
        if isinstance(op, dict) and "error" in op:
            raise TransactError(detail=f"operation {index}: {op}")
    return result


class _Keeper:
    """The thread that keeps idle connections alive (`RawConnection.keep_alive`). One per
    process, started with the first connection; every `TICK` it asks one `epoll` set of
    them which are readable, and reads those its owner has left idle: its cost is the
    connections with something to read, not all (a sweep that read each of 3,000 node
    connections every second, most with nothing to read, held the GIL ~15 ms at a time
    four times a second)."""

    TICK = 0.25
    """Seconds between looks (a probe is answered within `idle` + `TICK` of its coming)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[int, tuple[weakref.ref[RawConnection], float, Callable[[], None]]] = {}
        """Descriptor -> the connection on it, its idle time, its owner's wake."""
        self._epoll: select.epoll | None = None
        self._thread: threading.Thread | None = None

    def add(self, conn: RawConnection, idle: float, wake: Callable[[], None]) -> None:
        """Keep `conn` alive until it closes (or is dropped)."""
        fd = conn.fileno()
        with self._lock:
            if self._epoll is None:
                self._epoll = select.epoll()
            self._kept[fd] = (weakref.ref(conn), idle, wake)
            try:
                self._epoll.register(fd, select.EPOLLIN)
            except FileExistsError:  # (a number reused: the old socket's entry is stale)
                self._epoll.modify(fd, select.EPOLLIN)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ovsdb-keeper",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def _run(self) -> None:
        epoll = self._epoll
        assert epoll is not None
        while True:
            time.sleep(self.TICK)
            for fd, _ in epoll.poll(0):  # readable or closed (a closed socket leaves the set)
                with self._lock:
                    entry = self._kept.get(fd)
                if entry is None:
                    continue
                ref, idle, wake = entry
                conn = ref()
                if conn is not None and conn._keep(idle, wake):
                    continue
                with self._lock:
                    if self._kept.get(fd) is entry:
                        del self._kept[fd]
                        with contextlib.suppress(OSError):
                            epoll.unregister(fd)


_KEEPER = _Keeper()


class RawConnection:
    """A JSON-RPC connection to ovsdb-server: blocking calls, and notifications polled.

    python-ovs's IDL builds a Python object per row and per column and parses JSON in pure
    Python; for 10^4..10^6 rows that costs minutes and gigabytes (measured with
    `loom-logical-bench`). This client speaks the OVSDB protocol (RFC 7047) with `orjson`
    (3-4x the standard library's `json` on a full-scale cold start's 10^2 MB messages),
    answers the server's inactivity probes, and keeps notifications (`update` of a monitor)
    that arrive while it waits for a reply, for `poll()`.
    """

    def __init__(self, remote: str, *, timeout: float = 120.0, db: str | None = None) -> None:
        """Connect to `remote`: `tcp:HOST:PORT` or `unix:PATH`, or the members of a RAFT
        cluster separated by commas.

        Members are tried in turn from a random one (clients spread over the cluster). With
        `db`, a member whose `_Server` database says it is not connected to its cluster is
        passed over, as python-ovs's IDL does: it could serve stale data. `remote` is then
        the member connected to.
        """
        self._setup()
        members = [m.strip() for m in remote.split(",") if m.strip()]
        if not members:
            raise OvsdbError(detail=f"no remote in {remote!r}")
        first = random.randrange(len(members))
        failures = []
        for member in members[first:] + members[:first]:
            try:
                self._sock = _open(member, timeout)
            except OSError as exc:
                failures.append(f"{member}: {exc}")
                continue
            self.remote = member
            if db is None or len(members) == 1 or self._in_cluster(db):
                return
            self._sock.close()
            failures.append(f"{member}: not connected to its cluster")
        raise OvsdbError(detail="cannot connect: " + "; ".join(failures))

    @classmethod
    def accepted(cls, sock: socket.socket, name: str) -> RawConnection:
        """A connection over a socket that is already connected: one a passive OVSDB
        manager accepted from a node's ovsdb-server (the server is then the peer that
        serves, the manager the client). `name` stands for the remote in messages."""
        conn = cls.__new__(cls)
        conn._setup()
        conn._sock = sock
        conn.remote = name
        return conn

    def _setup(self) -> None:
        self._buffer = b""
        """Received bytes not parsed yet (joined), then `_chunks` (not joined yet)."""
        self._chunks: list[bytes] = []
        self._size = 0
        """Bytes in `_buffer` and `_chunks`."""
        self._depth = 0
        """Their "{" minus "}": a message can be complete only when it is 0."""
        self._tried = 0
        """The size at the last failed parse (0 after a success)."""
        self._decoder = json.JSONDecoder()
        self._next_id = 0
        self._waiting: set[int] = set()
        """Ids of requests sent whose replies nobody has taken yet."""
        self._early: dict[int, dict[str, Any]] = {}
        """Replies received while waiting for another, by id."""
        self.notifications: list[dict[str, Any]] = []
        self._lock = threading.RLock()
        """Held by whoever reads or writes the socket: the caller, or the keep-alive thread."""
        self._used = time.monotonic()
        self._closed = threading.Event()

    def _in_cluster(self, db: str) -> bool:
        """False if this server holds `db` as a cluster member cut off from its cluster."""
        try:
            select_op = {"op": "select", "table": "Database", "where": [["name", "==", db]],
                         "columns": ["model", "connected"]}  # fmt: skip
            rows = self.transact("_Server", [select_op])[0]["rows"]
        except (OSError, TransactError):
            return False
        return not rows or rows[0]["model"] != "clustered" or rows[0]["connected"] is True

    def fileno(self) -> int:
        """The socket's descriptor (to wait for notifications with select/poll)."""
        return self._sock.fileno()

    def has_pending(self) -> bool:
        """True if messages were received (during a call) that `poll()` has not returned:
        the socket will not signal them."""
        return bool(self.notifications or self._chunks or self._buffer.strip())

    def call(self, method: str, params: list[Any]) -> Any:
        """Send one request and return its result (raise `TransactError` on an error)."""
        with self._lock:
            self._used = time.monotonic()
            return self._reply(self._request(method, params), method)

    def call_noting(self, method: str, params: list[Any]) -> tuple[Any, list[dict[str, Any]]]:
        """`call`, and the notifications that arrived before its reply (taken: `poll()`
        will not return them; the ones before are exactly those, whoever else pumps)."""
        with self._lock:
            self._used = time.monotonic()
            result = self._reply(self._request(method, params), method)
            before, self.notifications = self.notifications, []
            return result, before

    def _request(self, method: str, params: list[Any]) -> int:
        """Send a request (reading what arrives meanwhile); its id."""
        self._next_id += 1
        self._waiting.add(self._next_id)
        self._send({"method": method, "params": params, "id": self._next_id}, reading=True)
        return self._next_id

    def _reply(self, request_id: int, method: str) -> Any:
        """Wait for the reply to `request_id`; its result (`TransactError` on an error).
        A reply to another request still waited for is kept for it (replies come in order
        from ovsdb-server, but nothing here depends on that); others are stale."""
        self._waiting.discard(request_id)
        message = self._early.pop(request_id, None)
        while message is None:
            received = self._receive(block=True)
            assert received is not None
            if self._handled(received):
                continue
            reply_id = received.get("id")
            if reply_id == request_id:
                message = received
            elif reply_id in self._waiting:
                self._early[reply_id] = received
        if message.get("error") is not None:
            raise TransactError(detail=f"{method}: {message['error']}")
        return message.get("result")

    def poll(self) -> list[dict[str, Any]]:
        """Return the notifications received so far, without waiting."""
        with self._lock:
            self._used = time.monotonic()
            self._pump()
            out, self.notifications = self.notifications, []
            return out

    def _pump(self) -> None:
        """Handle every message that has arrived (answer probes, keep notifications, and
        keep the replies to requests still waited for: `send_transact`'s, while another
        thread pumps)."""
        while (message := self._receive(block=False)) is not None:
            if not self._handled(message) and message.get("id") in self._waiting:
                self._early[message["id"]] = message

    def keep_alive(self, idle: float, wake: Callable[[], None]) -> None:
        """Answer the server's probes while the owner is busy elsewhere.

        ovsdb-server drops a client that leaves its inactivity probe (an `echo`, every 5 s
        on a command-line remote) unanswered for another 5 s; a controller computing a
        large change in the engine does exactly that. The process's keeper thread
        (`_KEEPER`: one for every connection, not one each: a physical controller has a
        connection per node) takes over whenever the connection has not been used for
        `idle` seconds: it answers probes and keeps notifications for `poll()`, calling
        `wake()` when it kept some (the owner may be waiting on the socket, whose bytes
        the keeper has consumed). It lets go at `close()`.
        """
        _KEEPER.add(self, idle, wake)

    def _keep(self, idle: float, wake: Callable[[], None]) -> bool:
        """One look by the keeper (`keep_alive`); False once the connection is done."""
        if self._closed.is_set():
            return False
        if time.monotonic() - self._used < idle or not self._lock.acquire(False):
            return True
        try:
            before = len(self.notifications)
            self._pump()
            kept = len(self.notifications) > before
        except (OSError, OvsdbError):
            return False  # the owner finds out at its next call or poll
        finally:
            self._lock.release()
        if kept:
            wake()
        return True

    def transact(self, db: str, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run one transaction; return its per-operation results, raising on any error."""
        return _checked(self.call("transact", [db, *ops]))

    def send_transact(self, db: str, ops: list[dict[str, Any]]) -> int:
        """Send one transaction without waiting for its outcome; `finish_transact` with the
        id returned waits for it (meanwhile the caller may talk to someone else)."""
        with self._lock:
            self._used = time.monotonic()
            return self._request("transact", [db, *ops])

    def finish_transact(self, request_id: int) -> list[dict[str, Any]]:
        """The outcome of a `send_transact`, as `transact` returns it."""
        with self._lock:
            self._used = time.monotonic()
            return _checked(self._reply(request_id, "transact"))

    def transact_each(
        self, db: str, batches: Iterable[list[dict[str, Any]]], *, window: int = 2
    ) -> Iterator[list[dict[str, Any]]]:
        """Run each batch of `batches` as its own transaction, in order; yield each one's
        results (raising on the first error, as `transact`).

        Up to `window` transactions are in flight (`call_each`): a large write costs about
        the larger of the client's and the server's share, not their sum. Transactions are
        independent: one that fails does not undo those before it.
        """
        params = ([db, *ops] for ops in batches)
        for result in self.call_each("transact", params, window=window):
            yield _checked(result)

    def call_each(
        self, method: str, params: Iterable[list[Any]], *, window: int = 2
    ) -> Iterator[Any]:
        """`call(method, p)` for each `p` of `params`, in order; yield each result (raising
        on the first error). Up to `window` requests are in flight: the next is built (the
        iterable may be lazy) and sent while the server still works on the one before, and
        the server makes the next reply while this side reads the last.
        """
        with self._lock:
            self._used = time.monotonic()
            in_flight: deque[int] = deque()
            try:
                for each in params:
                    in_flight.append(self._request(method, each))
                    while len(in_flight) >= window:
                        yield self._reply(in_flight.popleft(), method)
                while in_flight:
                    yield self._reply(in_flight.popleft(), method)
            finally:  # abandoned (an error): the replies still to come are stale
                self._waiting.difference_update(in_flight)
                for request_id in in_flight:
                    self._early.pop(request_id, None)

    def _handled(self, message: dict[str, Any]) -> bool:
        """Answer a probe or keep a notification; False for a reply."""
        method = message.get("method")
        if method == "echo":
            self._send({"result": message.get("params", []), "error": None,
                        "id": message.get("id")})  # fmt: skip
            return True
        if method is not None:
            self.notifications.append(message)
            return True
        return False

    def _send(self, message: dict[str, Any], *, reading: bool = False) -> None:
        """Send `message`; with `reading`, take in what the server sends meanwhile.

        With requests in flight the server may be writing a large reply while we write:
        it reads no new request until its reply is out (ovsdb-server leaves a client's
        input alone while output to it is queued), so a blocking send could wait forever.
        """
        data = orjson.dumps(message)
        if not reading:
            self._sock.sendall(data)
            return
        view = memoryview(data)
        while view:
            readable, writable = _ready(self._sock, write=True)
            if readable:
                self._take(self._sock.recv(RECV_SIZE))
            if writable:
                view = view[self._sock.send(view) :]

    def _receive(self, *, block: bool) -> dict[str, Any] | None:
        while True:
            # Parse only when a message may be complete: its braces balance (counted per
            # chunk, in C), or after a failed try the bytes doubled (braces inside
            # strings), or nothing more arrives for a while. A reply of 10^6 rows arrives in
            # thousands of chunks; joining and parsing after each one was quadratic
            # (profiled with py-spy on full-scale cold starts, twice).
            if self._depth <= 0 or (self._tried and self._size >= 2 * self._tried):
                message = self._parse()
                if message is not None:
                    return message
            wait = 0.0 if not block else (QUIET if self._size else None)
            if not _ready(self._sock, timeout=wait)[0]:
                if not block:
                    # Nothing more for now: try what is here, once per doubling.
                    if self._size and (not self._tried or self._size >= 2 * self._tried):
                        return self._parse()
                    return None
                message = self._parse()  # nothing more is coming for now: try what is here
                if message is not None:
                    return message
                _ready(self._sock)
            self._take(self._sock.recv(RECV_SIZE))

    def _take(self, chunk: bytes) -> None:
        """Keep received bytes for `_parse`."""
        if not chunk:
            raise ConnectionClosed(detail="connection closed by ovsdb-server")
        self._chunks.append(chunk)
        self._size += len(chunk)
        self._depth += chunk.count(b"{") - chunk.count(b"}")

    def _parse(self) -> dict[str, Any] | None:
        """The first complete message received, if there is one; if not, what is here is
        remembered as tried (`_receive` tries again once it doubles, balances or rests)."""
        if self._chunks:
            self._buffer += b"".join(self._chunks)
            self._chunks = []
        data = self._buffer.lstrip()
        self._buffer = data
        self._tried = self._size = len(data)
        if not data.endswith(b"}"):
            return None
        try:
            message = orjson.loads(data)  # the usual case: exactly one message
            rest = b""
        except orjson.JSONDecodeError as exc:
            # Incomplete, or several messages: the first ends where orjson stopped (its
            # `pos` counts characters: bytes when they are ASCII, as OVSDB's nearly always
            # are). The standard library's decoder was 1/3 of a controller's parsing.
            if data.isascii():
                end = exc.pos
                try:
                    message = orjson.loads(data[:end]) if end < len(data) else None
                except orjson.JSONDecodeError:
                    message = None
                if message is None:
                    return None
                rest = data[end:]
            else:
                text = data.decode("utf-8", errors="surrogateescape")
                try:
                    message, end = self._decoder.raw_decode(text)
                except json.JSONDecodeError:
                    return None
                rest = text[end:].encode("utf-8", errors="surrogateescape")
        self._buffer = rest
        self._size = len(rest)
        self._depth = rest.count(b"{") - rest.count(b"}")
        self._tried = 0
        result: dict[str, Any] = message
        return result

    def close(self) -> None:
        """Close the connection (and stop its keep-alive thread)."""
        self._closed.set()
        self._sock.close()


_client_tls: ssl.SSLContext | None = None


def use_tls(credentials: Credentials | None) -> None:
    """The key, certificate and trusted authority this process's `ssl:` database clients
    use (`RawConnection`, `Replica`; and python-ovs's streams, which the API server's IDL
    uses): set once at start-up, as OVS daemons take `--private-key` and the rest."""
    global _client_tls
    _client_tls = client_context(credentials) if credentials is not None else None
    import ovs.stream

    if credentials is not None:
        ovs.stream.Stream.ssl_set_private_key_file(str(credentials.private_key))
        ovs.stream.Stream.ssl_set_certificate_file(str(credentials.certificate))
        ovs.stream.Stream.ssl_set_ca_cert_file(str(credentials.peer_ca))


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """`--db-private-key`, `--db-certificate`, `--db-ca-cert`: a daemon's credentials for
    databases at `ssl:` remotes (`use_tls`; `tls_from_arguments` checks and applies them)."""
    group = parser.add_argument_group("TLS to the databases (for ssl: remotes)")
    group.add_argument("--db-private-key", metavar="FILE", help="this process's private key")
    group.add_argument("--db-certificate", metavar="FILE", help="its certificate")
    group.add_argument("--db-ca-cert", metavar="FILE",
                       help="the authority the databases' certificates are signed by")  # fmt: skip


def tls_from_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace,
                       *remotes: str) -> None:  # fmt: skip
    """Apply `add_tls_arguments`'s options (`use_tls`); a usage error (exit 2) if they are
    not all given or all absent, or if an `ssl:` remote among `remotes` has none."""
    files = (args.db_private_key, args.db_certificate, args.db_ca_cert)
    if any(files) != all(files):
        parser.error("--db-private-key, --db-certificate and --db-ca-cert go together")
    wants = any(m.strip().startswith("ssl:") for r in remotes for m in r.split(","))
    if wants and not all(files):
        parser.error("an ssl: database remote needs --db-private-key, --db-certificate and "
                     "--db-ca-cert")  # fmt: skip
    if all(files):
        use_tls(Credentials(*(Path(f) for f in files)))


def _open(remote: str, timeout: float) -> socket.socket:
    """A connected socket to one `tcp:HOST:PORT`, `ssl:HOST:PORT` (`use_tls`) or
    `unix:PATH`."""
    kind, _, where = remote.partition(":")
    if kind in ("tcp", "ssl"):
        host, _, port = where.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        if kind == "tcp":
            return sock
        if _client_tls is None:
            sock.close()
            raise OSError(f"{remote}: TLS without credentials (--private-key and the rest)")
        try:
            return _client_tls.wrap_socket(sock)
        except OSError:
            sock.close()
            raise
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(where)
        except OSError:
            sock.close()
            raise
        return sock
    raise OSError(f"unsupported remote {remote!r}")


Change = tuple[str, str, "dict[str, Any] | None"]
"""(table, row uuid, the row's new columns or None when it was deleted)."""


SHORT = 16
"""Strings at most this long are interned in a replica's rows (`compact`)."""
_SHARED: dict[str, list[Any]] = {tag: [tag, []] for tag in ("set", "map")}
"""The empty set and map every replica row shares."""


def compact(row: dict[str, Any]) -> dict[str, Any]:
    """`row` (a monitor's freshly parsed JSON, modified in place) with what many rows hold
    alike shared: every empty set and map one object, the "set" / "map" / "uuid" tags and
    the short strings (names, keys, small values) interned. A replica holds every row of
    its tables as parsed: a physical controller ~1,200 objects for each of the 3,000
    nodes it is connected to, a logical controller every row of the config DB. Rows are
    read, never modified in place (a shared value would change in every row)."""
    for column, value in row.items():
        row[column] = _compact(value)
    return row


def _compact(value: Any) -> Any:
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= SHORT else value
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        tag, inner = value
        if tag in _SHARED:
            if not inner:
                return _SHARED[tag]
            value[0] = _SHARED[tag][0]
            for i, item in enumerate(inner):
                if tag == "map":
                    item[0], item[1] = _compact(item[0]), _compact(item[1])
                else:
                    inner[i] = _compact(item)
        elif tag in ("uuid", "named-uuid"):
            value[0] = sys.intern(tag)
    return value


class Replica:
    """A read-only replica of some tables of one database, kept by an OVSDB `monitor`.

    `rows[table][uuid]` is the row's columns as OVSDB JSON. `start()` (and `restart()` after
    a lost connection) reads the initial contents; `poll()` applies the updates that
    arrived and returns what changed. Writes go through `conn.transact`.

    A table in `unkept` passes through: its changes carry the rows, but the replica keeps
    none of them (no `rows[table]`), for an owner that holds the rows elsewhere — the
    logical controller's engine holds its input rows, and a copy of the config DB as Python
    objects was ~360 MB of its memory at NVP's full scale. After a lost connection
    `start()` reports every such row read again (it cannot compare) and nothing of those no
    longer there: the owner knows what it holds, and `reads` tells it that a read of every
    row began (what it holds that the changes since do not mention is gone).
    """

    def __init__(
        self,
        remote: str,
        db: str,
        tables: dict[str, list[str]],
        *,
        wake: Callable[[], None] | None = None,
        no_inserts: frozenset[str] = frozenset(),
        unkept: frozenset[str] = frozenset(),
        staged: bool = False,
        connect: Callable[[], RawConnection] | None = None,
    ) -> None:
        """Describe the replica: `tables` maps each table to the columns to replicate.

        `connect` makes the connection (default: connect to `remote`); a passive manager
        passes the connection a node opened to it.

        With `wake`, the connection answers the server's probes by itself when the owner
        is busy for long (`RawConnection.keep_alive`) and calls `wake()` when updates
        arrived meanwhile.

        For the tables in `no_inserts` the server sends the rows present when the monitor
        starts, their modifications and deletions, but not rows inserted later: for rows the
        owner inserts itself and already knows (a modification or deletion always carries
        the whole row), whose echo would otherwise come back, row by row, after a large
        write.

        `staged` reads the tables one at a time (`_read_staged`): ovsdb-server then makes a
        table's reply at a time, not the whole database's — at NVP's full scale the config
        DB's 70 MB reply took its RSS from 0.3 to 0.8 GB — and the owner parses no more at
        once."""
        self.remote = remote
        self.db = db
        self.tables = tables
        self.wake = wake
        self.no_inserts = no_inserts
        self.unkept = unkept
        self.staged = staged
        self._connect = connect or (lambda: RawConnection(self.remote, db=self.db))
        self.rows: dict[str, dict[str, dict[str, Any]]] = self._empty_rows()
        self.reads = 0
        """Reads of every row (`start()`s that succeeded): when it changed, the changes
        returned since began with every row of the `unkept` tables."""
        self.conn: RawConnection | None = None

    def start(self) -> list[Change]:
        """(Re)connect and read the tables; return every difference from what was held
        (of the `unkept` tables: every row read).

        On an error (raised) the replica is left closed (`conn` None) with the rows it
        held, so a later `start()` reports what changed meanwhile.
        """
        self.close()
        conn = self._connect()
        old = self.rows
        self.rows = self._empty_rows()
        passed: list[Change] = []  # the unkept tables' rows, in order
        try:
            if self.wake is not None:
                conn.keep_alive(KEEPALIVE_IDLE, self.wake)
            if self.staged:
                self._read_staged(conn, passed)
            else:
                requests = self._requests(initial=True, updates=True)
                initial = conn.call("monitor", [self.db, None, requests])
                for table in self.tables:
                    passed += self._load(table, initial.get(table, {}))
        except BaseException:
            conn.close()
            self.rows = old
            raise
        self.conn = conn
        self.reads += 1
        changes: list[Change] = passed
        for table in self.rows:
            for uuid in old[table].keys() - self.rows[table].keys():
                changes.append((table, uuid, None))
            for uuid, row in self.rows[table].items():
                if old[table].get(uuid) != row:
                    changes.append((table, uuid, row))
        return changes

    def _read_staged(self, conn: RawConnection, passed: list[Change]) -> None:
        """Read the tables one at a time (`staged`): one monitor sends the updates (no
        rows), then each table's rows come from a monitor of their own, cancelled once
        read. ovsdb-server answers a client between its other requests and sends a
        transaction's updates before what it answers next, so the updates that came before
        a table's rows are already in them (dropped for it and for the tables still to be
        read) and those that came after are applied to it: what `start()` returns is the
        database as of the last table's read."""
        conn.call("monitor", [self.db, None, self._requests(initial=False, updates=True)])
        read: set[str] = set()
        for table in self.tables:
            request = self._requests(initial=True, updates=False, only=table)
            reply, before = conn.call_noting("monitor", [self.db, ["initial", table], request])
            passed += [c for c in self._apply(before, read) if c[0] in self.unkept]
            passed += self._load(table, reply.get(table, {}))
            read.add(table)
            conn.call("monitor_cancel", [["initial", table]])

    def _requests(
        self, *, initial: bool, updates: bool, only: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """Monitor requests for the tables (or `only` one) and the kinds of rows wanted."""
        return {
            table: {
                "columns": columns,
                "select": {
                    "initial": initial,
                    "insert": updates and table not in self.no_inserts,
                    "delete": updates,
                    "modify": updates,
                },
            }
            for table, columns in self.tables.items()
            if only in (None, table)
        }

    def _load(self, table: str, rows: dict[str, Any]) -> list[Change]:
        """Take `table`'s rows as read; the changes to pass on (an unkept table's rows)."""
        if table not in self.unkept:
            held = self.rows[table]
            for uuid, update in rows.items():
                held[uuid] = compact(update["new"])
            return []
        return [(table, uuid, compact(update["new"])) for uuid, update in rows.items()]

    def _empty_rows(self) -> dict[str, dict[str, dict[str, Any]]]:
        return {t: {} for t in self.tables if t not in self.unkept}

    def poll(self) -> list[Change]:
        """Apply the updates received so far; return the changes."""
        assert self.conn is not None, "start() first"
        return self._apply(self.conn.poll())

    def _apply(self, messages: list[dict[str, Any]], only: set[str] | None = None) -> list[Change]:
        """Apply the updates in `messages` (to the tables in `only`, if given); the changes."""
        changes: list[Change] = []
        for message in messages:
            if message.get("method") != "update":
                continue
            for table, updates in message["params"][1].items():
                if only is not None and table not in only:
                    continue
                held = self.rows.get(table)  # (None: unkept)
                for uuid, update in updates.items():
                    new = update.get("new")
                    if new is not None:
                        new = compact(new)
                    if held is not None and new is None:
                        held.pop(uuid, None)
                    elif held is not None:
                        held[uuid] = new
                    changes.append((table, uuid, new))
        return changes

    def fileno(self) -> int:
        """The connection's descriptor."""
        assert self.conn is not None
        return self.conn.fileno()

    def has_pending(self) -> bool:
        """True if updates already received wait for `poll()`."""
        return self.conn is not None and self.conn.has_pending()

    def close(self) -> None:
        """Close the connection."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def pack_uuid(uuid: str) -> bytes:
    """`uuid`'s 16 bytes (a new object: not the parsed string, which kept pins the arena of
    the message it was parsed from)."""
    return bytes.fromhex(uuid.replace("-", ""))


def unpack_uuid(packed: bytes) -> str:
    """`pack_uuid`'s inverse: the uuid as OVSDB writes it."""
    return str(uuidlib.UUID(bytes=packed))


_IN = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
"""What makes a socket readable (a closed or failed one too: its `recv` says so)."""


def _ready(sock: socket.socket, *, write: bool = False,
           timeout: float | None = None) -> tuple[bool, bool]:  # fmt: skip
    """Wait until `sock` is readable (or, with `write`, writable), at most `timeout`
    seconds (None: as long as it takes); return (readable, writable). `poll`, not `select`:
    a controller with thousands of nodes has descriptors past `select`'s 1,024. (A TLS
    socket's decrypted bytes not yet taken count as readable: the descriptor cannot say.)"""
    if not write and isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True, False
    poller = select.poll()
    poller.register(sock, _IN | (select.POLLOUT if write else 0))
    events = 0
    for _, mask in poller.poll(None if timeout is None else timeout * 1000):
        events |= mask
    return bool(events & _IN), bool(events & select.POLLOUT)


def readable(fds: Iterable[int], timeout: float | None) -> set[int]:
    """Wait until one of `fds` is readable (or closed), at most `timeout` seconds; return
    the readable ones. `poll`, not `select` (see `_ready`)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, _IN)
    return {fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)}
