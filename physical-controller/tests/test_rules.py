"""The localization rules on their golden script (rules/physical/tests), in the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loom_ddlog import Program
from loom_physical.inputs import universal_dl
from loom_physical.rules import main_file, rules_dir

TESTS = Path(__file__).resolve().parents[2] / "rules" / "physical" / "tests"
LOOM_DDLOG = Path(sys.executable).parent / "loom-ddlog"


def test_universal_dl_is_generated_from_the_universal_schema() -> None:
    assert (rules_dir() / "universal.dl").read_text() == universal_dl(), (
        "rules/physical/universal.dl is stale: run `make rules`"
    )


def test_localize_golden() -> None:
    script = TESTS / "localize.dat"
    done = subprocess.run([str(LOOM_DDLOG), "run", str(main_file())], input=script.read_text(),
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (TESTS / "localize.dump.expected").read_text()
    # What the golden pins: the way to a port elsewhere is the same on every node (a
    # `DpFlow`, by the flow-based tunnel, `tun_dst` its node's), a port here overrides it,
    # the zones are loaded where packets enter and reach their ports.
    assert "set_field:192.168.0.2->tun_dst" in done.stdout
    assert '.matches = "", .actions = "output:20"' in done.stdout
    assert '"set_field:3->reg13,resubmit(,40)"' in done.stdout
    # ... and so are a switch's flood copies to the nodes with its ports: one `DpFlow`
    # (every node's, itself included), which each node's flood flow resubmits to, and
    # whose copy to itself its tunnel table drops.
    dump = done.stdout.splitlines()
    remote = [line for line in dump if line.startswith("DpFlow{.dp = 1, .table = 67,")]
    assert remote
    assert all("192.168.0.1->tun_dst" in line for line in remote)
    flood = next(line for line in dump if '"hv1", .table = 64' in line)
    assert '.actions = "clone(set_field:0x1->reg15,resubmit(,70)),resubmit(,67)"' in flood
    assert (
        'NodeFlow{.node = "hv1", .table = 73, .priority = 110, .matches = "tun_dst=192.168.0.1",'
        ' .actions = "drop"}: +1' in dump
    )


def test_a_gateway_lost_to_bfd_moves_to_the_next_node() -> None:
    """The active node of a gateway service: the live one of least weight, where a node
    every BFD session to it says is down is not live (connected or not), a node a peer
    still reaches stays, a session's word about its own node does not count, nor the
    frozen word of a node nobody reaches (a dead datapath's last `bfd_status`)."""
    program = Program.load([main_file()], internal=True)

    def active() -> list[str]:
        return sorted(str(row[1]) for row in program.dump("ActiveGateway"))

    def bfd(insert: bool, *rows: tuple[str, str, bool]) -> None:
        with program.transaction() as txn:
            for row in rows:
                (txn.insert if insert else txn.delete)("Bfd", row)
            txn.commit()

    with program.transaction() as txn:
        nodes = ((1, "gw1"), (2, "gw2"), (3, "gw3"))
        txn.insert("Gateway_Assignment", ("ga", "gw", "l2", nodes, None, None, None))
        for _, node in nodes:
            txn.insert("Live", (node,))
        txn.commit()
    assert active() == ["gw1"]
    # everyone reaches everyone (hv1's sessions to the gateways and theirs back)
    everyone = [(a, b, True) for a in ("hv1", "gw1", "gw2", "gw3")
                for b in ("hv1", "gw1", "gw2", "gw3") if a != b]  # fmt: skip
    bfd(True, *everyone)
    assert active() == ["gw1"]
    # gw1's datapath dies: the others' sessions to it go down; its own stay "up", frozen
    lost_gw1 = [(a, "gw1", True) for a in ("hv1", "gw2", "gw3")]
    bfd(False, *lost_gw1)
    bfd(True, *[(a, b, False) for a, b, _ in lost_gw1], ("gw1", "gw1", True))
    assert active() == ["gw2"], "lost to BFD though connected"
    # one peer still reaches it: it stays (no move for a partial partition)
    bfd(False, ("gw3", "gw1", False))
    bfd(True, ("gw3", "gw1", True))
    assert active() == ["gw1"], "a peer still reaches it"
    bfd(False, ("gw3", "gw1", True))
    bfd(True, ("gw3", "gw1", False))
    assert active() == ["gw2"]
    # gw2's datapath dies too: gw1's frozen "gw2 forwards" does not keep it
    lost_gw2 = [(a, "gw2", True) for a in ("hv1", "gw3")]
    bfd(False, *lost_gw2)
    bfd(True, *[(a, b, False) for a, b, _ in lost_gw2])
    assert active() == ["gw3"], "a node nobody reaches vouched for gw2"
    # both back (preemptive: gw1 takes the service back)
    bfd(False, *[(a, b, False) for a, b, _ in lost_gw1 + lost_gw2])
    bfd(True, *lost_gw1, *lost_gw2)
    assert active() == ["gw1"], "back (preemptive)"


def test_the_node_that_learns_a_next_hop_has_its_flows_key_and_the_active_node_is_out() -> None:
    """An L3 service with no static neighbour for its next hop: its active node learns the
    MAC (a `learn` into table 65 keyed by the router's metadata), and the rules give that
    key (`Learned`: what the node writes itself is no difference) and the active node
    (`ActiveGateway`: the controllers write it in the service's status); a static
    neighbour, or the service moving away, takes the key back."""
    program = Program.load([main_file()], internal=False)
    router = 0x800001

    def learned() -> list[tuple[str, int, int, str]]:
        return sorted((str(n), int(t), int(p), str(m)) for n, t, p, m in program.dump("Learned"))

    def active() -> list[tuple[str, str]]:
        return sorted((str(g), str(n)) for g, n in program.dump("ActiveGateway"))

    with program.transaction() as txn:
        for node in ("gw1", "gw2"):
            txn.insert("Node", (node,))
            txn.insert("Live", (node,))
            txn.insert("Uplink", (node, 9))
        txn.insert("Datapath", ("dp-r", router, "router", "r", None))
        txn.insert("Gateway_Assignment", ("ga", "gw", "l3", ((1, "gw1"), (2, "gw2")),
                                          "172.16.0.2/24", "172.16.0.1",
                                          "0a:00:00:00:00:01"))  # fmt: skip
        txn.insert("Port_Binding", ("pb-up", "r-uplink", router, 0xFFFE, "l3-gateway", None,
                                    None, "gw", None, ()))  # fmt: skip
        txn.commit()
    assert active() == [("gw", "gw1")]
    assert learned() == [("gw1", 65, 100, f"metadata={router:#x}")]
    # the learn action writes exactly that key
    (learn,) = [row for row in program.dump("NodeFlow")
                if row[0] == "gw1" and "learn(" in str(row[4])]  # fmt: skip
    assert "learn(table=65,priority=100,OXM_OF_METADATA[]" in str(learn[4])
    with program.transaction() as txn:
        txn.delete("Live", ("gw1",))
        txn.commit()
    assert active() == [("gw", "gw2")]
    assert learned() == [("gw2", 65, 100, f"metadata={router:#x}")]
    with program.transaction() as txn:
        txn.insert("Neighbour", ("gw2", "172.16.0.1", "00:00:00:00:99:01"))
        txn.commit()
    assert learned() == []
    assert active() == [("gw", "gw2")]
