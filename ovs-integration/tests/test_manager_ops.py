"""A node session's writes as operations (no daemon): what `claim_ops`, `configure_ops`,
`zone_ops` and `qos_ops` return from the rows a node shows, and what `transact` adds."""

from __future__ import annotations

from typing import Any, cast

import pytest

from loom_common.ovsdb import RawConnection, TransactError
from loom_common.ovsdb.ops import Op
from loom_ovs.manager import BRIDGE, FENCE_KEY, Fenced, NodeSession, TunnelSpec


class Recorder:
    """Stands for the node's connection: keeps each transaction, fails when told to."""

    def __init__(self) -> None:
        self.sent: list[list[Op]] = []
        self.fail = False

    def transact(self, db: str, ops: list[Op]) -> list[dict[str, Any]]:
        self.sent.append(ops)
        if self.fail:
            raise TransactError(detail="refused")
        return [{} for _ in ops]


def _node(*, bridge: bool, fence: str | None = None) -> tuple[NodeSession, Recorder]:
    ids = [["system-id", "hv1"], *([[FENCE_KEY, fence]] if fence else [])]
    rows: dict[str, list[dict[str, Any]]] = {
        "Open_vSwitch": [{"_uuid": ["uuid", "o1"], "external_ids": ["map", ids],
                          "bridges": ["set", []], "other_config": ["map", []]}],
    }  # fmt: skip
    if bridge:
        rows["Bridge"] = [{"_uuid": ["uuid", "b1"], "name": BRIDGE, "ports": ["set", []],
                           "fail_mode": "secure", "datapath_type": "",
                           "protocols": ["set", ["OpenFlow13", "OpenFlow15"]],
                           "other_config": ["map", []], "controller": ["set", []],
                           "external_ids": ["map", [["loom-zone-old", "9"]]]}]  # fmt: skip
    session = NodeSession.snapshot(rows)
    recorder = Recorder()
    session.replica.conn = cast(RawConnection, recorder)
    return session, recorder


def _kinds(ops: list[Op]) -> list[tuple[str, str]]:
    return [(op["op"], op.get("table", "")) for op in ops]


def test_a_bridge_is_made_once_and_its_ports_wait_for_the_replica() -> None:
    session, recorder = _node(bridge=False)
    spec = TunnelSpec("hv2", "geneve", "10.0.0.2")
    ops = session.configure_ops([spec])
    assert ("insert", "Bridge") in _kinds(ops)
    assert session.configure([spec])
    assert recorder.sent == [ops]  # unfenced: no token claimed
    assert session.creating_bridge
    assert session.configure_ops([spec]) == []  # not a second br-int
    assert session.configure([spec])  # (still to show)
    assert len(recorder.sent) == 1


def test_a_claim_replaces_the_fence_and_later_writes_start_with_it() -> None:
    session, recorder = _node(bridge=True, fence="3")
    with pytest.raises(Fenced):
        session.claim_ops(2)
    claim = session.claim_ops(5)
    assert _kinds(claim) == [("wait", "Open_vSwitch"), ("mutate", "Open_vSwitch")]
    session.claim(5)
    assert recorder.sent == [claim]  # not behind the old token's fence
    assert session.claim_ops(5) == []
    zones = session.zone_ops({"lp1": 4}, ["old"])
    assert zones == [{
        "op": "mutate", "table": "Bridge", "where": [["_uuid", "==", ["uuid", "b1"]]],
        "mutations": [["external_ids", "delete", ["set", ["loom-zone-lp1", "loom-zone-old"]]],
                      ["external_ids", "insert", ["map", [["loom-zone-lp1", "4"]]]]],
    }]  # fmt: skip
    session.transact(zones)
    fence = recorder.sent[-1][0]
    assert fence["op"] == "wait"
    assert fence["where"] == [["external_ids", "includes", ["map", [[FENCE_KEY, "5"]]]]]
    assert recorder.sent[-1][1:] == zones


def test_a_failed_write_makes_the_next_claim_check_the_node() -> None:
    session, recorder = _node(bridge=True, fence="5")
    session.claim(5)
    assert recorder.sent == []  # the node has it: nothing to write
    recorder.fail = True
    with pytest.raises(TransactError):
        session.transact(session.qos_ops({}) or session.zone_ops({"lp1": 1}, []))
    assert session.claim_ops(5) == []  # the node still records 5 ...
    session.replica.rows["Open_vSwitch"]["o1"]["external_ids"] = ["map", [[FENCE_KEY, "7"]]]
    with pytest.raises(Fenced):
        session.claim_ops(5)  # ... and once it records a newer one, it is read again


def test_no_bridge_no_zone_or_qos_operations() -> None:
    session, _ = _node(bridge=False)
    assert session.zone_ops({"lp1": 1}, []) == []
    assert session.qos_ops({"lp1": {"max_rate": 10}}) == []
