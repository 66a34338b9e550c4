"""How a stand-in node keeps a flow, and the digest that says two tables are the same.

A flow is kept as two byte strings cut from the `OFPT_FLOW_MOD` that installed it, with
nothing parsed beyond the header fields: its key `table (1) | priority (2) | ofp_match`
(the padded OXM match, as sent), and its value `cookie (8) | instructions` (as sent). Two
flows are the same flow when their keys are the same bytes: the controller encodes a
match the same way every time (`loom_ovs.ofp`), so that is OpenFlow's identity of a flow
for Loom's flows (a match written with its fields in another order would be another flow
here, and the same one on OVS).

`table_digest` hashes a table's sorted (key, value) pairs; `expected_digest` computes the
same from the flows a controller wants on a node (`Flow` objects, encoded by
`loom_ovs.openflow.encode` exactly as they are pushed), so a test or a benchmark can check
that a stand-in holds exactly what the controller computed for it.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

from loom_ovs.openflow import Flow, encode

MATCH_AT = 48
"""Where a FLOW_MOD's `ofp_match` starts: after the header (8) and the fixed fields (40)."""
EMPTY_MATCH = b"\x00\x01\x00\x04\x00\x00\x00\x00"
"""An OXM match with no field (the catch-all), padded."""


def split(message: bytes) -> tuple[bytes, bytes]:
    """A FLOW_MOD's (key, value) (see the module docstring).

    Raises:
        ValueError: the message is too short for its match.
    """
    if len(message) < MATCH_AT + 8:
        raise ValueError("a flow_mod has at least 56 bytes")
    end = MATCH_AT + ((message[50] << 8 | message[51]) + 7 & -8)
    if end > len(message):
        raise ValueError("the match is longer than the flow_mod")
    return (message[24:25] + message[30:32] + message[MATCH_AT:end],
            message[8:16] + message[end:])  # fmt: skip


def parts(key: bytes, value: bytes) -> tuple[int, int, bytes, int, bytes]:
    """A kept flow as (table, priority, match, cookie, instructions)."""
    priority: int = struct.unpack_from("!H", key, 1)[0]
    cookie: int = struct.unpack_from("!Q", value)[0]
    return key[0], priority, key[3:], cookie, value[8:]


def table_digest(entries: Iterable[tuple[bytes, bytes]]) -> str:
    """The SHA-256 of a table's (key, value) pairs, sorted, each length-prefixed."""
    hasher = hashlib.sha256()
    for key, value in sorted(entries):
        hasher.update(struct.pack("!HI", len(key), len(value)))
        hasher.update(key)
        hasher.update(value)
    return hasher.hexdigest()


def expected_digest(flows: Iterable[Flow]) -> str:
    """The digest a stand-in's table has when it holds exactly `flows` (one per key, as a
    controller's `FlowTable` yields them).

    Raises:
        loom_ovs.ofp.FlowSyntaxError: a flow the encoder does not know (such a flow goes to
            a node by `ovs-ofctl`, which a stand-in does not take).
    """
    return table_digest(split(encode(("add", flow))) for flow in flows)
