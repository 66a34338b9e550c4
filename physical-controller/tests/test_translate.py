"""Universal flows as OpenFlow (`loom_physical.translate`): pure, no daemon."""

from __future__ import annotations

import pytest

from loom_ovs.openflow import cookie
from loom_physical.translate import (
    Unbound,
    UniversalFlow,
    datapath_match,
    physical,
    physical_text,
    tier_cookie,
)
from loom_schemas.pipeline import (
    STAGE_CATEGORIES,
    STAGES,
    TABLE_CATEGORIES,
    Category,
    Table,
    category_of,
    table,
    with_category,
)


def flow(text: str) -> UniversalFlow:
    return UniversalFlow.parse(text)


def test_a_cookie_carries_its_stages_category_beside_the_object() -> None:
    acl = physical(5, flow("ingress\tls_in_acl\t1000\ttcp\tresubmit(,@next)"), 0xDEADBEEF, {})
    assert acl.cookie == 0xDEADBEEF_0002_4C4D  # object, category (acl), Loom's mark
    assert acl.cookie >> 32 == 0xDEADBEEF  # the object part unchanged
    assert category_of(acl.cookie) is Category.ACL
    nat = physical_text(0x800001, "egress\tlr_out_snat\t50\tip\tresubmit(,@next)", cookie(3))
    assert category_of(nat.cookie) is Category.NAT
    assert nat.cookie >> 32 == 3
    # every stage has one, a feature's own
    assert set(STAGE_CATEGORIES) == set(STAGES)
    assert Category.NONE not in STAGE_CATEGORIES.values()
    assert category_of(cookie(3)) is Category.NONE  # a cookie that says none


def test_a_physical_tables_cookie_carries_its_category_and_no_object() -> None:
    assert tier_cookie(int(Table.CLASSIFIER)) == 0x8_4C4D
    assert category_of(tier_cookie(int(Table.TUNNEL_GENEVE))) is Category.OUTPUT
    assert category_of(tier_cookie(int(Table.FLOOD_REMOTE))) is Category.FLOOD
    assert tier_cookie(200) == cookie(0)  # not a table of Loom's: none
    assert tier_cookie(int(Table.ZONE)) >> 32 == 0
    assert set(TABLE_CATEGORIES) == set(Table)  # every physical table has one


def test_stages_placeholders_and_the_datapath() -> None:
    f = flow("ingress\tls_in_l2_lkup\t50\tdl_dst=00:00:00:00:00:01\tset_field:0x1->reg15,"
             "resubmit(,@egress)")  # fmt: skip
    out = physical(5, f, 7, {})
    assert out.table == table("ls_in_l2_lkup")
    assert out.priority == 50
    assert out.match == "metadata=0x5,dl_dst=00:00:00:00:00:01"
    assert out.actions == f"set_field:0x1->reg15,resubmit(,{int(Table.OUTPUT)})"
    assert out.cookie == with_category(cookie(7), Category.L2)
    nxt = physical(5, flow("egress\tls_out_pre_acl\t0\t\tresubmit(,@next)"), 7, {})
    assert nxt.match == "metadata=0x5"
    assert nxt.actions == f"resubmit(,{table('ls_out_acl')})"
    jump = physical(5, flow("ingress\tls_in_arp_rsp\t50\tarp\t"
                            "resubmit(,@stage:ls_out_pre_acl)"), 1, {})  # fmt: skip
    assert jump.actions == f"resubmit(,{table('ls_out_pre_acl')})"
    for placeholder, target in (("@deliver", Table.DELIVER), ("@flood", Table.FLOOD),
                                ("@zone", Table.ZONE)):  # fmt: skip
        out = physical(9, flow(f"egress\tls_out_deliver\t50\treg15=0x1\tresubmit(,{placeholder})"),
                       1, {})  # fmt: skip
        assert out.actions == f"resubmit(,{int(target)})"


def test_the_switches_shared_flows_match_every_switch() -> None:
    assert datapath_match(0) == "metadata=0/0x800000"
    assert datapath_match(1 << 23) == "metadata=0x800000"
    out = physical(0, flow("ingress\tls_in_port_sec_l2\t0\t\tdrop"), 1, {})
    assert out.match == "metadata=0/0x800000"


def test_identifiers_are_bound_or_the_flow_waits() -> None:
    f = flow("ingress\tlr_in_arp_resolve\t100\treg15=0xfffe\t"
             "set_field:${nexthop_mac:g1}->eth_dst,resubmit(,@next)")  # fmt: skip
    assert f.identifiers == {"nexthop_mac:g1"}
    with pytest.raises(Unbound, match="nexthop_mac:g1"):
        physical(1 << 23, f, 1, {})
    out = physical(1 << 23, f, 1, {"nexthop_mac:g1": "00:00:00:00:00:fe"})
    assert out.actions.startswith("set_field:00:00:00:00:00:fe->eth_dst,resubmit(,")


@pytest.mark.parametrize(
    "text",
    [
        "ingress\tls_in_acl\t1",  # too few fields
        "ingress\tno_such_stage\t1\t\tdrop",
        "egress\tls_in_acl\t1\t\tdrop",  # an ingress stage in the egress pipeline
        "ingress\tls_in_acl\tten\t\tdrop",
    ],
)
def test_malformed_flows_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"universal flow|ls_in_acl|invalid"):
        flow(text)


def test_next_at_a_pipelines_end_is_refused() -> None:
    with pytest.raises(ValueError, match="last stage"):
        physical(1, flow("egress\tls_out_deliver\t0\t\tresubmit(,@next)"), 1, {})


@pytest.mark.parametrize(
    "text",
    [
        "ingress\tls_in_l2_lkup\t50\tdl_dst=00:00:00:00:00:01\tset_field:0x1->reg15,resubmit(,@egress)",
        "egress\tls_out_pre_acl\t0\t\tresubmit(,@next)",
        "ingress\tls_in_arp_rsp\t50\tarp\tresubmit(,@stage:ls_out_pre_acl)",
        "egress\tls_out_deliver\t50\treg15=0x1\tresubmit(,@deliver)",
        "ingress\tls_in_port_sec_l2\t0\t\tdrop",
    ],
)
@pytest.mark.parametrize("dp", [0, 5, 1 << 23])
def test_the_one_step_translation_is_the_parsed_one(text: str, dp: int) -> None:
    """`physical_text` (placing, cached by stage and actions) gives what parsing and
    `physical` give, twice (the second from its cache)."""
    for _ in range(2):
        assert physical_text(dp, text, cookie(7)) == physical(dp, flow(text), 7, {})


@pytest.mark.parametrize(
    "text",
    [
        "ingress\tls_in_acl\t1",
        "ingress\tno_such_stage\t1\t\tdrop",
        "egress\tls_in_acl\t1\t\tdrop",
        "ingress\tls_in_acl\tten\t\tdrop",
        "egress\tls_out_deliver\t0\t\tresubmit(,@next)",
    ],
)
def test_the_one_step_translation_refuses_what_parsing_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"universal flow|ls_in_acl|invalid|last stage"):
        physical_text(1, text, cookie(1))


def test_flows_at_one_priority_share_its_number() -> None:
    """Every flow parsed at a priority holds the same int (past 256 each parse made its
    own: 32 bytes a flow, for every universal flow a controller holds)."""
    texts = [f"ingress\tls_in_acl\t1000\tip,nw_src=10.0.0.{i}\tdrop" for i in range(3)]
    priorities = [physical_text(5, text, cookie(1)).priority for text in texts]
    assert priorities == [1000] * 3
    assert all(p is priorities[0] for p in priorities)
