"""Universal rows the physical tests compute from: one switch, two ports, two nodes."""

from __future__ import annotations

from typing import Any


def binding(port: str, dp: int, key: int, vif: str, chassis: str = "") -> dict[str, Any]:
    """A Port_Binding row as the universal replica holds it (one-element sets as atoms)."""
    return {"logical_port": port, "datapath": dp, "port_key": key, "type": "vif",
            "vif_id": vif, "peer": ["set", []], "chassis": chassis or ["set", []],
            "up": False, "gateway_service": ["set", []], "vlan": ["set", []],
            "qos": ["map", []]}  # fmt: skip


def universal(*, with_p2: bool = True) -> list[tuple[str, str, dict[str, Any] | None]]:
    """One switch (key 1) with p1 (VIF vif-1) and p2 (vif-2); hv1 and hv2 reach each other
    by Geneve; the switch's flows: one shared, one per port."""
    changes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("Datapath", "dp1", {"key": 1, "kind": "switch", "config_id": "sw", "encap": "geneve"}),
        ("Node_Endpoint", "e1", {"node": "hv1", "encap": "geneve", "ip": "192.168.0.1"}),
        ("Node_Endpoint", "e2", {"node": "hv2", "encap": "geneve", "ip": "192.168.0.2"}),
        ("Port_Binding", "b1", binding("p1", 1, 1, "vif-1")),
        ("Flow", "f-sw", {"datapath": 1, "source": "sw", "cookie": 1,
                          "flows": {"ingress\tls_in_acl\t0\t\tresubmit(,@next)"},
                          "local_flows": set()}),
        ("Flow", "f-p1", {"datapath": 1, "source": "p1", "cookie": 2,
                          "flows": {"ingress\tls_in_l2_lkup\t50\tdl_dst=00:00:00:00:00:01\t"
                                    "set_field:0x1->reg15,resubmit(,@egress)"},
                          "local_flows": {"egress\tls_out_deliver\t50\treg15=0x1\t"
                                          "resubmit(,@deliver)"}}),
        ("Universal_Global", "g", {"generation": 3, "realized_generation": 0}),
    ]  # fmt: skip
    if with_p2:
        changes.append(("Port_Binding", "b2", binding("p2", 1, 2, "vif-2")))
    return changes
