"""Fixtures for API tests: a Store on a real ovsdb-server, the app, clients per token.

`config_db` (a standalone Loom_Config ovsdb-server, stopped at teardown) comes from the
`loom_common.testing` pytest plugin that the root `conftest.py` loads.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from waitress import wasyncore

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.limits import Limits
from loom_api.serving import create_server
from loom_api.store import Store
from loom_api.testing import ApiClient, running_store

ADMIN_TOKEN = "admin-secret"
TENANT_TOKENS = {"token-a": "tenant-a", "token-b": "tenant-b"}
TOKEN_OF = {"tenant-a": "token-a", "tenant-b": "token-b"}


@pytest.fixture
def store(config_db: Any) -> Iterator[Store]:
    """A started Store on the test's ovsdb-server."""
    with running_store(config_db.remote) as s:
        yield s


@pytest.fixture
def app(store: Store) -> Flask:
    """The API app on `store`, with the test tokens."""
    return create_app(store, Tokens(admin=ADMIN_TOKEN, tenants=TENANT_TOKENS))


@pytest.fixture
def admin(app: Flask) -> ApiClient:
    """A client with the admin token."""
    return ApiClient(app.test_client(), ADMIN_TOKEN)


@pytest.fixture
def tenant_a(app: Flask) -> ApiClient:
    """A client with tenant-a's token."""
    return ApiClient(app.test_client(), "token-a")


@pytest.fixture
def tenant_b(app: Flask) -> ApiClient:
    """A client with tenant-b's token."""
    return ApiClient(app.test_client(), "token-b")


@pytest.fixture
def anonymous(app: Flask) -> ApiClient:
    """A client with no token."""
    return ApiClient(app.test_client(), None)


@pytest.fixture
def live_api(app: Flask) -> Iterator[str]:
    """The app served by waitress (as `python -m loom_api` serves it, with the app's body
    limit) on a free loopback port; yields its base URL.

    Closing waitress's sockets while its loop thread polls them makes the loop die with
    EBADF (an unhandled thread exception, an error under `filterwarnings = error`), and open
    keep-alive connections keep the loop alive; so the workers stop first, every channel is
    closed, and an EBADF after the stop is expected.
    """
    limits: Limits = app.extensions["loom.limits"]
    server: Any = create_server(
        app, host="127.0.0.1", port=0, threads=16, max_body_bytes=limits.max_body_bytes
    )
    stopping = threading.Event()

    def run() -> None:
        try:
            server.run()
        except OSError as exc:
            if not (stopping.is_set() and exc.errno == errno.EBADF):
                raise

    thread = threading.Thread(target=run, name="live-api", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}"
    stopping.set()
    server.task_dispatcher.shutdown()
    wasyncore.close_all(server._map)
    thread.join(timeout=5)
    assert not thread.is_alive(), "the live server did not stop"
