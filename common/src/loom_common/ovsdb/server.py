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

import contextlib
import json
import math
import os
import random
import re
import shutil
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from loom_common.ovsdb.errors import OvsdbError
from loom_common.pki import Credentials
from loom_common.procs import Daemon, DaemonError, listens_on
from loom_common.supervise import HEALTHY, Verdict


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


PORT_RANGE_ENV = "LOOM_PORT_RANGE"
"""`LOW-HIGH`: the share of ports `free_ports` chooses from (inherited by the processes this
one starts). The test plugin gives each pytest worker its own share, so that two workers'
listeners never race for one port between its choice and its bind."""


def free_ports(count: int) -> list[int]:
    """Return `count` distinct TCP ports on 127.0.0.1 for listeners to bind, free a moment ago.

    The ports lie below the kernel's ephemeral range, so no outgoing connection takes one as
    its local port between this choice and the listener's bind (a port from `bind(port 0)`
    could: CI's api-server once failed with EADDRINUSE while the site's other daemons were
    connecting), and within `LOOM_PORT_RANGE` if it is set. Each is checked by binding it,
    all are held until every one is chosen, and none is handed out twice by this process.
    """
    low, high = port_range()
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(100 * count + 1000):
            if len(ports) == count:
                break
            port = random.randrange(low, high)
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
    raise OvsdbError(detail=f"no {count} free TCP ports found on 127.0.0.1 in {low}-{high - 1}")


def port_range() -> tuple[int, int]:
    """Where `free_ports` chooses: `[low, high)`, `LOOM_PORT_RANGE` (`LOW-HIGH`, inclusive)
    within 1024 up to the ephemeral range, or all of that.

    Raises:
        OvsdbError: `LOOM_PORT_RANGE` is not `LOW-HIGH` with 1024 <= LOW <= HIGH below the
            ephemeral range.
    """
    low, high = 1024, _ephemeral_low()
    given = os.environ.get(PORT_RANGE_ENV)
    if not given:
        return low, high
    first, _, last = given.partition("-")
    try:
        share = int(first), int(last) + 1
    except ValueError:
        share = (0, 0)
    if not low <= share[0] < share[1] <= high:
        raise OvsdbError(detail=f"{PORT_RANGE_ENV}={given!r}: not LOW-HIGH within {low}-{high - 1}")
    return share


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


JEMALLOC = next(iter(sorted(Path("/usr/lib").glob("*/libjemalloc.so.2"))), None)
"""Debian's jemalloc (`libjemalloc2`), which Loom's ovsdb-servers run with where it is
installed (`make install` installs it). ovsdb-server spends a good part of a large write
in glibc's malloc; with jemalloc preloaded, writing the full-scale NVP workload's 3.2M
universal flows takes markedly less of its CPU."""
