"""Deploying ZooKeeper for Loom's controller clusters: standalone, or a 3-member ensemble.

Debian's `zookeeper` package (3.8) ships the server as jars; its `zkServer.sh` wants
`/etc/zookeeper/conf` and `/var/log`, so the server is run here with plain `java`:
`/usr/share/java/zookeeper.jar` (whose manifest `Class-Path` brings in netty, jute and the
rest) plus an slf4j binding (`slf4j-simple`, logs on stderr) if installed.

`ZooKeeperServer` runs one server (`ZooKeeperServerMain`, or `QuorumPeerMain` for an
ensemble member) with its `zoo.cfg`, data directory, log and pid file in a state directory,
serving on a loopback port. `ZooKeeperEnsemble` runs `size` members on distinct client, peer
and election ports. Both are supervised children (`loom_common.procs.Daemon`): they stop with
their owner, and stop / kill -9 / restart of one member is a method call.

Readiness is the server's own answer: this process listens on the client port and the
`srvr` four-letter word reports a `Mode:` (standalone, leader or follower). Every probe has a
socket timeout: ZooKeeper 3.8.0 never closes a 4lw socket that arrives while it is still
loading its database.

The same 3.8.0 quirk hits clients: one that connects while a (re)starting server is still
loading may get no answer until its connect timeout (Kazoo: the session timeout divided by
the number of hosts), so with a single host its session expires. Where sessions must survive
a server restart, use an ensemble.

The tick matters to clients: the server clamps a session timeout to [2, 20] ticks and
notices a dead client's session only at the next tick after it expires. Tests use a short
tick (`DEFAULT_TICK_MS`) so that sessions of one or two seconds are allowed.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from loom_common.errors import LoomError
from loom_common.ovsdb import free_ports
from loom_common.procs import Daemon, DaemonError, listens_on

JAVA_DIR = Path("/usr/share/java")
SERVER_JAR = JAVA_DIR / "zookeeper.jar"
LOG_BINDING_JAR = JAVA_DIR / "slf4j-simple.jar"
STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Small heap, no JIT tiers beyond C1: the server starts quickly and stays small, as tests
# and `loom up` start many.
JVM_OPTIONS = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.jmx.log4j.disable=true",
)
FOUR_LETTER_WORDS = "ruok,srvr,stat,mntr,conf,cons"
DEFAULT_TICK_MS = 200
SERVING_MODES = ("standalone", "leader", "follower")


class ZooKeeperError(LoomError):
    """ZooKeeper or java is missing, or a server could not be configured."""

    message = "%(detail)s"


def java() -> str:
    """Return the path of the `java` launcher.

    Raises:
        ZooKeeperError: no java is installed (Debian: `default-jre-headless`, pulled in by
            the `zookeeper` package).
    """
    path = shutil.which("java")
    if path is None:
        raise ZooKeeperError(detail="java not found: apt-get install zookeeper")
    return path


def classpath(java_dir: Path = JAVA_DIR) -> str:
    """Return the classpath that runs Debian's ZooKeeper server.

    The server jar's manifest names its other jars; the slf4j binding is added when present
    (without one the server runs but logs nothing).

    Args:
        java_dir: where Debian installs jars (a parameter for tests).

    Raises:
        ZooKeeperError: the server jar is not installed.
    """
    server = java_dir / SERVER_JAR.name
    if not server.exists():
        raise ZooKeeperError(detail=f"{server} not found: apt-get install zookeeper")
    jars = [server]
    if (java_dir / LOG_BINDING_JAR.name).exists():
        jars.append(java_dir / LOG_BINDING_JAR.name)
    return ":".join(str(jar) for jar in jars)


def missing_zookeeper() -> list[str]:
    """Return what running ZooKeeper needs but is not installed (empty when all is there)."""
    missing = []
    if shutil.which("java") is None:
        missing.append("java")
    if not SERVER_JAR.exists():
        missing.append(str(SERVER_JAR))
    return missing


def four_letter_word(port: int, word: str, *, timeout: float = 2.0) -> str | None:
    """Send a ZooKeeper four-letter word to 127.0.0.1:`port`; return the answer.

    Args:
        port: the server's client port.
        word: `srvr`, `ruok`, `mntr`, ... (it must be in the server's 4lw whitelist).
        timeout: seconds for connecting and for each read.

    Returns:
        The answer, or None when the server does not answer in time or refuses.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:  # refused, reset, or timed out (the 3.8.0 loading-time hang)
        return None
    return b"".join(chunks).decode(errors="replace")


def parse_srvr(answer: str) -> dict[str, str]:
    """Return the `Key: value` lines of a `srvr` answer as a dict (`Mode`, `Zxid`, ...)."""
    fields = {}
    for line in answer.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


@dataclass(frozen=True)
class QuorumPeer:
    """One ensemble member's identity and quorum ports (the `server.<myid>=` line)."""

    myid: int
    peer_port: int
    election_port: int

    @property
    def config_line(self) -> str:
        """The member's `zoo.cfg` line."""
        return f"server.{self.myid}=127.0.0.1:{self.peer_port}:{self.election_port}"


class ZooKeeperServer:
    """One ZooKeeper server process on 127.0.0.1, its files in a state directory."""

    def __init__(
        self,
        state_dir: Path,
        *,
        name: str = "zk",
        port: int | None = None,
        tick_ms: int = DEFAULT_TICK_MS,
        myid: int | None = None,
        peers: Sequence[QuorumPeer] = (),
        log_level: str = "info",
    ) -> None:
        """Describe the server; `start()` writes its configuration and runs it.

        Args:
            state_dir: directory of `zoo.cfg`, the data directory, the log and the pid file.
            name: base name of the log and pid files.
            port: loopback client port (default: a free one, kept across restarts).
            tick_ms: ZooKeeper's tickTime; sessions may last 2 to 20 ticks.
            myid: this member's id in `peers` (an ensemble member), or None (standalone).
            peers: every ensemble member, this one included.
            log_level: slf4j-simple level (`info` shows sessions expiring; `warn` is quiet).

        Raises:
            ValueError: `myid` and `peers` disagree.
        """
        if (myid is None) != (not peers) or (
            myid is not None and myid not in {p.myid for p in peers}
        ):
            raise ValueError("an ensemble member needs its myid among the peers")
        self.state_dir = state_dir
        self.name = name
        self.port = port or free_ports(1)[0]
        self.tick_ms = tick_ms
        self.myid = myid
        self.peers = tuple(peers)
        self.log_level = log_level
        self.config_path = state_dir / "zoo.cfg"
        self.data_dir = state_dir / "data"
        self._daemon: Daemon | None = None

    @property
    def hosts(self) -> str:
        """The client connection string (`127.0.0.1:PORT`, as Kazoo's `hosts`)."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's log (its stdout and stderr)."""
        return self.state_dir / f"{self.name}.log"

    @property
    def pid_path(self) -> Path:
        """The pid file written while the server runs."""
        return self.state_dir / f"{self.name}.pid"

    @property
    def pid(self) -> int | None:
        """The server's PID while it runs."""
        return self._daemon.pid if self._daemon is not None else None

    @property
    def running(self) -> bool:
        """True while the server process runs."""
        return self._daemon is not None and self._daemon.running

    @property
    def session_timeout_range(self) -> tuple[float, float]:
        """The session timeouts (seconds) the server grants: 2 to 20 ticks."""
        return (2 * self.tick_ms / 1000, 20 * self.tick_ms / 1000)

    def config_text(self) -> str:
        """Return the `zoo.cfg` this server runs with."""
        lines = [
            f"tickTime={self.tick_ms}",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",  # else a Jetty admin server on :8080
            f"4lw.commands.whitelist={FOUR_LETTER_WORDS}",
            "maxClientCnxns=0",
            "autopurge.purgeInterval=0",
        ]
        lines += [peer.config_line for peer in self.peers]
        return "\n".join(lines) + "\n"

    def write_config(self) -> None:
        """Write `zoo.cfg`, the data directory and (for a member) its `myid` file."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text())
        if self.myid is not None:
            (self.data_dir / "myid").write_text(f"{self.myid}\n")

    def command(self) -> list[str]:
        """Return the java command line that runs this server.

        Raises:
            ZooKeeperError: java or the server jar is not installed.
        """
        return [
            java(),
            *JVM_OPTIONS,
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={self.log_level}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            classpath(),
            STANDALONE_MAIN if self.myid is None else QUORUM_MAIN,
            str(self.config_path),
        ]

    def launch(self) -> ZooKeeperServer:
        """Start the process without waiting until it serves (an ensemble starts all first).

        Raises:
            ZooKeeperError: java or the server jar is not installed.
            DaemonError: it is already running.
        """
        self.write_config()
        self._daemon = Daemon(
            self.name, self.command(), self.state_dir, log_path=self.log_path,
            pid_path=self.pid_path,
        )  # fmt: skip
        self._daemon.start()
        return self

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start the server and wait until it serves clients.

        A standalone server serves on its own; an ensemble member only once a quorum of its
        peers runs (start them with `launch()`, then `wait_serving()`).

        Args:
            timeout: seconds to wait for readiness.

        Returns:
            self, serving.

        Raises:
            ZooKeeperError: java or the server jar is not installed.
            DaemonError: it exited or did not serve within `timeout` (it is stopped then).
        """
        self.launch()
        try:
            self.wait_serving(timeout)
        except DaemonError:
            self.stop()
            raise
        return self

    def srvr(self) -> dict[str, str] | None:
        """Return this server's `srvr` answer as fields, or None if it does not answer.

        Only this process counts: if another process holds the port, the answer is None.
        """
        pid = self.pid
        if pid is None or not listens_on(pid, self.port):
            return None
        answer = four_letter_word(self.port, "srvr")
        return parse_srvr(answer) if answer is not None else None

    def mode(self) -> str | None:
        """Return `standalone`, `leader` or `follower` while serving, else None."""
        fields = self.srvr()
        mode = fields.get("Mode") if fields is not None else None
        return mode if mode in SERVING_MODES else None

    def serving(self) -> bool:
        """True when this server answers clients (the readiness predicate)."""
        return self.mode() is not None

    def wait_serving(self, timeout: float = 30.0) -> None:
        """Wait until the server serves clients.

        Raises:
            DaemonError: it is not running, exited, or `timeout` passed.
        """
        if self._daemon is None:
            raise DaemonError(name=self.name, detail="never started")
        self._daemon.wait_until(self.serving, timeout, what="serving clients")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL); its data directory stays."""
        if self._daemon is not None:
            self._daemon.stop()

    def kill9(self) -> None:
        """Kill the server with SIGKILL, as a crash would."""
        if self._daemon is not None:
            self._daemon.kill9()

    def restart(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start again on the same data directory and ports (after stop() or kill9())."""
        self.stop()
        return self.start(timeout)

    def log_tail(self, lines: int = 20) -> str:
        """Return the last `lines` lines of the server's log."""
        return self._daemon.log_tail(lines) if self._daemon is not None else ""

    def __enter__(self) -> ZooKeeperServer:
        return self.start() if not self.running else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ZooKeeperEnsemble:
    """`size` ZooKeeper servers forming one ensemble on 127.0.0.1."""

    def __init__(
        self,
        state_dir: Path,
        *,
        size: int = 3,
        tick_ms: int = DEFAULT_TICK_MS,
        log_level: str = "info",
    ) -> None:
        """Describe the ensemble; `start()` runs every member.

        Args:
            state_dir: member `i` (myid `i + 1`) lives in `state_dir/member<i>`.
            size: number of members (3 tolerates the loss of one).
            tick_ms: ZooKeeper's tickTime for every member.
            log_level: slf4j-simple level of every member.

        Raises:
            ValueError: `size` is less than 1.
        """
        if size < 1:
            raise ValueError("an ensemble needs at least one member")
        ports = free_ports(3 * size)
        peers = [
            QuorumPeer(myid=i + 1, peer_port=ports[size + i], election_port=ports[2 * size + i])
            for i in range(size)
        ]
        self.members = [
            ZooKeeperServer(
                state_dir / f"member{i}", name=f"zk{i + 1}", port=ports[i], tick_ms=tick_ms,
                myid=i + 1, peers=peers, log_level=log_level,
            )
            for i in range(size)
        ]  # fmt: skip
        self.tick_ms = tick_ms

    @property
    def hosts(self) -> str:
        """The client connection string listing every member (Kazoo's `hosts`)."""
        return ",".join(member.hosts for member in self.members)

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        """Start every member, then wait until each serves (a quorum has formed).

        Raises:
            ZooKeeperError: java or the server jar is not installed.
            DaemonError: a member exited or did not serve within `timeout` (all are stopped).
        """
        try:
            for member in self.members:
                member.launch()
            for member in self.members:
                member.wait_serving(timeout)
        except (DaemonError, ZooKeeperError):
            self.stop()
            raise
        return self

    def leader(self) -> ZooKeeperServer | None:
        """Return the running member that reports itself the ensemble's leader, if any."""
        for member in self.members:
            if member.mode() == "leader":
                return member
        return None

    def restart_member(self, member: ZooKeeperServer, timeout: float = 60.0) -> None:
        """Restart one member on its data directory; wait until it serves again."""
        member.restart(timeout)

    def stop(self) -> None:
        """Stop every member."""
        for member in self.members:
            member.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
