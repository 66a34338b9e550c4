"""The universal-DB writer against a real ovsdb-server: a large write goes in chunks, two in
flight, and the generation stamp commits only once every chunk before it has."""

from __future__ import annotations

from typing import Any

import pytest

from loom_common.ovsdb import OvsdbServer, RawConnection
from loom_logical import writer as writer_module
from loom_logical.writer import Writer

pytestmark = [pytest.mark.ovs]

DB = "Loom_Universal"
STAMP = [{"op": "insert", "table": "Universal_Global", "row": {"generation": 7}}]


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
        {"Flow_Group": [(1, (1, f"src-{i}", [f"ingress\tt\t{i}\t\tdrop"])) for i in range(6)]}
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
    groups = [(dp, f"src-{i}", [f"ingress\tt\t{i}\t\tdrop"]) for dp in (1, 2) for i in range(40)]
    writer.apply({"Flow_Group": [(1, g) for g in groups]})
    conn = RawConnection(universal_db.remote)
    try:
        assert writer.flush(conn, lambda shards: [], STAMP) is True
        rows = _select(conn, "Universal_Flow")
        assert sorted((r["datapath"], r["source"]) for r in rows) == sorted(
            (dp, s) for dp, s, _ in groups
        )
        assert [r["generation"] for r in _select(conn, "Universal_Global")] == [7]
        assert not writer.pending()
        # Deleting half of them is one more chunked flush of deletes.
        writer.apply({"Flow_Group": [(-1, g) for g in groups[::2]]})
        assert writer.flush(conn, lambda shards: [], []) is True
        assert len(_select(conn, "Universal_Flow")) == len(groups) // 2
    finally:
        conn.close()
