"""The universal-DB writer: the engine's output deltas in, the fewest OVSDB operations out.

The writer keeps two maps per universal table, both keyed by row identity
(`outputs.OutputTable.identity_columns`): *desired* (what the engine's outputs say, for
every shard, so a standby that takes a shard over already has its state) and *actual* (the
uuids of the rows in the database with that identity). Of a `lean` table (the flows: 3.2M
texts at S=1.0, which the engine holds anyway) desired keeps the columns only of rows
waiting to be written in an owned shard; the others are None, "as the engine has it", and
`load_actual` reads them back from the engine (`reread`) when they must be written again.
`apply(delta)` updates desired and marks the identities it touched, per shard; `flush()`
makes the database match desired for the marked identities of owned shards: insert what is
missing, update what changed, delete what is no longer wanted. Nothing else is read or
written, so a change costs what it touches, and marks of shards this controller only stands
by for wait until it owns them.

Rows go over a raw JSON-RPC connection (`loom_common.ovsdb.RawConnection`), not through
python-ovs's IDL: the IDL builds a Python object per row and column, which at the NVP
workload's 10^5..10^6 universal flows cost minutes and gigabytes (see the README's
benchmark). The writer is the only writer of its shards' rows (the `Shard` fencing in
`controller` makes that true), so its own transaction results keep *actual* current;
`load_actual()` reads it afresh when that cannot be assumed (start, takeover, a failure).
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from loom_common.ovsdb import RawConnection, TransactError, codec, ops, pack_uuid, unpack_uuid
from loom_logical.outputs import (
    OUTPUTS,
    TABLE_OUTPUT,
    Columns,
    Identity,
    Packed,
    shard_of_json,
)

log = logging.getLogger(__name__)

DB = "Loom_Universal"
CHUNK = 10_000
"""Operations per transaction when a flush is large (a cold start): ovsdb-server holds a
whole transaction in memory, and with two in flight the client builds one while the server
commits the other, so the write costs about the server's share. On the full-scale cold
start, the larger the transactions (measured from 5,000 to 50,000 operations), the more the
write outlasted the server's CPU for it; from this size down it is within a few percent."""

Delta = Mapping[str, Sequence[tuple[int, tuple[Any, ...]]]]
Uuids = tuple[bytes, ...]
"""The uuids of an identity's rows in the database, each packed as 16 bytes (`pack_uuid`):
one object a row rather than the reply's parsed string (~300k rows at S=1.0)."""
Op = tuple[str, str, Identity, dict[str, Any], Columns | None]
"""An operation tagged for `Writer._record`: (kind, table, identity, OVSDB operation, the
desired columns it writes)."""


_json = codec.to_json


def to_json(value: Any) -> Any:
    """A column value as OVSDB JSON (`loom_common.ovsdb.codec.to_json`: lists are sets,
    dicts are maps; unsorted: the server orders sets itself, and sorting a cold start's
    3.2M flows here took seconds), a `Packed` set's strings a set."""
    if isinstance(value, Packed):
        return codec.to_set(value.items())
    return codec.to_json(value)


