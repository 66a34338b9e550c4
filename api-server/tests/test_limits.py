"""The API under hostile input: body size, JSON nesting, bulk size, methods, query strings.

Bodies over the limit are refused (413) by the real server (`python -m loom_api`, over raw
sockets) before it reads them, declared or chunked, and it keeps answering other clients;
deep nesting is refused (400) on both APIs, never a 500; HEAD answers like GET without a
body and never writes, even with a body; a method a path does not take is 405 with `Allow`;
unknown query parameters and bad cursors are 400 naming them. Every refusal is checked to
have written nothing.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from loom_api import create_app, limits
from loom_api.auth import Tokens
from loom_api.store import ReadView, Store
from loom_common.ovsdb import free_port
from loom_common.procs import Daemon
from loom_common.testing import register_log, wait_for

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
SWITCHES = f"{API}/logical-switches"
QUEUES = f"{API}/qos-queues"
NODES = f"{API}/transport-nodes"
V2 = "/v2.0"
NETWORKS = f"{V2}/networks"
MISSING = "00000000-0000-0000-0000-00000000dead"

MIB = 1 << 20
#: What the report saw hang the server: a 50 MB body.
HUGE = 50 * MIB
WAIT = 30.0

ADMIN = "limits-admin-token"
ADMIN_TOKEN = "admin-secret"  # conftest's, of the in-process app
TENANT = "blue"
TENANT_TOKEN = "limits-tenant-token"


def nested(depth: int) -> str:
    """Return JSON text of `depth` arrays nested in each other."""
    return "[" * depth + "]" * depth


def switch_count(store: Store) -> int:
    def count(view: ReadView) -> int:
        return view.count("Logical_Switch")

    return store.read(count)


def switch_names(store: Store) -> set[str]:
    def names(view: ReadView) -> set[str]:
        return {row.name for row in view.rows("Logical_Switch")}

    return store.read(names)


def native_error(response: Any, status: int, code: str, field: str | None = None) -> str:
    body = response.get_json()
    assert response.status_code == status, body
    assert body["error"] == code, body
    assert body["field"] == field, body
    message: str = body["message"]
    return message


def neutron_error(response: Any, status: int, kind: str) -> str:
    body = response.get_json()
    assert response.status_code == status, body
    assert set(body) == {"NeutronError"}, body
    assert body["NeutronError"]["type"] == kind, body
    message: str = body["NeutronError"]["message"]
    return message


# ---- raw HTTP ------------------------------------------------------------------------------


def request_head(
    method: str,
    path: str,
    *,
    token: str | None = None,
    length: int | None = None,
    extra: tuple[str, ...] = (),
) -> bytes:
    """Return a request's first line and headers (`Connection: close`)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if length is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {length}"]
    lines += extra
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_until_closed(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read a response until the server closes; return status, headers (lower-case names;
    no Date) and every byte after the header block.

    A reset after the response (the server closed with part of our body unread) ends the
    read like a close.
    """
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            assert data, "the server reset the connection without answering"
            break
        if not chunk:
            break
        data += chunk
    header_block, _, rest = data.partition(b"\r\n\r\n")
    first, *lines = header_block.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name.lower() != "date":
            headers[name.strip().lower()] = value.strip()
    return int(first.split()[1]), headers, rest


def exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send one raw request and read its response until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(raw)
        return read_until_closed(sock)


def chunk(data: bytes) -> bytes:
    """Return `data` as one chunk of a chunked body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


# ---- the real server -----------------------------------------------------------------------


class ApiProcess:
    """A `python -m loom_api` process, its tokens given in files, and a JSON client."""

    def __init__(self, db_remote: str, state: Path, *extra: str) -> None:
        self.port = free_port()
        state.mkdir(parents=True, exist_ok=True)
        admin_file = state / "admin.token"
        admin_file.write_text(ADMIN + "\n")
        tenants_file = state / "tenant.tokens"
        tenants_file.write_text(f"# tenant tokens\n{TENANT}={TENANT_TOKEN}\n")
        command = [sys.executable, "-m", "loom_api", f"--db={db_remote}",
                   f"--listen=127.0.0.1:{self.port}", f"--admin-token-file={admin_file}",
                   f"--tenant-tokens-file={tenants_file}", *extra]  # fmt: skip
        # LOOM_ADMIN_TOKEN empty: the file is the one source even if the caller's env sets it.
        self.daemon = Daemon("api-server", command, state, env={"LOOM_ADMIN_TOKEN": ""})

    def request(
        self, method: str, path: str, body: Any = None, token: str = TENANT_TOKEN
    ) -> tuple[int, Any]:
        """Send one JSON request; return (status, JSON body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        try:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            response = conn.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        finally:
            conn.close()

    def healthy(self) -> bool:
        try:
            return self.request("GET", f"{API}/health")[0] == 200
        except OSError:
            return False


@contextlib.contextmanager
def serve(
    request: pytest.FixtureRequest, db_remote: str, state: Path, *extra: str
) -> Iterator[ApiProcess]:
    """A running `ApiProcess`, stopped (by its PID) on exit, its log on a failing report."""
    api = ApiProcess(db_remote, state, *extra)
    register_log(request, api.daemon.log_path)
    try:
        api.daemon.start(ready=api.healthy, timeout=WAIT)
        yield api
    finally:
        api.daemon.stop()


@pytest.fixture
def api_process(
    config_db: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ApiProcess]:
    """The API server process with the default limits."""
    with serve(request, config_db.remote, tmp_path / "api") as api:
        yield api


def test_tokens_are_not_on_the_command_line(api_process: ApiProcess) -> None:
    assert api_process.daemon.pid is not None
    argv = Path(f"/proc/{api_process.daemon.pid}/cmdline").read_bytes()
    assert ADMIN.encode() not in argv
    assert TENANT_TOKEN.encode() not in argv
    assert api_process.request("GET", SWITCHES, token=ADMIN)[0] == 200
    assert api_process.request("GET", SWITCHES, token=TENANT_TOKEN)[0] == 200
    assert api_process.request("GET", SWITCHES, token="guess")[0] == 401


def test_huge_declared_body_is_refused_before_it_is_read(
    api_process: ApiProcess, store: Store
) -> None:
    with socket.create_connection(("127.0.0.1", api_process.port), timeout=WAIT) as sock:
        start = b'{"name": "huge", "description": "'
        sock.sendall(request_head("POST", SWITCHES, token=TENANT_TOKEN, length=HUGE) + start)
        # The answer comes, and the connection closes, while 50 MB are still to come.
        status, headers, body = read_until_closed(sock)
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "error": "body_too_large",
        "message": f"request body exceeds the limit of {limits.DEFAULT_MAX_BODY_BYTES} bytes",
        "field": None,
    }
    assert api_process.request("POST", SWITCHES, {"name": "after"})[0] == 201
    wait_for(lambda: switch_count(store) == 1, WAIT, "the switch created after")
    assert switch_names(store) == {"after"}


def test_huge_neutron_body_is_refused_in_neutrons_form(api_process: ApiProcess) -> None:
    raw = request_head("POST", NETWORKS, token=TENANT_TOKEN, length=HUGE)
    status, _, body = exchange(api_process.port, raw)
    assert status == 413
    error = json.loads(body)["NeutronError"]
    assert error["type"] == "HTTPRequestEntityTooLarge"
    assert str(limits.DEFAULT_MAX_BODY_BYTES) in error["message"]


def test_a_body_of_exactly_the_limit_is_read(api_process: ApiProcess) -> None:
    prefix, suffix = b'{"nmae": "', b'"}'
    body = prefix + b"x" * (limits.DEFAULT_MAX_BODY_BYTES - len(prefix) - len(suffix)) + suffix
    raw = request_head("POST", SWITCHES, token=TENANT_TOKEN, length=len(body)) + body
    status, _, answer = exchange(api_process.port, raw)
    assert (status, json.loads(answer)["field"]) == (400, "nmae")  # read and validated
    raw = request_head("POST", SWITCHES, token=TENANT_TOKEN, length=len(body) + 1) + body + b" "
    status, _, answer = exchange(api_process.port, raw)
    assert (status, json.loads(answer)["error"]) == (413, "body_too_large")


def test_chunked_huge_body_is_refused_once_past_the_limit(
    api_process: ApiProcess, store: Store
) -> None:
    block = chunk(b"x" * 65536)
    sent = 0
    with socket.create_connection(("127.0.0.1", api_process.port), timeout=WAIT) as sock:
        head = request_head("POST", SWITCHES, token=TENANT_TOKEN, extra=(
            "Content-Type: application/json", "Transfer-Encoding: chunked"))  # fmt: skip
        sock.sendall(head + chunk(b'{"name": "chunked", "description": "'))
        with contextlib.suppress(OSError):  # the server closing on us ends the sending too
            while sent < HUGE and not select.select([sock], [], [], 0)[0]:
                sock.sendall(block)
                sent += len(block)
        status, _, body = read_until_closed(sock)
    assert status == 413
    assert json.loads(body)["error"] == "body_too_large"
    assert sent < HUGE // 2, f"the server read {sent} bytes of a chunked body"
    assert api_process.request("POST", SWITCHES, {"name": "after"})[0] == 201
    wait_for(lambda: switch_count(store) == 1, WAIT, "the switch created after")
    assert switch_names(store) == {"after"}


class Attacker:
    """Sends 50 MB bodies in a loop, each on a new connection, until stopped."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.attempts = 0
        self.most_sent = 0
        self.statuses: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        head = request_head("POST", SWITCHES, token=TENANT_TOKEN, length=HUGE)
        block = b"x" * 65536
        while not self.stop.is_set():
            sent = 0
            with socket.create_connection(("127.0.0.1", self.port), timeout=WAIT) as sock:
                with contextlib.suppress(OSError):
                    sock.sendall(head + b'{"name": "attack", "description": "')
                    while sent < HUGE:
                        sock.sendall(block)
                        sent += len(block)
                try:
                    self.statuses.append(read_until_closed(sock)[0])
                except (OSError, AssertionError):  # reset or timed out: no answer
                    self.statuses.append(0)
            self.most_sent = max(self.most_sent, sent)
            self.attempts += 1


def test_server_keeps_answering_while_huge_bodies_arrive(
    api_process: ApiProcess, store: Store
) -> None:
    attacker = Attacker(api_process.port)
    attacker.thread.start()
    try:
        wait_for(lambda: attacker.attempts >= 3, WAIT, "three huge bodies sent")
        for i in range(5):
            began = time.monotonic()
            status, body = api_process.request("POST", SWITCHES, {"name": f"ok-{i}"})
            assert status == 201, body
            assert time.monotonic() - began < 5.0
        seen = attacker.attempts
        wait_for(lambda: attacker.attempts >= seen + 3, WAIT, "three more huge bodies sent")
    finally:
        attacker.stop.set()
        attacker.thread.join(timeout=WAIT)
    assert not attacker.thread.is_alive()
    assert attacker.most_sent < HUGE // 2, "the server read a whole 50 MB body"
    assert set(attacker.statuses) == {413}
    wait_for(lambda: switch_count(store) == 5, WAIT, "the five switches")
    assert switch_names(store) == {f"ok-{i}" for i in range(5)}


def test_waitress_refusals_are_json_in_the_paths_form(api_process: ApiProcess) -> None:
    cases = [
        (request_head("GET", SWITCHES, extra=("X-Big: " + "a" * 300_000,)), 431, None),
        (request_head("GET", NETWORKS, extra=("Transfer-Encoding: gzip",)), 501, "neutron"),
        (request_head("POST", SWITCHES, extra=("Content-Length: abc",)), 400, None),
        (request_head("POST", NETWORKS, extra=("Content-Length: abc",)), 400, "neutron"),
    ]
    for raw, status, form in cases:
        got, headers, body = exchange(api_process.port, raw)
        assert (got, headers["content-type"]) == (status, "application/json")
        answer = json.loads(body)
        assert set(answer) == ({"NeutronError"} if form else {"error", "message", "field"})


def test_deep_nesting_is_400_through_the_server(api_process: ApiProcess) -> None:
    raw = ('{"name": ' + nested(100_000) + "}").encode()
    status, _, answer = exchange(
        api_process.port,
        request_head("POST", SWITCHES, token=TENANT_TOKEN, length=len(raw)) + raw,
    )
    assert status == 400
    assert json.loads(answer)["error"] == "json_too_deep"
    assert api_process.request("GET", SWITCHES)[1]["items"] == []


def test_limits_follow_the_command_line(
    config_db: Any, tmp_path: Path, request: pytest.FixtureRequest, store: Store
) -> None:
    flags = ("--max-body-bytes=4096", "--max-json-depth=4", "--max-bulk-items=2")
    with serve(request, config_db.remote, tmp_path / "api", *flags) as api:
        status, body = api.request("POST", SWITCHES, {"name": "x", "description": "d" * 4096})
        assert (status, body["error"]) == (413, "body_too_large")
        assert "4096 bytes" in body["message"]
        status, body = api.request("POST", SWITCHES, {"name": "x", "tags": [[[["deep"]]]]})
        assert (status, body["error"]) == (400, "json_too_deep")
        assert "4 levels" in body["message"]
        three = {"networks": [{"name": f"n{i}"} for i in range(3)]}
        status, body = api.request("POST", NETWORKS, three)
        assert status == 400
        assert "at most 2 networks" in body["NeutronError"]["message"]
        status, body = api.request("POST", NETWORKS, {"networks": three["networks"][:2]})
        assert status == 201, body
    wait_for(lambda: switch_count(store) == 2, WAIT, "the two networks")
    assert switch_names(store) == {"n0", "n1"}


# ---- connections: idle, slow, too many; framing ------------------------------------------


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection to the server from loopback address `source` (all of 127/8 is local)."""
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT, source_address=(source, 0))


class Watched:
    """Client sockets whose closing by the server is noticed without blocking."""

    def __init__(self, socks: list[socket.socket]) -> None:
        self.socks = list(socks)
        self.open = {sock.fileno(): sock for sock in socks}
        self.received: dict[int, bytes] = {}
        self.closed_after: dict[int, float] = {}
        self.began = time.monotonic()

    def poll(self) -> int:
        """Read what has come; return how many the server has closed so far."""
        while self.open:
            ready, _, _ = select.select(list(self.open.values()), [], [], 0)
            if not ready:
                break
            for sock in ready:
                fd = sock.fileno()
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    data = b""
                if data:
                    self.received[fd] = self.received.get(fd, b"") + data
                else:
                    self.closed_after[fd] = time.monotonic() - self.began
                    del self.open[fd]
        return len(self.closed_after)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


class Trickler:
    """Slowloris: each connection sends its request head a byte at a time, every `pause` s,
    never finishing it, until stopped."""

    HEAD = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100_000

    def __init__(self, socks: list[socket.socket], pause: float) -> None:
        self.socks = list(socks)
        self.pause = pause
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.pause) and self.sent < len(self.HEAD):
            byte = self.HEAD[self.sent : self.sent + 1]
            for sock in list(self.socks):
                try:
                    sock.send(byte)
                except OSError:  # closed by the server: left alone
                    self.socks.remove(sock)
            self.sent += 1

    def __enter__(self) -> Trickler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=WAIT)


def closed_by_reason(port: int) -> dict[str, float]:
    """The server's `loom_api_connections_closed_total`, by reason."""
    from prometheus_client.parser import text_string_to_metric_families

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return {sample.labels["reason"]: sample.value
            for family in text_string_to_metric_families(text)
            if family.name == "loom_api_connections_closed"
            for sample in family.samples if sample.name.endswith("_total")}  # fmt: skip


def timed_request(port: int, conn: http.client.HTTPConnection | None = None) -> float:
    """GET the switches (on `conn`, kept alive, or a new connection); return the seconds
    the answer took. Fails on any status but 200."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    began = time.monotonic()
    try:
        conn.request("GET", SWITCHES, headers={"Authorization": f"Bearer {TENANT_TOKEN}"})
        response = conn.getresponse()
        body = response.read()
        assert response.status == 200, body
        return time.monotonic() - began
    finally:
        if own:
            conn.close()


#: How long a request may take while hostile connections are open (quiet: milliseconds).
ANSWER_BOUND = 2.0


def test_idle_and_slow_connections_do_not_shut_others_out(api_process: ApiProcess) -> None:
    port = api_process.port
    per_client = limits.DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    # The report's 110 idle connections, from the address the client below uses too; as
    # many again from another address; slowloris from a third.
    same = Watched([connect(port) for _ in range(110)])
    other = Watched([connect(port, "127.0.0.2") for _ in range(3 * per_client)])
    slow_socks = [connect(port, "127.0.0.3") for _ in range(2 * per_client)]
    slow = Watched(slow_socks)
    keep = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        with Trickler(slow_socks, pause=0.05) as trickler:
            wait_for(lambda: trickler.sent >= 5, WAIT, "slowloris under way")
            took = [timed_request(port, keep if i % 2 else None) for i in range(20)]
            assert max(took) < ANSWER_BOUND, took
            # Each address keeps at most its share; its quietest went to make room.
            wait_for(lambda: other.poll() >= 2 * per_client, WAIT, "idle ones closed")
            wait_for(lambda: slow.poll() >= per_client, WAIT, "slow ones closed")
            wait_for(lambda: same.poll() >= 110 + 1 - per_client, WAIT, "same-address closed")
            assert len(other.open) <= per_client
            assert len(slow.open) <= per_client
            assert trickler.sent < 200  # (still trickling: not a completed request)
            # The slow ones kept open are still arriving (no answer, no close).
            assert all(slow.received.get(s.fileno(), b"") == b"" for s in slow.open.values())
            took = [timed_request(port, keep if i % 2 else None) for i in range(20)]
            assert max(took) < ANSWER_BOUND, took
    finally:
        keep.close()
        for watched in (same, other, slow):
            watched.close()


def test_idle_and_arriving_connections_time_out_and_busy_ones_do_not(
    config_db: Any, tmp_path: Path, request: pytest.FixtureRequest, store: Store
) -> None:
    flags = ("--idle-timeout=1", "--request-timeout=2")
    with serve(request, config_db.remote, tmp_path / "api", *flags) as api:
        # A request that takes longer than both timeouts: it waits 4 s for a realization
        # no controller will do.
        answer: dict[str, Any] = {}

        def long_request() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=WAIT)
            began = time.monotonic()
            headers = {"Authorization": f"Bearer {TENANT_TOKEN}",
                       "X-Loom-Wait-For-Realization": "4",
                       "Content-Type": "application/json"}  # fmt: skip
            conn.request("POST", SWITCHES, json.dumps({"name": "long"}), headers)
            response = conn.getresponse()
            response.read()
            answer.update(status=response.status, took=time.monotonic() - began,
                          realized=response.getheader("X-Loom-Realized"))  # fmt: skip
            conn.close()

        waiter = threading.Thread(target=long_request, daemon=True)
        waiter.start()
        idle = Watched([connect(api.port, "127.0.0.2") for _ in range(5)])
        slow_socks = [connect(api.port, "127.0.0.3")]
        slow = Watched(slow_socks)
        try:
            assert idle.poll() == 0
            with Trickler(slow_socks, pause=0.1):
                wait_for(lambda: idle.poll() == 5, WAIT, "idle connections closed")
                wait_for(lambda: slow.poll() == 1, WAIT, "the slowloris answered and closed")
        finally:
            idle.close()
            slow.close()
        assert min(idle.closed_after.values()) >= 1.0
        assert all(data == b"" for data in idle.received.values())
        (slow_after,) = slow.closed_after.values()
        assert slow_after >= 2.0
        (said,) = slow.received.values()
        assert said.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), said
        assert json.loads(said.partition(b"\r\n\r\n")[2])["error"] == "request_timeout"
        waiter.join(timeout=WAIT)
        assert answer == {"status": 201, "took": answer["took"], "realized": "false"}, answer
        assert answer["took"] >= 4.0
        closed = closed_by_reason(api.port)
        assert closed["idle_timeout"] >= 5
        assert closed["request_timeout"] == 1
        # A connection between requests for less than the idle timeout is kept.
        keep = http.client.HTTPConnection("127.0.0.1", api.port, timeout=WAIT)
        try:
            timed_request(api.port, keep)
            sock = keep.sock
            timed_request(api.port, keep)
            assert keep.sock is sock
        finally:
            keep.close()
    assert switch_names(store) == {"long"}


def has_switches(store: Store, count: int) -> bool:
    return switch_count(store) == count


def busy_request(port: int, source: str, name: str) -> http.client.HTTPConnection:
    """Send (from `source`) a create that then waits 5 s for its realization; its
    connection, to read the answer from."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT, source_address=(source, 0))
    headers = {"Authorization": f"Bearer {TENANT_TOKEN}", "X-Loom-Wait-For-Realization": "5",
               "Content-Type": "application/json"}  # fmt: skip
    conn.request("POST", SWITCHES, json.dumps({"name": name}), headers)
    return conn


def test_connections_past_the_limits_are_429_or_503_when_all_are_busy(
    config_db: Any, tmp_path: Path, request: pytest.FixtureRequest, store: Store
) -> None:
    flags = ("--threads=16", "--max-connections=6", "--max-connections-per-client=4")
    with serve(request, config_db.remote, tmp_path / "api", *flags) as api:
        busy: list[http.client.HTTPConnection] = []
        idle = Watched([])
        try:
            for i in range(4):
                busy.append(busy_request(api.port, "127.0.0.4", f"a{i}"))
                # (the switch written: its request is being handled)
                wait_for(partial(has_switches, store, i + 1), WAIT, "the request handled")
            with connect(api.port, "127.0.0.4") as sock:
                status, headers, body = read_until_closed(sock)
            assert (status, headers["retry-after"]) == (429, "1")
            assert json.loads(body)["error"] == "too_many_connections"
            assert "127.0.0.4" in json.loads(body)["message"]
            idle = Watched([connect(api.port, "127.0.0.5")])
            for i in range(2):
                busy.append(busy_request(api.port, "127.0.0.5", f"b{i}"))
                wait_for(partial(has_switches, store, 5 + i), WAIT, "the request handled")
            # The third from 127.0.0.5 made room by closing its idle one; now all six are busy.
            wait_for(lambda: idle.poll() == 1, WAIT, "the idle connection closed for room")
            with connect(api.port, "127.0.0.6") as sock:
                status, headers, body = read_until_closed(sock)
            assert (status, headers["retry-after"]) == (503, "1")
            assert json.loads(body)["error"] == "too_many_connections"
            for conn in busy:
                response = conn.getresponse()
                assert response.status == 201, response.read()
                response.read()
            closed = closed_by_reason(api.port)
            assert (closed["refused_per_client"], closed["refused_server_full"]) == (1, 1)
            assert closed["made_room"] >= 1
        finally:
            idle.close()
            for conn in busy:
                conn.close()
        # Once they are answered there is room again.
        assert api.request("POST", SWITCHES, {"name": "after"})[0] == 201
    assert switch_names(store) == {"a0", "a1", "a2", "a3", "b0", "b1", "after"}


def test_waits_for_realization_hold_at_most_half_the_threads(
    config_db: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """No controller realizes anything here, so every wait lasts its whole time: with 4
    threads two writes wait, a third asking to wait is answered at once (not realized), and
    plain requests are answered meanwhile."""
    with serve(request, config_db.remote, tmp_path / "api", "--threads=4") as api:
        waiting = [busy_request(api.port, "127.0.0.1", f"w{i}") for i in range(2)]
        try:
            wait_for(lambda: len(api.request("GET", SWITCHES)[1]["items"]) == 2, WAIT,
                     "both waiting writes written")  # fmt: skip
            started = time.monotonic()
            third = busy_request(api.port, "127.0.0.1", "w2")
            waiting.append(third)
            response = third.getresponse()
            assert response.status == 201, response.read()
            response.read()
            assert response.headers["X-Loom-Realized"] == "false"
            assert time.monotonic() - started < 2.5, "the third write waited for a slot"
            for _ in range(4):  # the other two threads serve everyone else
                assert timed_request(api.port) < 2.0
            for conn in waiting[:2]:
                held = conn.getresponse()
                assert held.status == 201
                held.read()
                assert held.headers["X-Loom-Realized"] == "false"
        finally:
            for conn in waiting:
                conn.close()


def test_bad_connection_limits_are_refused_at_start() -> None:
    from loom_api.__main__ import parse_args

    base = ["--db=unix:/nonexistent", "--admin-token=t"]
    with pytest.raises(SystemExit):
        parse_args([*base, "--max-connections=5", "--max-connections-per-client=6"])
    with pytest.raises(SystemExit):
        parse_args([*base, "--idle-timeout=0"])
    flags = ["--idle-timeout=2.5", "--max-connections=50", "--max-connections-per-client=10"]
    assert parse_args([*base, *flags]).connections == limits.ConnectionLimits(
        max_connections=50, max_connections_per_client=10, idle_timeout=2.5
    )


@pytest.mark.parametrize(
    ("path", "version", "framing"),
    [
        (SWITCHES, "1.1", ("Content-Length: 5", "Transfer-Encoding: chunked")),
        (SWITCHES, "1.1", ("Transfer-Encoding: chunked", "Content-Length: 5")),
        (NETWORKS, "1.1", ("Content-Length: 5", "Transfer-Encoding: chunked")),
        (SWITCHES, "1.0", ("Transfer-Encoding: chunked",)),
    ],
)
def test_a_body_framed_two_ways_is_400_and_the_connection_closed(
    api_process: ApiProcess, store: Store, path: str, version: str, framing: tuple[str, ...]
) -> None:
    # What a proxy framing by Content-Length would pass as one request, and a server
    # framing by the chunks as two: the second, smuggled, creates a switch.
    body = b'{"name": "outer"}' if "neutron" not in path else b'{"network": {}}'
    smuggled = json.dumps({"name": "smuggled"}).encode()
    second = (f"POST {SWITCHES} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              f"Authorization: Bearer {TENANT_TOKEN}\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(smuggled)}\r\n\r\n").encode() + smuggled  # fmt: skip
    head = (f"POST {path} HTTP/{version}\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TENANT_TOKEN}\r\nContent-Type: application/json\r\n"
            + "".join(f"{line}\r\n" for line in framing) + "\r\n").encode()  # fmt: skip
    raw = head + chunk(body) + b"0\r\n\r\n" + second
    status, headers, answer = exchange(api_process.port, raw)  # (read until the server closes)
    assert (status, headers["content-type"], headers["connection"]) == (
        400, "application/json", "close")  # fmt: skip
    parsed = json.loads(answer.partition(b"HTTP/1.1")[0])
    if path == NETWORKS:
        assert parsed["NeutronError"]["type"] == "HTTPBadRequest"
        assert "Transfer-Encoding" in parsed["NeutronError"]["message"]
    else:
        assert (parsed["error"], parsed["field"]) == ("bad_request", "Transfer-Encoding")
    assert b"HTTP/1.1" not in answer, "a second answer: the smuggled request was served"
    assert switch_count(store) == 0
    assert api_process.request("GET", SWITCHES)[1]["items"] == []


# ---- JSON nesting, in the app ----------------------------------------------------------------


@pytest.mark.parametrize("depth", [32, 33, 1000, 1024, 1025, 100_000])
def test_deep_nesting_is_400_on_the_native_api(admin: ApiClient, depth: int) -> None:
    raw = '{"name": ' + nested(depth) + "}"  # the body is one level deeper than the value
    response = admin.post(SWITCHES, data=raw, content_type="application/json")
    if depth < limits.DEFAULT_MAX_JSON_DEPTH:  # not too deep: refused as the wrong type
        native_error(response, 400, "invalid_value", "name")
    else:
        message = native_error(response, 400, "json_too_deep")
        assert f"deeper than {limits.DEFAULT_MAX_JSON_DEPTH} levels" in message
    assert admin.get(SWITCHES).get_json()["items"] == []


def test_deep_nesting_is_400_on_updates(admin: ApiClient) -> None:
    queue = admin.create(QUEUES, {"name": "q"})
    url = f"{QUEUES}/{queue['id']}"
    raw = '{"name": "q", "tags": ' + nested(1000) + "}"
    for method in ("PUT", "PATCH"):
        response = admin.client.open(
            url, method=method, data=raw, content_type="application/json",
            headers={"Authorization": f"Bearer {admin.token}"},
        )  # fmt: skip
        native_error(response, 400, "json_too_deep")
    assert admin.get(url).get_json() == queue


@pytest.mark.parametrize("depth", [33, 1000, 100_000])
def test_deep_nesting_is_400_on_the_neutron_api(admin: ApiClient, depth: int) -> None:
    raw = '{"network": {"name": ' + nested(depth) + "}}"
    response = admin.post(NETWORKS, data=raw, content_type="application/json")
    message = neutron_error(response, 400, "HTTPBadRequest")
    assert "deeper than" in message
    network = admin.post(NETWORKS, {"network": {"name": "n"}}).get_json()["network"]
    response = admin.put(
        f"{NETWORKS}/{network['id']}",
        data='{"network": {"description": ' + nested(depth) + "}}",
        content_type="application/json",
    )
    neutron_error(response, 400, "HTTPBadRequest")
    assert [n["name"] for n in admin.get(NETWORKS).get_json()["networks"]] == ["n"]
    assert admin.get(f"{NETWORKS}/{network['id']}").get_json()["network"] == network


def test_nul_is_still_refused_naming_its_field(admin: ApiClient) -> None:
    response = admin.post(SWITCHES, {"name": "ok", "tags": ["a", "b\u0000"]})
    native_error(response, 400, "invalid_value", "tags.1")


# ---- body size and bulk size, in the app (any WSGI server) ---------------------------------


@pytest.fixture
def small(store: Store) -> ApiClient:
    """The admin on an app with a 4 KiB body limit and bulk creates of at most 3."""
    config = {limits.MAX_BODY_BYTES: 4096, limits.MAX_BULK_ITEMS: 3}
    app = create_app(store, Tokens(admin=ADMIN), config)
    from loom_api.testing import ApiClient

    return ApiClient(app.test_client(), ADMIN)


def test_long_body_is_413_in_the_app(small: ApiClient) -> None:
    body = {"name": "x", "description": "d" * 4096}
    message = native_error(small.post(SWITCHES, body), 413, "body_too_large")
    assert "4096 bytes" in message
    response = small.post(NETWORKS, {"network": body})
    assert "4096 bytes" in neutron_error(response, 413, "HTTPRequestEntityTooLarge")
    assert small.get(SWITCHES).get_json()["items"] == []


def test_long_chunked_body_is_413_in_the_app(small: ApiClient) -> None:
    raw = json.dumps({"name": "x", "description": "d" * 5000}).encode()
    response = small.client.post(
        SWITCHES,
        input_stream=io.BytesIO(raw),
        content_type="application/json",
        headers={"Authorization": f"Bearer {ADMIN}"},
        environ_overrides={"wsgi.input_terminated": True},  # a chunked body, as waitress says
    )
    native_error(response, 413, "body_too_large")
    assert small.get(SWITCHES).get_json()["items"] == []


def test_bulk_create_is_bounded(small: ApiClient) -> None:
    four = [{"name": f"n{i}"} for i in range(4)]
    message = neutron_error(small.post(NETWORKS, {"networks": four}), 400, "HTTPBadRequest")
    assert "at most 3 networks" in message
    assert small.get(NETWORKS).get_json()["networks"] == []
    response = small.post(NETWORKS, {"networks": four[:3]})
    assert response.status_code == 201, response.get_json()
    assert len(small.get(NETWORKS).get_json()["networks"]) == 3


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (limits.MAX_BODY_BYTES, 0),
        (limits.MAX_JSON_DEPTH, limits.PARSER_MAX_DEPTH + 1),
        (limits.MAX_BULK_ITEMS, "10"),
    ],
)
def test_limits_out_of_range_are_refused(store: Store, key: str, value: Any) -> None:
    with pytest.raises(ValueError, match=key.removeprefix("LOOM_").lower()):
        create_app(store, Tokens(admin=ADMIN), {key: value})


