"""Snapshot tests of one hypervisor's OpenFlow table per scenario: each scenario of
tests/snapshots/ (the logical snapshot tests' steps, their universal DB) is localized by the
physical rules (`rules/physical`, in the engine) for node `hv1` — its VIFs are the ports the
scenario locates there, its tunnels the universal `Tunnel` rows from it, its conntrack zones
numbered by datapath and port key, every node live — and the table is compared with
`NAME.hv1.golden` (`pytest --update-snapshots` rewrites them), each flow's table named by its
stage or physical table (`table=ls_in_acl`, `table=output`: `loom_schemas.pipeline.table_name`).
Every scenario puts what it is about on hv1 (a VIF of the ports whose flows it tests), so
that its table pins those flows.
The table is also installed on a real ovs-vswitchd, which must accept every flow, and
installed again through the native OpenFlow encoder, which must leave the same table.

It lives beside the logical snapshot tests because it runs their scenarios (the steps, the
API, the logical controller); it exercises the physical rules, not the physical
controller's plumbing (tests/test_physical*.py do that with real nodes)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from loom_common.ovsdb import RawConnection
from loom_ddlog import Program
from loom_ovs.manager import TunnelSpec, atoms
from loom_ovs.openflow import Flow, FlowTable, Switch
from loom_physical.core import Localizer, NodeFacts
from loom_physical.images import Images
from loom_physical.inputs import opt
from loom_physical.rules import main_file
from loom_schemas.pipeline import STAGES, table_name

SNAPSHOTS = Path(__file__).resolve().parents[2] / "tests" / "snapshots"
SCENARIOS = sorted(SNAPSHOTS.glob("*.yaml"))
NODE = "hv1"
UPLINK = 9
NEXT_HOP_MAC = "00:00:00:00:00:fe"
# Scenarios whose hv1 table rightly has nothing but the node's own flows: what they test
# is that nothing of the network is left.
EMPTY_BY_DESIGN = {"24_everything_deleted"}
NODE_COOKIE = re.compile(r"cookie=0x[0-9a-f]{0,2}4c4d\b")
"""A flow of the node's own (no object in its cookie: a category at most, Loom's mark)."""
FLOW_COOKIE = re.compile(r"table=(\w+),priority=\d+,cookie=<([^>]+)>")
TABLES = ["Datapath", "Port_Binding", "Universal_Flow", "Gateway_Assignment",
          "Replication_Set", "Tunnel", "Node_Endpoint"]  # fmt: skip
FLOW_PORTS = {"geneve": 90, "vxlan": 91, "stt": 92}
"""The ofports of the node's flow-based tunnel ports, by encapsulation."""


