"""The physical controller's answers that the API passes on (`GET /transport-nodes/{id}/flows`,
`GET /trace`) have the shape the API's models, and so its OpenAPI document, give them.

No test of the API sees such an answer with a 200 (they need a controller that masters a
node), so the controller's own pure builders are checked here: `flowsview.report` whole,
and `trace.parse`'s passes and `trace.verdict` on a recorded `ofproto/trace` (the endpoint
then turns `delivered` into ports and nodes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_api.views.flows import NodeFlows
from loom_api.views.trace import TracePass, TraceVerdict
from loom_ovs.openflow import Flow
from loom_physical import trace
from loom_physical.flowsview import report

TRACES = Path(__file__).parents[1] / "physical-controller" / "tests" / "traces"


@pytest.mark.parametrize("tables", [False, True])
def test_a_flows_report_is_a_node_flows_answer(tables: bool) -> None:
    learned = Flow(65, 100, "metadata=0x800001", "set_field:00:00:00:00:99:01->eth_dst", 0)
    stray = Flow(99, 1, "", "drop")
    computed = [Flow(0, 100, "in_port=1", "resubmit(,8)"), Flow(8, 50, "", "drop")]
    body = report("hv1", "physical-0", computed, ["a", "b"],
                  [("delete", learned), ("delete", stray), ("add", computed[0])],
                  learned={learned.key}, tables=tables)  # fmt: skip
    answer = NodeFlows.model_validate(body)
    assert answer.model_dump(exclude_unset=True) == body
    assert answer.learned == [learned.text()]


@pytest.mark.parametrize("name", ["ideal_routed_tcp23.txt", "hv1_routed_tcp23.txt"])
def test_a_traces_passes_and_verdict_are_the_answers(name: str) -> None:
    passes = trace.parse((TRACES / name).read_text(), {})
    assert passes
    for one in passes:
        TracePass.model_validate(one)
    verdict = TraceVerdict.model_validate(trace.verdict(passes, {}, {}, {}))
    assert verdict.outcome == "dropped"