# ---- methods: HEAD is GET without a body; others a path does not take are 405 -------------


def raw_get_and_head(
    base: str, path: str
) -> tuple[tuple[int, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]:
    port = int(base.rsplit(":", 1)[1])
    get = exchange(port, request_head("GET", path, token=ADMIN_TOKEN))
    head = exchange(port, request_head("HEAD", path, token=ADMIN_TOKEN))
    return get, head


@pytest.fixture
def objects(admin: ApiClient) -> dict[str, str]:
    """Paths of one object of each kind HEAD is tried on."""
    switch = admin.create(SWITCHES, {"name": "sw"})
    port = admin.create(f"{SWITCHES}/{switch['id']}/ports", {"name": "p"})
    network = admin.post(NETWORKS, {"network": {"name": "net"}}).get_json()["network"]
    return {
        "switch": f"{SWITCHES}/{switch['id']}",
        "port_status": f"{SWITCHES}/{switch['id']}/ports/{port['id']}/status",
        "network": f"{NETWORKS}/{network['id']}",
    }


def test_head_is_get_without_a_body(live_api: str, objects: dict[str, str]) -> None:
    paths = [
        SWITCHES, objects["switch"], objects["port_status"], f"{API}/status",
        f"{API}/health", f"{API}/realization", f"{API}/openapi.json",
        "/", V2, NETWORKS, objects["network"], f"{objects['network']}/tags",
        f"{V2}/extensions", f"{API}/no-such-path", f"{SWITCHES}/{MISSING}",
    ]  # fmt: skip
    for path in paths:
        (get_status, get_headers, get_body), head = raw_get_and_head(live_api, path)
        assert head == (get_status, get_headers, b""), path
        assert get_body, path
        assert int(get_headers["content-length"]) == len(get_body), path


def test_head_with_a_body_writes_nothing(
    live_api: str, admin: ApiClient, store: Store, objects: dict[str, str]
) -> None:
    port = int(live_api.rsplit(":", 1)[1])
    queue = admin.create(QUEUES, {"name": "q", "min_rate": 10})
    network = admin.get(objects["network"]).get_json()
    before = switch_count(store)
    tries = [
        (SWITCHES, {"name": "via-head"}),
        (QUEUES, {"name": "via-head"}),
        (f"{QUEUES}/{queue['id']}", {"name": "replaced", "max_rate": 5}),
        (objects["switch"], {"name": "renamed"}),
        (NETWORKS, {"network": {"name": "via-head"}}),
        (objects["network"], {"network": {"name": "renamed"}}),
        (f"{objects['network']}/tags", {"tags": ["t"]}),
        (f"{objects['network']}/tags/t", {"tags": ["t"]}),
    ]
    for path, body in tries:
        raw = json.dumps(body).encode()
        status, headers, rest = exchange(
            port, request_head("HEAD", path, token=ADMIN_TOKEN, length=len(raw)) + raw
        )
        assert status in (200, 404), (path, status)  # (404: the tag is not there)
        assert rest == b"", path
        assert "location" not in headers, path
        assert "x-loom-config-generation" not in headers, path
    assert switch_count(store) == before
    assert admin.get(f"{QUEUES}/{queue['id']}").get_json() == queue
    assert [q["name"] for q in admin.get(QUEUES).get_json()["items"]] == ["q"]
    assert admin.get(objects["network"]).get_json() == network
    assert admin.get(f"{objects['network']}/tags").get_json() == {"tags": []}


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", SWITCHES, "GET, HEAD, OPTIONS, POST"),
        ("POST", f"{SWITCHES}/{MISSING}", "DELETE, GET, HEAD, OPTIONS, PATCH, PUT"),
        ("PUT", f"{SWITCHES}/{MISSING}/ports/{MISSING}/status", "GET, HEAD, OPTIONS"),
        ("POST", f"{API}/status", "GET, HEAD, OPTIONS"),
        ("DELETE", f"{API}/openapi.json", "GET, HEAD, OPTIONS"),
    ],
)
def test_other_methods_are_405_with_allow_on_the_native_api(
    admin: ApiClient, method: str, path: str, allow: str
) -> None:
    response = admin.client.open(path, method=method)
    native_error(response, 405, "method_not_allowed")
    assert sorted(response.headers["Allow"].split(", ")) == allow.split(", ")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PATCH", NETWORKS, "GET, HEAD, OPTIONS, POST"),
        ("PATCH", f"{NETWORKS}/{MISSING}", "DELETE, GET, HEAD, OPTIONS, PUT"),
        ("POST", f"{NETWORKS}/{MISSING}/tags", "DELETE, GET, HEAD, OPTIONS, PUT"),
        ("GET", f"{V2}/routers/{MISSING}/add_router_interface", "OPTIONS, PUT"),
        ("HEAD", f"{V2}/routers/{MISSING}/remove_router_interface", "OPTIONS, PUT"),
        ("DELETE", "/", "GET, HEAD, OPTIONS"),
    ],
)
def test_other_methods_are_405_with_allow_on_the_neutron_api(
    admin: ApiClient, method: str, path: str, allow: str
) -> None:
    response = admin.client.open(path, method=method)
    assert response.status_code == 405
    assert sorted(response.headers["Allow"].split(", ")) == allow.split(", ")
    if method != "HEAD":
        neutron_error(response, 405, "HTTPMethodNotAllowed")
    else:
        assert response.data == b""


