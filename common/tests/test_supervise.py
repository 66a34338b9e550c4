"""The restart policy and the supervisor, without a daemon (time is a parameter)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from loom_common.procs import Daemon, DaemonError
from loom_common.supervise import (
    HEALTHY,
    GiveUp,
    HealthPolicy,
    Restart,
    RestartPolicy,
    Streak,
    Supervisor,
    Track,
    Verdict,
    decide,
    judge,
    unhealthy,
)

POLICY = RestartPolicy(first_delay=0.25, max_delay=2.0, stable_after=30.0, burst=4)


def test_quick_failures_double_the_delay_up_to_the_limit_then_give_up() -> None:
    track = Track(started=100.0)
    delays = []
    for _ in range(3):
        decision = decide(POLICY, track, track.started + 1.0)
        assert isinstance(decision, Restart)
        delays.append(decision.at - (track.started + 1.0))
        track = Track(decision.at, decision.failures)
    assert delays == [0.25, 0.5, 1.0]
    assert decide(POLICY, track, track.started + 1.0) == GiveUp(4)


def test_the_delay_is_bounded() -> None:
    policy = RestartPolicy(first_delay=1.0, max_delay=3.0, burst=10)
    decision = decide(policy, Track(0.0, failures=6), 1.0)
    assert decision == Restart(4.0, 7)


def test_a_daemon_that_ran_long_starts_over_from_the_first_delay() -> None:
    assert decide(POLICY, Track(0.0, failures=3), 31.0) == Restart(31.25, 1)


class FakeProc:
    """A process the test kills and whose restarts it counts (or makes fail)."""

    def __init__(self, clock: list[float], fail_restarts: int = 0) -> None:
        self.running = True
        self.restarted = 0
        self._fail = fail_restarts
        self._clock = clock

    def restart(self) -> None:
        if self._fail:
            self._fail -= 1
            raise DaemonError(name="fake", detail="exited with 1 before it was ready\nlog")
        self.restarted += 1
        self.running = True


def test_supervisor_restarts_after_the_delay_and_logs_each_step() -> None:
    now = [0.0]
    db, demo = FakeProc(now), FakeProc(now)
    procs = {"config DB": db, "demo nodes": demo}
    sup = Supervisor(procs, lambda n: n != "demo nodes", policy=POLICY, clock=lambda: now[0],
                     where="/state")  # fmt: skip
    assert sup.tick() == []
    now[0] = 5.0
    db.running = demo.running = False
    lines = sup.tick()
    assert lines == ["loom: config DB exited; restarting it in 0.25 s",
                     "loom: demo nodes exited; see its log under /state"]  # fmt: skip
    assert db.restarted == 0
    now[0] = 5.3
    lines = sup.tick()
    assert db.restarted == 1
    assert db.running
    assert lines == ["loom: config DB restarted (0.00 s to ready)"]
    assert demo.restarted == 0
    assert "demo nodes" in sup.given_up
    assert sup.tick() == []  # the demo's death is reported once
    assert sup.restarts == {"config DB": 1}


def test_supervisor_gives_up_after_repeated_quick_failures() -> None:
    now = [0.0]
    api = FakeProc(now, fail_restarts=100)
    sup = Supervisor({"API server": api}, lambda n: True, policy=POLICY, clock=lambda: now[0],
                     where="/state")  # fmt: skip
    sup.tick()
    api.running = False
    lines: list[str] = []
    for step in range(1, 40):
        now[0] = step * 0.5
        lines += sup.tick()
    assert "API server" in sup.given_up
    assert lines[-1] == (
        "loom: API server failed to start 4 times in a row, each within 30 s "
        "of its start; not restarting it again (see its log under /state)"
    )
    assert sum("did not start again: fake: exited with 1 before it was ready" in line
               for line in lines) == 3  # fmt: skip
    assert sup.restarts == {}


def test_supervisor_restarts_a_real_daemon_on_its_command(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]
    daemon = Daemon("sleeper", command, tmp_path)
    daemon.start(ready=lambda: daemon.log_path.read_text().count("up") >= 1, timeout=10)
    sup = Supervisor({"sleeper": daemon}, lambda n: True,
                     policy=RestartPolicy(first_delay=0.0), where=str(tmp_path))  # fmt: skip
    try:
        first = daemon.pid
        daemon.kill9()
        lines = sup.tick()
        assert lines[0] == "loom: sleeper exited; restarting it in 0.00 s"
        assert lines[1].startswith("loom: sleeper restarted (")
        assert daemon.running
        assert daemon.pid != first
    finally:
        daemon.stop()


HEALTH = HealthPolicy(interval=1.0, timeout=1.0, failures=3, unanswered=5)
FAULT = Verdict("fault", "in failure mode")


def test_a_fault_needs_several_answers_in_a_row_and_a_healthy_one_ends_the_streak() -> None:
    streak = Streak()
    for _ in range(2):
        streak = judge(streak, FAULT)
        assert not unhealthy(HEALTH, streak)
    assert judge(streak, HEALTHY) == Streak()
    assert unhealthy(HEALTH, judge(streak, FAULT))


def test_silence_is_a_fault_only_when_it_lasts_longer() -> None:
    streak = Streak()
    for _ in range(4):
        streak = judge(streak, Verdict("unanswered", "no answer in time"))
        assert not unhealthy(HEALTH, streak)
    assert unhealthy(HEALTH, judge(streak, Verdict("unanswered", "no answer")))


def test_a_hold_is_never_acted_on_and_the_fault_after_it_is_at_once() -> None:
    streak = Streak()
    for _ in range(10):
        streak = judge(streak, Verdict("hold", "disk full"))
        assert not unhealthy(HEALTH, streak)
    assert unhealthy(HEALTH, judge(streak, FAULT))


class SickProc(FakeProc):
    """A process that keeps running and answers its health checks with `verdict`."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__(clock)
        self.verdict = HEALTHY
        self.stopped = 0

    def health(self, timeout: float) -> Verdict:
        return self.verdict

    def stop(self) -> None:
        self.stopped += 1
        self.running = False


