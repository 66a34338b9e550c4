"""Supervising the daemons Loom starts: start, wait until ready, stop or kill by PID.

Every process is a direct child started here, with its output in a log file of its state
directory. Only PIDs started by this module are ever signalled. Readiness is a predicate on
observable state (a socket answers, a health URL returns 200), polled until a deadline;
time and sleep are parameters so tests can drive them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from loom_common.errors import LoomError


class DaemonError(LoomError):
    """A daemon failed to start, died, or did not become ready."""

    message = "%(name)s: %(detail)s"


class Daemon:
    """One supervised child process."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        state_dir: Path,
        *,
        env: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Describe a daemon; nothing runs until `start()`.

        Args:
            name: a short name; the log is `state_dir/<name>.log`.
            command: the argv to run.
            state_dir: where its log (and whatever the command writes) lives.
            env: extra environment variables.
            clock: monotonic time source.
            sleep: how to wait between readiness polls.
        """
        self.name = name
        self.command = list(command)
        self.state_dir = state_dir
        self.log_path = state_dir / f"{name}.log"
        self._env = env
        self._clock = clock
        self._sleep = sleep
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The PID while running, else None."""
        return self._proc.pid if self._proc is not None and self.running else None

    @property
    def running(self) -> bool:
        """True while the process has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, *, ready: Callable[[], bool] | None = None, timeout: float = 30.0) -> Daemon:
        """Start the process and wait until `ready()` holds.

        Raises:
            DaemonError: it exited or was not ready within `timeout` (it is stopped then).
        """
        if self.running:
            raise DaemonError(name=self.name, detail="already running")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **(self._env or {})}
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # Ctrl-C in a terminal reaches only the supervisor
            )
        if ready is not None:
            try:
                self.wait_until(ready, timeout, what="ready")
            except DaemonError:
                self.stop()
                raise
        return self

    def wait_until(self, predicate: Callable[[], bool], timeout: float, *, what: str) -> None:
        """Poll `predicate` until it holds; fail early if the process exits.

        Raises:
            DaemonError: the process exited, or `timeout` passed.
        """
        deadline = self._clock() + timeout
        delay = 0.01
        while True:
            if predicate():
                return
            if not self.running:
                raise DaemonError(
                    name=self.name,
                    detail=f"exited with {self._exit_code()} before it was {what}; "
                    f"see {self.log_path}:\n{self.log_tail()}",
                )
            if self._clock() >= deadline:
                raise DaemonError(
                    name=self.name,
                    detail=f"not {what} after {timeout:g}s; see {self.log_path}:\n"
                    f"{self.log_tail()}",
                )
            self._sleep(delay)
            delay = min(delay * 2, 0.2)

    def stop(self, grace: float = 5.0) -> int | None:
        """Stop the process (SIGTERM, then SIGKILL after `grace` seconds); return its exit code."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def kill9(self) -> None:
        """Kill the process with SIGKILL (durability tests) and reap it."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def log_tail(self, lines: int = 20) -> str:
        """Return the last `lines` lines of the log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _exit_code(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None
