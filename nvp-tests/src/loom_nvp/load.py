"""A write load through the API that records every write it was told was committed.

`Writer` creates logical switch ports on one switch, one request after another, until
stopped: each 201 is recorded with its name, the generation it was acknowledged with and
when; each refusal with its status and when. Afterwards every acknowledged port must be in
the configuration (`lost`), and the longest time between two acknowledgements tells how
long the API could not write (`longest_gap`).

With `churn`, each acknowledged port is followed by a short-lived one, created and deleted
at once (`NAME-tmp`): rows that come and go between two reads of a controller that is
paused or reconnecting, which must reach its engine as nothing at all. None may be left
afterwards (`leftover`).
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

from loom_common.apiclient import Http


@dataclass(frozen=True)
class Ack:
    """One acknowledged write."""

    name: str
    generation: int
    at: float


class Writer:
    """See the module docstring."""

    def __init__(self, api: Http, switch: str, prefix: str, *, churn: bool = False) -> None:
        self.api = api
        self.churn = churn
        self.switch = switch
        self.prefix = prefix
        self.acked: list[Ack] = []
        self.refused: list[tuple[float, int, str]] = []
        """(when, HTTP status (0: no answer), the error's code or text)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)
        self.began = 0.0

    def start(self) -> Writer:
        """Start writing."""
        self.began = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop writing (the request under way finishes)."""
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"{self.prefix}-{i}"
            i += 1
            reply = self.api.request("POST", f"/logical-switches/{self.switch}/ports",
                                     {"name": name})  # fmt: skip
            now = time.monotonic()
            if reply.status == 201 and reply.generation is not None:
                self.acked.append(Ack(name, reply.generation, now))
                if self.churn:
                    self._come_and_go(f"{name}-tmp")
            else:
                error = reply.body.get("error") if isinstance(reply.body, dict) else reply.body
                self.refused.append((now, reply.status, str(error)[:80]))
                self._stop.wait(0.05)  # (a refused write is tried again, not spun on)

    def _come_and_go(self, name: str) -> None:
        """Create port `name` and delete it (a refused delete is tried again)."""
        reply = self.api.request("POST", f"/logical-switches/{self.switch}/ports",
                                 {"name": name})  # fmt: skip
        if reply.status != 201:
            return
        port = f"/logical-switches/{self.switch}/ports/{reply.body['id']}"
        while self.api.request("DELETE", port).status not in (204, 404):
            self._stop.wait(0.05)

    def wait_acked(self, count: int, timeout: float) -> None:
        """Wait until `count` more writes than now are acknowledged."""
        target = len(self.acked) + count
        deadline = time.monotonic() + timeout
        while len(self.acked) < target:
            assert time.monotonic() < deadline, (
                f"{count} writes not acknowledged in {timeout} s: {self.refused[-3:]}"
            )
            time.sleep(0.02)

    def longest_gap(self, since: float) -> float:
        """The longest time between two acknowledgements (or from `since` to the first)
        after `since`."""
        times = [since, *(a.at for a in self.acked if a.at > since)]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def lost(self) -> list[str]:
        """The acknowledged ports that the configuration does not have."""
        names = self._names()
        return [a.name for a in self.acked if a.name not in names]

    def leftover(self) -> list[str]:
        """The short-lived ports (`churn`) that the configuration still has."""
        return sorted(n for n in self._names() if n.startswith(self.prefix) and n.endswith("-tmp"))

    def _names(self) -> set[str]:
        """The names of the switch's ports."""
        reply = self.api.request("GET", f"/logical-switches/{self.switch}/ports?limit=1000")
        names: set[str] = set()
        while True:
            assert reply.status == 200, f"listing the ports: {reply.status} {reply.body}"
            names.update(item["name"] for item in reply.body["items"])
            cursor = reply.body.get("next_cursor")
            if not cursor:
                break
            reply = self.api.request(
                "GET", f"/logical-switches/{self.switch}/ports?limit=1000&cursor={cursor}"
            )
        return names

    @property
    def last_generation(self) -> int:
        """The newest generation acknowledged (0: none)."""
        return max((a.generation for a in self.acked), default=0)
