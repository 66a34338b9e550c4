"""The rule language's reference (`docs/rules.md`, linked from the README) has examples
that work: the rule-language example compiles, the Python example runs (its own `assert`
included), and the CLI commands it shows succeed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loom_ddlog import Program

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")


def _blocks(lang: str, section: str) -> list[str]:
    """Return the fenced code blocks tagged `lang` under the `## section` heading."""
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{lang}\n(.*?)^```$", body, flags=re.M | re.S)


def test_language_example_compiles() -> None:
    [source] = _blocks("", "The rule language")
    prog = Program.compile(source, name="README.md")
    assert {"Switch", "SwitchPort", "Link", "Flow"} <= set(prog.relations)


def test_python_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    [code] = _blocks("python", "Using the engine")
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {})  # the README's own example


def _cli_lines() -> list[str]:
    [sh] = _blocks("sh", "Using the engine")
    return [line.split("  #", 1)[0].strip() for line in sh.splitlines() if line.strip()]


@pytest.mark.parametrize("line", _cli_lines())
def test_cli_example_runs(line: str, tmp_path: Path) -> None:
    argv = shlex.split(line.split("<", 1)[0])
    assert argv[0] == ".venv/bin/loom-ddlog"
    argv[0:1] = [sys.executable, "-m", "loom_ddlog.cli"]
    # Paths the README names relative to the repository root; outputs go to tmp_path.
    argv = [str(ROOT / a) if (ROOT / a).exists() else a for a in argv]
    expanded: list[str] = []
    for a in argv:
        expanded.extend(sorted(str(p) for p in ROOT.glob(a)) if "*" in a else [a])
    stdin_path = line.split("<", 1)[1].strip() if "<" in line else None
    stdin = (ROOT / stdin_path).read_bytes() if stdin_path else None
    out = subprocess.run(
        expanded,
        input=stdin,
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr.decode()
    if "--record" in expanded:
        replay = tmp_path / "replay.dat"
        assert replay.read_text().strip(), "the recording is empty"
