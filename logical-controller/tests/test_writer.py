"""The universal-DB writer against a real ovsdb-server: a large write goes in chunks, two in
flight, and the generation stamp commits only once every chunk before it has."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loom_common.ovsdb import OvsdbServer, RawConnection
from loom_logical import writer as writer_module
from loom_logical.outputs import GLOBAL_SHARD, Packed, datapath_shard, packed, unpacked
from loom_logical.writer import Writer

pytestmark = [pytest.mark.ovs]

DB = "Loom_Universal"
STAMP = [{"op": "insert", "table": "Universal_Global", "row": {"generation": 7}}]
Group = tuple[int, str, list[str], list[str]]
"""A `Flow_Group` row: datapath, source, flows, local flows."""


def _group(dp: int, source: str, *flows: str) -> Group:
    return (dp, source, list(flows), [])


def _select(conn: RawConnection, table: str) -> list[dict[str, Any]]:
    (reply,) = conn.transact(DB, [{"op": "select", "table": table, "where": []}])
    rows: list[dict[str, Any]] = reply["rows"]
    return rows


def test_a_failed_chunk_leaves_the_generation_unstamped(
    universal_db: OvsdbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "CHUNK", 1)  # one operation per transaction
    writer = Writer(owns=lambda shard: True)
    writer.apply(
        {"Flow_Group": [(1, _group(1, f"src-{i}", f"ingress\tt\t{i}\t\tdrop")) for i in range(6)]}
    )
    (shard,) = writer.owned_dirty_shards()
    order = list(writer.dirty[shard]["Universal_Flow"])  # the order the flush writes them in
    conn = RawConnection(universal_db.remote)
    try:
        # Another writer's row has the identity of the next-to-last insert: that chunk
        # fails on the table's index while the last, stamped one would succeed.
        dp, source = order[-2]
        conn.transact(DB, [{"op": "insert", "table": "Universal_Flow",
                            "row": {"datapath": dp, "source": source, "cookie": 0}}])  # fmt: skip

        assert writer.flush(conn, lambda shards: [], STAMP) is False
        assert _select(conn, "Universal_Global") == []  # not realized: a row is missing
        assert len(_select(conn, "Universal_Flow")) < 1 + len(order)

        # What a controller does next: learn what is there, write the difference.
        writer.load_actual(conn)
        assert writer.flush(conn, lambda shards: [], STAMP) is True
        (stamped,) = _select(conn, "Universal_Global")
        assert stamped["generation"] == 7
        rows = _select(conn, "Universal_Flow")
        assert sorted((r["datapath"], r["source"]) for r in rows) == sorted(order)
        assert all(r["flows"] != ["set", []] for r in rows)  # the other writer's row updated
    finally:
        conn.close()


def test_a_large_write_in_chunks_writes_every_row_once(
    universal_db: OvsdbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "CHUNK", 7)
    writer = Writer(owns=lambda shard: True)
    groups = [
        _group(dp, f"src-{i}", f"ingress\tt\t{i}\t\tdrop") for dp in (1, 2) for i in range(40)
    ]
    writer.apply({"Flow_Group": [(1, g) for g in groups]})
    conn = RawConnection(universal_db.remote)
    try:
        assert writer.flush(conn, lambda shards: [], STAMP) is True
        rows = _select(conn, "Universal_Flow")
        assert sorted((r["datapath"], r["source"]) for r in rows) == sorted(
            (dp, s) for dp, s, _, _ in groups
        )
        assert [r["generation"] for r in _select(conn, "Universal_Global")] == [7]
        assert not writer.pending()
        # Deleting half of them is one more chunked flush of deletes.
        writer.apply({"Flow_Group": [(-1, g) for g in groups[::2]]})
        assert writer.flush(conn, lambda shards: [], []) is True
        assert len(_select(conn, "Universal_Flow")) == len(groups) // 2
    finally:
        conn.close()


class Outputs:
    """What the engine's output relations hold: the deltas given to a writer, summed (its
    `reread`, as the engine's `dump`)."""

    def __init__(self) -> None:
        self.rows: dict[str, Counter[tuple[Any, ...]]] = {}

    def apply(self, delta: dict[str, list[tuple[int, Any]]]) -> dict[str, list[tuple[int, Any]]]:
        for relation, changes in delta.items():
            for weight, row in changes:
                self.rows.setdefault(relation, Counter())[_frozen(row)] += weight
        return delta

    def dump(self, relation: str) -> list[tuple[Any, ...]]:
        return [_thawed(row) for row, n in self.rows.get(relation, Counter()).items() if n > 0]


