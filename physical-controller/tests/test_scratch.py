"""`loom_physical.scratch`: the scratch switch traces run on, and the thread that owns it.

The switch is a real ovsdb-server + ovs-vswitchd (dummy datapath) private to its thread:
it dies when that thread ends, as it would with a killed controller; the tracer runs one
trace and lets one wait, refuses more, cancels a waiting one that timed out, and stops."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from loom_common.testing import wait_for
from loom_physical import trace
from loom_physical.scratch import PREFIX, Scratch, ScratchDown, ScratchError, Tracer
from loom_physical.trace import ScratchPort, Table

TABLE = Table([ScratchPort("p1", 7), ScratchPort("p2", 8)],
              ["table=0,priority=10,in_port=7 actions=output:8",
               "table=0,priority=0 actions=drop"], 7)  # fmt: skip


@pytest.mark.ovs
def test_the_scratch_switch_traces_and_dies_with_its_thread(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path / "scratch")
    got: dict[str, object] = {}

    def work() -> None:
        got["trace"], got["ports"] = scratch.trace(TABLE, "in_port=7,ip")
        assert scratch.node is not None
        assert scratch.node.running
        with pytest.raises(ScratchError) as refused:  # (OVS's words, not the scratch's paths)
            scratch.trace(TABLE, "in_port=7,bogus=1")
        got["refused"] = str(refused.value)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    try:
        assert "Datapath actions: " in str(got["trace"]), got
        ports = got["ports"]
        assert isinstance(ports, dict)
        assert {p.name for p in ports.values()} == {"p1", "p2"}
        assert "bogus" in str(got["refused"])
        assert str(tmp_path) not in str(got["refused"])
        # The thread that started the daemons ended: the kernel stopped them (`running`
        # reaps them: they are this process's children).
        node = scratch.node
        assert node is not None
        wait_for(lambda: not node.db.running and not node.vswitchd.running, 10,
                 "the daemons gone")  # fmt: skip
    finally:
        scratch.stop()
    assert not (tmp_path / "scratch").exists()


def test_the_tracer_runs_one_lets_one_wait_and_refuses_more() -> None:
    tracer = Tracer()
    release = threading.Event()
    started = threading.Event()
    roots: list[Path] = []

    def blocking(scratch: Scratch) -> str:
        roots.append(scratch.root)
        started.set()
        release.wait(10)
        return "first"

    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.update(first=tracer.run(blocking, 10)))
    first.start()
    assert started.wait(10)
    # The second waits behind the first, times out, and is cancelled (never runs).
    with pytest.raises(TimeoutError):
        tracer.run(lambda s: results.update(second="ran"), 0.2)
    # Its slot is freed by the cancellation: a third may wait; a fourth is refused.
    waiting = threading.Thread(
        target=lambda: results.update(third=tracer.run(lambda s: "third", 10))
    )
    waiting.start()
    wait_for(lambda: not tracer._slots._value, 5, "the third waiting")  # type: ignore[attr-defined]
    with pytest.raises(ScratchDown):
        tracer.run(lambda s: "fourth", 1)
    release.set()
    first.join(10)
    waiting.join(10)
    assert results == {"first": "first", "third": "third"}
    assert roots[0].name.startswith(PREFIX)
    tracer.stop()
    assert not roots[0].exists()
    with pytest.raises(ScratchDown):
        tracer.run(lambda s: "after", 1)


@pytest.mark.ovs
def test_a_verdict_names_the_tunnel_port_the_flow_output_to(tmp_path: Path) -> None:
    """A node's flow-based tunnel port and its BFD port to one peer are both Geneve: on OVS's
    userspace datapath they would share one datapath port, and the datapath actions could
    not tell which one the flow chose. The scratch switch gives each its own."""
    flow_based = ScratchPort("loom-geneve", 1, "geneve", {"remote_ip": "flow", "key": "flow"},
                             role="tunnel")  # fmt: skip
    bfd = ScratchPort("lt0001", 2, "geneve", {"remote_ip": "192.168.0.9", "key": "flow"},
                      role="tunnel")  # fmt: skip
    ports = [flow_based, bfd, ScratchPort("vm", 7)]
    scratch = Scratch(tmp_path / "scratch")
    via = {}
    try:
        for out in (1, 2):
            table = Table(ports, [f"table=0,priority=10,in_port=7 actions=set_field:5->tun_id,"
                                  f"set_field:192.168.0.9->tun_dst,output:{out}"], 7)  # fmt: skip
            text, dp_ports = scratch.trace(table, "in_port=7,ip")
            verdict = trace.verdict(trace.parse(text, {}), dp_ports, {"192.168.0.9": "gw1"}, {})
            assert verdict["outcome"] == "tunneled", text
            via[out] = [(t["node"], t["via"]) for t in verdict["tunneled"]]
    finally:
        scratch.stop()
    assert via == {1: [("gw1", "loom-geneve")], 2: [("gw1", "lt0001")]}
