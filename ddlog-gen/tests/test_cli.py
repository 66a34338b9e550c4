"""The `loom-ddlog` command: run, check, recorder replay, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loom_ddlog import Program

REACH = str(Path(__file__).resolve().parents[2] / "ddlog-gen" / "examples" / "reach.dl")


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loom_ddlog.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_run_prints_the_engine_output() -> None:
    script = "start;\ninsert Edge(1, 2), insert Edge(2, 3);\ncommit dump_changes;\ndump Reach;\n"
    r = cli("run", REACH, stdin=script)
    assert r.returncode == 0, r.stderr
    prog = Program.load(REACH)
    expected, errors = prog.run_script(script)
    assert errors == 0
    assert r.stdout == expected
    assert "Reach{.src = 1, .dst = 3}: +1" in r.stdout


def test_runtime_error_exits_1() -> None:
    r = cli("run", REACH, stdin="commit;\n")
    assert r.returncode == 1
    assert "error: no transaction in progress" in r.stdout


def test_compile_error_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.dl"
    bad.write_text("input relation R(x: bit<8>)\nR(x) :- Nope(x).\n")
    for command in ("run", "check"):
        r = cli(command, str(bad))
        assert r.returncode == 1
        assert r.stderr.startswith(f"{bad}:2:"), r.stderr
        assert ": error: " in r.stderr


def test_script_parse_error_exits_1() -> None:
    r = cli("run", REACH, stdin="start;\ninsert Edge(1);\ncommit;\n")
    assert r.returncode == 1
    assert r.stderr.startswith("<stdin>:2:"), r.stderr


def test_check() -> None:
    r = cli("check", REACH)
    assert r.returncode == 0
    assert r.stdout.startswith("ok: 5 relations (1 input, 4 output")


@pytest.mark.parametrize(("args", "code"), [((), 2), (("nope",), 2), (("--help",), 0)])
def test_usage(args: tuple[str, ...], code: int) -> None:
    assert cli(*args).returncode == code


def test_recording_replays_to_the_same_state(tmp_path: Path, reach: Program) -> None:
    log = tmp_path / "rec.dat"
    reach.record(log)
    for k in range(5):
        with reach.transaction() as txn:
            txn.insert("Edge", (k, k + 1))
            if k == 3:
                txn.delete("Edge", (0, 1))
    with reach.transaction() as txn:  # a failed transaction is not recorded
        txn.insert("Nope", ())
        with pytest.raises(Exception, match="unknown relation"):
            txn.commit()
    reach.stop_recording()
    with reach.transaction() as txn:  # nor is anything after stop_recording
        txn.insert("Edge", (40, 41))
    with reach.transaction() as txn:
        txn.delete("Edge", (40, 41))
    dumps = "".join(f"dump {rel};\n" for rel in ("Edge", "Reach", "ReachCount"))
    r = cli("run", REACH, stdin=log.read_text() + dumps)
    assert r.returncode == 0, r.stderr
    live, _ = reach.run_script(dumps)
    assert r.stdout == live
    assert "Reach{.src = 1, .dst = 5}" in live


def test_run_with_record_flag(tmp_path: Path) -> None:
    log = tmp_path / "rec.dat"
    r = cli("run", REACH, "--record", str(log), stdin="start;\ninsert Edge(1, 2);\ncommit;\n")
    assert r.returncode == 0, r.stderr
    assert log.read_text() == "start;\ninsert Edge(1, 2);\ncommit;\n"
