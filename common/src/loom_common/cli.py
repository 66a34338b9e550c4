"""The `loom` command: the local deployment's composition root.

`loom up` starts, in order, the configuration database (standalone, or a 3-member RAFT
cluster with `--db-cluster`), the universal-flow database, ZooKeeper, the API server, a
logical and a physical controller (and with `--demo`, simulated transport nodes), prints the
API URL and where the admin token is (never the token: the banner ends up in logs), and
stays up until Ctrl-C or SIGTERM, restarting a daemon that dies (`loom_common.supervise`:
bounded backoff, a line each time, left down after repeated quick failures); then it stops
everything it started (by PID, newest first). With `--log-format json` its own lines are
JSON objects too (`own_lines`).

`loom db` starts only the configuration database and prints its remote.

`loom show`, `status`, `list`, `get`, `create`, `set`, `delete` are the operator's client of
the API (`loom_common.ctl`); `loom up` leaves them the URL and the admin token's file in
`STATE-DIR/client.json`.

Both claim the state directory first (`loom_common.statedir`): a second deployment on a
directory in use is refused with one line, before anything is touched.

Secrets never go on a command line (`ps` shows command lines to every local user): the admin
token comes from `--admin-token-file`, `LOOM_ADMIN_TOKEN` or (visible, for compatibility)
`--admin-token`, and reaches the API server and the demo in their environment; tenant tokens
go to the API server in a file only its owner can read. The API server's command line (the
contract with `loom_api`)::

    LOOM_ADMIN_TOKEN=TOKEN <python> -m loom_api --db REMOTE --listen 127.0.0.1:PORT
        [--tenant-tokens-file PATH]

and the logical controller's (the contract with `loom_logical`)::

    <python> -m loom_logical --name NAME --config-db REMOTE --universal-db REMOTE
        --zookeeper HOSTS

The daemons meet only in the databases and ZooKeeper; this package imports none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from types import FrameType
from typing import Protocol, TextIO

from loom_common import ctl, logs
from loom_common.ctl import CLIENT_FILE
from loom_common.errors import LoomError
from loom_common.ovsdb import OvsdbCluster, OvsdbServer, free_port, ops, reachable, tool
from loom_common.pki import Credentials, Pki
from loom_common.procs import Daemon, listens_on
from loom_common.progress import Steps
from loom_common.statedir import claim, release
from loom_common.supervise import Supervisor
from loom_common.zookeeper import ZooKeeperEnsemble, ZooKeeperServer
from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

DEFAULT_STATE_DIR = Path("run/loom")
DEFAULT_API_PORT = 8080
DEFAULT_MANAGER_PORT = 6640
"""Where nodes dial (OVS's own OVSDB port: `ovs-vsctl set-manager ssl:HOST:6640`)."""
HEALTH_PATH = "/api/v1/health"
TOKEN_ENV = "LOOM_ADMIN_TOKEN"
"""The environment variable that carries the admin token (to `loom up`, the API server and
the demo)."""

Handler = Callable[[int, FrameType | None], object]
InstallHandler = Callable[[int, Handler | int], object]


class UsageError(LoomError):
    """A command-line option that cannot be used as given."""

    message = "%(detail)s"


class NoDemo(LoomError):
    """`--demo` without Loom's lab installed: the demo is the lab's (`demo_module`)."""

    message = (
        "--demo needs Loom's lab (package loom-nvp-tests, the workspace's nvp-tests/), which is "
        "not installed: no entry point in group %(group)r (`uv sync --all-packages` installs it)"
    )


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: unwind and stop what was started.

    A BaseException, like KeyboardInterrupt, so no `except Exception` swallows it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Process(Protocol):
    """Anything the deployment started: it can say whether it runs, be stopped, and be
    started again on its own files (`loom_common.supervise`)."""

    @property
    def running(self) -> bool:
        """True while it runs."""

    def stop(self) -> object:
        """Stop it (by the PIDs it started)."""

    def restart(self) -> object:
        """Start it again after it died."""


UNSUPERVISED = frozenset({"demo nodes"})
"""Processes `loom up` reports when they die but does not restart."""
DEMO_GROUP = "loom.demo"
"""The entry-point group the demo is found in (`demo_module`)."""


def stop_on_signals(install: InstallHandler = signal.signal) -> None:
    """Make SIGINT and SIGTERM raise `Stopped` in the main thread.

    The first signal raises; later ones are ignored, so a second Ctrl-C cannot interrupt the
    teardown halfway (each daemon's stop is bounded by its SIGKILL grace period).

    Args:
        install: `signal.signal`, or a stand-in for tests.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        install(signal.SIGINT, signal.SIG_IGN)
        install(signal.SIGTERM, signal.SIG_IGN)
        raise Stopped(signum)

    install(signal.SIGINT, handler)
    install(signal.SIGTERM, handler)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Return True if GET `url` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status: int = response.status
            return status == 200
    except (urllib.error.URLError, OSError):
        return False


def has_row(remote: str, table: str, name: str) -> bool:
    """True if universal-DB `table` has a row named `name` (a daemon announced itself)."""
    query = json.dumps(["Loom_Universal", ops.select(table, ops.where_eq("name", name))])
    result = subprocess.run(
        [tool("ovsdb-client"), "transact", remote, query], capture_output=True, text=True
    )
    if result.returncode != 0:
        return False
    reply = json.loads(result.stdout)
    return bool(reply and reply[0].get("rows"))


def api_command(db_remote: str, api_port: int, tenant_tokens_file: Path | None = None,
                neutron_auth: str = "token", host: str = "127.0.0.1") -> list[str]:  # fmt: skip
    """Return the API server's command line (the contract with `loom_api`); the admin token
    goes in its environment (`TOKEN_ENV`), not here."""
    command = [
        sys.executable, "-m", "loom_api", f"--db={db_remote}", f"--listen={host}:{api_port}",
    ]  # fmt: skip
    if tenant_tokens_file is not None:
        command.append(f"--tenant-tokens-file={tenant_tokens_file}")
    if neutron_auth != "token":
        command.append(f"--neutron-auth={neutron_auth}")
    return command


def write_secret(path: Path, text: str) -> Path:
    """Write `text` to a file only its owner may read (created so: never readable by others
    even for a moment); return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path


def write_client_file(state_dir: Path, url: str, token: str) -> Path:
    """Leave the API's URL and the admin token (in a file only its owner reads) where the
    `loom` client commands look (`loom_common.ctl.CLIENT_FILE`); the client file's path."""
    token_file = write_secret(state_dir / "admin-token", token + "\n")
    client = state_dir / CLIENT_FILE
    client.write_text(json.dumps({"url": url, "token_file": str(token_file)}) + "\n")
    return client


def _read_option_file(path: str | None, option: str) -> str:
    """The text of the file an option names ("" when not given).

    Raises:
        UsageError: it cannot be read.
    """
    if path is None:
        return ""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise UsageError(detail=f"{option}: {exc}") from None


def admin_token(
    args: argparse.Namespace, environ: dict[str, str] | os._Environ[str]
) -> tuple[str, str]:
    """The admin token `loom up` was given, and where it came from (for the banner, which
    names the source but never prints the token): `--admin-token-file`, else
    `LOOM_ADMIN_TOKEN`, else `--admin-token`, else a new random one.

    Raises:
        LoomError: the file cannot be read or holds no token.
    """
    if args.admin_token_file is not None:
        token = _read_option_file(args.admin_token_file, "--admin-token-file").strip()
        if not token:
            raise UsageError(detail=f"--admin-token-file: {args.admin_token_file} is empty")
        return token, f"--admin-token-file {args.admin_token_file}"
    if environ.get(TOKEN_ENV):
        return environ[TOKEN_ENV], TOKEN_ENV
    if args.admin_token:
        return args.admin_token, "--admin-token"
    return secrets.token_urlsafe(24), "random, made for this run"


class JsonLines(io.TextIOBase):
    """A text stream whose every line is written to `target` as one JSON log object
    (`loom_common.logs.JsonFormatter`): `loom up`'s own lines under `--log-format json`,
    so a log pipeline reads its banner, steps, supervision and demo lines like the
    daemons' (`component` "up")."""

    def __init__(self, target: TextIO, level: int) -> None:
        super().__init__()
        self.target = target
        self.level = level
        self.formatter = logs.JsonFormatter("up")
        self._partial = ""

    def write(self, text: str) -> int:
        """Buffer `text`; emit each complete line as a JSON object."""
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            record = logging.makeLogRecord({
                "name": "loom.up", "msg": line, "levelno": self.level,
                "levelname": logging.getLevelName(self.level),
            })  # fmt: skip
            self.target.write(self.formatter.format(record) + "\n")
        if lines:
            self.target.flush()
        return len(text)

    def flush(self) -> None:
        """Flush the target (a partial line waits for its end)."""
        self.target.flush()

    def isatty(self) -> bool:
        """Never a terminal: no live status line (`loom_common.progress`)."""
        return False


@contextlib.contextmanager
def own_lines(log_format: str) -> Iterator[None]:
    """Within it, what `loom up` prints is in `log_format`: as written (text), or with
    stdout's lines as INFO and stderr's as WARNING JSON objects (json)."""
    if log_format != "json":
        yield
        return
    with contextlib.redirect_stdout(JsonLines(sys.stdout, logging.INFO)), \
            contextlib.redirect_stderr(JsonLines(sys.stderr, logging.WARNING)):  # fmt: skip
        yield


class Deployment:
    """What `loom up` runs; `start()` brings it up in order, `stop()` tears it down in reverse.

    Each `_start_*` step appends what it started to `processes` before waiting on it, so a
    failure or a signal during startup still stops it.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        api_port: int,
        admin_token: str,
        tenant_tokens: list[str],
        tenant_tokens_text: str = "",
        db_cluster: bool,
        neutron_auth: str = "token",
        zookeeper_ensemble: bool = False,
        logical_controllers: int = 1,
        physical_controllers: int = 1,
        session_timeout: float | None = None,
        pki_dir: Path | None = None,
        listen: str = "127.0.0.1",
        manager_port: int | None = None,
        log_format: str = "text",
    ) -> None:
        """Describe the deployment (see `loom up --help` for the meaning of each option).

        Args:
            state_dir: root of every daemon's files (databases, sockets, logs, pid files).
            api_port: the API server's port.
            admin_token: the admin bearer token.
            tenant_tokens: `TENANT=TOKEN` pairs.
            tenant_tokens_text: more, as the lines of a tokens file.
            db_cluster: run the config DB as a 3-member RAFT cluster.
            neutron_auth: `token` (X-Auth-Token as the native tokens) or `noauth`.
            zookeeper_ensemble: run ZooKeeper as a 3-member ensemble.
            logical_controllers: how many logical controllers (they shard the work through
                ZooKeeper, each the hot standby of the others' shards).
            physical_controllers: how many physical controllers (likewise, by node).
            session_timeout: the controllers' ZooKeeper session timeout, seconds (default
                theirs).
            pki_dir: with it, transport nodes talk to the physical controllers over TLS
                with certificates from the PKI there (made if missing, `loom_common.pki`),
                and the databases' TCP ports (the RAFT members' traffic too) take only
                TLS; the daemons started here use the databases' unix sockets.
            listen: the address the API, the physical controllers and the databases' TCP
                ports listen on (`0.0.0.0`: every address of this host).
            manager_port: the port transport nodes dial (the first physical controller's;
                the i-th listens on this + i), the same across restarts; None: free ports.
            log_format: the daemons' `--log-format` (`text` or `json`).
        """
        self.state_dir = state_dir.resolve()
        self.listen = listen
        self.manager_port = manager_port
        self.log_format = log_format
        self.api_port = api_port
        self.admin_token = admin_token
        self.tenant_tokens = tenant_tokens
        self.tenant_tokens_text = tenant_tokens_text
        self.db_cluster = db_cluster
        self.neutron_auth = neutron_auth
        self.zookeeper_ensemble = zookeeper_ensemble
        self.logical_controllers = logical_controllers
        self.physical_controllers = physical_controllers
        self.session_timeout = session_timeout
        self.pki = Pki(pki_dir) if pki_dir is not None else None
        self.db_remote = ""
        self.universal_remote = ""
        self.local_db_remote = ""
        self.local_universal_remote = ""
        """The same databases over unix sockets, for the daemons started here (not probed
        for inactivity: see `OvsdbServer.unix_remote`)."""
        self.zookeeper_hosts = ""
        self.metrics_urls: dict[str, str] = {}
        """Where each daemon serves its Prometheus metrics."""
        self.manager_targets: list[str] = []
        """Where transport nodes' Manager rows point (each physical controller)."""
        self.processes: dict[str, Process] = {}

    @property
    def api_url(self) -> str:
        """The API's base URL."""
        return f"http://{reachable(self.listen)}:{self.api_port}"

    def start(self, progress: Callable[[str], None] | None = None) -> None:
        """Start the database, then the API server; on any failure stop what started.

        Args:
            progress: told each step as it begins (`loom_common.progress.Steps.step`).

        Raises:
            LoomError: a daemon failed to start or to become ready.
        """
        say = progress or (lambda _: None)
        try:
            if self.pki is not None:
                say("the PKI")
                self.pki.ensure()
            say("the config DB" + (" (3 RAFT members)" if self.db_cluster else ""))
            self._start_db()
            say("the universal DB")
            self._start_universal_db()
            say("ZooKeeper" + (" (3 members)" if self.zookeeper_ensemble else ""))
            self._start_zookeeper()
            # The API server and the controllers start together (they meet only in the
            # databases and ZooKeeper), each waited for after: the API's read of the
            # configuration and a logical controller's computation of it each take a while
            # on a large configuration, and overlap.
            say("the API server and the controllers")
            started = [self._start_api(), *self._start_logical_controller(),
                       *self._start_physical_controller()]  # fmt: skip
            for daemon in started:
                say(f"waiting for {daemon.name}")
                daemon.wait_ready()
        except BaseException:
            self.stop()
            raise

    def _start_db(self) -> None:
        schema = schema_path(CONFIG_SCHEMA)
        if self.db_cluster:
            cluster = OvsdbCluster(self.state_dir / "config-db-cluster", schema,
                                   tls=self._db_tls("config-db"), host=self.listen)  # fmt: skip
            for i, member in enumerate(cluster.members):
                self.processes[f"config DB member {i}"] = member
            cluster.start()
            self.db_remote = cluster.remote
            self.local_db_remote = cluster.unix_remote
        else:
            server = OvsdbServer(self.state_dir / "config-db", schema,
                                 tls=self._db_tls("config-db"), host=self.listen)  # fmt: skip
            self.processes["config DB"] = server
            server.start()
            self.db_remote = server.remote
            self.local_db_remote = server.unix_remote

    def _db_tls(self, name: str) -> Credentials | None:
        """A database's credentials: with a PKI its TCP port (the one other hosts would
        use) takes only TLS; this host's daemons use its unix socket."""
        return self.pki.internal(name) if self.pki is not None else None

    def _start_universal_db(self) -> None:
        server = OvsdbServer(self.state_dir / "universal-db", schema_path(UNIVERSAL_SCHEMA),
                             name="universal", tls=self._db_tls("universal-db"),
                             host=self.listen)  # fmt: skip
        self.processes["universal DB"] = server
        server.start()
        self.universal_remote = server.remote
        self.local_universal_remote = server.unix_remote

    def _start_zookeeper(self) -> None:
        if self.zookeeper_ensemble:
            ensemble = ZooKeeperEnsemble(self.state_dir / "zookeeper-ensemble")
            for i, member in enumerate(ensemble.members):
                self.processes[f"ZooKeeper member {i}"] = member
            ensemble.start()
            self.zookeeper_hosts = ensemble.hosts
            return
        server = ZooKeeperServer(self.state_dir / "zookeeper")
        self.processes["ZooKeeper"] = server
        server.start()
        self.zookeeper_hosts = server.hosts

    @staticmethod
    def _named(what: str, i: int, count: int) -> tuple[str, str]:
        """A controller's process name and daemon (file) name: "logical controller" and
        "logical-controller" alone, "... 1" and "...-1" when there are several."""
        if count == 1:
            return what, what.replace(" ", "-")
        return f"{what} {i}", f"{what.replace(' ', '-')}-{i}"

    def _zookeeper_args(self) -> list[str]:
        args = ["--zookeeper", self.zookeeper_hosts]
        if self.session_timeout is not None:
            args += ["--session-timeout", str(self.session_timeout)]
        return args

    def _daemon_args(self, name: str) -> list[str]:
        """A controller's options `loom up` chooses: `--metrics` (a port of its own, kept
        across its restarts) and the daemons' `--log-format`."""
        port = free_port()
        self.metrics_urls[name] = f"http://{reachable(self.listen)}:{port}/metrics"
        return ["--metrics", f"{self.listen}:{port}", "--log-format", self.log_format]

    def _start_logical_controller(self) -> list[Daemon]:
        started = []
        for i in range(self.logical_controllers):
            name = f"logical-{i}"
            command = [
                sys.executable, "-m", "loom_logical", "--name", name,
                "--config-db", self.local_db_remote, "--universal-db",
                self.local_universal_remote, *self._zookeeper_args(),
                *self._daemon_args(f"logical controller {i}"),
            ]  # fmt: skip
            process, daemon_name = self._named("logical controller", i, self.logical_controllers)
            daemon = Daemon(daemon_name, command, self.state_dir)
            self.processes[process] = daemon
            daemon.start(ready=lambda name=name: has_row(  # type: ignore[misc]
                self.local_universal_remote, "Logical_Controller", name),
                         timeout=60, wait=False)  # fmt: skip
            started.append(daemon)
        return started

    def _start_physical_controller(self) -> list[Daemon]:
        started = []
        for i in range(self.physical_controllers):
            name = f"physical-{i}"
            port = self.manager_port + i if self.manager_port is not None else free_port()
            if self.pki is None:
                self.manager_targets.append(f"tcp:{reachable(self.listen)}:{port}")
                listen = [f"ptcp:{port}:{self.listen}"]
            else:
                self.manager_targets.append(f"ssl:{reachable(self.listen)}:{port}")
                mine = self.pki.issue(name, "controller")
                listen = [f"pssl:{port}:{self.listen}", "--private-key", str(mine.private_key),
                          "--certificate", str(mine.certificate), "--ca-cert",
                          str(mine.peer_ca)]  # fmt: skip
            command = [
                sys.executable, "-m", "loom_physical", "--name", name,
                "--universal-db", self.local_universal_remote, "--config-db",
                self.local_db_remote, "--listen", *listen, *self._zookeeper_args(),
                *self._daemon_args(f"physical controller {i}"),
            ]  # fmt: skip
            process, daemon_name = self._named("physical controller", i,
                                               self.physical_controllers)  # fmt: skip
            daemon = Daemon(daemon_name, command, self.state_dir)
            self.processes[process] = daemon
            daemon.start(ready=lambda d=daemon, p=port: (  # type: ignore[misc]
                d.pid is not None and listens_on(d.pid, p)), timeout=60, wait=False)  # fmt: skip
            started.append(daemon)
        return started

    @property
    def manager_target(self) -> str:
        """The targets transport nodes dial, comma-separated."""
        return ",".join(self.manager_targets)

    def demo_command(self, check: bool) -> list[str]:
        """The demo (the lab's, `demo_module`) against this deployment (the admin token goes
        in its environment: `demo_env`)."""
        command = [
            sys.executable, "-m", demo_module(), "--api", self.api_url,
            "--manager", self.manager_target, "--state-dir", str(self.state_dir / "demo"),
        ]  # fmt: skip
        if self.pki is not None:
            command += ["--pki-dir", str(self.pki.directory)]
        return [*command, "--check"] if check else command

    @property
    def demo_env(self) -> dict[str, str]:
        """The demo's environment additions: the admin token."""
        return {TOKEN_ENV: self.admin_token}

    def _start_api(self) -> Daemon:
        tokens_file = None
        if self.tenant_tokens or self.tenant_tokens_text.strip():
            text = self.tenant_tokens_text.rstrip("\n") + "\n"
            text += "".join(f"{pair}\n" for pair in self.tenant_tokens)
            tokens_file = write_secret(self.state_dir / "tenant-tokens", text)
        command = api_command(self.local_db_remote, self.api_port, tokens_file, self.neutron_auth,
                              self.listen)  # fmt: skip
        command += ["--log-format", self.log_format]
        self.metrics_urls["API server"] = f"{self.api_url}/metrics"
        daemon = Daemon("api-server", command, self.state_dir,
                        env={TOKEN_ENV: self.admin_token})  # fmt: skip
        self.processes["API server"] = daemon
        return daemon.start(ready=lambda: http_ok(self.api_url + HEALTH_PATH), timeout=60,
                            wait=False)  # fmt: skip

    def dead(self) -> list[str]:
        """Return the names of started processes that are no longer running."""
        return [name for name, proc in self.processes.items() if not proc.running]

    def stop(self) -> None:
        """Stop everything started, newest first."""
        while self.processes:
            _, proc = self.processes.popitem()
            proc.stop()


def watch(
    deployment: Deployment,
    *,
    sleep: Callable[[float], None] = time.sleep,
    interval: float = 0.25,
    err: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    supervisor: Supervisor | None = None,
) -> None:
    """Restart the deployment's daemons that die, or that run but fail their health checks
    (the databases: `loom_common.supervise`, `OvsdbServer.health`), until a signal raises
    `Stopped`. The demo's nodes are not restarted (reported once): they are the demo's, not
    Loom's.

    Args:
        deployment: the running deployment.
        sleep: how to wait between checks.
        interval: seconds between checks.
        err: where the supervisor's lines go.
        supervisor: the supervisor (default: one with `loom up`'s policies).
    """
    if supervisor is None:
        supervisor = Supervisor(deployment.processes, lambda name: name not in UNSUPERVISED,
                                where=str(deployment.state_dir))  # fmt: skip
    supervisor.start_checking()
    try:
        while True:
            for line in supervisor.tick():
                err(line)
            sleep(interval)
    finally:
        supervisor.stop_checking()


def cmd_up(args: argparse.Namespace) -> int:
    """Run `loom up`: claim the state directory, start the deployment, print how to reach
    it, run until a signal (its own lines in `--log-format`)."""
    with own_lines(args.log_format):
        return _up(args)


def _up(args: argparse.Namespace) -> int:
    stop_on_signals()
    try:
        token, token_source = admin_token(args, os.environ)
        tenant_tokens = _read_option_file(args.tenant_tokens_file, "--tenant-tokens-file")
        if args.demo or args.check:
            demo_module()  # refused before anything starts when the lab is missing
        lock = claim(Path(args.state_dir))
    except LoomError as exc:
        print(f"loom up: {exc}", file=sys.stderr, flush=True)
        return 1
    code = 0
    deployment = Deployment(
        Path(args.state_dir),
        api_port=args.api_port,
        admin_token=token,
        tenant_tokens=args.tenant_token,
        tenant_tokens_text=tenant_tokens,
        db_cluster=args.db_cluster,
        neutron_auth=args.neutron_auth,
        zookeeper_ensemble=args.zookeeper_ensemble,
        logical_controllers=args.logical_controllers,
        physical_controllers=args.physical_controllers,
        pki_dir=None if args.no_ssl else Path(args.pki_dir or Path(args.state_dir) / "pki"),
        listen=args.listen,
        manager_port=args.manager_port,
        log_format=args.log_format,
    )
    try:
        with Steps("loom up") as steps:
            deployment.start(steps.step)
        print(f"Loom is up. State in {deployment.state_dir}", flush=True)
        print(f"  config DB:   {deployment.db_remote} (this host: "
              f"{deployment.local_db_remote})", flush=True)  # fmt: skip
        print(f"  universal DB: {deployment.universal_remote} (this host: "
              f"{deployment.local_universal_remote})", flush=True)  # fmt: skip
        print(f"  ZooKeeper:   {deployment.zookeeper_hosts}", flush=True)
        print(f"  API:         {deployment.api_url}/api/v1", flush=True)
        print(f"  Neutron API: {deployment.api_url}/v2.0 ({args.neutron_auth})", flush=True)
        client = write_client_file(deployment.state_dir, deployment.api_url, token)
        # (never the token itself: this output ends up in logs)
        print(f"  admin token: in {client.parent / 'admin-token'} ({token_source})", flush=True)
        print(f"  CLI:         loom show, loom status, ... (they read {client})", flush=True)
        print(f"  nodes dial:  {deployment.manager_target} (OVSDB manager)", flush=True)
        for name, url in deployment.metrics_urls.items():
            print(f"  metrics:     {url} ({name})", flush=True)
        if deployment.pki is not None:
            print(f"  PKI:         {deployment.pki.directory} (nodes present a switchca "
                  "certificate naming their system-id; database clients on other hosts a "
                  "controllerca one)", flush=True)  # fmt: skip
        if args.demo or args.check:  # --check implies --demo
            code = run_demo(deployment, check=args.check)
        if not args.check:
            print("Ctrl-C stops everything.", flush=True)
            watch(deployment)
    except Stopped:
        pass
    except LoomError as exc:
        print(f"loom up: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        deployment.stop()
        release(lock)
    print("Loom stopped.", flush=True)
    return code


def demo_module() -> str:
    """The module `loom up --demo` runs (`python -m`): the one Loom's lab (the workspace
    member `nvp-tests`) declares in the `DEMO_GROUP` entry-point group. The demo is lab code
    and this package does not depend on the lab: without it installed, `--demo` is refused."""
    found = sorted(entry_points(group=DEMO_GROUP), key=lambda point: point.name)
    if not found:
        raise NoDemo(group=DEMO_GROUP)
    return found[0].module


def run_demo(deployment: Deployment, *, check: bool) -> int:
    """Run the demo against `deployment`: with `check`, to the end (its exit code); else as
    one more process of the deployment, printing its matrix once it is ready."""
    demo_dir = deployment.state_dir / "demo"
    demo_dir.mkdir(parents=True, exist_ok=True)
    (demo_dir / "demo.json").unlink(missing_ok=True)
    if check:
        env = {**os.environ, **deployment.demo_env}
        # Its lines go through this process's stdout, so `--log-format json` covers them.
        command = deployment.demo_command(check=True)
        with subprocess.Popen(command, env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) as demo:  # fmt: skip
            assert demo.stdout is not None
            try:
                for line in demo.stdout:
                    print(line, end="", flush=True)
            except BaseException:  # a signal: the demo goes too (as subprocess.run does)
                demo.kill()
                raise
        return demo.returncode
    daemon = Daemon("demo", deployment.demo_command(check=False), demo_dir,
                    env=deployment.demo_env)  # fmt: skip
    deployment.processes["demo nodes"] = daemon
    daemon.start(ready=(demo_dir / "demo.json").exists, timeout=180)
    print(daemon.log_tail(40), flush=True)
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    """Run `loom db`: only the configuration database, until a signal."""
    stop_on_signals()
    schema = schema_path(CONFIG_SCHEMA)
    state = Path(args.state_dir).resolve()
    try:
        lock = claim(state)
    except LoomError as exc:
        print(f"loom db: {exc}", file=sys.stderr, flush=True)
        return 1
    server: OvsdbCluster | OvsdbServer
    if args.cluster:
        server = OvsdbCluster(state / "config-db-cluster", schema)
    else:
        server = OvsdbServer(state / "config-db", schema, port=args.port)
    try:
        server.start()
        print(f"config DB: {server.remote}", flush=True)
        while True:
            signal.pause()  # until SIGINT/SIGTERM raises Stopped
    except Stopped:
        pass
    except LoomError as exc:
        print(f"loom db: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        server.stop()
        release(lock)
    return 0


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 8:
        raise argparse.ArgumentTypeError(f"expected a count from 1 to 8, got {text!r}")
    return value


def _tenant_token(text: str) -> str:
    tenant, sep, token = text.partition("=")
    if not (sep and tenant and token):
        raise argparse.ArgumentTypeError(f"expected TENANT=TOKEN, got {text!r}")
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the `loom` command line."""
    parser = argparse.ArgumentParser(
        prog="loom", description="Loom: the local deployment and its operator commands"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser(
        "up",
        help="start the local deployment: both databases, ZooKeeper, the API server, "
        "the logical and physical controllers (--demo: simulated nodes and two tenants)",
    )
    up.add_argument("--api-port", type=int, default=DEFAULT_API_PORT, help="default 8080")
    up.add_argument("--listen", default="127.0.0.1", metavar="ADDR",
                    help="the address the API, the physical controllers (the nodes' OVSDB "
                    "manager) and the databases listen on (default 127.0.0.1; 0.0.0.0 for "
                    "every address: nodes and clients on other hosts)")  # fmt: skip
    up.add_argument("--log-format", choices=["text", "json"], default="text",
                    help="the daemons' logs: text lines (default) or JSON, an object a "
                    "line")  # fmt: skip
    up.add_argument("--manager-port", type=int, default=DEFAULT_MANAGER_PORT, metavar="PORT",
                    help="the port transport nodes dial as their OVSDB manager, the same "
                    "across restarts (default %(default)s; the i-th physical controller "
                    "listens on PORT+i)")  # fmt: skip
    token = up.add_mutually_exclusive_group()
    token.add_argument("--admin-token-file", metavar="PATH",
                       help=f"a file holding the admin bearer token (or set {TOKEN_ENV}; "
                       "default: a random one)")  # fmt: skip
    token.add_argument("--admin-token",
                       help="the admin bearer token (visible in ps: prefer the file)")  # fmt: skip
    up.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR), help="default ./run/loom")
    up.add_argument("--db-cluster", action="store_true", help="a 3-member RAFT config DB")
    up.add_argument("--pki-dir", metavar="DIR",
                    help="the PKI transport nodes and controllers use (made if missing; "
                    "default STATE-DIR/pki)")  # fmt: skip
    up.add_argument("--no-ssl", action="store_true",
                    help="plain TCP: nodes to the physical controllers, and the databases' "
                    "TCP ports")  # fmt: skip
    up.add_argument("--zookeeper-ensemble", action="store_true",
                    help="a 3-member ZooKeeper ensemble")  # fmt: skip
    up.add_argument("--logical-controllers", type=_count, default=1, metavar="N",
                    help="logical controllers sharing the work, each the others' hot "
                    "standby (default 1)")  # fmt: skip
    up.add_argument("--physical-controllers", type=_count, default=1, metavar="N",
                    help="physical controllers sharing the nodes, each the others' hot "
                    "standby (default 1)")  # fmt: skip
    up.add_argument(
        "--tenant-token",
        action="append",
        default=[],
        type=_tenant_token,
        metavar="TENANT=TOKEN",
        help="a tenant's bearer token (repeatable; visible in ps: prefer the file)",
    )
    up.add_argument("--tenant-tokens-file", metavar="PATH",
                    help="a file of tenants' bearer tokens, one TENANT=TOKEN per line")  # fmt: skip
    up.add_argument(
        "--neutron-auth",
        choices=["token", "noauth"],
        default="token",
        help="the Neutron API's auth: tokens as the native API (default), or noauth "
        "(requests act as admin, as Neutron's auth_strategy=noauth)",
    )
    up.add_argument("--demo", action="store_true",
                    help="start 4 simulated transport nodes, build a two-tenant topology, "
                    "send traffic and print the connectivity matrix")  # fmt: skip
    up.add_argument("--check", action="store_true",
                    help="with --demo: tear down afterwards; exit 0 only if every "
                    "expected outcome held")  # fmt: skip
    up.set_defaults(func=cmd_up)
    db = sub.add_parser("db", help="start only the configuration database; print its remote")
    db.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR), help="default ./run/loom")
    db.add_argument("--cluster", action="store_true", help="a 3-member RAFT cluster")
    db.add_argument("--port", type=int, help="client port, standalone (default: a free one)")
    db.set_defaults(func=cmd_db)
    ctl.add_commands(sub, str(DEFAULT_STATE_DIR))
    args, extra = parser.parse_known_args(argv)
    # FIELD=VALUE arguments after an option (`create port --parent web name=p1`): argparse
    # takes a command's positionals in one run, before the option.
    if extra and hasattr(args, "fields") and not any(a.startswith("-") for a in extra):
        args.fields = [*args.fields, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of `loom`."""
    args = parse_args(argv)
    result: int = args.func(args)
    return result