def _rows(remote: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the tables the physical rules read, as OVSDB JSON."""
    conn = RawConnection(remote)
    try:
        ops = [{"op": "select", "table": t, "where": []} for t in TABLES]
        results = conn.transact("Loom_Universal", ops)
    finally:
        conn.close()
    return {t: r["rows"] for t, r in zip(TABLES, results, strict=True)}


Shared = dict[tuple[int, int, str], list[int]]
"""A flow key several objects want alike -> their cookies (which one is installed depends on
the cookies, hashes of random ids: the golden names them all)."""


def localize(remote: str, node: str = NODE) -> tuple[list[Flow], Shared]:
    """`node`'s OpenFlow table for the universal DB at `remote` (see the module docstring),
    as the controller's core computes it (`loom_physical.core.Localizer`: the universal
    rows fed as a monitor gives them, the node's facts as its OVSDB would say them)."""
    rows = _rows(remote)
    core = _localizer(rows, node, {})
    # Zones in an order that does not vary between runs (not by uuid): by datapath and port
    # key, a router (its datapath's config id) before its ports; given again as the node's
    # record, which a controller adopts.
    rank = {r["config_id"]: (r["key"], 0) for r in rows["Datapath"]}
    rank |= {r["logical_port"]: (r["datapath"], r["port_key"]) for r in rows["Port_Binding"]}
    zones = sorted(core.zones(node).zones, key=lambda owner: (rank.get(owner, (0, 0)), owner))
    core = _localizer(rows, node, {owner: i for i, owner in enumerate(zones, start=1)})
    parts = core.desired_parts(node)
    return core.flows(node), _shared(core.images, parts)


def _localizer(rows: dict[str, list[dict[str, Any]]], node: str,
               zones: dict[str, int]) -> Localizer:  # fmt: skip
    """A core fed the universal rows and `node`'s facts (its zone record: `zones`),
    computed until it settles."""
    core = Localizer(Program.load([main_file()], workers=1, internal=False))
    core.universal(
        ("Flow" if table == "Universal_Flow" else table, r["_uuid"][1], _monitor_row(table, r))
        for table, found in rows.items()
        for r in found
    )
    members: dict[str, list[str]] = {}
    for row in rows["Gateway_Assignment"]:
        for _, gateway in sorted(_pairs(row["nodes"])):
            members.setdefault(row["service"], []).append(gateway)
    # Every node is live but the gateway nodes after the first (by name) of each service:
    # the active one is the live node of least weight, and weights are hashes of ids.
    live = {e["node"] for e in rows["Node_Endpoint"]} | {node}
    standby: set[str] = set()
    for gateways in members.values():
        ordered = sorted(set(gateways))
        standby |= set(ordered[1:])
        live.add(ordered[0])
    vifs = sorted(opt(r["vif_id"]) for r in rows["Port_Binding"] if opt(r["chassis"]) == node)
    tunnels = {f"loom-{e['encap']}": FLOW_PORTS[e["encap"]]
               for e in rows["Node_Endpoint"] if e["node"] == node}  # fmt: skip
    peers = sorted((t["to_node"], t["encap"]) for t in rows["Tunnel"] if t["from_node"] == node)
    for i, (peer, encap) in enumerate(peers):
        tunnels[TunnelSpec(peer, encap, "").port_name] = 100 + i
    gateway = any(node in gateways for gateways in members.values())
    hops = {opt(r["uplink_next_hop"]) for r in rows["Gateway_Assignment"]} - {""}
    facts = NodeFacts(
        vifs={vif: 10 + i for i, vif in enumerate(vifs)},
        tunnels=tunnels,
        uplinks=(UPLINK,) if gateway else (),
        neighbours=dict.fromkeys(sorted(hops), NEXT_HOP_MAC) if gateway else {},
    )
    core.node(node, facts, zones)
    core.set_computed({node})
    core.set_liveness(live - standby, set())
    while core.compute() and core.feeds_back():
        pass
    return core


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    """An OVSDB JSON map's pairs."""
    return [tuple(pair) for pair in value[1]]


def _monitor_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A selected row as the controller's replica holds it (a `Universal_Flow` row's flows
    as sets)."""
    if table != "Universal_Flow":
        return row
    sets = {c: set(atoms(row[c])) - {"set"} if isinstance(row[c], list) else {row[c]}
            for c in ("flows", "local_flows")}  # fmt: skip
    return {**row, **sets}


def _shared(images: Images, parts: set[Any]) -> Shared:
    """The keys of `parts` that several objects want alike, with their cookies."""
    shared: Shared = {}
    for part in (images.parts[key] for key in parts if key in images.parts):
        for flow in part.table:
            cookies = sorted({c for c, _ in part.table.candidates(flow.key)})
            if len(cookies) > 1:
                shared[flow.key] = cookies
    return shared


def tunnel_names(remote: str, node: str = NODE) -> dict[int, str]:
    """`localize`'s tunnel ofports on `node` -> the peer they lead to (`flow-ENCAP` for
    its flow-based ports)."""
    rows = _rows(remote)["Tunnel"]
    tunnels = sorted((t["to_node"], t["encap"]) for t in rows if t["from_node"] == node)
    names = {100 + i: peer for i, (peer, _) in enumerate(tunnels)}
    return names | {ofport: f"flow-{encap}" for encap, ofport in FLOW_PORTS.items()}


def render(flows: list[Flow], tunnels: dict[int, str], normalize: Callable[[str], str],
           shared: Shared | None = None) -> str:  # fmt: skip
    """The table as text, one flow a line, sorted once what varies between runs is named
    (`normalize`; tunnel ofports as `<tun:PEER>`: which gateway is active varies; a flow
    several objects want alike names them all, `cookie=<a|b>`), each flow's table by name
    (`table_name`: its stage's, or its physical table's)."""

    def cookie_of(flow: Flow) -> str:
        names = sorted(normalize(f"cookie={c:#x}").removeprefix("cookie=").strip("<>")
                       for c in (shared or {}).get(flow.key, [flow.cookie]))  # fmt: skip
        return f"cookie=<{'|'.join(names)}>" if len(names) > 1 else f"cookie={flow.cookie:#x}"

    def named(text: str) -> str:
        for ofport, peer in tunnels.items():
            text = re.sub(rf"(output:|in_port=|members:|,){ofport}\b", rf"\1<tun:{peer}>", text)
        # a bundle's members are in preference order, and preferences are hashes of ids:
        # shown as a set
        text = re.sub(r"members:([^)]*)",
                      lambda m: "members:{" + ",".join(sorted(m.group(1).split(","))) + "}",
                      text)  # fmt: skip
        return normalize(text)

    def text(flow: Flow) -> str:
        spelt = flow.text().replace(f"cookie={flow.cookie:#x}", cookie_of(flow))
        name = table_name(flow.table, flow.match)
        return spelt.replace(f"table={flow.table},", f"table={name},", 1)

    return "".join(sorted(f"{named(text(flow))}\n" for flow in flows))


def test_there_is_a_table_per_scenario() -> None:
    goldens = {p.name.removesuffix(".hv1.golden") for p in SNAPSHOTS.glob("*.hv1.golden")}
    assert goldens == {p.stem for p in SCENARIOS}


def _ports(steps: list[dict[str, Any]]) -> set[str]:
    """The names a scenario gives the logical ports it creates (switch and router ports)."""
    return {s["as"] for s in steps if "as" in s and s.get("create", "").endswith("/ports")}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_hypervisor_table_pins_the_scenario(path: Path) -> None:
    """hv1's golden has flows of the scenario's own ports in the logical stages' tables, not
    only the node's fixed flows (or nothing): the scenario puts what it tests on hv1."""
    table = path.with_suffix(".hv1.golden")
    golden = table.read_text()
    if path.stem in EMPTY_BY_DESIGN:  # only the node's own part: it is still a node
        logical = [line for line in golden.splitlines()
                   if line.split(",")[0].removeprefix("table=") in STAGES
                   or not NODE_COOKIE.search(line)]  # fmt: skip
        assert logical == [], f"{path.stem} leaves nothing of its network on hv1"
        return
    ports = _ports(yaml.safe_load(path.read_text())["steps"])
    ours = [
        line
        for line in golden.splitlines()
        if (m := FLOW_COOKIE.match(line))
        and m.group(1) in STAGES
        and m.group(2).removesuffix(".peer") in ports
    ]
    assert ours, (
        f"{table.name} has no logical flow of the ports {sorted(ports)}: "
        "locate the ones the scenario tests on hv1"
    )


