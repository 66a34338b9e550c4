"""Test helpers for code that drives the API in-process (the API's tests, the controllers'
snapshot tests): a started store on a test's config DB, and a Flask test client that sends
one bearer token and JSON bodies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from loom_api.store import Store
from loom_schemas import CONFIG_SCHEMA, schema_path


@contextlib.contextmanager
def running_store(remote: str) -> Iterator[Store]:
    """A started `Store` on the config DB at `remote` (short timeouts, for tests), stopped
    on exit."""
    store = Store(remote, str(schema_path(CONFIG_SCHEMA)), reconnect_grace=0.5, timeout=5.0)
    store.start()
    try:
        assert store.wait_connected(10.0), "the store did not connect to ovsdb-server"
        yield store
    finally:
        store.stop()


class ApiClient:
    """A Flask test client that sends one bearer token and JSON bodies."""

    def __init__(self, client: FlaskClient, token: str | None) -> None:
        self.client = client
        self.token = token

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        out = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        out.update(headers or {})
        return out

    def _send(self, method: str, path: str, body: Any, kw: dict[str, Any]) -> TestResponse:
        headers = self._headers(kw.pop("headers", None))
        if body is not None:
            kw["json"] = body
        return self.client.open(path, method=method, headers=headers, **kw)

    def get(self, path: str, **kw: Any) -> TestResponse:
        """GET `path`."""
        return self._send("GET", path, None, kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> TestResponse:
        """POST `body` to `path`."""
        return self._send("POST", path, body, kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> TestResponse:
        """PUT `body` to `path`."""
        return self._send("PUT", path, body, kw)

    def patch(self, path: str, body: Any = None, **kw: Any) -> TestResponse:
        """PATCH `path` with `body`."""
        return self._send("PATCH", path, body, kw)

    def delete(self, path: str, **kw: Any) -> TestResponse:
        """DELETE `path`."""
        return self._send("DELETE", path, None, kw)

    def create(self, path: str, body: Any) -> dict[str, Any]:
        """POST `body` and return the created object, failing the test on any other status."""
        response = self.post(path, body)
        assert response.status_code == 201, response.get_json()
        result: dict[str, Any] = response.get_json()
        return result
