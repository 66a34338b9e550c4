"""The API's waitress server: its connection and body limits, and its refusals in the API's JSON.

Waitress reads a request's whole body before the app runs, so the body limit must be
waitress's too (`max_request_body_size`): a declared `Content-Length` over the limit is
refused as soon as the headers are in, and a chunked body once it passes the limit, and the
connection is closed without reading the rest. Waitress answers those (and requests it
cannot parse) itself, in plain text; here its error task renders them as the API does:
`{"error", "message", "field"}` under `/api/v1`, `{"NeutronError": {...}}` under `/v2.0`.

A request with both `Content-Length` and `Transfer-Encoding`, or an HTTP/1.0 request with
`Transfer-Encoding`, is refused (400, and the connection closed) rather than framed by the
chunked coding as waitress would: two framings of one message are how requests are
smuggled past a proxy that picks the other one (RFC 9112 §6.1 and §6.3 allow the refusal).

Connections are held to `limits.ConnectionLimits` by the server below, not by waitress's
own bounds (which stop accepting at a fixed count, so that idle clients shut every other
out, and close idle connections only after minutes). A connection is *idle* (no request
started), *arriving* (a request started and not complete) or *busy* (a whole request
queued for a thread, being handled, or its answer being written):

- an idle connection is closed after `idle_timeout` without traffic (keep-alive clients
  reconnect), and so is one whose answer its client has stopped reading for that long;
- an arriving request must be complete (headers and body) within `request_timeout` of its
  first byte, or is answered 408 and closed: trickling a byte at a time (slowloris) keeps a
  connection active but does not keep it open;
- a request being handled is never cut, however long it takes;
- when a new connection would pass `max_connections_per_client` (connections from its
  source address) or `max_connections`, the quietest idle or arriving connection of that
  address (or, for the total, of any) is closed to make room — the longest idle, or the
  one whose request has been arriving longest — so idle and slow clients never keep a new
  client out; only when every connection in the way is busy is the new one answered at
  once and closed — 429 (its own address has that many requests in progress) or 503 (the
  server has), with `Retry-After` — without reading its request, so a refusal costs no
  thread and no buffer. That answer is in the native API's form (the path is not read).

Each is counted in `loom_api_connections_closed_total{reason}` (`loom_api.metrics`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import resource
import socket
import time
from typing import Any

from flask import Flask
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import BadRequest, Error, RequestEntityTooLarge, RequestHeaderFieldsTooLarge

from loom_api import errors
from loom_api.limits import ConnectionLimits
from loom_api.metrics import CONNECTIONS_CLOSED
from loom_api.neutron import errors as neutron_errors
from loom_api.views.neutron import is_neutron_path

log = logging.getLogger(__name__)

#: Seconds between two log lines about refused connections (a flood is one line a period).
REFUSAL_LOG_PERIOD = 60.0
#: File descriptors the process needs besides its clients' connections (the listening
#: socket, the loop's trigger, the config DB connections, logs, the interpreter's own).
SPARE_DESCRIPTORS = 64


def error_body(error: Error, path: str, max_body_bytes: int) -> bytes:
    """Return the JSON body of a waitress refusal of a request for `path`.

    Args:
        error: what waitress refused the request with (413, 400, 431, 501 ...).
        path: the request's path ("" when waitress could not parse it: the native form).
        max_body_bytes: the body limit, which a 413 names.

    Returns:
        The body, in the native or the Neutron form (by `path`).
    """
    exc: errors.LoomApiError
    if isinstance(error, RequestEntityTooLarge):
        exc = errors.BodyTooLarge(limit=max_body_bytes)
    else:
        field = error.field if isinstance(error, FramingConflict) else None
        exc = errors.BadRequest(detail=f"{error.reason}: {error.body}", field=field)
    if is_neutron_path(path):
        body, _ = neutron_errors.render(exc)
        if not isinstance(error, RequestEntityTooLarge):
            body["NeutronError"]["type"] = "HTTP" + error.reason.replace(" ", "")
        return json.dumps(body).encode()
    out = exc.to_dict()
    if not isinstance(error, RequestEntityTooLarge):
        out["error"] = error.reason.lower().replace(" ", "_")
    return json.dumps(out).encode()


class FramingConflict(BadRequest):
    """A request framed two ways (400), naming the header at fault."""

    def __init__(self, body: str, field: str) -> None:
        super().__init__(body)
        self.field = field


class _Parser(HTTPRequestParser):
    """Waitress's request parser, refusing a request whose body is framed two ways."""

    conflict: FramingConflict | None = None

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)
        headers: Any = self.headers
        if self.chunked and "CONTENT_LENGTH" in headers:
            self.conflict = FramingConflict(
                "a request may not have both Content-Length and Transfer-Encoding",
                "Transfer-Encoding",
            )
        elif self.version == "1.0" and "TRANSFER_ENCODING" in headers:
            self.conflict = FramingConflict(
                "Transfer-Encoding is not defined in HTTP/1.0", "Transfer-Encoding"
            )
        if self.conflict is not None:
            raise ParsingError(self.conflict.body)  # (waitress's refusal: a 400, then close)

    def received(self, data: bytes) -> int:
        consumed = super().received(data)
        if self.conflict is not None:
            self.error = self.conflict  # (waitress made a plain BadRequest of it)
        return consumed