# ---- query strings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("tenat=blue", "tenat"),
        ("tenant=blue&verbose=1", "verbose"),
        ("limit=1&limit=2", "limit"),
        ("cursor=garbage", "cursor"),
        ("cursor=", "cursor"),
        (f"cursor={MISSING}x", "cursor"),
    ],
)
def test_bad_list_query_is_400_naming_the_parameter(
    admin: ApiClient, query: str, field: str
) -> None:
    admin.create(SWITCHES, {"name": "sw", "tenant": "red"})
    native_error(admin.get(f"{SWITCHES}?{query}"), 400, field_code(field), field)


def field_code(field: str) -> str:
    return "invalid_value" if field == "cursor" else "unknown_parameter"


def test_cursor_in_any_case_pages_alike(admin: ApiClient) -> None:
    for i in range(3):
        admin.create(SWITCHES, {"name": f"sw{i}"})
    first = admin.get(f"{SWITCHES}?limit=1").get_json()
    cursor = first["next_cursor"]
    lower = admin.get(f"{SWITCHES}?limit=1&cursor={cursor}").get_json()
    upper = admin.get(f"{SWITCHES}?limit=1&cursor={cursor.upper()}").get_json()
    assert lower == upper
    assert lower["items"][0]["id"] > cursor


def test_list_filters_still_filter(admin: ApiClient) -> None:
    admin.create(SWITCHES, {"name": "a", "tenant": "red", "tags": ["x"]})
    admin.create(SWITCHES, {"name": "b", "tenant": "blue"})
    names = [s["name"] for s in admin.get(f"{SWITCHES}?tenant=red&tag=x").get_json()["items"]]
    assert names == ["a"]
    assert [s["name"] for s in admin.get(f"{SWITCHES}?name=b").get_json()["items"]] == ["b"]


