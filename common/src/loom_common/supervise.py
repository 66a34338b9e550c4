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

Alive is not enough: a database member can run and serve nothing (a RAFT member in I/O
failure mode after its disk filled, or one that closed its database; `loom_common.ovsdb`
says what ovsdb-server does then). A process with a `health(timeout)` method (`Checkable`)
is asked every `HealthPolicy.interval` seconds, by a thread of its own (`start_checking`),
since a check runs a command that can block up to its timeout; `tick()` acts on what it
found. One bad answer is not a fault: a member that has no leader during an election, or
is slow to answer while it builds a large reply, would otherwise be restarted for nothing,
so a process is restarted only after `HealthPolicy.failures` faults in a row (or
`HealthPolicy.unanswered` checks in a row that got no answer at all), then by the same
policy and backoff as a process that died. A verdict can also say a restart would not help
yet (`Verdict.hold`: its filesystem is still full, and a member started on a full disk
fails again at once); the process is then left as it is, said once, and restarted when the
hold lifts, so the restarts of the burst are not spent while the operator frees space.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from loom_common.errors import LoomError

LOG = logging.getLogger(__name__)


class Restartable(Protocol):
    """A daemon the supervisor can watch and start again."""

    @property
    def running(self) -> bool:
        """True while it runs."""

    def restart(self) -> object:
        """Start it again on its own files and ports; raise `LoomError` if it does not come
        up (it is stopped then)."""


@dataclass(frozen=True)
class Verdict:
    """What one health check found."""

    state: Literal["ok", "fault", "unanswered", "hold"]
    """`ok`; `fault`: it runs but does not do its work; `unanswered`: the check got no
    answer in time; `hold`: a fault that a restart would not mend yet."""
    reason: str = ""
    """What is wrong, for the supervisor's line (empty when `ok`)."""


HEALTHY = Verdict("ok")


class Checkable(Protocol):
    """A process whose health the supervisor asks, not only whether it runs."""

    def health(self, timeout: float) -> Verdict:
        """Check it once, within `timeout` seconds (raise nothing: say it in the verdict)."""

    def stop(self) -> object:
        """Stop it (before it is restarted for its health)."""


@dataclass(frozen=True)
class HealthPolicy:
    """How often health is checked, and how many bad answers make a fault."""

    interval: float = 1.0
    """Seconds between the starts of two rounds of checks."""
    timeout: float = 2.0
    """Seconds one check may take."""
    failures: int = 3
    """Faults in a row before the process is restarted."""
    unanswered: int = 10
    """Checks in a row without an answer (or faults among them) before it is restarted:
    a server busy with a large reply is slow, not broken."""


@dataclass(frozen=True)
class Streak:
    """The bad verdicts in a row of one process since it was last healthy or started."""

    count: int = 0
    answered: int = 0
    """How many of them were answers (faults or holds), not silence."""
    last: Verdict = HEALTHY


def judge(streak: Streak, verdict: Verdict) -> Streak:
    """The streak after one more verdict (a healthy one ends it)."""
    if verdict.state == "ok":
        return Streak()
    answered = streak.answered + (verdict.state != "unanswered")
    return Streak(streak.count + 1, answered, verdict)


