"""The logical pipelines: their stages in order, and the OpenFlow table of each.

This is the code side of `schemas/loom_universal.md` ("Pipelines"): the rules name stages,
the localizer (physical controllers) turns a stage into a table with `table()`, `@next` into
the next stage's table and `@stage:NAME` into NAME's. Switch and router stages share table
numbers, as OVN's do: `metadata` says which datapath a flow belongs to.
"""

from __future__ import annotations

from collections.abc import Mapping

SWITCH_INGRESS = (
    "ls_in_port_sec_l2",
    "ls_in_port_sec_ip",
    "ls_in_port_sec_nd",
    "ls_in_pre_acl",
    "ls_in_acl",
    "ls_in_arp_rsp",
    "ls_in_nd_rsp",
    "ls_in_l2_lkup",
)
SWITCH_EGRESS = (
    "ls_out_pre_acl",
    "ls_out_acl",
    "ls_out_port_sec_l2",
    "ls_out_port_sec_ip",
    "ls_out_deliver",
)
ROUTER_INGRESS = (
    "lr_in_admission",
    "lr_in_ip_input",
    "lr_in_dnat",
    "lr_in_ip_routing",
    "lr_in_arp_resolve",
    "lr_in_deliver",
)
ROUTER_EGRESS = ("lr_out_snat", "lr_out_deliver")

INGRESS_BASE = 8
"""Table of the first ingress stage (tables below are the physical classifier's)."""
EGRESS_BASE = 40
"""Table of the first egress stage."""

PIPELINES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("switch", "ingress"): SWITCH_INGRESS,
    ("switch", "egress"): SWITCH_EGRESS,
    ("router", "ingress"): ROUTER_INGRESS,
    ("router", "egress"): ROUTER_EGRESS,
}


def _tables() -> dict[str, int]:
    tables = {}
    for (_kind, pipeline), stages in PIPELINES.items():
        base = INGRESS_BASE if pipeline == "ingress" else EGRESS_BASE
        for index, stage in enumerate(stages):
            tables[stage] = base + index
    return tables


TABLES: Mapping[str, int] = _tables()
"""Stage name -> OpenFlow table."""


def table(stage: str) -> int:
    """The OpenFlow table of `stage` (KeyError for an unknown stage)."""
    return TABLES[stage]


def next_table(stage: str) -> int:
    """The table `@next` means at `stage`: the following stage of its pipeline."""
    for stages in PIPELINES.values():
        if stage in stages:
            index = stages.index(stage)
            if index + 1 == len(stages):
                raise ValueError(f"{stage} is the last stage of its pipeline: no @next")
            return TABLES[stages[index + 1]]
    raise KeyError(stage)
