"""Controllers' heartbeats as a reader sees them (pure: time is a parameter)."""

from __future__ import annotations

from loom_common.liveness import HEARTBEAT, LEASE_S, Liveness, heartbeat_op, node_view


def test_a_counter_that_moves_keeps_its_controller_alive() -> None:
    live = Liveness(now=0.0)
    for t in range(0, 20):
        live.observe({HEARTBEAT + "pc1": str(t), "realized_generation:pc1": "3"}, now=float(t))
        assert not live.gone("pc1", now=t + 0.5)
    assert live.silent_for("pc1", now=19.5) == 0.5


def test_a_counter_that_stops_is_gone_after_the_lease_by_the_readers_clock() -> None:
    live = Liveness(now=100.0)
    live.observe({HEARTBEAT + "pc1": "7"}, now=100.0)
    live.observe({HEARTBEAT + "pc1": "7"}, now=103.0)  # seen again, not moved
    assert not live.gone("pc1", now=100.0 + LEASE_S)
    assert live.gone("pc1", now=100.0 + LEASE_S + 0.1)
    live.observe({HEARTBEAT + "pc1": "1"}, now=200.0)  # restarted: counts from 1 again
    assert not live.gone("pc1", now=201.0)


def test_a_controller_never_seen_is_given_the_lease_from_when_the_reader_began() -> None:
    live = Liveness(now=10.0)
    assert not live.gone("pc9", now=10.0 + LEASE_S)
    assert live.gone("pc9", now=10.0 + LEASE_S + 1)


def test_node_view_says_not_connected_only_when_its_controller_is_gone() -> None:
    live = Liveness(now=0.0)
    live.observe({HEARTBEAT + "pc1": "1", HEARTBEAT + "pc2": "1"}, now=0.0)
    live.observe({HEARTBEAT + "pc1": "2", HEARTBEAT + "pc2": "1"}, now=9.0)
    on_pc1 = {"connected": "true", "controller": "pc1", "realized_generation": "4"}
    on_pc2 = {"connected": "true", "controller": "pc2", "realized_generation": "4"}
    off = {"connected": "false", "controller": "pc2", "message": "not connected"}
    assert node_view(on_pc1, live, now=10.0) == on_pc1
    assert node_view(off, live, now=10.0) == off
    assert node_view(on_pc2, live, now=10.0) == {
        "connected": "false", "controller": "pc2", "realized_generation": "4",
        "message": "its physical controller pc2 has not been heard from for 10 s",
    }  # fmt: skip


def test_heartbeat_op_replaces_only_its_own_key() -> None:
    op = heartbeat_op("u1", "pc1", 5)
    assert op["table"] == "Loom_Global"
    assert op["where"] == [["_uuid", "==", ["uuid", "u1"]]]
    key = "heartbeat:pc1"
    assert op["mutations"] == [["external_ids", "delete", ["set", [key]]],
                               ["external_ids", "insert", ["map", [[key, "5"]]]]]  # fmt: skip
