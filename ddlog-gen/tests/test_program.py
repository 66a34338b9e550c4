"""The Program/Transaction API: errors, atomicity, rollback, context managers, threads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from loom_ddlog import CompileError, EngineError, Program, Struct
from loom_ddlog.program import Delta, Row


def port(sw: str, name: str, ofport: int, vlan: int | None = None) -> Row:
    return (sw, name, ofport, vlan)


def test_relations_metadata(l2switch: Program) -> None:
    rels = l2switch.relations
    assert rels["Port"].role == "input"
    assert rels["Port"].key == "(string, string)"
    assert rels["Port"].columns[3] == ("vlan", "Option<bit<12>>")
    assert rels["MacBinding"].key is None
    assert rels["Forward"].role == "output"
    assert rels["KnownMac"].role == "internal"
    assert rels["Forward"].column_names == ("sw", "dst", "action", "descr")


def test_commit_returns_output_deltas(l2switch: Program) -> None:
    with l2switch.transaction() as txn:
        txn.insert("Port", port("sw", "p1", 1, 10))
        txn.insert("MacBinding", ("sw", "p1", "00:00:00:00:00:01"))
        delta = txn.commit()
    assert txn.delta is delta
    assert delta["PortVlan"] == [(1, ("sw", "p1", 10))]
    assert (1, ("sw", 1, Struct("Output", port=1), "to 00:00:00:00:00:01 via 1")) in delta[
        "Forward"
    ]
    assert "KnownMac" not in delta  # internal relations are not reported
    assert l2switch.dump("KnownMac") == [("sw", 1, 1)]  # ... but can be dumped
    with l2switch.transaction() as txn:
        txn.delete_key("Port", ("sw", "p1"))
    assert txn.delta is not None
    assert txn.delta["PortVlan"] == [(-1, ("sw", "p1", 10))]
    assert l2switch.stats().commits == 2


def test_the_engine_empties_a_list_of_updates_once_converted(l2switch: Program) -> None:
    """The rows' Python objects are freed before the computation, not after it; a
    conversion error leaves the list as it was."""
    row = port("sw", "p1", 1, 10)
    updates = [("insert", "Port", row)]
    held = sys.getrefcount(row)
    delta = l2switch.engine.apply(updates)
    assert updates == []
    assert sys.getrefcount(row) == held - 1
    assert delta["PortVlan"] == [(1, ("sw", "p1", 10))]
    bad = [("insert", "Port", port("sw", "p2", 2)), ("insert", "Port", ("sw",))]
    with pytest.raises((ValueError, TypeError, EngineError)):
        l2switch.engine.apply_lazy(bad, 10)
    assert len(bad) == 2


def test_insert_or_update_and_modify(l2switch: Program) -> None:
    with l2switch.transaction() as txn:
        txn.insert("Port", port("sw", "p1", 1, 10))
    with l2switch.transaction() as txn:
        txn.insert_or_update("Port", port("sw", "p1", 1, 20))
    assert l2switch.dump("PortVlan") == [("sw", "p1", 20)]
    with l2switch.transaction() as txn:
        txn.modify("Port", ("sw", "p1"), {"vlan": None, "ofport": 5})
    assert l2switch.dump("Port") == [port("sw", "p1", 5)]
    assert l2switch.dump("PortVlan") == []


def test_primary_key_violation_leaves_state_unchanged(l2switch: Program) -> None:
    with l2switch.transaction() as txn:
        txn.insert("Port", port("sw", "p1", 1))
    before = {name: l2switch.dump(name) for name in l2switch.relations}
    stats = l2switch.stats()
    txn = l2switch.transaction()
    txn.insert("Port", port("sw", "p2", 2))  # fine on its own ...
    txn.insert("Port", port("sw", "p1", 9))  # ... but this key exists with another row
    with pytest.raises(EngineError, match="duplicate key"):
        txn.commit()
    assert txn.closed
    assert {name: l2switch.dump(name) for name in l2switch.relations} == before
    assert l2switch.stats() == stats
    with l2switch.transaction() as txn:  # the program is usable (and unlocked) afterwards
        txn.insert("Port", port("sw", "p2", 2))


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (lambda t: t.delete_key("Port", ("sw", "nope")), "no row with key"),
        (lambda t: t.delete_key("MacBinding", "x"), "has no primary key"),
        (lambda t: t.insert("Forward", ("sw", 1, Struct("Drop"), "")), "not an input"),
        (lambda t: t.insert("Nope", ()), "unknown relation Nope"),
    ],
)
def test_engine_errors(l2switch: Program, update: object, message: str) -> None:
    txn = l2switch.transaction()
    update(txn)  # type: ignore[operator]
    with pytest.raises(EngineError, match=message):
        txn.commit()
    assert l2switch.stats().commits == 0


def test_unknown_relation_in_dump(l2switch: Program) -> None:
    with pytest.raises(EngineError, match="unknown relation"):
        l2switch.dump("Nope")


def test_rollback(l2switch: Program) -> None:
    txn = l2switch.transaction()
    txn.insert("Port", port("sw", "p1", 1))
    txn.rollback()
    assert txn.closed
    assert l2switch.dump("Port") == []
    with pytest.raises(RuntimeError, match="closed"):
        txn.insert("Port", port("sw", "p1", 1))
    with pytest.raises(RuntimeError, match="closed"):
        txn.commit()


def test_context_manager_commits_or_rolls_back(l2switch: Program) -> None:
    opened = []

    def fail() -> None:
        with l2switch.transaction() as t:
            opened.append(t)
            t.insert("Port", port("sw", "p1", 1))
            raise KeyError("boom")

    with pytest.raises(KeyError):
        fail()
    [txn] = opened
    assert txn.closed
    assert txn.delta is None
    assert l2switch.dump("Port") == []
    with l2switch.transaction() as txn:
        txn.insert("Port", port("sw", "p1", 1))
    assert l2switch.dump("Port") == [port("sw", "p1", 1)]
    with l2switch.transaction() as txn:  # explicit commit inside: leaving does nothing more
        txn.insert("Port", port("sw", "p2", 2))
        txn.commit()
    assert len(l2switch.dump("Port")) == 2


def test_one_transaction_per_thread(l2switch: Program) -> None:
    with l2switch.transaction(), pytest.raises(RuntimeError, match="already has a transaction"):
        l2switch.transaction()


def test_compile_error_attributes(tmp_path: object) -> None:
    src = "input relation R(x: bit<8>)\noutput relation S(x: bit<8>)\nS(y) :- R(x).\n"
    with pytest.raises(CompileError) as info:
        Program.compile(src, name="bad.dl")
    e = info.value
    assert isinstance(e, EngineError)
    assert e.file == "bad.dl"
    assert e.line == 3
    assert isinstance(e.col, int)
    assert e.col >= 1
    assert e.message
    assert str(e) == f"bad.dl:3:{e.col}: error: {e.message}"


def test_load_reports_missing_file() -> None:
    with pytest.raises(CompileError, match="cannot read file") as info:
        Program.load(["/nonexistent/x.dl"])
    assert info.value.file == "/nonexistent/x.dl"


def test_other_threads_block_while_a_transaction_is_open(reach: Program) -> None:
    events: list[str] = []
    txn = reach.transaction()
    txn.insert("Edge", (1, 2))

    def other() -> None:
        with reach.transaction() as t:
            events.append("other")
            t.insert("Edge", (2, 3))

    th = threading.Thread(target=other)
    th.start()
    time.sleep(0.1)
    events.append("first")
    txn.commit()
    th.join(timeout=10)
    assert events == ["first", "other"]
    assert (1, 3) in reach.dump("Reach")


def accumulate(acc: dict[str, set[Row]], delta: Delta) -> None:
    for rel, rows in delta.items():
        for weight, row in rows:
            if weight > 0:
                assert row not in acc.setdefault(rel, set())
                acc[rel].add(row)
            else:
                acc.setdefault(rel, set()).remove(row)


def test_concurrent_transactions_are_consistent(reach: Program) -> None:
    n_threads, n_txns = 4, 30
    per_thread: list[dict[str, set[Row]]] = [{} for _ in range(n_threads)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        base = 100 * i  # each thread owns its own nodes, so its deltas are its own
        try:
            for k in range(n_txns):
                with reach.transaction() as txn:
                    txn.insert("Edge", (base + k % 10, base + (k + 1) % 10))
                    if k % 3 == 2:
                        txn.delete("Edge", (base + (k - 1) % 10, base + k % 10))
                assert txn.delta is not None
                accumulate(per_thread[i], txn.delta)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert not errors
    assert reach.stats().commits == n_threads * n_txns
    naive = reach.naive_evaluate()
    for rel in ("Reach", "OnCycle", "Acyclic"):
        combined: set[Row] = set().union(*(acc.get(rel, set()) for acc in per_thread))
        assert combined == set(reach.dump(rel)) == set(naive[rel])


def test_without_internal_relations_outputs_match_and_internal_dumps_fail() -> None:
    source = """
