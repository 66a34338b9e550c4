"""The API's waitress server: its body-size limit, and its own refusals in the API's JSON.

Waitress reads a request's whole body before the app runs, so the body limit must be
waitress's too (`max_request_body_size`): a declared `Content-Length` over the limit is
refused as soon as the headers are in, and a chunked body once it passes the limit, and the
connection is closed without reading the rest. Waitress answers those (and requests it
cannot parse) itself, in plain text; here its error task renders them as the API does:
`{"error", "message", "field"}` under `/api/v1`, `{"NeutronError": {...}}` under `/v2.0`.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Flask
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer
from waitress.server import create_server as waitress_server
from waitress.task import ErrorTask
from waitress.utilities import Error, RequestEntityTooLarge, RequestHeaderFieldsTooLarge

from loom_api import errors
from loom_api.neutron import errors as neutron_errors
from loom_api.views.neutron import is_neutron_path


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
        exc = errors.BadRequest(detail=f"{error.reason}: {error.body}")
    if is_neutron_path(path):
        body, _ = neutron_errors.render(exc)
        if not isinstance(error, RequestEntityTooLarge):
            body["NeutronError"]["type"] = "HTTP" + error.reason.replace(" ", "")
        return json.dumps(body).encode()
    out = exc.to_dict()
    if not isinstance(error, RequestEntityTooLarge):
        out["error"] = error.reason.lower().replace(" ", "_")
    return json.dumps(out).encode()


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


class _Channel(HTTPChannel):
    """One client connection; its refusals are JSON."""

    error_task_class = _JsonErrorTask


def create_server(
    app: Flask, *, host: str, port: int, threads: int, max_body_bytes: int, **kw: Any
) -> BaseWSGIServer:
    """Return a waitress server for `app` (not yet running) that refuses long bodies.

    Args:
        app: the API app.
        host: the address to listen on.
        port: the port (0 for any free one: see the server's `effective_port`).
        threads: request threads.
        max_body_bytes: the longest body accepted (`Limits.max_body_bytes`).
        **kw: further waitress settings.

    Returns:
        The waitress server; `run()` serves, `close()` stops.
    """
    # waitress refuses a body of `max_request_body_size` bytes or more.
    server = waitress_server(
        app,
        host=host,
        port=port,
        threads=threads,
        max_request_body_size=max_body_bytes + 1,
        **kw,
    )
    assert isinstance(server, BaseWSGIServer)  # one address, one listening socket
    server.channel_class = _Channel
    return server
