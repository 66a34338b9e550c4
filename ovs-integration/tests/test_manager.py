"""The passive OVSDB manager against real nodes: they dial in, the session learns them, and
the configuration it writes (br-int, tunnel ports) appears on the node and goes away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom_common.ovsdb import TransactError
from loom_common.testing import wait_for
from loom_ovs.manager import Fenced, Manager, NodeSession, TunnelSpec, _bfd_forwarding, omap
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
            assert not session.bridge_created()
            spec = TunnelSpec("hv2", "geneve", "172.31.0.9", bfd=True)
            assert session.configure([spec])
            # Again before the replica has the node's update: not a second br-int (the
            # node would refuse it: a duplicate interface name).
            assert session.configure([spec])
            wait_for(lambda: session.poll() is not None and spec.port_name in session.tunnels(),
                     10, "the tunnel port")  # fmt: skip
            bridge = session.bridge()
            assert bridge is not None
            assert bridge[1]["fail_mode"] == "secure"
            wait_for(lambda: session.poll() is not None and session.bridge_created(), 10,
                     "ovs-vswitchd making br-int")  # fmt: skip
            assert node.ofctl("dump-flows")  # it takes OpenFlow connections
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


def test_a_newer_master_fences_the_old_ones_ovsdb_writes(tmp_path: Path) -> None:
    """Two controllers' sessions to one node: once the newer master has claimed it, every
    write of the older one fails whole (tunnel ports, zone records), and so does its claim;
    the newer one's writes go through."""
    old, new = (Manager("ptcp:0:127.0.0.1", lambda: None).start() for _ in range(2))
    try:
        with Sandbox(tmp_path) as sandbox:
            node = sandbox.add_node("hv1", [old.target, new.target])
            a, b = _session(old), _session(new)
            a.claim(5)
            fence = node.vsctl("get", "Open_vSwitch", ".", "external_ids:loom-fence")
            assert fence.strip() == '"5"'
            assert a.configure([])  # br-int
            wait_for(lambda: b.poll() is not None and b.bridge() is not None, 10, "br-int")
            wait_for(lambda: a.poll() is not None and a.bridge() is not None, 10, "br-int")
            b.claim(7)
            wait_for(lambda: a.poll() is not None and a.external_ids.get("loom-fence") == "7",
                     10, "the new token seen by the old master")  # fmt: skip
            spec = TunnelSpec("hv2", "geneve", "172.31.0.9")
            with pytest.raises(TransactError):
                a.configure([spec])
            with pytest.raises(TransactError):
                a.save_zones({"lp1": 3}, [])()
            with pytest.raises(Fenced):
                a.claim(5)
            with pytest.raises(Fenced):
                b.claim(6)  # an even older assignment
            b.claim(7)  # its own again: nothing to write
            assert node.vsctl("list-ports", "br-int").strip() == ""
            assert "loom-zone" not in node.vsctl("get", "Bridge", "br-int", "external_ids")
            assert b.configure([spec])
            assert spec.port_name in node.vsctl("list-ports", "br-int")
            b.save_zones({"lp1": 3}, [])()
            assert "loom-zone-lp1" in node.vsctl("get", "Bridge", "br-int", "external_ids")
            a.close()
            b.close()
    finally:
        old.close()
        new.close()


def test_a_bfd_session_counts_once_it_has_come_up() -> None:
    """A new BFD session is down until both ends run it: that says nothing about the peer.
    Once it has come up (`flap_count` counts the changes of `forwarding`), its verdict
    counts either way; an interface without BFD has none."""

    def iface(**status: str) -> dict[str, Any]:
        return {"bfd_status": ["map", sorted(status.items())]}

    assert _bfd_forwarding(iface()) is None
    assert _bfd_forwarding(iface(state="down", forwarding="false", flap_count="0")) is None
    assert _bfd_forwarding(iface(state="up", forwarding="true", flap_count="1")) is True
    assert _bfd_forwarding(iface(state="down", forwarding="false", flap_count="2")) is False
