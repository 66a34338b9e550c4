"""`loom_common.ids`: the rules' `id32` in Python equals the engine's."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from loom_common.ids import id32, siphash24
from loom_ddlog import Program

_ENGINE = Program.compile(
    "input relation S(s: string)\n"
    "output relation Id(s: string, id: bit<32>)\n"
    "Id(s, (hash64(s) & 64'hffffffff) as bit<32>) :- S(s).\n",
    "id32.dl",
)


def test_siphash24_gives_the_reference_vector() -> None:
    # The SipHash paper's test vector: key 00..0f, message 00..0e.
    k0 = int.from_bytes(bytes(range(8)), "little")
    k1 = int.from_bytes(bytes(range(8, 16)), "little")
    assert siphash24(bytes(range(15)), k0, k1) == 0xA129CA6149BE45E5
    assert siphash24(b"", k0, k1) == 0x726FDB47DD0E0E31


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=10, unique=True))
def test_id32_is_the_engines(texts: list[str]) -> None:
    texts = [*texts, str(uuid.uuid4())]
    with _ENGINE.transaction() as txn:
        for text in texts:
            txn.insert("S", (text,))
        txn.commit()
    engine: dict[str, int] = dict(_ENGINE.dump("Id"))
    with _ENGINE.transaction() as txn:
        for text in texts:
            txn.delete("S", (text,))
        txn.commit()
    assert {t: id32(t) for t in texts} == {t: engine[t] for t in texts}
