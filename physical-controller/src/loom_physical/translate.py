"""Universal flows as OpenFlow: parsed once, tables resolved, the datapath matched.

A universal flow names no node (schemas/loom_universal.md): its physical form is the same
bytes on every node that has its datapath, so it is computed here once, by a pure
function, and the controller places it (`images`). What differs per node sits in the
physical tier's tables, which the universal flow reaches through placeholders
(`resubmit(,@egress)`), and which the physical rules fill per node.

A flow's cookie is its universal row's (the object it exists for) with its stage's category
(`loom_schemas.pipeline.STAGE_CATEGORIES`) in the category bits.

Only `${nexthop_mac:G}` needs a value (`GlobalBind`): the same on every node too, but
known only once the gateway's next hop is; a flow that names an unbound identifier is not
installed anywhere (`Unbound`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from loom_ovs.flows import MARK, Flow, cookie
from loom_schemas.pipeline import (
    ALL_SWITCHES_MATCH,
    CATEGORY_SHIFT,
    DATAPATH,
    PLACEHOLDERS,
    STAGE_CATEGORIES,
    STAGES,
    TABLE_CATEGORIES,
    Category,
    Stage,
    Table,
    with_category,
)

ALL_SWITCHES = 0
"""The datapath key that stands for every logical switch (its flows are shared)."""
SWITCHES_MATCH = ALL_SWITCHES_MATCH
"""Every switch datapath: the router bit of the key clear."""
_DATAPATH_IS = f"{DATAPATH.name}="
"""A datapath match's head (`DATAPATH.match`, spelt inline where every flow is placed)."""
_CATEGORY_BITS: Mapping[str, int] = {
    name: int(category) << CATEGORY_SHIFT for name, category in STAGE_CATEGORIES.items()
}
"""Stage name -> its category's bits of a cookie."""

_IDENT = re.compile(r"\$\{([^}]*)\}")
_STAGE_REF = re.compile(r"@stage:(\w+)\)")
_PLACEHOLDER = re.compile(r"@(egress|deliver|flood|zone)\)")


class Unbound(LookupError):
    """The flow names an identifier that has no value yet."""


@dataclass(frozen=True, slots=True)
class UniversalFlow:
    """One universal flow, parsed: `pipeline<TAB>stage<TAB>priority<TAB>match<TAB>actions`."""

    stage: Stage
    priority: int
    match: str
    actions: str

    @classmethod
    def parse(cls, text: str) -> UniversalFlow:
        """Parse one flow of a `Universal_Flow` row's `flows` or `local_flows`.

        Raises:
            ValueError: malformed text, an unknown stage, or a stage of another pipeline.
        """
        return cls(*_fields(text))

    @property
    def identifiers(self) -> frozenset[str]:
        """The `${...}` identifiers the actions name."""
        return frozenset(_IDENT.findall(self.actions))


def _fields(text: str) -> tuple[Stage, int, str, str]:
    """A universal flow's (stage, priority, match, actions) (`UniversalFlow.parse`).

    Raises:
        ValueError: malformed text, an unknown stage, or a stage of another pipeline.
    """
    try:
        pipeline, stage_name, priority, match, actions = text.split("\t")
        stage = STAGES[stage_name]
    except (ValueError, KeyError):
        raise ValueError(f"not a universal flow: {text!r}") from None
    if stage.pipeline != pipeline:
        raise ValueError(f"stage {stage_name} is not in the {pipeline} pipeline: {text!r}")
    number = _PRIORITIES.get(priority)
    if number is None:
        number = int(priority)
        if len(_PRIORITIES) < 1 << 16:
            _PRIORITIES[priority] = number
    return stage, number, match, actions


_PRIORITIES: dict[str, int] = {}
"""A priority's text -> its int, one object for every flow at that priority: an int past
256 is an object of its own (32 bytes) each time text is parsed, and a controller holds
every universal flow's priority in its key (1.84M at S=1.0)."""


def datapath_match(dp: int) -> str:
    """The match on datapath `dp`'s packets (`ALL_SWITCHES`: every switch's)."""
    return SWITCHES_MATCH if dp == ALL_SWITCHES else f"{_DATAPATH_IS}{dp:#x}"