def _frozen(row: Any) -> Any:
    return tuple(tuple(v) if isinstance(v, list) else v for v in row)


def _thawed(row: Any) -> Any:
    return tuple(list(v) if isinstance(v, tuple) else v for v in row)


def test_a_lean_table_keeps_only_what_is_not_written_and_reads_the_rest_back(
    universal_db: OvsdbServer,
) -> None:
    """The flows' columns are forgotten once written (a standby's at once) and read back
    from the engine when the database must be corrected; a row the engine no longer has
    goes."""
    owned = {datapath_shard(1), GLOBAL_SHARD}
    engine = Outputs()
    writer = Writer(owns=owned.__contains__, reread=engine.dump)
    groups = [_group(dp, f"src-{i}", f"ingress\tt\t{i}\t\tdrop") for dp in (1, 2) for i in range(5)]
    writer.apply(engine.apply({"Flow_Group": [(1, g) for g in groups]}))
    desired = writer.desired["Universal_Flow"]
    assert all((columns is None) == (dp == 2) for (dp, _), (_, columns) in desired.items())
    conn = RawConnection(universal_db.remote)
    try:
        assert writer.flush(conn, lambda shards: [], STAMP) is True
        assert all(columns is None for _, columns in desired.values())
        # The database loses a row, the engine another (its deletion not folded yet).
        (row,) = [r for r in _select(conn, "Universal_Flow") if r["source"] == "src-1"]
        conn.transact(DB, [{"op": "delete", "table": "Universal_Flow",
                            "where": [["_uuid", "==", row["_uuid"]]]}])  # fmt: skip
        engine.apply({"Flow_Group": [(-1, groups[2])]})
        writer.load_actual(conn)
        assert writer.flush(conn, lambda shards: [], []) is True
        rows = {(r["datapath"], r["source"]): r for r in _select(conn, "Universal_Flow")}
        assert set(rows) == {(1, f"src-{i}") for i in range(5) if i != 2}
        assert rows[(1, "src-1")]["flows"] == "ingress\tt\t1\t\tdrop"
        # A shard owned later is written whole from what the engine has.
        owned.add(datapath_shard(2))
        writer.load_actual(conn, [datapath_shard(2)])
        assert writer.flush(conn, lambda shards: [], []) is True
        rows = {(r["datapath"], r["source"]): r for r in _select(conn, "Universal_Flow")}
        assert rows[(2, "src-4")]["flows"] == "ingress\tt\t4\t\tdrop"
        assert len(rows) == 9
        assert [k for k, (_, columns) in desired.items() if columns is not None] == []
    finally:
        conn.close()


@pytest.mark.parametrize("lean", [False, True], ids=["whole", "lean"])
def test_a_streamed_delta_is_written_as_it_is_folded_and_the_flush_writes_the_rest(
    universal_db: OvsdbServer, monkeypatch: pytest.MonkeyPatch, lean: bool
) -> None:
    """`stream` writes each chunk's identities once, as the chunks come; an identity that a
    later chunk changes again, and rows of shards not owned, are left to the flush, which
    stamps the generation. The database ends as one flush of the whole delta would leave it
    (`lean`: the flows' columns read back from the engine for the shard owned later)."""
    monkeypatch.setattr(writer_module, "CHUNK", 5)
    owned = {datapath_shard(1), GLOBAL_SHARD}
    engine = Outputs()
    writer = Writer(owns=owned.__contains__, reread=engine.dump if lean else None)
    groups = [
        _group(dp, f"src-{i}", f"ingress\tt\t{i}\t\tdrop") for dp in (1, 2) for i in range(12)
    ]
    again = _group(1, "src-3", "ingress\tt\t3\t\tdrop", "egress\tt\t3\t\tdrop")
    chunks = [{"Flow_Group": [(1, g) for g in groups[i : i + 4]]} for i in range(0, 24, 4)]
    chunks.append({"Flow_Group": [(-1, groups[3]), (1, again)]})  # groups[3]'s identity
    for chunk in chunks:
        engine.apply(chunk)
    conn = RawConnection(universal_db.remote)
    try:
        assert writer.stream(conn, set(owned), [], iter(chunks)) is True
        assert _select(conn, "Universal_Global") == []  # no stamp yet
        written = {(r["datapath"], r["source"]): r for r in _select(conn, "Universal_Flow")}
        assert set(written) == {(1, f"src-{i}") for i in range(12)}  # datapath 2: not owned
        # Written identities are no longer marked; src-3's second version, and datapath 2's
        # rows, are.
        assert writer.dirty[datapath_shard(1)]["Universal_Flow"] == {(1, "src-3")}
        assert len(writer.dirty[datapath_shard(2)]["Universal_Flow"]) == 12
        owned.add(datapath_shard(2))
        assert writer.flush(conn, lambda shards: [], STAMP) is True
        assert not writer.pending()
        rows = {(r["datapath"], r["source"]): r for r in _select(conn, "Universal_Flow")}
        assert set(rows) == {(dp, s) for dp, s, _, _ in groups}
        assert sorted(rows[(1, "src-3")]["flows"][1]) == sorted(again[2])
        assert [r["generation"] for r in _select(conn, "Universal_Global")] == [7]
    finally:
        conn.close()


