"""The rules' `id32` in Python: a security rule's conjunction id, from its uuid.

`rules/logical/common.dl` names each security rule in the flows by `id32(uuid)`, the low
32 bits of the engine's `hash64` of the uuid string (`ddlog-gen/crates/engine`: SipHash-2-4
with Loom's keys, over the value's encoding: tag 4, the length as 8 little-endian bytes,
the UTF-8 bytes). `loom trace` reads a `conj_id=N` flow back to its rule with it. Written
here (twenty lines) rather than taken from PyPI: the only SipHash packages there are C
extensions for one purpose each, and this must equal the engine's bytes exactly, which
`common/tests/test_ids.py` checks against the engine itself.
"""

from __future__ import annotations

import struct

KEYS = (0x6C6F_6F6D_2D68_6173, 0x682D_7631_2D6B_6579)
"""The engine's `HASH_K0`, `HASH_K1` ("loom-has", "h-v1-key")."""
_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def siphash24(data: bytes, k0: int = KEYS[0], k1: int = KEYS[1]) -> int:
    """SipHash-2-4 of `data` with key (`k0`, `k1`)."""
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]  # fmt: skip

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & _MASK
            v[1] = _rotl(v[1], 13) ^ v[0]
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _MASK
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _MASK
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _MASK
            v[1] = _rotl(v[1], 17) ^ v[2]
            v[2] = _rotl(v[2], 32)

    tail = len(data) % 8
    for (m,) in struct.iter_unpack("<Q", data[: len(data) - tail]):
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    last = (len(data) & 0xFF) << 56 | int.from_bytes(data[len(data) - tail :], "little")
    v[3] ^= last
    rounds(2)
    v[0] ^= last
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def hash64(text: str) -> int:
    """The engine's `hash64` of a string value."""
    raw = text.encode()
    return siphash24(b"\x04" + struct.pack("<Q", len(raw)) + raw)


def id32(text: str) -> int:
    """The rules' `id32` of a string (a security rule's conjunction id, from its uuid)."""
    return hash64(text) & 0xFFFFFFFF