def test_unknown_query_on_other_routes_is_400(admin: ApiClient, store: Store) -> None:
    switch = admin.create(SWITCHES, {"name": "sw"})
    url = f"{SWITCHES}/{switch['id']}"
    native_error(admin.get(f"{url}?verbose=1"), 400, "unknown_parameter", "verbose")
    native_error(admin.put(f"{url}?x=1", {"name": "new"}), 400, "unknown_parameter", "x")
    native_error(admin.patch(f"{url}?x=1", {"name": "new"}), 400, "unknown_parameter", "x")
    native_error(admin.delete(f"{url}?force=1"), 400, "unknown_parameter", "force")
    native_error(
        admin.post(f"{SWITCHES}?tenant=red", {"name": "other"}), 400, "unknown_parameter", "tenant"
    )
    native_error(admin.get(f"{API}/status?x=1"), 400, "unknown_parameter", "x")
    native_error(admin.get(f"{API}/realization?generation=1&x=1"), 400, "unknown_parameter", "x")
    assert admin.get(f"{API}/health?probe=1").status_code == 200
    assert admin.get(url).get_json() == switch
    assert switch_names(store) == {"sw"}


@pytest.mark.parametrize("populated", [False, True])
def test_neutron_unknown_filter_and_bad_marker_are_400(admin: ApiClient, populated: bool) -> None:
    if populated:
        admin.post(NETWORKS, {"network": {"name": "n"}})
    neutron_error(admin.get(f"{NETWORKS}?tenat=blue"), 400, "HTTPBadRequest")
    neutron_error(admin.get(f"{NETWORKS}?marker=garbage"), 400, "HTTPBadRequest")
    neutron_error(admin.get(f"{NETWORKS}?limit=garbage"), 400, "HTTPBadRequest")
    assert admin.get(f"{NETWORKS}?name=n").status_code == 200


