"""The API server the lab's benchmarks run, and their HTTP client of it.

`api_server` runs `python -m loom_api` (a real server process, as `loom up` starts it) on a
free port with the admin token `TOKEN`; `HttpClient` makes keep-alive JSON requests to it, as
a cloud manager does. Shared by `loom_lab.api_bench`, `loom_lab.api_bench_hostile` and the
controllers' benchmarks.
"""

from __future__ import annotations

import http.client
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TOKEN = "bench-admin-token"


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile of `values` (nearest rank; `values` not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class HttpClient:
    """Keep-alive JSON requests to the API server, as a cloud manager makes them."""

    def __init__(self, base: str, token: str) -> None:
        host, _, port = base.removeprefix("http://").partition(":")
        self._conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
        """Return (status, JSON body, headers)."""
        payload = None if body is None else json.dumps(body)
        self._conn.request(method, path, payload, self._headers)
        response = self._conn.getresponse()
        return response.status, json.loads(response.read() or b"null"), response.headers

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


@contextmanager
def api_server(
    db_remote: str,
    state: Path,
    ready_timeout: float = 30.0,
    tenant_tokens: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Run `python -m loom_api` on a free port, its tokens (`TOKEN` for the admin, and
    `tenant_tokens`, tenant -> token) in files; yield its base URL once it answers (it
    reads the whole config DB first: allow for that with `ready_timeout`)."""
    from loom_common.ovsdb import free_port
    from loom_common.procs import Daemon

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    state.mkdir(parents=True, exist_ok=True)
    admin_file, tenants_file = state / "admin.token", state / "tenant.tokens"
    admin_file.write_text(TOKEN + "\n")
    tenants_file.write_text("".join(f"{t}={k}\n" for t, k in (tenant_tokens or {}).items()))
    command = [sys.executable, "-m", "loom_api", "--db", db_remote,
               "--listen", f"127.0.0.1:{port}", f"--admin-token-file={admin_file}",
               f"--tenant-tokens-file={tenants_file}"]  # fmt: skip
    # The file is the admin token's one source, whatever the caller's environment says.
    daemon = Daemon("loom-api", command, state, env={"LOOM_ADMIN_TOKEN": ""})
    daemon.start(ready=lambda: _healthy(base), timeout=ready_timeout)
    try:
        yield base
    finally:
        daemon.stop()


def _healthy(base: str) -> bool:
    host, _, port = base.removeprefix("http://").partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=1)
    try:
        conn.request("GET", "/api/v1/health")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()
