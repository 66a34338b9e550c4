"""`loom_common.apiclient.Http` never raises on an answer: a refused connection and an
answer cut short (a server killed while it answered) are status 0."""

from __future__ import annotations

import http.client
import socket
import threading

from loom_common.apiclient import Http


def _read_request(conn: socket.socket) -> None:
    """Read one request whole (its request line, headers, and the body its Content-Length
    gives): a server that closes with a request's bytes unread makes the kernel reset the
    connection, and the client sees that instead of the answer."""
    with conn.makefile("rb") as request:
        request.readline()
        headers = http.client.parse_headers(request)
        request.read(int(headers.get("Content-Length", 0)))


def _serve_once(answer: bytes) -> tuple[str, threading.Thread]:
    """A server on 127.0.0.1 that reads one request, sends `answer` and closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                _read_request(conn)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{port}", thread


def test_an_answer_cut_short_is_status_0() -> None:
    cut = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 417\r\n\r\n{"
    url, thread = _serve_once(cut)
    reply = Http(url, "token", timeout=10).request("POST", "/ports", {"name": "p"})
    thread.join(timeout=10)
    assert reply.status == 0
    assert "IncompleteRead" in reply.body


def test_a_whole_answer_is_its_status_and_body() -> None:
    whole = (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
             b"X-Loom-Config-Generation: 7\r\nContent-Length: 11\r\n\r\n"
             b'{"id": "x"}')  # fmt: skip
    url, thread = _serve_once(whole)
    reply = Http(url, "token", timeout=10).request("POST", "/ports", {"name": "p"})
    thread.join(timeout=10)
    assert (reply.status, reply.body, reply.generation) == (201, {"id": "x"}, 7)


def test_nobody_listening_is_status_0() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # (closed again: nobody listens there)
    reply = Http(f"http://127.0.0.1:{port}", "token", timeout=10).request("GET", "/health")
    assert reply.status == 0
