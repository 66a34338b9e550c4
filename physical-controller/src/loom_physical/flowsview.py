"""What `loom flows NODE` shows: a node's table as this controller computes it, as the node
holds it, and the difference — what a reconciliation would change (`Switch.difference`:
`ovs-ofctl diff-flows` of the installed table against the computed one, as OVS parses
both, so a flow written differently but meaning the same is no difference). The flows the
node's datapath writes itself (an L3 service's next-hop MAC, by a `learn` action) are
computed as keys only (rules/physical `Learned`): installed under such a key, a flow is
listed as learned, not as a difference (a reconciliation leaves it too).

`report` is pure (tested without a daemon); `PhysicalController.flows` gathers its inputs:
the computed table from the loop (between passes), the installed table and the difference
from the node (on the asking thread).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from loom_ovs.flows import Flow, Key, Mod


def report(node: str, controller: str, computed: Sequence[Flow], installed: Sequence[str],
           mods: Sequence[Mod], *, learned: AbstractSet[Key] = frozenset(),
           tables: bool = False) -> dict[str, Any]:  # fmt: skip
    """The JSON body of `/nodes/<node>/flows`: counts, whether the node holds exactly what
    is computed, the changes a reconciliation would make (`op`: add, modify, delete, each
    with the flow as the computation has it or, for a delete, as installed), the installed
    flows the node learned (`mods`' deletes of a key in `learned`: none of them is a
    change), and with `tables` both whole tables (sorted by table, then priority, highest
    first)."""
    kept = [flow for op, flow in mods if op == "delete" and flow.key in learned]
    changes = [(op, flow) for op, flow in mods if op != "delete" or flow.key not in learned]
    body: dict[str, Any] = {
        "node": node,
        "controller": controller,
        "computed_flows": len(computed),
        "installed_flows": len(installed),
        "in_sync": not changes,
        "changes": sorted(
            ({"op": op, "flow": flow.text()} for op, flow in changes),
            key=lambda c: (c["op"], c["flow"]),
        ),
        "learned": sorted(flow.text() for flow in kept),
    }
    if tables:
        ordered = sorted(computed, key=lambda f: (f.table, -f.priority, f.match))
        body["computed"] = [flow.text() for flow in ordered]
        body["installed"] = sorted(installed)
    return body