def test_a_shard_whose_marks_a_stream_cleared_is_not_looked_at_again(
    universal_db: OvsdbServer,
) -> None:
    """A shard left with no marked identity after a stream leaves the marks: `pending` and
    `owned_dirty_shards` cost the shards still marked, not every shard ever written."""
    writer = Writer(owns={datapath_shard(1), datapath_shard(2)}.__contains__)
    chunks = [{"Flow_Group": [(1, _group(dp, f"src-{dp}", "ingress\tt\t1\t\tdrop"))]}
              for dp in (1, 2)]  # fmt: skip
    conn = RawConnection(universal_db.remote)
    try:
        assert writer.stream(conn, {datapath_shard(1)}, [], iter(chunks)) is True
    finally:
        conn.close()
    assert datapath_shard(1) not in writer.dirty
    assert datapath_shard(1) not in writer.changed
    assert writer.owned_dirty_shards() == [datapath_shard(2)]  # (not in the stream's shards)
    assert writer.pending()


def test_a_failed_stream_still_folds_every_chunk(
    universal_db: OvsdbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream that fails part-way folds the chunks it did not get to into desired: after
    a reconcile the flush writes all of it."""
    monkeypatch.setattr(writer_module, "CHUNK", 2)
    writer = Writer(owns=lambda shard: True)
    groups = [_group(1, f"src-{i}", f"ingress\tt\t{i}\t\tdrop") for i in range(10)]
    conn = RawConnection(universal_db.remote)
    try:
        # Another writer's row takes the identity of the third insert: its chunk fails.
        conn.transact(DB, [{"op": "insert", "table": "Universal_Flow",
                            "row": {"datapath": 1, "source": "src-4", "cookie": 0}}])  # fmt: skip
        chunks = ({"Flow_Group": [(1, g)]} for g in groups)
        assert writer.stream(conn, {datapath_shard(1)}, [], chunks) is False
        assert len(writer.desired["Universal_Flow"]) == len(groups)
        writer.load_actual(conn)
        assert writer.flush(conn, lambda shards: [], STAMP) is True
        rows = _select(conn, "Universal_Flow")
        assert sorted(r["source"] for r in rows) == sorted(s for _, s, _, _ in groups)
        assert all(r["flows"] != ["set", []] for r in rows)
    finally:
        conn.close()


def test_a_stream_writes_the_shards_owned_when_it_started(
    universal_db: OvsdbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ownership that changes while a stream runs (a new assignment: `owns` is false until
    the shards are claimed again) does not make it skip rows and report success: the shards
    it writes are fixed when it starts, and the fencing decides whether it may."""
    monkeypatch.setattr(writer_module, "CHUNK", 3)
    claimed = {datapath_shard(1)}
    writer = Writer(owns=lambda shard: shard in claimed)
    groups = [_group(1, f"src-{i}", f"ingress\tt\t{i}\t\tdrop") for i in range(9)]

    def chunks() -> Iterator[dict[str, list[tuple[int, tuple[Any, ...]]]]]:
        for i, group in enumerate(groups):
            if i == 4:
                claimed.clear()  # the member thread saw a new assignment
            yield {"Flow_Group": [(1, group)]}

    conn = RawConnection(universal_db.remote)
    try:
        assert writer.stream(conn, {datapath_shard(1)}, [], chunks()) is True
        assert len(_select(conn, "Universal_Flow")) == len(groups)
        assert not writer.dirty[datapath_shard(1)]["Universal_Flow"]
    finally:
        conn.close()


@given(st.lists(st.text(max_size=6), max_size=6))
def test_a_packed_set_gives_its_strings_back_as_the_set_column(texts: list[str]) -> None:
    value = packed(texts)
    assert unpacked(value) == texts
    assert writer_module.to_json(value) == ["set", texts]
    if not any("\n" in t for t in texts) and texts != [""]:
        assert isinstance(value, Packed), "one string a row, not one a flow"
