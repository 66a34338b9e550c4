"""Allocation of the keys Loom hands out: datapath tunnel keys and per-datapath port keys.

A key is chosen inside the transaction that creates its object: the smallest key above the
largest one in use, wrapping to the smallest free key once the range's top is reached. The
schema's unique indexes make a duplicate impossible even with several API servers (the loser's
transaction fails and runs again); keys live in the row, so they survive restarts, and a key
is free again only once its object is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable

from loom_api import errors


def allocate(used: Iterable[int], low: int, high: int, what: str) -> int:
    """Return a key in `low..high` not in `used`.

    Raises:
        errors.Conflict: every key of the range is taken.
    """
    taken = set(used)
    top = max(taken, default=low - 1)
    if top < high:
        return max(top + 1, low)
    for key in range(low, high + 1):
        if key not in taken:
            return key
    raise errors.Conflict(detail=f"no free {what} left ({low}..{high} all in use)")
