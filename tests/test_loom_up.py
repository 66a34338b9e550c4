"""`loom up` end to end: it starts the config DB and the API, serves, and Ctrl-C stops all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from loom_common.ovsdb import free_port

pytestmark = pytest.mark.ovs

LOOM = Path(sys.executable).parent / "loom"


def _children(pid: int) -> set[int]:
    """Return the PIDs of every descendant of `pid`."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True)
    parents: dict[int, list[int]] = {}
    for line in out.stdout.splitlines():
        child, parent = (int(x) for x in line.split())
        parents.setdefault(parent, []).append(child)
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_serves_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [str(LOOM), "up", "--api-port", str(port), "--admin-token", "tok",
         "--state-dir", str(tmp_path / "state")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        text = "".join(lines)
        assert f"http://127.0.0.1:{port}/api/v1" in text, text
        assert "admin token: tok" in text
        children = _children(proc.pid)
        assert len(children) >= 2, "expected ovsdb-server and the API server"
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/logical-switches",
            data=json.dumps({"name": "ls0"}).encode(),
            headers={"Authorization": "Bearer tok", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 201
            assert int(response.headers["X-Loom-Config-Generation"]) >= 1
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, rest
        assert "Loom stopped." in rest
        assert not [pid for pid in children if _alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
