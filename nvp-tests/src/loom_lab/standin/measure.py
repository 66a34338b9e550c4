"""What a stand-in fleet costs, measured without a controller: Loom's own clients do what a
physical controller does to each node, and the fleet process's CPU and memory are read.

    python -m loom_lab.standin.measure [--nodes 500] [--vifs 21] [--tunnels 170]
                                       [--flows 4000] [--changes 200] [--change-flows 150]

1. start: the fleet with `--nodes` nodes of `--vifs` VIFs each (CPU and memory per node);
2. connect: a passive manager (`loom_ovs.manager`) accepts every node, reads it
   (`monitor`), claims it (the fencing token's compare-and-set) and writes `--tunnels`
   tunnel ports with BFD (`NodeSession.configure`) until each has its ofport: the OVSDB
   share of a node's connect;
3. cold push: per node, an OpenFlow channel claims the master role, maps the Geneve
   option, asks the flow count and pushes `--flows` flows in one bundle
   (`Switch.replace` on an empty bridge): per flow_mod;
4. changes: `--changes` bundles of `--change-flows` adds and as many deletes, on nodes in
   turn (a port's flows coming and going): per bundle.

The flows are Loom-like (metadata, registers, MACs, IP prefixes; set_field, resubmit,
conntrack), each node's the same but for a register value (as nodes with the same
datapaths share most flows). Prints one JSON document; the clients' own CPU (this
process) is not counted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loom_common.testing import wait_for
from loom_lab.standin.fleet import NodeSpec, VifSpec
from loom_lab.standin.handle import Fleet
from loom_ovs.manager import Manager, NodeSession, TunnelSpec
from loom_ovs.openflow import Flow, Mod, Switch, cookie


def _flows(node: int, count: int, base: int = 0) -> list[Flow]:
    """`count` Loom-like flows for node number `node`."""
    out = []
    for i in range(base, base + count):
        dp = 1 + i % 21
        kind = i % 4
        if kind == 0:
            out.append(Flow(0, 100, f"in_port={1 + i % 200},reg0={node},reg13={i:#x}",
                            f"set_field:{dp:#x}->metadata,set_field:{i:#x}->reg14,resubmit(,8)",
                            cookie(i)))  # fmt: skip
        elif kind == 1:
            out.append(Flow(15, 50, f"metadata={dp:#x},dl_dst=0a:00:00:{i >> 16 & 255:02x}:"
                            f"{i >> 8 & 255:02x}:{i & 255:02x}",
                            f"set_field:{i:#x}->reg15,resubmit(,37)", cookie(i)))  # fmt: skip
        elif kind == 2:
            out.append(Flow(44, 2001, f"ct_state=-new+est-rpl+trk,ip,reg15={i:#x},"
                            f"metadata={dp:#x},nw_src=10.{i >> 8 & 255}.{i & 255}.0/24",
                            "resubmit(,45)", cookie(i)))  # fmt: skip
        else:
            out.append(Flow(48, 100, f"ip,reg15={i:#x},metadata={dp:#x}",
                            f"ct(commit,zone={1 + i % 64000},exec(set_field:0x1/0x1->ct_mark)),"
                            "resubmit(,49)", cookie(i)))  # fmt: skip
    return out


def _fleet_cpu(fleet: Fleet) -> dict[str, float]:
    stats = fleet.stats()
    return {"total": fleet.cpu_seconds(), "ovsdb": stats["cpu_ovsdb_seconds"],
            "openflow": stats["cpu_openflow_seconds"]}  # fmt: skip


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 3) for k in after}


def run(args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    """Run the four phases; their figures."""
    specs = [NodeSpec(f"hv{n}", f"172.31.{n // 250}.{n % 250 + 1}",
                      tuple(VifSpec(f"v{i}", f"hv{n}-vif{i}", f"0a:01:00:00:{n % 256:02x}:{i:02x}")
                            for i in range(args.vifs)))
             for n in range(1, args.nodes + 1)]  # fmt: skip
    manager = Manager("ptcp:0:127.0.0.1", lambda: None).start()
    fleet = Fleet(run_dir, specs, [manager.target])
    switches: list[Switch] = []
    sessions: list[NodeSession] = []
    try:
        began = time.perf_counter()
        fleet.start(timeout=600)
        out: dict[str, Any] = {"nodes": args.nodes, "vifs_per_node": args.vifs,
                               "start_s": round(time.perf_counter() - began, 2)}  # fmt: skip
        cpu0, rss0 = _fleet_cpu(fleet), fleet.rss_bytes()
        out["start"] = {"cpu_s": round(cpu0["total"], 2), "rss_mib": round(rss0 / 2**20, 1),
                        "kib_per_node": round(rss0 / args.nodes / 1024, 1)}  # fmt: skip

        # 2. connect: read, claim, tunnels with BFD, until every ofport is there
        def accepted() -> bool:
            for session in manager.accept():  # read at once: a silent manager is dropped
                session.start()
                sessions.append(session)
            return len(sessions) >= int(args.nodes)

        wait_for(accepted, 600, "every node's connection")
        names = [s.system_id for s in specs]
        for session in sessions:
            session.claim(1)
            assert session.system_id is not None
            peers = [p for p in names if p != session.system_id][: args.tunnels]
            session.configure([TunnelSpec(p, "geneve", f"10.9.{i // 250}.{i % 250 + 1}", True)
                               for i, p in enumerate(peers)])  # fmt: skip

        def configured() -> bool:
            return all(session.poll() is not None and len(session.tunnels()) ==
                       min(args.tunnels, args.nodes - 1) and
                       all(port for _, port, _ in session.tunnels().values())
                       for session in sessions)  # fmt: skip

        wait_for(configured, 600, "every tunnel's ofport")
        cpu1 = _fleet_cpu(fleet)
        connect = _delta(cpu1, cpu0)
        out["connect"] = {
            "tunnels_per_node": min(args.tunnels, args.nodes - 1), "cpu_s": connect,
            "ms_per_node": round(connect["total"] / args.nodes * 1000, 2),
        }  # fmt: skip

        # 3. cold push: one bundle of the whole table per node
        for n, session in enumerate(sessions, start=1):
            remote = session.openflow_remote
            assert remote is not None
            switch = Switch(remote)
            switch.channel.claim(1)
            switch.ensure_tlv_map()
            switch.replace(_flows(n, args.flows))
            switches.append(switch)
        cpu2, rss2 = _fleet_cpu(fleet), fleet.rss_bytes()
        push = _delta(cpu2, cpu1)
        flow_mods = args.nodes * args.flows
        out["cold_push"] = {
            "flow_mods": flow_mods, "cpu_s": push,
            "us_per_flow_mod": round(push["total"] / flow_mods * 1e6, 2),
            "openflow_us_per_flow_mod": round(push["openflow"] / flow_mods * 1e6, 2),
            "rss_mib": round(rss2 / 2**20, 1), "kib_per_node": round(rss2 / args.nodes / 1024, 1),
            "interned": fleet.stats()["interned"],
        }  # fmt: skip

        # 4. changes: a port's flows added, then removed, node after node
        for c in range(args.changes):
            n = c % args.nodes
            added = _flows(n + 1, args.change_flows, base=10_000_000 + c * args.change_flows)
            mods: list[Mod] = [("add", f) for f in added]
            switches[n].apply(mods)
            switches[n].apply([("delete", f) for f in added])
        cpu3 = _fleet_cpu(fleet)
        changes = _delta(cpu3, cpu2)
        bundles = 2 * args.changes
        out["changes"] = {
            "bundles": bundles, "flow_mods_each": args.change_flows, "cpu_s": changes,
            "ms_per_bundle": round(changes["total"] / bundles * 1000, 3),
            "us_per_flow_mod": round(changes["total"] / (bundles * args.change_flows) * 1e6, 2),
        }  # fmt: skip
        stats = fleet.stats()
        kept = ("bundles", "flow_mods", "transactions", "vswitchd_writes", "errors", "unknown")
        out["counters"] = {k: stats[k] for k in kept}
        return out
    finally:
        for switch in switches:
            switch.close()
        for session in sessions:
            session.close()
        fleet.stop()
        manager.close()


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print its JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m loom_lab.standin.measure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--vifs", type=int, default=21)
    parser.add_argument("--tunnels", type=int, default=170)
    parser.add_argument("--flows", type=int, default=4000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--change-flows", type=int, default=150)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="standin-measure-") as tmp:
        print(json.dumps(run(args, Path(tmp)), indent=2), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