class Writer:
    """Writes the engine's outputs to the universal database, for the shards it owns."""

    def __init__(
        self,
        owns: Callable[[str], bool],
        reread: Callable[[str], Iterable[tuple[Any, ...]]] | None = None,
    ) -> None:
        """Create a writer that writes only rows whose shard `owns(shard)` accepts.
        `reread(relation)`: the output relation's rows now (the engine's `dump`); without
        it every table is kept whole."""
        self.owns = owns
        self.reread = reread
        self.desired: dict[str, dict[Identity, tuple[str, Columns | None]]] = defaultdict(dict)
        """Table -> identity -> (shard, columns; None: as the engine has them, written --
        one `(shard, None)` a shard, shared: `_unkept`)."""
        self.actual: dict[str, dict[Identity, tuple[str, Uuids]]] = defaultdict(dict)
        """Table -> identity -> (shard, uuids of its rows)."""
        self._unkept_marks: dict[str, tuple[str, None]] = {}
        self.dirty: dict[str, dict[str, set[Identity]]] = defaultdict(lambda: defaultdict(set))
        """Shard -> table -> identities to compare at the next flush."""
        self.changed: dict[str, dict[str, set[Identity]]] = defaultdict(lambda: defaultdict(set))
        """Shard -> table -> identities whose desired columns changed (their rows need an
        update)."""

    # ---- the two sides ----

    def apply(self, delta: Delta) -> list[tuple[str, str, Identity]]:
        """Fold one engine commit's output delta into desired (deletions first); return
        the (shard, table, identity) of every row it marked."""
        marked = []
        for relation, changes in delta.items():
            out = OUTPUTS.get(relation)
            if out is None:
                continue
            desired = self.desired[out.table]
            for weight, row in sorted(changes, key=lambda c: c[0]):
                columns = out.columns(row)
                ident = out.identity(columns)
                shard = out.shard(columns)
                self.dirty[shard][out.table].add(ident)
                marked.append((shard, out.table, ident))
                if weight < 0:
                    desired.pop(ident, None)
                else:
                    keep = not self._lean(out.table) or self.owns(shard)
                    desired[ident] = (shard, columns) if keep else self._unkept(shard)
                    self.changed[shard][out.table].add(ident)
        return marked

    def _unkept(self, shard: str) -> tuple[str, None]:
        """Desired's entry for a row of `shard` whose columns it does not keep (one tuple a
        shard: the flows' ~230k entries at S=1.0 were a tuple each)."""
        mark = self._unkept_marks.get(shard)
        if mark is None:
            mark = self._unkept_marks[shard] = (shard, None)
        return mark

    def _lean(self, table: str) -> bool:
        """Table `table`'s written rows are kept as None (see the module docstring)."""
        return self.reread is not None and TABLE_OUTPUT[table].lean

    def _written(self, table: str, ident: Identity, columns: Columns) -> None:
        """Row `ident` of lean `table` is in the database as `columns`: forget them, unless
        desired has changed since (a later delta, written later)."""
        desired = self.desired[table]
        want = desired.get(ident)
        if want is not None and want[1] is columns:
            desired[ident] = self._unkept(want[0])

    def _refill(self, table: str, missing: set[Identity]) -> None:
        """Read back from the engine the columns of `table`'s rows `missing` (desired holds
        them as None); a row the engine no longer has goes (its deletion is still on its way
        from a streamed commit)."""
        if not missing:
            return
        assert self.reread is not None
        desired, out = self.desired[table], TABLE_OUTPUT[table]
        for row in self.reread(out.relation):
            columns = out.columns(row)
            ident = out.identity(columns)
            if ident in missing:
                desired[ident] = (out.shard(columns), columns)
                missing.discard(ident)
        for ident in missing:
            del desired[ident]

    def _unread(self, table: str, shards: set[str] | None) -> set[Identity]:
        """The identities of `table` in `shards` (None: all) desired holds as None."""
        return {ident for ident, (shard, columns) in self.desired[table].items()
                if columns is None and (shards is None or shard in shards)}  # fmt: skip

    def load_actual(self, conn: RawConnection, shards: Iterable[str] | None = None) -> None:
        """Read what the database holds (of `shards`, default all) and mark it all dirty.

        After this, a flush corrects every difference: rows a previous master left, rows
        lost in a crash between the engine's commit and the database's.
        """
        wanted = None if shards is None else set(shards)
        for table, out in TABLE_OUTPUT.items():
            columns = sorted({"_uuid", *out.identity_columns, *out.shard_columns})
            (reply,) = conn.transact(DB, [ops.select(table, [], columns)])
            actual = {
                ident: entry
                for ident, entry in self.actual[table].items()
                if wanted is not None and entry[0] not in wanted
            }
            for row in reply["rows"]:
                shard = shard_of_json(table, row)
                if wanted is not None and shard not in wanted:
                    continue
                ident = tuple(row[c] for c in out.identity_columns)
                held = actual.get(ident, (shard, ()))[1]
                actual[ident] = (shard, (*held, pack_uuid(row["_uuid"][1])))
            self.actual[table] = actual
            if self._lean(table):
                self._refill(table, self._unread(table, wanted))
            for ident, (shard, _) in actual.items():
                if wanted is None or shard in wanted:
                    self.dirty[shard][table].add(ident)
            for ident, (shard, _) in self.desired[table].items():
                if wanted is None or shard in wanted:
                    self.dirty[shard][table].add(ident)
                    self.changed[shard][table].add(ident)

    def pending(self) -> bool:
        """True if some identity of an owned shard awaits a flush."""
        return any(any(t.values()) and self.owns(shard) for shard, t in self.dirty.items())

    def owned_dirty_shards(self) -> list[str]:
        """The shards a flush would write now."""
        return sorted(s for s, t in self.dirty.items() if any(t.values()) and self.owns(s))

    # ---- writing ----

    def flush(
        self,
        conn: RawConnection,
        fence: Callable[[Iterable[str]], list[dict[str, Any]]],
        stamp: list[dict[str, Any]],
    ) -> bool:
        """Write the marked identities of owned shards; return True on success.

        Every transaction starts with `fence(shards)` (operations that fail it if this
        controller no longer owns a shard it writes) and the last one ends with `stamp`
        (the generation this write realizes). On success the marks of the written shards
        are cleared; on failure they stay, and `actual` is reloaded before a retry. (Other
        connections stay alive meanwhile through their keep-alive threads.)
        """
        shards = self.owned_dirty_shards()
        for table in TABLE_OUTPUT:  # (a shard this controller came to own without a claim)
            if self._lean(table):
                self._refill(table, {
                    ident
                    for shard in shards
                    for ident in self.dirty[shard].get(table, ())
                    if self.desired[table].get(ident, ("", {}))[1] is None
                    and (ident in self.changed[shard][table] or ident not in self.actual[table])
                })  # fmt: skip
        tagged = (
            op
            for shard in shards
            for table, idents in self.dirty[shard].items()
            for ident in idents
            for op in self._ops(table, shard, ident)
        )
        if not self._write(conn, fence(shards), _chunked(tagged, CHUNK), stamp):
            return False
        for shard in shards:
            self.dirty.pop(shard, None)
            self.changed.pop(shard, None)
        return True

    def stream(
        self,
        conn: RawConnection,
        owned: Collection[str],
        fencing: list[dict[str, Any]],
        deltas: Iterable[Delta],
    ) -> bool:
        """Fold `deltas` — one commit's output in chunks, every deletion first
        (`loom_ddlog.PendingDelta`) — into desired, and write the rows they change in owned
        shards as they come: each chunk is converted and folded while ovsdb-server commits
        the transactions before it (a full-scale cold start's 160,947 rows, converted and
        folded all before the first was sent, kept the server idle meanwhile). The shards
        written are `owned`, fixed for the whole stream (as a flush fixes its own): each
        transaction starts with `fencing`, the operations that fail it if another controller
        took one of them; none carries a stamp. An identity that a later chunk changes again
        is left marked, as are rows of other shards, for the next `flush`, which writes them
        with the generation's stamp. Return True on success; on a failure the rest of the
        chunks is still folded into desired, the marks stay, and False is returned
        (reconcile, then flush).
        """
        chunks = iter(deltas)
        once: dict[tuple[str, Identity], str] = {}
        """(table, identity) -> shard, of the identities written by this stream."""
        again: set[tuple[str, Identity]] = set()
        tagged = self._stream_ops(chunks, owned, once, again)
        if not self._write(conn, fencing, _chunked(tagged, CHUNK), None):
            for delta in chunks:  # the rest, not folded yet
                self.apply(delta)
            return False
        written: set[str] = set()
        for (table, ident), shard in once.items():
            if (table, ident) not in again:
                self.dirty[shard][table].discard(ident)
                self.changed[shard][table].discard(ident)
                written.add(shard)
        for shard in written:  # (a shard left with no mark goes: `pending` asks the rest)
            if not any(self.dirty[shard].values()):
                del self.dirty[shard]
            if not any(self.changed[shard].values()):
                del self.changed[shard]
        return True

    def _write(
        self,
        conn: RawConnection,
        fencing: list[dict[str, Any]],
        chunks: Iterator[list[Op]],
        stamp: list[dict[str, Any]] | None,
    ) -> bool:
        """Send each of `chunks` as a transaction that starts with `fencing`, each built while
        the server commits the one before (`RawConnection.transact_each`), and fold their
        results into actual. With `stamp`, the last chunk is held back and sent with it once
        every chunk before it has committed: a generation is realized when all its rows are
        written, never after a chunk failed. False (logged) on a failure, after which chunks
        before it may have committed: reconcile before a retry."""
        sent: deque[list[Op]] = deque()
        last: list[Op] = []

        def fenced(chunk: list[Op]) -> list[dict[str, Any]]:
            return [*fencing, *(tagged[3] for tagged in chunk)]

        def record(chunk: list[Op], results: list[Any]) -> None:
            self._record(chunk, results[len(fencing) : len(fencing) + len(chunk)])

        def transactions() -> Iterator[list[dict[str, Any]]]:
            nonlocal last
            chunk = next(chunks, None)
            while chunk is not None:
                following = next(chunks, None)
                if following is None and stamp is not None:
                    last = chunk
                    return
                sent.append(chunk)
                yield fenced(chunk)
                chunk = following

        try:
            for results in conn.transact_each(DB, transactions()):
                record(sent.popleft(), results)
            if stamp is not None:
                record(last, conn.transact(DB, [*fenced(last), *stamp]))
        except TransactError as exc:
            log.warning("universal DB write failed: %s", exc)
            return False
        except Exception:
            log.exception("universal DB write failed")
            return False
        return True

    def _stream_ops(
        self,
        chunks: Iterator[Delta],
        owned: Collection[str],
        once: dict[tuple[str, Identity], str],
        again: set[tuple[str, Identity]],
    ) -> Iterator[Op]:
        """`stream`'s operations: each chunk folded, then the operations of its identities in
        `owned` shards, once per identity (`once`); one that comes back (in any shard) goes
        to `again`, for the flush (its first operations may be in flight, not yet in
        `actual`)."""
        for delta in chunks:
            for shard, table, ident in self.apply(delta):
                if (table, ident) in once:
                    again.add((table, ident))
                    continue
                if shard not in owned:
                    continue
                once[(table, ident)] = shard
                yield from self._ops(table, shard, ident)

    def _shard(self, table: str, ident: Identity) -> str | None:
        want = self.desired[table].get(ident)
        if want is not None:
            return want[0]
        have = self.actual[table].get(ident)
        return have[0] if have is not None else None

    def _ops(self, table: str, shard: str, ident: Identity) -> Iterable[Op]:
        """The operations that make `ident`'s rows what desired says, tagged for `_record`."""
        want = self.desired[table].get(ident)
        _, uuids = self.actual[table].get(ident, (shard, ()))
        keep = [unpack_uuid(uuids[0])] if want is not None and uuids else []
        for packed in uuids[len(keep) :]:
            delete = ops.delete(table, ops.where_uuid(unpack_uuid(packed)))
            yield "delete", table, ident, delete, None
        if want is None:
            return
        assert want[1] is not None, f"{table} {ident}: columns not read back (load_actual)"
        row = {  # (`to_json`, inline: a cold start converts millions of values)
            column: codec.to_set(value.items()) if isinstance(value, Packed) else _json(value)
            for column, value in want[1].items()
        }
        if not keep:
            yield "insert", table, ident, ops.insert(table, row), want[1]
        elif ident in self.changed[shard][table] and TABLE_OUTPUT[table].updatable:
            yield "update", table, ident, ops.update(table, ops.where_uuid(keep[0]), row), want[1]

    def _record(self, chunk: list[Op], results: list[Any]) -> None:
        """Fold a committed chunk's results into actual."""
        for (kind, table, ident, op, columns), result in zip(chunk, results, strict=True):
            if columns is not None and self._lean(table):
                self._written(table, ident, columns)
            actual = self.actual[table]
            if kind == "insert":
                shard = self._shard(table, ident) or ""
                held = actual.get(ident, (shard, ()))[1]
                actual[ident] = (shard, (*held, pack_uuid(result["uuid"][1])))
            elif kind == "delete":
                gone = pack_uuid(op["where"][0][2][1])
                shard, uuids = actual.get(ident, ("", ()))
                rest = tuple(u for u in uuids if u != gone)
                if rest:
                    actual[ident] = (shard, rest)
                else:
                    actual.pop(ident, None)


def _chunked(items: Iterable[Op], size: int) -> Iterator[list[Op]]:
    """`items` in lists of `size` (the last may be shorter), lazily."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk
