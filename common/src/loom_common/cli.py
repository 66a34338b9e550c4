"""The `loom` command: the local deployment's composition root.

`loom up` starts, in order, the configuration database (standalone, or a 3-member RAFT
cluster with `--db-cluster`) and the API server, prints the API URL and the admin token, and
stays up until Ctrl-C or SIGTERM, then stops everything it started (by PID, newest first).
Later issues add ZooKeeper, the controllers and simulated transport nodes to `Deployment`.

`loom db` starts only the configuration database and prints its remote.

The API server runs as its own process (`python -m loom_api ...`): the daemons meet only in
the databases, and this package imports none of them.
"""

from __future__ import annotations

import argparse
import http.client
import secrets
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Protocol

from loom_common.errors import LoomError
from loom_common.ovsdb import OvsdbCluster, OvsdbServer, free_port
from loom_common.procs import Daemon
from loom_schemas import CONFIG_SCHEMA, schema_path

DEFAULT_STATE_DIR = Path("run/loom")
DEFAULT_API_PORT = 8080


class Stoppable(Protocol):
    """Anything the deployment started and must stop."""

    def stop(self) -> None:
        """Stop it."""


def _http_ok(host: str, port: int, path: str) -> bool:
    try:
        conn = http.client.HTTPConnection(host, port, timeout=2)
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False


class _DaemonHandle:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def stop(self) -> None:
        self.daemon.stop()


class Deployment:
    """What `loom up` runs; `start()` brings it up in order, `stop()` tears it down in reverse."""

    def __init__(
        self,
        state_dir: Path,
        *,
        api_port: int,
        admin_token: str,
        tenant_tokens: list[str],
        db_cluster: bool,
        neutron_auth: str = "token",
    ) -> None:
        """Describe the deployment (see `loom up --help` for the meaning of each option)."""
        self.state_dir = state_dir.resolve()
        self.api_port = api_port
        self.admin_token = admin_token
        self.tenant_tokens = tenant_tokens
        self.db_cluster = db_cluster
        self.neutron_auth = neutron_auth
        self.db_remote = ""
        self._started: list[Stoppable] = []

    @property
    def api_url(self) -> str:
        """The API's base URL."""
        return f"http://127.0.0.1:{self.api_port}"

    def start(self) -> None:
        """Start the database, then the API server; on failure stop what started."""
        try:
            self._start_db()
            self._start_api()
        except BaseException:
            self.stop()
            raise

    def _start_db(self) -> None:
        schema = schema_path(CONFIG_SCHEMA)
        if self.db_cluster:
            cluster = OvsdbCluster(self.state_dir / "config-db-cluster", schema)
            self._started.append(cluster)
            cluster.start()
            self.db_remote = cluster.remote
        else:
            server = OvsdbServer(self.state_dir / "config-db", schema)
            self._started.append(server)
            server.start()
            self.db_remote = server.remote

    def _start_api(self) -> None:
        command = [
            sys.executable, "-m", "loom_api", "--db", self.db_remote,
            "--listen", f"127.0.0.1:{self.api_port}", "--admin-token", self.admin_token,
        ]  # fmt: skip
        if self.neutron_auth != "token":
            command += ["--neutron-auth", self.neutron_auth]
        for pair in self.tenant_tokens:
            command += ["--tenant-token", pair]
        daemon = Daemon("api-server", command, self.state_dir)
        self._started.append(_DaemonHandle(daemon))
        daemon.start(
            ready=lambda: _http_ok("127.0.0.1", self.api_port, "/api/v1/health"), timeout=60
        )

    def stop(self) -> None:
        """Stop everything started, newest first."""
        while self._started:
            self._started.pop().stop()


Handler = Callable[[int, FrameType | None], None]


def _wait_for_signal(install: Callable[[int, Handler], object]) -> None:
    done = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        done.set()

    install(signal.SIGINT, handler)
    install(signal.SIGTERM, handler)
    done.wait()


def cmd_up(args: argparse.Namespace) -> int:
    """Run `loom up`."""
    token = args.admin_token or secrets.token_urlsafe(24)
    deployment = Deployment(
        Path(args.state_dir),
        api_port=args.api_port,
        admin_token=token,
        tenant_tokens=args.tenant_token,
        db_cluster=args.db_cluster,
        neutron_auth=args.neutron_auth,
    )
    try:
        deployment.start()
        print(f"Loom is up. State in {deployment.state_dir}", flush=True)
        print(f"  config DB:   {deployment.db_remote}", flush=True)
        print(f"  API:         {deployment.api_url}/api/v1", flush=True)
        print(f"  Neutron API: {deployment.api_url}/v2.0", flush=True)
        print(f"  admin token: {token}", flush=True)
        print("Ctrl-C stops everything.", flush=True)
        _wait_for_signal(signal.signal)
    except LoomError as exc:
        print(f"loom up: {exc}", file=sys.stderr)
        return 1
    finally:
        deployment.stop()
    print("Loom stopped.", flush=True)
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    """Run `loom db`: only the configuration database."""
    schema = schema_path(CONFIG_SCHEMA)
    state = Path(args.state_dir).resolve()
    server: OvsdbCluster | OvsdbServer
    if args.cluster:
        server = OvsdbCluster(state / "config-db-cluster", schema)
    else:
        server = OvsdbServer(state / "config-db", schema, port=args.port or free_port())
    try:
        server.start()
        print(f"config DB: {server.remote}", flush=True)
        _wait_for_signal(signal.signal)
    except LoomError as exc:
        print(f"loom db: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the `loom` command line."""
    parser = argparse.ArgumentParser(prog="loom", description="Loom's local deployment")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the local deployment (config DB and API server)")
    up.add_argument("--api-port", type=int, default=DEFAULT_API_PORT)
    up.add_argument("--admin-token", help="the admin bearer token (default: a random one)")
    up.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    up.add_argument("--db-cluster", action="store_true", help="a 3-member RAFT config DB")
    up.add_argument("--tenant-token", action="append", default=[], metavar="TENANT=TOKEN")
    up.add_argument(
        "--neutron-auth",
        choices=["token", "noauth"],
        default="token",
        help="Neutron API auth: tokens as the native API, or noauth (act as admin)",
    )
    up.set_defaults(func=cmd_up)
    db = sub.add_parser("db", help="start only the configuration database")
    db.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR))
    db.add_argument("--cluster", action="store_true", help="a 3-member RAFT cluster")
    db.add_argument("--port", type=int, help="client port (standalone)")
    db.set_defaults(func=cmd_db)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `loom`."""
    args = parse_args(argv)
    result: int = args.func(args)
    return result
