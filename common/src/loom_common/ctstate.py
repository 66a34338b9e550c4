"""What conntrack may be said to answer a traced packet (`ofproto/trace --ct-next`): a
`ct_state` as OVS reads one there — flags separated by commas, checked as OVS checks them,
so a trace refuses a state with a message naming it rather than with OVS's error."""

from __future__ import annotations

FLAGS = frozenset({"trk", "new", "est", "rel", "rpl", "inv", "snat", "dnat"})
"""The `ct_state` flags (`ovs-fields(7)`)."""
MAX_LENGTH = 64
"""The longest state taken (every flag once is 35 characters)."""


def check(state: str) -> list[str]:
    """The flags of `state` (`trk,est`), if OVS takes it as a conntrack answer.

    Raises:
        ValueError: what is wrong with it: an unknown flag, or flags OVS finds
            inconsistent (any flag without `trk`; `new` with `est` or `rpl`; `inv` with
            anything but `trk`).
    """
    if len(state) > MAX_LENGTH:
        raise ValueError(f"longer than {MAX_LENGTH} characters")
    flags = [f.strip() for f in state.split(",")]
    unknown = [f for f in flags if f not in FLAGS]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a flag: flags are {', '.join(sorted(FLAGS))}, "
                         "separated by commas")  # fmt: skip
    given = set(flags)
    if "trk" not in given:
        raise ValueError("every answer is tracked: trk with any other flag")
    for a, b in (("new", "est"), ("new", "rpl")):
        if {a, b} <= given:
            raise ValueError(f"{a} and {b} exclude each other")
    if "inv" in given and given - {"inv", "trk"}:
        raise ValueError("inv goes only with trk")
    return flags
