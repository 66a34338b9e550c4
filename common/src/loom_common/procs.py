"""Supervising the daemons Loom starts: start, wait until ready, stop or kill by PID.

Every process is a direct child started here, with its output in a log file of its state
directory and its PID recorded in a pid file beside it. Only PIDs started by this module are
ever signalled. Readiness is a predicate on
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
        log_path: Path | None = None,
        pid_path: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        die_with_parent: bool = False,
    ) -> None:
        """Describe a daemon; nothing runs until `start()`.

        Args:
            name: a short name, used in errors and the default file names.
            command: the argv to run.
            state_dir: where its log, pid file (and whatever the command writes) live.
            env: extra environment variables.
            log_path: where stdout and stderr go (appended); default `state_dir/<name>.log`.
            pid_path: where the PID is recorded while it runs; default `state_dir/<name>.pid`.
                A command that writes its own pid file (`ovsdb-server --pidfile`) may be given
                the same path: it records the same PID.
            clock: monotonic time source.
            sleep: how to wait between readiness polls.
            die_with_parent: the kernel kills it when the thread that started it ends
                (`PR_SET_PDEATHSIG`): for a helper private to a process (a controller's
                scratch switch), which must not outlive a `kill -9` of that process. Start
                it from a thread that lives as long as the helper is wanted.
        """
        self.name = name
        self.command = list(command)
        self.state_dir = state_dir
        self.log_path = log_path or state_dir / f"{name}.log"
        self.pid_path = pid_path or state_dir / f"{name}.pid"
        self._env = env
        self._clock = clock
        self._sleep = sleep
        if die_with_parent:  # (util-linux's setpriv execs the command with the signal set;
            # a preexec_fn would run Python in the child of a threaded process)
            self.command = ["setpriv", "--pdeathsig", "KILL", "--", *self.command]
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready: Callable[[], bool] | None = None
        self._ready_timeout = 30.0

    @property
    def pid(self) -> int | None:
        """The PID while running, else None."""
        return self._proc.pid if self._proc is not None and self.running else None

    @property
    def running(self) -> bool:
        """True while the process has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def start(
        self, *, ready: Callable[[], bool] | None = None, timeout: float = 30.0, wait: bool = True
    ) -> Daemon:
        """Start the process and wait until `ready()` holds.

        Args:
            ready: readiness predicate on observable state, polled until it returns True.
            timeout: seconds to wait for `ready`.
            wait: False to return at once (`wait_ready()` waits later: several daemons
                started together, each waited for after), `ready` kept for restarts.

        Returns:
            self, running (and ready, with `wait`).

        Raises:
            DaemonError: it exited or was not ready within `timeout` (it is stopped then).
        """
        if self.running:
            raise DaemonError(name=self.name, detail="already running")
        self._ready, self._ready_timeout = ready, timeout
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
        self.pid_path.write_text(f"{self._proc.pid}\n")
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Wait until the readiness `start()` was given holds (at once without one).

        Raises:
            DaemonError: it exited or was not ready in time (it is stopped then, as when
                the wait is interrupted: SIGTERM, Ctrl-C).
        """
        if self._ready is None:
            return
        try:
            self.wait_until(self._ready, self._ready_timeout, what="ready")
        except BaseException:  # not ready, or the wait interrupted (SIGTERM, Ctrl-C)
            self.stop()
            raise

    def wait_until(self, predicate: Callable[[], bool], timeout: float, *, what: str) -> None:
        """Poll `predicate` until it holds; fail early if the process exits.

        Args:
            predicate: the observable condition to wait for.
            timeout: seconds, measured on the injected clock.
            what: how the condition reads in the error ("ready", "joined ...").

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
        """Stop the process: SIGTERM, then SIGKILL after `grace` seconds; reap it.

        Args:
            grace: seconds between SIGTERM and SIGKILL.

        Returns:
            Its exit code (negative: the signal that ended it), or None if never started.
        """
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
        self._forget_pid()
        return proc.returncode

    def restart(self) -> Daemon:
        """Start it again with the command and readiness of its last `start()` (after it
        died, or was stopped or killed).

        Raises:
            DaemonError: as `start()`.
        """
        self.stop()
        return self.start(ready=self._ready, timeout=self._ready_timeout)

    def kill9(self) -> None:
        """Kill the process with SIGKILL, as a crash would (durability tests), and reap it.

        The pid file is left behind, as a crash leaves it.
        """
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def _forget_pid(self) -> None:
        """Remove the pid file if it still names our (now reaped) process."""
        proc = self._proc
        try:
            recorded = self.pid_path.read_text().strip()
        except FileNotFoundError:
            return
        if proc is not None and recorded == str(proc.pid):
            self.pid_path.unlink(missing_ok=True)

    def log_tail(self, lines: int = 20) -> str:
        """Return the last `lines` lines of the log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _exit_code(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None


def listens_on(pid: int, port: int, *, proc: Path = Path("/proc")) -> bool:
    """True if process `pid` holds a listening IPv4 TCP socket on `port` (Linux `/proc`).

    Distinguishes "our daemon bound the port" from "something else did": a daemon that lost
    the race for a port picked earlier must not count as ready.

    Args:
        pid: the process.
        port: the TCP port.
        proc: the procfs mount (a parameter for tests).
    """
    listening = set()
    try:
        table = (proc / "net" / "tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in table:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and int(local.rpartition(":")[2], 16) == port:  # 0A: TCP_LISTEN
            listening.add(f"socket:[{inode}]")
    if not listening:
        return False
    try:
        fds = list((proc / str(pid) / "fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) in listening:
                return True
        except OSError:
            continue
    return False


def pid_exists(pid: int) -> bool:
    """Return whether a process `pid` exists (signal 0; nothing is sent).

    A zombie still exists; `Daemon` reaps its children, so for them this means "running".
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