def unhealthy(policy: HealthPolicy, streak: Streak) -> bool:
    """Whether the process should be restarted now (a hold never is)."""
    if streak.last.state == "hold":
        return False
    if streak.last.state == "fault" and streak.answered >= policy.failures:
        return True
    return streak.count >= policy.unanswered


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
        health: HealthPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        where: str = "",
    ) -> None:
        """Watch `processes` (the live mapping: processes added later are watched too).

        Args:
            processes: name -> process (`Restartable` if supervised; `running` in any case;
                `Checkable` too if its health is to be watched).
            supervised: whether the process named is restarted.
            policy: the restart policy.
            health: how health is checked (`check`, `start_checking`).
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
        self.health = health or HealthPolicy()
        self._streaks: dict[str, Streak] = {}
        self._epochs: dict[str, int] = {}
        """Name -> its starts: a verdict on a process since restarted is dropped."""
        self._held: set[str] = set()
        """Unhealthy processes whose hold was said."""
        self._health_lock = threading.Lock()
        self._checking: threading.Thread | None = None
        self._stop_checking = threading.Event()

    def check(self) -> None:
        """Ask each running supervised `Checkable` for its health once, all at once, and
        note the verdicts for `tick()`. Blocks up to `HealthPolicy.timeout` (the checking
        thread calls it; a test may call it directly)."""
        asked: list[tuple[str, int, Callable[[float], Verdict]]] = []
        for name, proc in list(self._processes.items()):
            health = getattr(proc, "health", None)
            if health is None or not self._supervised(name) or name in self.given_up:
                continue
            if name in self._pending or not getattr(proc, "running", True):
                continue
            with self._health_lock:
                asked.append((name, self._epochs.get(name, 0), health))
        if not asked:
            return
        with concurrent.futures.ThreadPoolExecutor(len(asked)) as pool:
            verdicts = list(pool.map(lambda a: a[2](self.health.timeout), asked))
        with self._health_lock:
            for (name, epoch, _), verdict in zip(asked, verdicts, strict=True):
                if self._epochs.get(name, 0) == epoch:
                    streak = self._streaks.get(name, Streak())
                    self._streaks[name] = judge(streak, verdict)

    def start_checking(self) -> None:
        """Check health every `HealthPolicy.interval` seconds in a thread of its own, until
        `stop_checking()`."""
        if self._checking is not None:
            return
        self._stop_checking.clear()
        self._checking = threading.Thread(target=self._check_loop, name="health checks",
                                          daemon=True)  # fmt: skip
        self._checking.start()

    def stop_checking(self) -> None:
        """Stop the checking thread (waits for the round in progress)."""
        self._stop_checking.set()
        if self._checking is not None:
            self._checking.join(timeout=self.health.timeout + self.health.interval + 1.0)
            self._checking = None

    def _check_loop(self) -> None:
        while not self._stop_checking.is_set():
            began = time.monotonic()
            try:
                self.check()
            except Exception:  # a bug in one check must not end the checking
                LOG.exception("health check failed")
            left = self.health.interval - (time.monotonic() - began)
            self._stop_checking.wait(max(left, 0.0))

    def tick(self) -> list[str]:
        """Look at every process once: schedule a restart for the newly dead, restart those
        whose delay has passed. Returns the lines to log."""
        lines: list[str] = []
        now = self._clock()
        for name, proc in list(self._processes.items()):
            track = self._tracks.setdefault(name, Track(now))
            if name in self.given_up:
                continue
            if getattr(proc, "running", True):
                if name not in self._pending:
                    self._judge_health(name, proc, track, now, lines)
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

    def _judge_health(
        self, name: str, proc: object, track: Track, now: float, lines: list[str]
    ) -> None:
        """Act on a running process's health verdicts: stop it and schedule its restart
        when they make a fault, say once that it waits when they hold it."""
        with self._health_lock:
            streak = self._streaks.get(name)
        if streak is None or streak.count == 0:
            self._held.discard(name)
            return
        if streak.last.state == "hold":
            if name not in self._held:
                self._held.add(name)
                lines.append(f"loom: {name} unhealthy ({streak.last.reason}); "
                             "restarting it once that passes")  # fmt: skip
            return
        if not unhealthy(self.health, streak):
            return
        self._held.discard(name)
        with self._health_lock:
            self._streaks.pop(name, None)
            self._epochs[name] = self._epochs.get(name, 0) + 1
        proc.stop()  # type: ignore[attr-defined]
        what = f"unhealthy ({streak.last.reason or 'no answer'}, {streak.count} checks in a row)"
        self._schedule(name, track, now, lines, what)

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
        with self._health_lock:
            self._streaks.pop(name, None)
            self._epochs[name] = self._epochs.get(name, 0) + 1
        del self._pending[name]
        self.restarts[name] = self.restarts.get(name, 0) + 1
        lines.append(f"loom: {name} restarted ({self._clock() - began:.2f} s to ready)")