def test_supervisor_restarts_an_unhealthy_process_after_its_streak_and_holds_meanwhile() -> None:
    now = [0.0]
    member = SickProc(now)
    sup = Supervisor({"config DB member 1": member}, lambda n: True, policy=POLICY,
                     health=HEALTH, clock=lambda: now[0], where="/state")  # fmt: skip
    sup.check()
    assert sup.tick() == []
    member.verdict = Verdict("hold", "disk full")
    lines = []
    for step in range(1, 6):
        now[0] = float(step)
        sup.check()
        lines += sup.tick()
    assert lines == ["loom: config DB member 1 unhealthy (disk full); restarting it once that "
                     "passes"]  # fmt: skip
    assert member.stopped == 0
    member.verdict = FAULT
    now[0] = 40.0
    sup.check()
    assert sup.tick() == ["loom: config DB member 1 unhealthy (in failure mode, 6 checks in a "
                          "row); restarting it in 0.25 s"]  # fmt: skip
    assert member.stopped == 1
    member.verdict = HEALTHY
    sup.check()  # not running: not asked
    now[0] = 40.3
    assert sup.tick() == ["loom: config DB member 1 restarted (0.00 s to ready)"]
    assert member.running
    assert member.restarted == 1
    sup.check()
    assert sup.tick() == []
    assert sup.restarts == {"config DB member 1": 1}


def test_a_verdict_on_a_process_since_restarted_is_dropped() -> None:
    now = [0.0]
    member = SickProc(now)
    sup = Supervisor({"m": member}, lambda n: True, policy=POLICY, health=HEALTH,
                     clock=lambda: now[0])  # fmt: skip
    member.verdict = FAULT
    for _ in range(2):
        sup.check()
    member.running = False  # it died: restarted by the ordinary path
    sup.tick()
    now[0] = 1.0
    sup.tick()
    assert member.restarted == 1
    sup.check()
    sup.check()
    assert sup.tick() == []  # two faults since the restart, not four
    assert member.stopped == 0


def test_the_checking_thread_asks_until_stopped() -> None:
    asked = threading.Event()

    class Asked(SickProc):
        def health(self, timeout: float) -> Verdict:
            asked.set()
            return HEALTHY

    member = Asked([0.0])
    sup = Supervisor({"m": member}, lambda n: True,
                     health=HealthPolicy(interval=0.05, timeout=1.0))  # fmt: skip
    sup.start_checking()
    try:
        assert asked.wait(5.0)
    finally:
        sup.stop_checking()
    asked.clear()
    assert not asked.wait(0.3)
