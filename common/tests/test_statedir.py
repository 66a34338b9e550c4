"""`loom_common.statedir`: one deployment per state directory, refused with one line naming
the holder, nothing in the directory touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loom_common.statedir import LOCK_NAME, StateDirInUse, claim, release, running_daemons
from loom_common.testing import wait_for


def test_a_second_claim_names_the_holder_and_touches_nothing(tmp_path: Path) -> None:
    fd = claim(tmp_path)
    try:
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        with pytest.raises(StateDirInUse) as refused:
            claim(tmp_path)
        assert str(refused.value) == (
            f"the state directory {tmp_path} is in use by loom (pid {os.getpid()}); stop it "
            "first, or give another --state-dir"
        )
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    finally:
        release(fd)
    release(claim(tmp_path))  # free again once released


def test_daemons_left_running_hold_the_directory(tmp_path: Path) -> None:
    """A `loom up` killed with SIGKILL releases its lock, but its daemons run on."""
    left = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path / "db" / "x.sock")]
    )
    try:
        # (until the child has exec'd, its command line is still ours)
        wait_for(lambda: str(tmp_path) in Path(f"/proc/{left.pid}/cmdline").read_text(), 10,
                 "the child to run")  # fmt: skip
        (tmp_path / "db").mkdir()
        (tmp_path / "db" / "config-ovsdb-server.pid").write_text(f"{left.pid}\n")
        (tmp_path / "stale.pid").write_text("999999999\n")  # a process long gone
        (tmp_path / "other.pid").write_text(f"{os.getpid()}\n")  # runs, but not from here
        assert running_daemons(tmp_path) == [f"config-ovsdb-server (pid {left.pid})"]
        with pytest.raises(StateDirInUse, match=r"daemons an earlier loom left running: "
                           rf"config-ovsdb-server \(pid {left.pid}\)"):  # fmt: skip
            claim(tmp_path)
    finally:
        left.kill()
        left.wait()
    assert running_daemons(tmp_path) == []
    release(claim(tmp_path))
