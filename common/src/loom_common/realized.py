"""Which generation a transport node has realized, as the config DB says (pure).

A node's `Transport_Node.status` is written when the node changes: when it was pushed
something, or its message, BFD verdicts or connection changed — not at every change of
the configuration, which reaches a few nodes (rewriting every node's row would make each
change cost a row per node). Each physical controller publishes instead, once per
change, the generation every node it masters has realized, in `Loom_Global.external_ids`
under `PUBLISHED` + its name. A node's realized generation is the larger of its row's and
its controller's published one, while its row says nothing is in the way.
"""

from __future__ import annotations

from collections.abc import Mapping

PUBLISHED = "realized_generation:"
"""`Loom_Global.external_ids` key prefix: + a controller's name -> the generation every node
it masters has realized."""


def node_realized(status: Mapping[str, str], published: Mapping[str, str]) -> int:
    """A node's realized generation: its row's (`status`: `Transport_Node.status`), or the
    one its controller published (`published`: `Loom_Global.external_ids`) if larger while
    the node is connected, has had its whole table (`synced` is not "false") and its
    status has no message."""
    own = as_generation(status.get("realized_generation"))
    blocked = status.get("synced") == "false" or status.get("message")
    if status.get("connected") != "true" or blocked:
        return own
    return max(own, as_generation(published.get(PUBLISHED + status.get("controller", ""))))


def as_generation(text: str | None) -> int:
    """A generation as a status map holds it (0 if missing or not a number)."""
    try:
        return int(text or 0)
    except ValueError:
        return 0