class _JsonErrorTask(ErrorTask):
    """Waitress's error response, with a JSON body in the API's form."""

    def execute(self) -> None:
        request: Any = self.request  # (the stubs call it an Error; it is the parsed request)
        error: Error = request.error
        path = getattr(request, "path", "") or ""
        if isinstance(error, RequestHeaderFieldsTooLarge):  # waitress stood in "GET /" for it
            path = ""
        limit = self.channel.server.adj.max_request_body_size - 1  # see create_server
        body = error_body(error, path, limit)
        self.status = f"{error.code} {error.reason}"
        headers: Any = self.response_headers
        headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


def plain_response(status: str, error: str, message: str, *, retry_after: int | None) -> bytes:
    """Return a whole HTTP/1.1 response (JSON error body, `Connection: close`) as bytes."""
    body = json.dumps({"error": error, "message": message, "field": None}).encode()
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", "Connection: close"]  # fmt: skip
    if retry_after is not None:
        lines.append(f"Retry-After: {retry_after}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Channel(HTTPChannel):
    """One client connection: its refusals are JSON, its request framed one way only, and
    the time its arriving request started is kept (for `request_timeout`)."""

    error_task_class = _JsonErrorTask
    parser_class = _Parser
    #: When the first byte of the request still arriving came (None: none is arriving).
    request_started: float | None = None

    @property
    def peer(self) -> str:
        """The client's source address, which `max_connections_per_client` counts by."""
        return str(self.addr[0])

    def received(self, data: bytes) -> bool:
        before = self.request
        result = super().received(data)
        if self.request is None:
            self.request_started = None
        elif self.request is not before:  # (a request began in this data)
            self.request_started = time.time()
        return result

    def handling(self) -> bool:
        """True while a whole request is queued for a thread or being handled."""
        return bool(self.requests)

    def busy(self) -> bool:
        """True while a request is handled or its answer is still being written."""
        return self.handling() or bool(self.total_outbufs_len)

    def ending(self) -> bool:
        """True once the connection is to be closed."""
        return bool(self.will_close or self.close_when_flushed)

    def quiet_since(self) -> float:
        """Since when it has made no progress towards an answer: the start of the request
        still arriving, else its last traffic."""
        if self.request_started is not None:
            return self.request_started
        return self.last_activity

    def time_out_request(self) -> None:
        """Answer 408 to the request still arriving, and close once that is written."""
        answer = plain_response("408 Request Timeout", "request_timeout",
                                "the request did not arrive in time", retry_after=None)  # fmt: skip
        if self.request is not None:
            self.request.close()
        self.request = None
        self.request_started = None
        with self.outbuf_lock:
            outbuf: Any = self.outbufs[-1]
            outbuf.append(answer)
            self.total_outbufs_len += len(answer)
        self.close_when_flushed = True
        CONNECTIONS_CLOSED.labels("request_timeout").inc()


class _Server(TcpWSGIServer):
    """Waitress's TCP server, holding its connections to `ConnectionLimits` (module
    docstring) instead of waitress's `connection_limit` and `channel_timeout`."""

    channel_class = _Channel

    def __init__(self, app: Flask, bounds: ConnectionLimits, **kw: Any) -> None:
        self.bounds = bounds
        self.next_sweep = 0.0
        self.refused_unlogged = 0
        self.refusal_logged_at = float("-inf")
        super().__init__(app, **kw)

    def readable(self) -> bool:
        # (The loop asks every turn, at least once a second.)
        now = time.time()
        if now >= self.next_sweep:
            self.next_sweep = now + self.bounds.sweep_interval
            self.maintenance(now)
        return bool(self.accepting)

    def maintenance(self, now: float) -> None:
        """Close connections idle past `idle_timeout` and answer 408 to requests arriving
        for longer than `request_timeout`; a request being handled is left alone."""
        for channel in self.channels():
            if channel.handling():
                continue
            if channel.request_started is not None:
                if now - channel.request_started > self.bounds.request_timeout:
                    channel.time_out_request()
            elif now - channel.last_activity > self.bounds.idle_timeout:
                channel.will_close = True
                CONNECTIONS_CLOSED.labels("idle_timeout").inc()

    def channels(self, peer: str | None = None) -> list[_Channel]:
        """The connections (of `peer`, or all) that are not being closed."""
        channels: Any = self.active_channels
        return [c for c in channels.values() if isinstance(c, _Channel) and not c.ending()
                and (peer is None or c.peer == peer)]  # fmt: skip

    def handle_accept(self) -> None:
        try:
            pair = self.accept()
            if pair is None:
                return
            conn, addr = pair
            self.set_socket_options(conn)
        except OSError:  # (as waitress: a client gone before it was accepted)
            return
        peer = str(addr[0])
        refusal = self._make_room(peer)
        if refusal is not None:
            _refuse(conn, refusal)
            self._log_refusal(peer, refusal)
            return
        server: Any = self  # (the stubs do not know the socket map)
        self.channel_class(self, conn, addr, self.adj, map=server._map)

    def _make_room(self, peer: str) -> bytes | None:
        """Close the quietest connection in the way of a new one from `peer`, for each limit
        it would pass; the answer refusing it if every one in the way is busy, else None."""
        bounds = self.bounds
        for scope, limit in ((peer, bounds.max_connections_per_client),
                             (None, bounds.max_connections)):  # fmt: skip
            current = self.channels(scope)
            if len(current) < limit:
                continue
            quiet = [c for c in current if not c.busy()]
            if quiet:
                min(quiet, key=_Channel.quiet_since).will_close = True
                CONNECTIONS_CLOSED.labels("made_room").inc()
            elif scope is not None:
                CONNECTIONS_CLOSED.labels("refused_per_client").inc()
                return plain_response(
                    "429 Too Many Requests", "too_many_connections",
                    f"{limit} connections from {peer} already have requests in progress",
                    retry_after=1)  # fmt: skip
            else:
                CONNECTIONS_CLOSED.labels("refused_server_full").inc()
                return plain_response(
                    "503 Service Unavailable", "too_many_connections",
                    f"{limit} connections already have requests in progress",
                    retry_after=1)  # fmt: skip
        return None

    def _log_refusal(self, peer: str, answer: bytes) -> None:
        """Log refused connections: the first, then at most one line a period."""
        self.refused_unlogged += 1
        now = time.monotonic()
        if now - self.refusal_logged_at < REFUSAL_LOG_PERIOD:
            return
        status = answer.split(b"\r\n", 1)[0].decode()
        log.warning("refused %d connection(s) since the last such line, the latest from %s: %s",
                    self.refused_unlogged, peer, status)  # fmt: skip
        self.refused_unlogged = 0
        self.refusal_logged_at = now


def _refuse(conn: socket.socket, answer: bytes) -> None:
    """Answer a connection there is no room for and close it.

    What its client already sent is read and dropped first: closing with unread data would
    reset the connection, and the client could lose the answer.
    """
    try:
        conn.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            conn.recv(65536)
        conn.send(answer)  # (a new socket's send buffer holds it whole)
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        conn.close()


def ensure_descriptors(bounds: ConnectionLimits) -> None:
    """Raise the process's open-file limit to what `max_connections` needs, if it is lower.

    Raises:
        ValueError: the hard limit is below what `max_connections` needs.
    """
    needed = bounds.max_connections + SPARE_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise ValueError(
                f"max_connections {bounds.max_connections} needs {needed} open files; the "
                f"hard limit (ulimit -Hn) is {hard}"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def create_server(
    app: Flask,
    *,
    host: str,
    port: int,
    threads: int,
    max_body_bytes: int,
    connections: ConnectionLimits | None = None,
    **kw: Any,
) -> TcpWSGIServer:
    """Return a waitress server for `app` (not yet running) held to the API's limits.

    Args:
        app: the API app.
        host: the address to listen on.
        port: the port (0 for any free one: see the server's `effective_port`).
        threads: request threads.
        max_body_bytes: the longest body accepted (`Limits.max_body_bytes`).
        connections: the connection limits (`ConnectionLimits()` when None).
        **kw: further waitress settings.

    Returns:
        The waitress server; `run()` serves, `close()` stops.

    Raises:
        ValueError: the process may not open enough files for `max_connections`.
    """
    bounds = connections or ConnectionLimits()
    ensure_descriptors(bounds)
    # waitress refuses a body of `max_request_body_size` bytes or more. poll(), not
    # select(), which cannot watch descriptors past 1024.
    return _Server(
        app,
        bounds,
        host=host,
        port=port,
        threads=threads,
        max_request_body_size=max_body_bytes + 1,
        connection_limit=bounds.max_connections,
        asyncore_use_poll=True,
        **kw,
    )