input relation Kv(k: bit<8>, v: string)
relation Mid(k: bit<8>, v: string)
Mid(k, v) :- Kv(k, v).
output relation Out(v: string)
Out(v) :- Mid(_, v).
"""
    full = Program.compile(source, "internal.dl")
    lean = Program.compile(source, "internal.dl", internal=False)
    deltas = []
    for program in (full, lean):
        with program.transaction() as txn:
            txn.insert("Kv", (1, "a"))
            txn.insert("Kv", (2, "a"))
            deltas.append(txn.commit())
    assert deltas[0] == deltas[1] == {"Out": [(1, ("a",))]}
    assert len(full.dump("Mid")) == 2
    with pytest.raises(EngineError, match="Mid is internal"):
        lean.dump("Mid")


def test_a_counted_output_gives_counts_of_derivations_and_cannot_be_dumped() -> None:
    source = """
input relation Kv(k: bit<8>, v: string)
output relation Out(v: string)
Out(v) :- Kv(_, v).
"""
    program = Program.compile(source, "counted.dl", internal=False, counted=["Out"])
    with program.transaction() as txn:
        txn.insert("Kv", (1, "a"))
        txn.insert("Kv", (2, "a"))
        txn.insert("Kv", (3, "b"))
        assert txn.commit() == {"Out": [(2, ("a",)), (1, ("b",))]}
    with program.transaction() as txn:
        txn.delete("Kv", (1, "a"))
        assert txn.commit() == {"Out": [(-1, ("a",))]}
    with pytest.raises(EngineError, match="Out is counted"):
        program.dump("Out")
    with pytest.raises(EngineError, match="Kv is not an output"):
        Program.compile(source, "counted.dl", counted=["Kv"])


def test_profile_names_the_relations_a_commit_spent_its_time_on(tmp_path: Path) -> None:
    """`LOOM_ENGINE_PROFILE=1`: each worker prints, after a slow enough commit, its time by
    the relation whose operators spent it."""
    program = tmp_path / "p.dl"
    program.write_text(
        "input relation Edge(a: bit<32>, b: bit<32>)\n"
        "output relation Path(a: bit<32>, b: bit<32>)\n"
        "Path(a, b) :- Edge(a, b).\n"
        "Path(a, c) :- Path(a, b), Edge(b, c).\n"
    )
    script = (
        "import sys\n"
        "from loom_ddlog import Program\n"
        "p = Program.load(sys.argv[1], workers=2)\n"
        "with p.transaction() as t:\n"
        "    for i in range(300):\n"
        "        t.insert('Edge', (i, i + 1))\n"
        "    t.commit()\n"
    )
    env = {**os.environ, "LOOM_ENGINE_PROFILE": "1", "LOOM_ENGINE_PROFILE_MS": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(program)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    reports = re.findall(r"loom-engine profile: worker (\d), commit [\d.]+ ms", done.stderr)
    assert set(reports) == {"0", "1"}, done.stderr
    assert re.search(r"^\s+[\d.]+ ms  Path$", done.stderr, re.MULTILINE), done.stderr
    # and the updates each relation's arrangements hold, from differential's own log: the
    # recursive join arranges `Path` (its 300 * 301 / 2 rows, split between the workers)
    held = re.findall(r"^\s+(\d+)  Path$", done.stderr, re.MULTILINE)
    assert sum(map(int, held)) >= 300 * 301 // 2, done.stderr
    assert len(re.findall(r"arrangements: \d+ updates held", done.stderr)) == 2, done.stderr

    quiet = subprocess.run(
        [sys.executable, "-c", script, str(program)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "loom-engine profile" not in quiet.stderr


def test_the_native_allocators_memory_grows_with_an_engines_rows() -> None:
    """`allocator_memory` (the controllers' long-pass log line and metrics): what the native
    allocator holds, and of it what is in use, grow with what an engine holds (in a fresh
    process: in this one, earlier tests' engines left memory the allocator reuses)."""
    script = (
        "from loom_ddlog import Program, allocator_memory\n"
        "before = allocator_memory()[0]\n"
        "p = Program.compile('input relation In(x: bit<32>, s: string)\\n'\n"
        "                    'output relation Out(x: bit<32>, s: string)\\n'\n"
        "                    'Out(x, s) :- In(x, s).\\n')\n"
        "with p.transaction() as t:\n"
        "    for i in range(200_000):\n"
        "        t.insert('In', (i, f'row {i} with a string long enough to be allocated'))\n"
        "    t.commit()\n"
        "print(before, *allocator_memory())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    before, held, used = map(int, done.stdout.split())
    assert held >= used > 20 * 2**20, done.stdout  # (~100 bytes a row, twice)
    assert held > before + 20 * 2**20, done.stdout


def test_heads_of_one_body_are_independent() -> None:
    """A rule's heads share one evaluation of its body (the engine builds it once), yet each
    head is its own derivation: one head failing at runtime (a division by zero) drops only
    its row, and counts one error; the others are derived, with multiplicities intact."""
    program = Program.compile(
        """
input relation In(x: bit<8>)
output relation Out(tag: string, x: bit<8>)
Out("same", x), Out("same", x), Out("div", 100 / x), Out("plus", x + 1) :- In(x).
""",
        "heads.dl",
    )
    with program.transaction() as txn:
        txn.insert("In", (0,))
        txn.insert("In", (5,))
        delta = txn.commit()
    assert sorted(row for _, row in delta["Out"]) == [
        ("div", 20), ("plus", 1), ("plus", 6), ("same", 0), ("same", 5),
    ]  # fmt: skip
    assert program.stats().runtime_errors == 1
    with program.transaction() as txn:  # two derivations of ("same", 5): it stays until both go
        txn.delete("In", (5,))
        delta = txn.commit()
    assert sorted(row for _, row in delta["Out"]) == [("div", 20), ("plus", 6), ("same", 5)]
    assert all(weight == -1 for weight, _ in delta["Out"])


def test_commit_lazy_hands_out_the_delta_in_chunks_deletions_first() -> None:
    """`commit_lazy` commits at once and converts when iterated: chunks of at most `chunk`
    changes, every deletion before any insertion, together what `commit` returns."""
    source = """
        input relation A(x: bit<32>)
        output relation B(x: bit<32>, y: string)
        output relation C(x: bit<32>)
        B(x, "b${x}") :- A(x).
        C(x) :- A(x), x % 2 == 0.
    """
    lazy, eager = Program.compile(source), Program.compile(source)

    def both(rows: list[int], gone: list[int]) -> tuple[list[Delta], Delta]:
        with lazy.transaction() as a, eager.transaction() as b:
            for txn in (a, b):
                for x in rows:
                    txn.insert("A", (x,))
                for x in gone:
                    txn.delete("A", (x,))
            pending = a.commit_lazy(4)
            whole = b.commit()
        assert set(pending.relations()) == set(whole)
        assert len(pending) == sum(map(len, whole.values()))
        assert pending.has_deletions() == any(w < 0 for c in whole.values() for w, _ in c)
        chunks = list(pending)
        assert len(pending) == 0
        return chunks, whole

    chunks, whole = both(list(range(10)), [])
    assert [sum(map(len, c.values())) for c in chunks] == [4, 4, 4, 3]
    folded: dict[str, list[tuple[int, Row]]] = {}
    for chunk in chunks:
        for relation, changes in chunk.items():
            folded.setdefault(relation, []).extend(changes)
    assert {r: sorted(c) for r, c in folded.items()} == {r: sorted(c) for r, c in whole.items()}

    chunks, whole = both([20, 21], [0, 1, 2])
    signs = [(i, w) for i, chunk in enumerate(chunks) for c in chunk.values() for w, _ in c]
    last_deletion = max(i for i, w in signs if w < 0)
    assert last_deletion <= min(i for i, w in signs if w > 0)  # no deletion after an insertion
    assert [w for _, w in signs].count(-1) == sum(w < 0 for c in whole.values() for w, _ in c)
    with pytest.raises(ValueError, match="chunk"), lazy.transaction() as txn:
        txn.commit_lazy(0)
