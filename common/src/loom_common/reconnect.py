"""Keeping a controller's database connections: bounded backoff, and a replica that is
either up or down and reconnecting.

A controller's main loop must outlive its databases: a config or universal DB that is
killed and started again (or a RAFT cluster that elects a new leader) is a connection that
drops, then refuses, then accepts again. `Link` turns that into two states the loop can see
— up (poll it, write through it) or down (skip it; it reconnects by itself, at most every
`Backoff.limit` seconds) — and logs each outage once: when it starts (WARNING, with the
reason) and when it ends (INFO, with its length). Time is a parameter (`clock`), so the
state machine is tested without a database.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from loom_common.ovsdb import Change, ConnectionClosed, OvsdbError

log = logging.getLogger(__name__)

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (OSError, OvsdbError)
"""What connecting and polling raise when the connection is lost or refused: socket errors,
and `OvsdbError`s (a closed connection, no member reachable, a cluster member cut off from
its cluster)."""
LOST: tuple[type[BaseException], ...] = (OSError, ConnectionClosed)
"""What a write raises when its connection is gone (other `TransactError`s are the
transaction's own: the connection is fine)."""


@dataclass
class Backoff:
    """Delays between reconnection attempts: `first`, doubling up to `limit` seconds.

    Bounded so that a database back after a long outage is noticed within `limit`; short at
    first so that a quick restart (the usual case) costs a fraction of a second.
    """

    first: float = 0.1
    limit: float = 1.0
    _delay: float = field(default=0.0, init=False)

    def next_delay(self) -> float:
        """The delay before the next attempt, after one more failure."""
        self._delay = self.first if self._delay == 0.0 else min(self._delay * 2, self.limit)
        return self._delay

    def reset(self) -> None:
        """Connected: the next outage starts again from `first`."""
        self._delay = 0.0


class Source(Protocol):
    """What a `Link` keeps connected: a replica of some tables of one database
    (`loom_common.ovsdb.Replica`, the physical controller's universal replica)."""

    conn: Any

    def start(self) -> list[Change]:
        """(Re)connect and read; return every difference from the rows held."""

    def poll(self) -> list[Change]:
        """Apply the updates received; return the changes."""

    def fileno(self) -> int:
        """The connection's descriptor."""

    def has_pending(self) -> bool:
        """True if updates already received wait for `poll()`."""

    def close(self) -> None:
        """Close the connection (`conn` becomes None)."""


class Link:
    """One database connection a controller depends on, kept up.

    States (`up`):
        down -> up:   `sync()` reconnected (logged at INFO with the outage's length); the
                      changes the replica missed meanwhile come back from that `sync()`.
        up -> down:   a poll failed with a connection error, or the owner saw a write fail
                      (`lost()`); logged once at WARNING with the reason.
        down -> down: an attempt failed; the next is due after `Backoff.next_delay()`
                      (logged at DEBUG only: one outage, one warning).
    A link starts down and due, so the owner's first `sync()` connects.
    """

    def __init__(
        self,
        name: str,
        source: Source,
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Describe the link; nothing connects until `sync()`.

        Args:
            name: the database's name in log lines (`Loom_Config`).
            source: the replica to keep connected.
            backoff: delays between attempts (default `Backoff()`).
            clock: monotonic time, in seconds.
        """
        self.name = name
        self.source = source
        self.backoff = backoff or Backoff()
        self._clock = clock
        self.up = False
        self._due = clock()
        """When the next reconnection attempt may run (down only)."""
        self._down_since: float | None = None
        """When the current outage began (None: never connected yet)."""
        self.reason = "not connected yet"
        """Why the link is down (the last error), for status and logs."""
        self.outages = 0
        """Outages ended so far (reconnections after a loss)."""
        self._ever = False
        """Connected at least once."""
        self._warned = False
        """The current outage was logged (once per outage)."""

    def sync(self) -> list[Change]:
        """Reconnect if down and due; poll if up. Return the changes, never raising a
        connection error (the link goes down instead, and `[]` is returned)."""
        changes: list[Change] = []
        if not self.up:
            if self._clock() < self._due:
                return changes
            try:
                changes = self.source.start()
            except CONNECTION_ERRORS as exc:
                self._failed(exc)
                return []
            self._connected()
        try:
            changes += self.source.poll()
        except CONNECTION_ERRORS as exc:
            self.lost(exc)
        return changes

    def lost(self, exc: BaseException | str) -> None:
        """The connection is gone (a poll or a write on it failed): close it, go down, and
        reconnect at once on the next `sync()` (then with backoff)."""
        if self.up:
            log.warning("%s connection lost: %s; reconnecting", self.name, exc)
            self._down_since = self._clock()
            self._warned = True
        self.up = False
        self.reason = str(exc)
        self.source.close()
        self._due = self._clock()

    def retry_in(self) -> float | None:
        """Seconds until the next reconnection attempt is due (None while up)."""
        if self.up:
            return None
        return max(0.0, self._due - self._clock())

    def fileno(self) -> int | None:
        """The connection's descriptor while up (to wait on), else None."""
        return self.source.fileno() if self.up else None

    def has_pending(self) -> bool:
        """True if updates already received wait for `sync()`."""
        return self.up and self.source.has_pending()

    def close(self) -> None:
        """Close the connection for good (the owner stops)."""
        self.up = False
        self.source.close()

    def _failed(self, exc: BaseException) -> None:
        self.source.close()
        delay = self.backoff.next_delay()
        self._due = self._clock() + delay
        if self._down_since is None:
            self._down_since = self._clock()
        if not self._warned:
            log.warning("%s unreachable: %s; retrying every %.1fs at most", self.name, exc,
                        self.backoff.limit)  # fmt: skip
            self._warned = True
        else:
            log.debug("%s still unreachable: %s; next try in %.2fs", self.name, exc, delay)
        self.reason = str(exc)

    def _connected(self) -> None:
        if self._down_since is not None:
            took = self._clock() - self._down_since
            log.info("%s %s after %.1fs", self.name,
                     "reconnected" if self._ever else "connected", took)  # fmt: skip
            if self._ever:
                self.outages += 1
        self.up = self._ever = True
        self.reason = ""
        self._down_since = None
        self._warned = False
        self.backoff.reset()
