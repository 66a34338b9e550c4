"""The OVSDB client: JSON-RPC connections to ovsdb-server (RFC 7047), spoken directly.

`RawConnection` connects (to one server, or to the member of a RAFT cluster that is
connected to its cluster), sends requests (`call`, `transact`, several in flight with
`call_each` / `transact_each`, or sent now and finished later with `send_transact`),
answers the server's inactivity probes (by a keeper thread while the owner is busy:
`keep_alive`) and keeps the notifications that arrive meanwhile for `poll()`.
`use_tls` and its command-line options set the credentials of `ssl:` remotes;
`readable` waits on many connections (`poll`, not `select`).

The replica a monitor keeps on a connection is `loom_common.ovsdb.replica`; operations
are built by `loom_common.ovsdb.ops`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import select
import socket
import ssl
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from loom_common import unixsock
from loom_common.ovsdb import ops
from loom_common.ovsdb.errors import ConnectionClosed, OvsdbError, TransactError
from loom_common.pki import Credentials, client_context

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
    connections, most with nothing to read, held the GIL for a cost per connection, every
    tick)."""

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
    (several times faster than the standard library's `json` on a full-scale cold start's
    large messages),
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
            select_op = ops.select("Database", ops.where_eq("name", db), ["model", "connected"])
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
        return unixsock.connect(where, timeout)
    raise OSError(f"unsupported remote {remote!r}")


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
