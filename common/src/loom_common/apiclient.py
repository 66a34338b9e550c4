"""A JSON client of Loom's API that never raises on an answer (urllib: no dependency).

`Http.request` returns every answer as a `Reply` — its status (0 when nobody answered: the
API server is down, or went while it answered), its decoded body and its headers — so a
caller under faults (the fault matrix's writer) counts refusals, and a caller that wants
failures loud (the demo) says so itself.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One HTTP answer of the API (status 0: nobody answered)."""

    status: int
    body: Any
    headers: dict[str, str]

    @property
    def generation(self) -> int | None:
        """The configuration generation a write was acknowledged with."""
        text = self.headers.get("X-Loom-Config-Generation")
        return int(text) if text else None


class Http:
    """A JSON client of Loom's API that never raises on an answer (urllib)."""

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        """Send one request to `/api/v1` + `path`."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}/api/v1{path}", data=data, method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return Reply(response.status, _json(response.read()), dict(response.headers))
        except urllib.error.HTTPError as exc:
            with exc:
                return Reply(exc.code, _json(exc.read()), dict(exc.headers))
        except (OSError, http.client.HTTPException) as exc:
            # refused, reset, timed out, or the answer cut short (a server killed while it
            # answered): nobody answered, and a write's outcome is unknown
            return Reply(0, f"{type(exc).__name__}: {exc}", {})

    def create(self, path: str, body: Any) -> str:
        """Create an object; return its id (raise `AssertionError` on a refusal)."""
        reply = self.request("POST", path, body)
        assert reply.status == 201, f"POST {path}: {reply.status} {reply.body}"
        return str(reply.body["id"])

    def realized(self, generation: int) -> bool:
        """Every node has realized `generation` (the API's `realization` route)."""
        reply = self.request("GET", f"/realization?generation={generation}")
        return reply.status == 200 and bool(reply.body.get("realized"))


def _json(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return data.decode(errors="replace")
