"""Type stubs of the native binding (checked by `python -m mypy.stubtest loom_ddlog._native`)."""

from collections.abc import Iterable, Sequence
from os import PathLike
from typing import Any, final

__all__ = [
    "CompileError",
    "CompiledProgram",
    "Engine",
    "EngineError",
    "PendingDelta",
    "allocator_memory",
    "bulk_adds",
    "compile_files",
    "compile_source",
    "encode_actions",
    "flow_mod",
    "standin_apply_adds",
    "standin_bundle_adds",
]

_RelationInfo = tuple[str, str, list[tuple[str, str]], str | None]
_Row = tuple[Any, ...]

class EngineError(Exception):
    """A transaction or script failed in the engine; the engine's state is unchanged."""

class CompileError(EngineError):
    """A rule program or script did not compile."""

    file: str
    line: int
    col: int
    message: str

@final
class CompiledProgram:
    """A compiled rule program."""

    def relations(self) -> list[_RelationInfo]:
        """Relation metadata: (name, role, [(column, type)], key type or None)."""

@final
class Engine:
    """A running program."""

    def __new__(
        cls,
        program: CompiledProgram,
        workers: int = 1,
        internal: bool = True,
        counted: Sequence[str] = ...,
    ) -> Engine: ...
    def apply(self, updates: Iterable[tuple[Any, ...]]) -> dict[str, list[tuple[int, _Row]]]:
        """Apply updates atomically; return the output deltas (a list given is emptied)."""

    def apply_lazy(self, updates: Iterable[tuple[Any, ...]], chunk: int) -> PendingDelta:
        """Apply updates atomically; the output deltas, converted a chunk at a time (a list
        given is emptied)."""

    def dump(self, relation: str) -> list[_Row]:
        """Current rows of a relation, sorted."""

    def relations(self) -> list[_RelationInfo]:
        """Relation metadata."""

    def run_script(self, text: str, name: str = "<script>") -> tuple[str, int]:
        """Run a `.dat` script; return (output, runtime errors)."""

    def record(self, path: str | PathLike[str] | None) -> None:
        """Record committed transactions to `path`; None stops."""

    def stats(self) -> dict[str, int]:
        """Counters: commits and runtime_errors."""

    def naive_evaluate(self) -> dict[str, list[_Row]]:
        """Evaluate every relation from scratch from the current inputs."""

@final
class PendingDelta:
    """A committed transaction's output deltas, converted when iterated: chunks of at most
    `chunk` changes, every deletion before any insertion."""

    def __len__(self) -> int:
        """Changes not handed out yet."""

    def relations(self) -> set[str]:
        """The relations the deltas change."""

    def has_deletions(self) -> bool:
        """True if any row is deleted."""

    def __iter__(self) -> PendingDelta: ...
    def __next__(self) -> dict[str, list[tuple[int, _Row]]]: ...

def compile_files(paths: Sequence[str | PathLike[str]]) -> CompiledProgram:
    """Compile rule files."""

def compile_source(source: str, name: str = "<string>") -> CompiledProgram:
    """Compile a program given as text."""

def allocator_memory() -> tuple[int, int]:
    """The native allocator's memory in bytes: (committed, peak committed)."""

def bulk_adds(flows: Sequence[tuple[int, int, int, str, bytes]]) -> bytes:
    """Flows `(table, priority, cookie, match, encoded actions)` as messages of the bulk
    bundle; `ValueError` naming a match the encoder declines."""

def flow_mod(
    command: int, table: int, priority: int, cookie: int, matched: str, actions: bytes
) -> bytes:
    """One OFPT_FLOW_MOD with xid 0; `ValueError` if the encoder declines the match."""

def encode_actions(actions: str) -> bytes:
    """An ovs-ofctl action list as OpenFlow actions; `ValueError` if declined."""

def standin_bundle_adds(buf: bytes, at: int, bundle_id: int, flags: int) -> tuple[list[bytes], int]:
    """The run of flow adds into open bundle `bundle_id` (with `flags`) in `buf` from
    `at`: the messages they carry, and where the run ends."""

def standin_apply_adds(
    messages: list[bytes],
    start: int,
    flows: dict[bytes, bytes],
    intern: dict[bytes, bytes] | None = None,
) -> int:
    """Keep the flow adds of `messages[start:]` in `flows` (interned through `intern`);
    the index of the first message that is not one."""