@pytest.mark.ovs
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_hypervisor_openflow_snapshot(
    path: Path,
    scenario: Callable[[list[dict[str, Any]]], Any],
    dummy_switch: Any,
    golden_check: Callable[[Path, str, str], None],
) -> None:
    doc = yaml.safe_load(path.read_text())
    run = scenario(doc["steps"])
    flows, shared = localize(run.universal.remote)
    # A real ovs-vswitchd accepts the table (with the Geneve option Loom maps).
    mapper = Switch(f"unix:{dummy_switch.mgmt}")
    try:
        mapper.ensure_tlv_map()
    finally:
        mapper.close()
    table = FlowTable()  # one flow per match, as the controller installs it
    for flow in flows:
        table.add(flow)
    result = dummy_switch.replace_flows([f.text() for f in table])
    assert result.returncode == 0, result.stderr
    # Pushed natively (loom_ovs.ofp, one bundle on the channel) over an empty table, the
    # switch holds exactly what ovs-ofctl installed.
    switch = Switch(f"unix:{dummy_switch.mgmt}")
    try:
        by_ofctl = sorted(switch.dump())
        assert dummy_switch.replace_flows([]).returncode == 0
        switch.apply([("add", flow) for flow in table])
        assert switch.fallbacks == 0
        assert sorted(switch.dump()) == by_ofctl
    finally:
        switch.close()
    rendered = render(flows, tunnel_names(run.universal.remote), run.normalize_openflow, shared)
    golden_check(path.with_suffix(".hv1.golden"), rendered, "hv1's OpenFlow table")
