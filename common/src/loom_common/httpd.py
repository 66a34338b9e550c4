"""A daemon's own HTTP endpoint (`--metrics HOST:PORT`): `/metrics` in Prometheus text,
and the read-only routes the daemon adds (`route`): the physical controller's
`/nodes/<system-id>/flows`, which the API server asks on an operator's behalf. It is
meant for the controllers' own network (the API server and Prometheus), as exporters are:
it takes no token, and `loom up` binds it where it binds everything else.

A route is a function of the rest of the path and the query that returns a status and a
JSON body; it runs on the server's request thread (one per request).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger(__name__)

Route = Callable[[str, dict[str, list[str]]], tuple[int, Any]]
"""(the path after the route's prefix, the query) -> (HTTP status, JSON body)."""

_routes: dict[str, Route] = {}


def route(prefix: str, handler: Route) -> None:
    """Answer GET requests whose path starts with `prefix` with `handler`."""
    _routes[prefix] = handler


def unroute(prefix: str) -> None:
    """Stop answering `prefix` (its requests get 404)."""
    _routes.pop(prefix, None)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/metrics":
            self._send(200, generate_latest(), CONTENT_TYPE_LATEST)
            return
        for prefix, handler in list(_routes.items()):
            if url.path.startswith(prefix):
                try:
                    status, body = handler(url.path[len(prefix) :], parse_qs(url.query))
                except Exception as exc:  # a route's bug: said, not a dead endpoint
                    log.exception("GET %s failed", url.path)
                    status, body = 500, {"error": "internal", "message": str(exc)}
                self._send(status, json.dumps(body).encode(), "application/json")
                return
        self._send(404, b'{"error": "not_found"}', "application/json")

    def _send(self, status: int, body: bytes, media_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)


def serve(address: str) -> tuple[str, int]:
    """Serve on `HOST:PORT` (PORT 0: a free one) from a daemon thread; the address bound.

    Raises:
        ValueError: not HOST:PORT.
        OSError: the port cannot be bound.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="loom-httpd", daemon=True).start()
    bound = server.server_address
    return str(bound[0]), int(bound[1])
