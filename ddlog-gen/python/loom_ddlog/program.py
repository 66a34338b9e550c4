"""Pythonic API over the native engine: programs, transactions and relation metadata."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any, Literal, cast

from loom_ddlog import _native

Row = tuple[Any, ...]
"""One row: its columns in declaration order (see `loom_ddlog._native` for the types)."""

Delta = dict[str, list[tuple[int, Row]]]
"""Changes of one commit: ``{output relation: [(+1, row), (-1, row), ...]}``."""
PendingDelta = _native.PendingDelta
"""A commit's changes kept in the engine, handed out as `Delta`s of a chunk each."""

StrPath = str | os.PathLike[str]
Role = Literal["input", "output", "internal"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector from running inside the block.

    A commit hands back one new tuple per changed row, a dump one per row; a big delta
    (a cold load makes hundreds of thousands) would trigger full collections that
    traverse every object in the process and can find nothing to free, since the new
    tuples are acyclic (on `loom-ddlog bench`, a noticeable share of a cold load). The
    previous state is restored, so an application that disabled the collector keeps it disabled.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class Relation:
    """Metadata of one relation of a compiled program."""

    name: str
    role: Role
    columns: tuple[tuple[str, str], ...]
    """``(column name, type)`` pairs, types spelled as in the rule language."""
    key: str | None
    """Type of the primary key (input relations that declare one), else None."""

    @property
    def column_names(self) -> tuple[str, ...]:
        """Return the column names in order."""
        return tuple(name for name, _ in self.columns)


@dataclass(frozen=True)
class Stats:
    """Engine counters since the program started."""

    commits: int
    runtime_errors: int
    """Rows dropped because an expression failed (division by zero, ...): a binding row of
    a rule body (counted once, however many heads share that body), or one head's row."""


class Program:
    """A compiled rule program running on the incremental engine.

    Safe to share between threads: transactions are serialised by a lock (a second
    thread's :meth:`transaction` blocks until the first one commits or rolls back), and
    reads (:meth:`dump`, :meth:`stats`) never block on an open transaction.
    """

    def __init__(
        self,
        compiled: _native.CompiledProgram,
        *,
        workers: int = 1,
        internal: bool = True,
        counted: Iterable[str] = (),
    ) -> None:
        """Start an engine for `compiled` with `workers` worker threads.

        With `internal=False` the engine keeps only output relations: less memory and
        work when internal relations are large, and :meth:`dump` of one raises
        :class:`EngineError`. The output relations named in `counted` are not kept
        either (their reader keeps them, with counts): a commit's delta gives, for each of
        their rows that changed, the net change of its number of derivations (any non-zero
        integer, not just +1 or -1), and :meth:`dump` of one raises :class:`EngineError`.

        Raises:
            ValueError: `workers` is less than 1.
            EngineError: `counted` names a relation that is not an output.
        """
        self._engine = _native.Engine(compiled, workers, internal, list(counted))
        self._relations: Mapping[str, Relation] = MappingProxyType(
            {
                name: Relation(name, cast(Role, role), tuple(cols), key)
                for name, role, cols, key in compiled.relations()
            }
        )
        self._lock = threading.Lock()
        self._owner: int | None = None

    @classmethod
    def load(
        cls,
        paths: StrPath | Iterable[StrPath],
        *,
        workers: int = 1,
        internal: bool = True,
        counted: Iterable[str] = (),
    ) -> Program:
        """Compile rule files and start them.

        Args:
            paths: One `.dl` file or several; imports resolve relative to each file.
            workers: Engine worker threads (1 is best on small machines).
            internal: Keep internal relations for :meth:`dump` (see :meth:`__init__`).
            counted: Output relations given as counts and not kept (see :meth:`__init__`).

        Raises:
            CompileError: With `file`, `line`, `col` and `message` set.
        """
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        compiled = _native.compile_files([os.fspath(p) for p in paths])
        return cls(compiled, workers=workers, internal=internal, counted=counted)

    @classmethod
    def compile(
        cls,
        source: str,
        name: str = "<string>",
        *,
        workers: int = 1,
        internal: bool = True,
        counted: Iterable[str] = (),
    ) -> Program:
        """Compile a program given as text and start it; `name` appears in errors. The
        options are :meth:`load`'s.

        Raises:
            CompileError: With `file`, `line`, `col` and `message` set.
        """
        compiled = _native.compile_source(source, name)
        return cls(compiled, workers=workers, internal=internal, counted=counted)

    @property
    def relations(self) -> Mapping[str, Relation]:
        """Return every relation by name, in declaration order."""
        return self._relations

    @property
    def engine(self) -> _native.Engine:
        """Return the native engine (for tools; prefer the methods here)."""
        return self._engine

    def transaction(self) -> Transaction:
        """Open a transaction, waiting while another thread has one open.

        Returns:
            A :class:`Transaction`; use it as a context manager, or call
            :meth:`Transaction.commit` / :meth:`Transaction.rollback` yourself.

        Raises:
            RuntimeError: This thread already has a transaction open on this program.
        """
        if self._owner == threading.get_ident():
            raise RuntimeError("this thread already has a transaction open on this program")
        self._lock.acquire()
        self._owner = threading.get_ident()
        return Transaction(self)

    def _release(self) -> None:
        self._owner = None
        self._lock.release()

    def dump(self, relation: str) -> list[Row]:
        """Return the current rows of any relation, sorted.

        Raises:
            EngineError: No relation has this name.
        """
        with gc_paused():
            return self._engine.dump(relation)

    def record(self, path: StrPath) -> None:
        """Record every committed transaction to `path` as a `.dat` script (truncates it).

        `loom-ddlog run PROGRAM.dl < path` replays it to the same state.
        """
        self._engine.record(path)

    def stop_recording(self) -> None:
        """Stop recording and close the file."""
        self._engine.record(None)

    def stats(self) -> Stats:
        """Return the engine's counters."""
        s = self._engine.stats()
        return Stats(commits=s["commits"], runtime_errors=s["runtime_errors"])

    def naive_evaluate(self) -> dict[str, list[Row]]:
        """Evaluate every relation from scratch from the current inputs (slow; for tests).

        Holds the transaction lock, so the inputs it reads are one committed state.
        """
        with self._locked():
            return self._engine.naive_evaluate()

    def run_script(self, text: str, name: str = "<script>") -> tuple[str, int]:
        """Run a `.dat` command script; return (its output, number of runtime errors).

        Raises:
            CompileError: The script does not parse; nothing ran.
        """
        with self._locked():
            return self._engine.run_script(text, name)

    def _locked(self) -> _Held:
        if self._owner == threading.get_ident():
            raise RuntimeError("this thread has a transaction open on this program")
        return _Held(self)


class _Held:
    """Context manager holding a program's transaction lock."""

    def __init__(self, prog: Program) -> None:
        self._prog = prog

    def __enter__(self) -> None:
        self._prog._lock.acquire()
        self._prog._owner = threading.get_ident()

    def __exit__(self, *exc: object) -> None:
        self._prog._release()


class Transaction:
    """Updates buffered for one atomic commit.

    Nothing reaches the engine until :meth:`commit`, which applies all updates in order or
    none of them. As a context manager, leaving the block normally commits and leaving it
    with an exception rolls back. Either way the transaction is then closed.
    """

    def __init__(self, prog: Program) -> None:
        """Use :meth:`Program.transaction` instead."""
        self._prog: Program | None = prog
        self._updates: list[tuple[Any, ...]] = []
        self.delta: Delta | None = None
        """The changes, once committed."""

    @property
    def closed(self) -> bool:
        """Return whether the transaction was committed or rolled back."""
        return self._prog is None

    def _add(self, update: tuple[Any, ...]) -> None:
        if self._prog is None:
            raise RuntimeError("transaction is closed")
        self._updates.append(update)

    def insert(self, relation: str, row: Sequence[Any] | Mapping[str, Any]) -> None:
        """Insert `row` (a tuple, or a dict by column name) into an input relation."""
        self._add(("insert", relation, row))

    def insert_or_update(self, relation: str, row: Sequence[Any] | Mapping[str, Any]) -> None:
        """Insert `row`, replacing the row with the same primary key if there is one."""
        self._add(("insert_or_update", relation, row))

    def delete(self, relation: str, row: Sequence[Any] | Mapping[str, Any]) -> None:
        """Delete `row` (no-op if absent)."""
        self._add(("delete", relation, row))

    def delete_key(self, relation: str, key: Any) -> None:
        """Delete the row whose primary key is `key` (an error at commit if absent)."""
        self._add(("delete_key", relation, key))

    def modify(self, relation: str, key: Any, changes: Mapping[str, Any]) -> None:
        """Change columns of the row whose primary key is `key`: ``{column: value}``."""
        self._add(("modify", relation, key, dict(changes)))

    def clear(self, relation: str) -> None:
        """Delete every row of an input relation."""
        self._add(("clear", relation))

    def commit(self) -> Delta:
        """Apply the updates atomically and close the transaction.

        Returns:
            ``{output relation: [(+1 | -1, row), ...]}`` for every output that changed.

        Raises:
            EngineError: A primary-key violation or similar; nothing was applied.
            ValueError: A value does not fit its column; nothing was applied.
            TypeError: A value has the wrong Python type; nothing was applied.
        """
        prog = self._close()
        try:
            with gc_paused():
                self.delta = prog._engine.apply(self._updates)
        finally:
            self._updates = []
            prog._release()
        return self.delta

    def commit_lazy(self, chunk: int = 10_000) -> PendingDelta:
        """As :meth:`commit`, but the delta stays in the engine until iterated: each
        iteration converts and returns at most `chunk` changes (a `Delta`), every deletion
        before any insertion, so folding the chunks in order equals folding `commit()`'s
        delta. A consumer that sends each chunk somewhere while the next is converted
        overlaps the two (the logical controller's cold start does)."""
        prog = self._close()
        try:
            with gc_paused():
                return prog._engine.apply_lazy(self._updates, chunk)
        finally:
            self._updates = []
            prog._release()

    def rollback(self) -> None:
        """Discard the updates and close the transaction."""
        prog = self._close()
        self._updates = []
        prog._release()

    def _close(self) -> Program:
        prog = self._prog
        if prog is None:
            raise RuntimeError("transaction is closed")
        self._prog = None
        return prog

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.closed:
            return
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def __del__(self) -> None:
        # A transaction dropped while open must not keep the program locked forever.
        if getattr(self, "_prog", None) is not None:
            with contextlib.suppress(RuntimeError):  # lock already released elsewhere
                self.rollback()