def test_filterable_and_sortable_attributes_cover_what_objects_show(admin: ApiClient) -> None:
    from loom_api import neutron
    from loom_api.neutron import listing

    def post(collection: str, member: str, body: dict[str, Any]) -> dict[str, Any]:
        response = admin.post(f"{V2}/{collection}", {member: body})
        assert response.status_code == 201, response.get_json()
        created: dict[str, Any] = response.get_json()[member]
        return created

    external = post("networks", "network", {"name": "ext", "router:external": True})
    post(
        "subnets",
        "subnet",
        {"network_id": external["id"], "cidr": "203.0.113.0/24", "ip_version": 4},
    )
    network = post("networks", "network", {"name": "net"})
    subnet = post(
        "subnets", "subnet", {"network_id": network["id"], "cidr": "10.0.0.0/24", "ip_version": 4}
    )
    post("ports", "port", {"network_id": network["id"]})
    router = post("routers", "router", {"external_gateway_info": {"network_id": external["id"]}})
    response = admin.put(
        f"{V2}/routers/{router['id']}/add_router_interface", {"subnet_id": subnet["id"]}
    )
    assert response.status_code == 200, response.get_json()
    post("floatingips", "floatingip", {"floating_network_id": external["id"]})  # unassociated
    for path, res in neutron.RESOURCES.items():
        items = admin.get(f"{V2}/{path}").get_json()[res.collection]
        assert items, path
        shown = set().union(*items)
        assert shown <= listing.attributes(res), (path, shown - listing.attributes(res))
        # What can be sorted by: every attribute shown with a scalar value, and no other.
        for item in items:
            for name, value in item.items():
                if isinstance(value, list | dict):
                    assert name in listing.NOT_SORTABLE, (path, name)
                else:
                    assert name in listing.sort_keys(res), (path, name)
