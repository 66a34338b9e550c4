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
