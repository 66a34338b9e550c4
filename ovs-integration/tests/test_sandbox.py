"""The sandbox stops what it started, also when a node fails half-way through starting."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_common.procs import pid_exists
from loom_ovs.sandbox import OvsNode, Sandbox, SandboxError

pytestmark = pytest.mark.ovs


def test_a_node_that_fails_to_start_leaves_no_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []
    real_start = OvsNode._start

    def start_then_fail(self: OvsNode, managers: object) -> None:
        real_start(self, [])  # both daemons run...
        started.extend(p for p in (self.db.pid, self.vswitchd.pid) if p is not None)
        raise SandboxError(detail="injected: the node's manager could not be set")

    with Sandbox(tmp_path) as sandbox:
        monkeypatch.setattr(OvsNode, "_start", start_then_fail)
        with pytest.raises(SandboxError, match="injected"):
            sandbox.add_node("hv1")
    assert len(started) == 2  # the first node to start (the underlay's switch) failed
    assert not [pid for pid in started if pid_exists(pid)]
