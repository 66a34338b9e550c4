"""`Link` and `Backoff` without a database: a fake replica whose connection fails on demand,
and a fake clock."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from loom_common.ovsdb import Change, ConnectionClosed, OvsdbError
from loom_common.reconnect import Backoff, Link


@dataclass
class FakeReplica:
    """Connects unless `refuse`; polls raise `poll_error` once when set."""

    refuse: bool = False
    poll_error: BaseException | None = None
    pending: list[Change] = field(default_factory=list)
    starts: int = 0
    conn: Any = None

    def start(self) -> list[Change]:
        self.starts += 1
        if self.refuse:
            raise OvsdbError(detail="cannot connect: refused")
        self.conn = object()
        return [("T", f"start-{self.starts}", {})]

    def poll(self) -> list[Change]:
        if self.poll_error is not None:
            error, self.poll_error = self.poll_error, None
            raise error
        out, self.pending = self.pending, []
        return out

    def fileno(self) -> int:
        assert self.conn is not None, "fileno() of a closed replica"
        return 7

    def has_pending(self) -> bool:
        return bool(self.pending)

    def close(self) -> None:
        self.conn = None


def is_up(link: Link) -> bool:
    """`link.up`, read anew (mypy would narrow the attribute across a sync)."""
    return link.up


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_backoff_doubles_to_its_limit_and_resets() -> None:
    backoff = Backoff(first=0.1, limit=1.0)
    assert [backoff.next_delay() for _ in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1, 1])
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(0.1)


def test_link_connects_on_first_sync_and_polls_after() -> None:
    replica = FakeReplica(pending=[("T", "u1", {"a": 1})])
    link = Link("Loom_Config", replica, clock=Clock())
    assert not is_up(link)
    assert link.fileno() is None
    assert link.retry_in() == 0.0
    assert link.sync() == [("T", "start-1", {}), ("T", "u1", {"a": 1})]
    assert is_up(link)
    assert link.fileno() == 7
    assert link.retry_in() is None
    replica.pending = [("T", "u2", None)]
    assert link.has_pending()
    assert link.sync() == [("T", "u2", None)]
    assert replica.starts == 1


def test_a_lost_connection_reconnects_with_bounded_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    replica = FakeReplica()
    link = Link("Loom_Config", replica, clock=clock, backoff=Backoff(first=0.1, limit=0.4))
    link.sync()
    caplog.set_level(logging.DEBUG, logger="loom_common.reconnect")
    replica.poll_error = ConnectionClosed(detail="connection closed by ovsdb-server")
    replica.refuse = True
    assert link.sync() == []
    assert not is_up(link)
    assert replica.conn is None
    assert link.fileno() is None
    assert "connection closed" in link.reason
    # the first attempt is due at once, then 0.1, 0.2, 0.4, 0.4 s apart
    waits = []
    for _ in range(5):
        assert link.retry_in() is not None
        clock.now += link.retry_in() or 0.0
        starts = replica.starts
        assert link.sync() == []
        assert replica.starts == starts + 1, "an attempt when due"
        assert link.sync() == []
        assert replica.starts == starts + 1, "none before it is due"
        waits.append(link.retry_in())
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.4, 0.4])
    replica.refuse = False
    clock.now += 0.4
    assert link.sync() == [("T", f"start-{replica.starts}", {})]
    assert is_up(link)
    assert link.outages == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "Loom_Config connection lost: connection closed by ovsdb-server; reconnecting"
    ], "one warning per outage"
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["Loom_Config reconnected after 1.5s"]


def test_a_database_unreachable_at_start_is_retried() -> None:
    clock = Clock()
    replica = FakeReplica(refuse=True)
    link = Link("Loom_Universal", replica, clock=clock)
    assert link.sync() == []
    assert not is_up(link)
    assert "refused" in link.reason
    replica.refuse = False
    assert link.sync() == [], "not due yet"
    clock.now += 0.1
    assert link.sync() == [("T", "start-2", {})]
    assert is_up(link)
    assert link.outages == 0, "a first connection is not an outage's end"


def test_lost_from_a_write_reconnects_at_once() -> None:
    clock = Clock()
    replica = FakeReplica()
    link = Link("Loom_Universal", replica, clock=clock)
    link.sync()
    link.lost(BrokenPipeError("broken pipe"))
    assert not is_up(link)
    assert link.retry_in() == 0.0
    assert link.sync() == [("T", "start-2", {})]
    assert is_up(link)
    assert link.outages == 1


def test_close_stops_the_link() -> None:
    replica = FakeReplica()
    link = Link("Loom_Config", replica, clock=Clock())
    link.sync()
    link.close()
    assert not is_up(link)
    assert replica.conn is None
    assert not link.has_pending()
