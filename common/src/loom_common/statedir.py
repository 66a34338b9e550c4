"""One deployment per state directory: a lock that says who uses it, checked before anything
starts.

`loom up` (and `loom db`) keep every daemon's files in one state directory: databases,
sockets, pid files, logs. Two deployments on one directory would fight over them — the
second's ovsdb-server fails on the locked database file, and its clean-up removed the
first's pid file. So the directory is claimed first, and a second claimant is refused with
one line naming the holder, before it touches anything:

- `loom.lock` in the directory, held with `flock` by the `loom` process while it runs (the
  lock goes with the process, even after kill -9), and naming its PID;
- and, because a `loom up` killed with SIGKILL leaves its daemons running (they run in
  sessions of their own), every `*.pid` file under the directory whose process still runs
  with the directory in its command line also counts as a holder.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from loom_common.errors import LoomError
from loom_common.procs import pid_exists

LOCK_NAME = "loom.lock"


class StateDirInUse(LoomError):
    """Another deployment uses the state directory."""

    message = (
        "the state directory %(path)s is in use by %(holder)s; stop it first, or give "
        "another --state-dir"
    )


def running_daemons(state_dir: Path, *, proc: Path = Path("/proc")) -> list[str]:
    """The daemons of a deployment in `state_dir` that still run: "name (pid N)" for each
    `*.pid` file under it whose process runs with the directory in its command line (a PID
    reused by an unrelated process does not count)."""
    found = []
    marker = str(state_dir.resolve()).encode()
    for pid_file in sorted(state_dir.rglob("*.pid")):
        try:
            pid = int(pid_file.read_text().split()[0])
            cmdline = (proc / str(pid) / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if pid_exists(pid) and marker in cmdline.replace(b"\0", b" "):
            found.append(f"{pid_file.stem} (pid {pid})")
    return found


def claim(state_dir: Path) -> int:
    """Claim `state_dir` for this process (creating it if needed); return the lock's file
    descriptor, to keep open while the deployment runs (closing it releases the claim).

    Raises:
        StateDirInUse: another `loom` holds the lock, or daemons of an earlier deployment
            still run from the directory. Nothing in the directory was changed.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
        os.close(fd)
        raise StateDirInUse(path=state_dir, holder=f"loom (pid {holder or '?'})") from None
    daemons = running_daemons(state_dir)
    if daemons:
        os.close(fd)
        raise StateDirInUse(
            path=state_dir,
            holder=f"daemons an earlier loom left running: {', '.join(daemons)}",
        )
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def release(fd: int) -> None:
    """Give up a claim made by `claim` (the lock file stays, empty)."""
    os.ftruncate(fd, 0)
    os.close(fd)
