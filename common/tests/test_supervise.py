"""The restart policy and the supervisor, without a daemon (time is a parameter)."""

from __future__ import annotations

import sys
from pathlib import Path

from loom_common.procs import Daemon, DaemonError
from loom_common.supervise import GiveUp, Restart, RestartPolicy, Supervisor, Track, decide

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
