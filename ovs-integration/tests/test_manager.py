"""The passive OVSDB manager against real nodes: they dial in, the session learns them, and
the configuration it writes (br-int, tunnel ports) appears on the node and goes away."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_common.testing import wait_for
from loom_ovs.manager import Manager, NodeSession, TunnelSpec, omap
from loom_ovs.sandbox import Sandbox

pytestmark = pytest.mark.ovs


def _session(manager: Manager) -> NodeSession:
    sessions: list[NodeSession] = []

    def accepted() -> bool:
        sessions.extend(manager.accept())
        return bool(sessions)

    wait_for(accepted, 10, "a node's connection")
    session = sessions[0]
    session.start()
    return session


def test_nodes_dial_in_and_get_configured(tmp_path: Path) -> None:
    manager = Manager("ptcp:0:127.0.0.1", lambda: None).start()
    try:
        with Sandbox(tmp_path) as sandbox:
            node = sandbox.add_node("hv1", [manager.target])
            session = _session(manager)
            assert session.system_id == "hv1"
            assert session.openflow_remote == node.openflow
            assert session.bridge() is None  # br-int is the controller's to make
            spec = TunnelSpec("hv2", "geneve", "172.31.0.9", bfd=True)
            assert session.configure([spec])
            wait_for(lambda: session.poll() is not None and spec.port_name in session.tunnels(),
                     10, "the tunnel port")  # fmt: skip
            bridge = session.bridge()
            assert bridge is not None
            assert bridge[1]["fail_mode"] == "secure"
            options = node.vsctl("get", "Interface", spec.port_name, "options")
            assert 'remote_ip="172.31.0.9"' in options
            assert "key=flow" in options
            assert 'enable="true"' in node.vsctl("get", "Interface", spec.port_name, "bfd")
            wait_for(
                lambda: (
                    session.poll() is not None and session.tunnels()[spec.port_name][1] is not None
                ),
                10,
                "its ofport",
            )
            assert not session.configure([spec])  # nothing to change
            node.add_vif("vm", "vif-1", "50:54:00:00:00:01")
            wait_for(lambda: session.poll() is not None and "vif-1" in session.vifs(), 10,
                     "the VIF")  # fmt: skip
            assert session.vifs()["vif-1"].mac == "50:54:00:00:00:01"
            assert session.configure([])  # the tunnel is no longer wanted
            wait_for(lambda: session.poll() is not None and not session.tunnels(), 10,
                     "the tunnel port removed")  # fmt: skip
            assert omap(["map", [["a", "b"]]]) == {"a": "b"}
            session.close()
    finally:
        manager.close()
