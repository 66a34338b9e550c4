"""Restarting the daemons `loom up` runs: when, how often, and when to stop trying.

A daemon that dies is started again on its own files, after a delay that doubles with each
failure that follows quickly on a start (`RestartPolicy.first_delay` up to `max_delay`), so
a crash costs a fraction of a second and a daemon that cannot start does not spin. A daemon
that ran `stable_after` seconds before it died starts again from the first delay. After
`burst` quick failures in a row it is left down, with one line saying so and where its log
is: what keeps failing at once (a corrupt file, a port taken) needs an operator, and
systemd's `StartLimitBurst` does the same.

The decisions are a pure function (`decide`) of what happened to one daemon and the time;
`Supervisor.tick()` applies them to the deployment's processes and returns the lines to
log, so both are tested without a daemon (`common/tests/test_supervise.py`), and `loom up`
calls `tick()` in its wait loop (`loom_common.cli.watch`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from loom_common.errors import LoomError


class Restartable(Protocol):
    """A daemon the supervisor can watch and start again."""

    @property
    def running(self) -> bool:
        """True while it runs."""

    def restart(self) -> object:
        """Start it again on its own files and ports; raise `LoomError` if it does not come
        up (it is stopped then)."""


@dataclass(frozen=True)
class RestartPolicy:
    """How the supervisor restarts (defaults as `loom up` uses them)."""

    first_delay: float = 0.25
    """Seconds before the first restart after a crash."""
    max_delay: float = 8.0
    """The longest wait between restarts (the delay doubles with each quick failure)."""
    stable_after: float = 30.0
    """A daemon that ran this long before it died is restarted as after a first crash."""
    burst: int = 5
    """Quick failures in a row (each within `stable_after` of its start) after which the
    daemon is left down."""


@dataclass(frozen=True)
class Track:
    """What happened to one daemon: when it was last started and how many quick failures in
    a row preceded that start."""

    started: float
    failures: int = 0


@dataclass(frozen=True)
class Restart:
    """Start it again at `at` (monotonic seconds); it is the `failures`-th quick failure."""

    at: float
    failures: int


@dataclass(frozen=True)
class GiveUp:
    """Leave it down: it failed `failures` times in a row, each soon after its start."""

    failures: int


def decide(policy: RestartPolicy, track: Track, died: float) -> Restart | GiveUp:
    """What to do about a daemon, started as `track` says, found dead at `died`."""
    quick = died - track.started < policy.stable_after
    failures = track.failures + 1 if quick else 1
    if failures >= policy.burst:
        return GiveUp(failures)
    delay = min(policy.first_delay * 2 ** (failures - 1), policy.max_delay)
    return Restart(died + delay, failures)


class Supervisor:
    """Watches a deployment's processes and restarts those that die (see the module
    docstring). Processes not in `supervised` are reported once when they die, not
    restarted."""

    def __init__(
        self,
        processes: Mapping[str, object],
        supervised: Callable[[str], bool],
        *,
        policy: RestartPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        where: str = "",
    ) -> None:
        """Watch `processes` (the live mapping: processes added later are watched too).

        Args:
            processes: name -> process (`Restartable` if supervised; `running` in any case).
            supervised: whether the process named is restarted.
            policy: the restart policy.
            clock: monotonic time source.
            where: where the logs are, for the lines (the state directory).
        """
        self._processes = processes
        self._supervised = supervised
        self.policy = policy or RestartPolicy()
        self._clock = clock
        self._where = where
        self._tracks: dict[str, Track] = {}
        self._pending: dict[str, Restart] = {}
        self.given_up: set[str] = set()
        """Daemons left down (or, unsupervised, reported dead)."""
        self.restarts: dict[str, int] = {}
        """Name -> how many times it was restarted."""

    def tick(self) -> list[str]:
        """Look at every process once: schedule a restart for the newly dead, restart those
        whose delay has passed. Returns the lines to log."""
        lines: list[str] = []
        now = self._clock()
        for name, proc in list(self._processes.items()):
            track = self._tracks.setdefault(name, Track(now))
            if name in self.given_up or getattr(proc, "running", True):
                continue
            pending = self._pending.get(name)
            if pending is None:
                if not self._supervised(name):
                    self.given_up.add(name)
                    lines.append(f"loom: {name} exited; see its log under {self._where}")
                    continue
                pending = self._schedule(name, track, now, lines, "exited")
                if pending is None:
                    continue
            if now >= pending.at:
                self._restart(name, proc, pending, lines)
        return lines

    def _schedule(
        self, name: str, track: Track, now: float, lines: list[str], what: str
    ) -> Restart | None:
        decision = decide(self.policy, track, now)
        if isinstance(decision, GiveUp):
            self.given_up.add(name)
            self._pending.pop(name, None)
            lines.append(
                f"loom: {name} {what} {decision.failures} times in a row, each within "
                f"{self.policy.stable_after:g} s of its start; not restarting it again "
                f"(see its log under {self._where})"
            )
            return None
        self._pending[name] = decision
        ran = f" {now - track.started:.1f} s after its restart" if name in self.restarts else ""
        lines.append(f"loom: {name} {what}{ran}; restarting it in {decision.at - now:.2f} s")
        return decision

    def _restart(self, name: str, proc: object, pending: Restart, lines: list[str]) -> None:
        began = self._clock()
        self._tracks[name] = Track(began, pending.failures)
        try:
            proc.restart()  # type: ignore[attr-defined]
        except LoomError as exc:
            lines.append(f"loom: {name} did not start again: {str(exc).splitlines()[0]}")
            self._schedule(name, self._tracks[name], self._clock(), lines, "failed to start")
            return
        del self._pending[name]
        self.restarts[name] = self.restarts.get(name, 0) + 1
        lines.append(f"loom: {name} restarted ({self._clock() - began:.2f} s to ready)")