@lru_cache(maxsize=256)  # (asked once per flow folded: one answer per table)
def tier_cookie(table: int) -> int:
    """The cookie of a physical-tier flow (`NodeFlow`, `DpFlow`) in OpenFlow table `table`:
    no object, the table's category (`TABLE_CATEGORIES`), Loom's mark."""
    try:
        category = TABLE_CATEGORIES.get(Table(table), Category.NONE)
    except ValueError:
        category = Category.NONE
    return with_category(MARK, category)


def resolve(flow: UniversalFlow, bindings: Mapping[str, str]) -> str:
    """`flow`'s actions with every table reference resolved and identifier bound.

    Raises:
        Unbound: an identifier `bindings` has no value for.
        ValueError: `@next` at a pipeline's last stage, or an unknown stage.
    """
    actions = flow.actions
    if "@next" in actions:
        if not flow.stage.next_table:
            raise ValueError(f"@next at {flow.stage.name}, the last stage of its pipeline")
        actions = actions.replace("@next", str(flow.stage.next_table))
    if "@stage:" in actions:
        actions = _STAGE_REF.sub(lambda m: f"{STAGES[m.group(1)].table})", actions)
    if "@" in actions:
        actions = _PLACEHOLDER.sub(lambda m: f"{int(PLACEHOLDERS['@' + m.group(1)])})", actions)
    if "${" in actions:

        def bind(m: re.Match[str]) -> str:
            try:
                return bindings[m.group(1)]
            except KeyError:
                raise Unbound(m.group(1)) from None

        actions = _IDENT.sub(bind, actions)
    return actions


def physical(dp: int, flow: UniversalFlow, object_cookie: int, bindings: Mapping[str, str]) -> Flow:
    """The OpenFlow flow of universal flow `flow` of datapath `dp` (the same on every node).

    Args:
        dp: the datapath key (`ALL_SWITCHES` for the flows every switch shares).
        flow: the parsed universal flow.
        object_cookie: the universal row's cookie (its object's; the flow's cookie has
            its stage's category too).
        bindings: the values of the identifiers (`GlobalBind`).

    Raises:
        Unbound: the flow names an identifier with no value yet.
        ValueError: the flow is malformed (see `resolve`).
    """
    match = datapath_match(dp)
    if flow.match:
        match = f"{match},{flow.match}"
    return Flow(flow.stage.table, flow.priority, match, resolve(flow, bindings),
                cookie(object_cookie) | _CATEGORY_BITS[flow.stage.name])  # fmt: skip


def physical_text(dp: int, text: str, flow_cookie: int) -> Flow:
    """`physical(dp, UniversalFlow.parse(text), ...)` for a flow that names no identifier
    (`"${" not in text`), in one step: a cold start places every universal flow (1.45M at
    S=1.0, in each controller), and its datapaths share their flows' actions (~10 flows
    per distinct stage and actions): resolved once each (`_resolved`).

    Args:
        dp: the datapath key (`ALL_SWITCHES` for the flows every switch shares).
        text: one flow of a `Universal_Flow` row (`UniversalFlow.parse`).
        flow_cookie: the row's OpenFlow cookie (`cookie(row's cookie)`): the flow's has its
            stage's category too.

    Raises:
        ValueError: the flow is malformed (`UniversalFlow.parse`, `resolve`).
    """
    stage, priority, match, actions = _fields(text)
    head = SWITCHES_MATCH if dp == ALL_SWITCHES else f"{_DATAPATH_IS}{dp:#x}"
    return Flow(stage.table, priority, f"{head},{match}" if match else head,
                _resolved(stage.name, actions),
                flow_cookie | _CATEGORY_BITS[stage.name])  # fmt: skip


@lru_cache(maxsize=1 << 17)
def _resolved(stage_name: str, actions: str) -> str:
    """`actions` resolved at stage `stage_name` (`resolve`, no identifier bound).

    Raises:
        ValueError: see `resolve`.
    """
    return resolve(UniversalFlow(STAGES[stage_name], 0, "", actions), {})
