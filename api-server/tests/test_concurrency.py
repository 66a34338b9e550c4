"""Concurrent writers through the live server: If-Match races and key allocation.

Two threads that read, then write with If-Match, meet at a barrier between the two steps, so
every round is a real race: exactly one must win and the other get 412, and no update may be
lost. Many concurrent creations must get distinct keys.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
import requests
from flask import Flask

from loom_api.auth import Tokens

pytestmark = pytest.mark.ovs

T = TypeVar("T")
TIMEOUT = 10.0
ROUNDS = 10


class Client:
    """A requests session on the live API with the admin token."""

    def __init__(self, base: str, token: str) -> None:
        self.base = f"{base}/api/v1"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def __call__(self, method: str, path: str, **kw: Any) -> requests.Response:
        return self.session.request(method, f"{self.base}{path}", timeout=TIMEOUT, **kw)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self("POST", path, json=body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def close(self) -> None:
        self.session.close()


@pytest.fixture
def clients(live_api: str, app: Flask) -> Iterator[Callable[[], Client]]:
    """Make admin clients (one per thread: a requests session is not thread-safe)."""
    tokens: Tokens = app.extensions["loom.tokens"]
    made: list[Client] = []

    def make() -> Client:
        client = Client(live_api, tokens.admin)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def in_threads(count: int, fn: Callable[[int], T]) -> list[T]:
    """Run `fn(0)` .. `fn(count - 1)` in `count` threads; return their results in order."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(fn, i) for i in range(count)]
        return [f.result(timeout=60) for f in futures]


def test_if_match_race_has_exactly_one_winner(clients: Callable[[], Client]) -> None:
    setup = clients()
    queue = setup.create("/qos-queues", {"name": "contended"})
    url = f"/qos-queues/{queue['id']}"
    writers = [clients(), clients()]
    read_done = threading.Barrier(2, timeout=TIMEOUT)

    def round_of(writer: int, number: int) -> int:
        client = writers[writer]
        current = client("GET", url)
        assert current.status_code == 200
        read_done.wait()  # both have read the same revision: now both write
        response = client(
            "PATCH",
            url,
            json={"tags": [f"round-{number}-writer-{writer}"]},
            headers={"If-Match": current.headers["ETag"]},
        )
        if response.status_code == 412:
            assert response.json()["error"] == "precondition_failed"
        return response.status_code

    for number in range(ROUNDS):
        statuses = in_threads(2, functools.partial(round_of, number=number))
        assert sorted(statuses) == [200, 412], f"round {number}: {statuses}"
        winner = statuses.index(200)
        final = setup("GET", url).json()
        assert final["tags"] == [f"round-{number}-writer-{winner}"]
        assert final["revision"] == number + 2


def test_read_modify_write_loses_no_update(clients: Callable[[], Client]) -> None:
    setup = clients()
    switch = setup.create("/logical-switches", {"description": "0"})
    url = f"/logical-switches/{switch['id']}"
    increments = 15

    def increment_many(writer: int) -> int:
        client = clients()
        conflicts = 0
        for _ in range(increments):
            while True:
                current = client("GET", url)
                value = int(current.json()["description"])
                response = client(
                    "PATCH",
                    url,
                    json={"description": str(value + 1)},
                    headers={"If-Match": current.headers["ETag"]},
                )
                if response.status_code == 200:
                    break
                assert response.status_code == 412, response.text
                conflicts += 1
        return conflicts

    in_threads(2, increment_many)
    final = setup("GET", url).json()
    assert final["description"] == str(2 * increments)
    assert final["revision"] == 1 + 2 * increments


def test_concurrent_port_creation_gets_distinct_keys(clients: Callable[[], Client]) -> None:
    setup = clients()
    switch = setup.create("/logical-switches", {})
    ports = f"/logical-switches/{switch['id']}/ports"
    threads, each = 8, 6

    def create_some(writer: int) -> list[dict[str, Any]]:
        client = clients()
        return [client.create(ports, {"name": f"w{writer}-{i}"}) for i in range(each)]

    created = [port for batch in in_threads(threads, create_some) for port in batch]
    keys = [port["port_key"] for port in created]
    assert len(set(keys)) == len(keys) == threads * each
    macs = {port["mac"] for port in created}
    assert len(macs) == threads * each
    listed = setup("GET", ports, params={"limit": 1000}).json()["items"]
    assert sorted(p["port_key"] for p in listed) == sorted(keys)


def test_concurrent_switch_creation_gets_distinct_tunnel_keys(
    clients: Callable[[], Client],
) -> None:
    def create_some(writer: int) -> list[int]:
        client = clients()
        return [client.create("/logical-switches", {})["tunnel_key"] for _ in range(5)]

    keys = [key for batch in in_threads(6, create_some) for key in batch]
    assert len(set(keys)) == len(keys) == 30


def test_concurrent_duplicate_names_one_wins(clients: Callable[[], Client]) -> None:
    start = threading.Barrier(4, timeout=TIMEOUT)

    def create(writer: int) -> int:
        client = clients()
        start.wait()
        return client("POST", "/transport-zones", json={"name": "only-one"}).status_code

    statuses = in_threads(4, create)
    assert sorted(statuses) == [201, 409, 409, 409]
