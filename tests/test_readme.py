"""The guides as tests: the README's tour and docs/operations.md's recipes run as written
against `loom up --demo`, and what they print is what the guides show.

`test_the_readme_tour_runs_as_written` starts `loom up --demo` (as `make run` does) in a
scratch directory that has the checkout's `.venv`, so the guide's relative paths
(`.venv/bin/loom`, `run/loom/...`) mean there what they mean in a checkout; the API and
manager ports are free ones, written into the guide's text where it says 8080 and 6640.
The banner and the demo's matrix are compared with the `$ make run` transcript; every
other block runs in the guide's order.

The parts below read the guides; they are tested on their own first.

A guide's section is a run of fenced blocks (`blocks`):

- a transcript (a block whose first line starts with `$ `): each `$ COMMAND` (continued
  on the next line after a trailing backslash) runs, and what it prints must be the lines
  that follow it, up to the next `$` (`matches`);
- a `sh` block: a script, run as one with `bash -euo pipefail` (it must succeed);
- a `python` block: run with the deployment's Python (it must succeed).

The info string may name where a block runs: ```` ```sh on-node=hv1 ```` runs it on that
transport node (its `ovs-vsctl`/`ovs-ofctl`/`ovs-appctl` are that node's: `node_prelude`).

What an expected output may leave open, so that a guide reads like a real session and still
compares exactly: a line `...` stands for any lines (none included); `…` within a line for
any text; UUIDs match any UUID (ids differ from run to run). Trailing spaces do not count.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loom_common.ovsdb import free_port
from loom_common.testing import loom_up
from loom_ovs.sandbox import OvsNode

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
OPERATIONS = ROOT / "docs" / "operations.md"
VENV = Path(sys.prefix)

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
FENCE = re.compile(r"^```(\S*)(.*)$")


@dataclass
class Block:
    """One fenced block of a guide."""

    language: str
    """The info string's first word (`sh`, `python`, or empty)."""
    text: str
    line: int
    """Where it starts in the file (1-based), for messages."""
    options: dict[str, str] = field(default_factory=dict)
    """`KEY=VALUE` words after the language (`on-node=hv1`)."""

    @property
    def is_transcript(self) -> bool:
        """True if it shows commands with their output (`$ ` lines)."""
        return self.text.startswith("$ ")


def section(text: str, heading: str) -> str:
    """The text of the section under `heading` (a `## ` line), up to the next `## `."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[start:end])


def blocks(text: str, first_line: int = 1) -> list[Block]:
    """The fenced blocks of `text`, in order."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        options = dict(word.split("=", 1) for word in fence.group(2).split() if "=" in word)
        body = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(fence.group(1), body, first_line + i, options))
        i = end + 1
    return found


def transcript(text: str) -> list[tuple[str, str]]:
    """A transcript's (command, expected output) pairs."""
    pairs: list[tuple[str, list[str]]] = []
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command += "\n" + next(lines)
            pairs.append((command, []))
        else:
            assert pairs, f"output before any command: {line!r}"
            pairs[-1][1].append(line)
    return [(command, "".join(f"{out}\n" for out in output)) for command, output in pairs]


def _pattern(expected: str) -> re.Pattern[str]:
    parts = []
    for line in expected.splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        escaped = re.escape(UUID.sub("\0", line.rstrip()))
        escaped = escaped.replace("…", ".*?").replace("\0", UUID.pattern)
        parts.append(escaped + r"\n")
    return re.compile("".join(parts))


def matches(expected: str, actual: str) -> bool:
    """True if `actual` is what `expected` shows (see the module docstring)."""
    normal = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return _pattern(expected).fullmatch(normal) is not None


def node_prelude(run_dir: Path) -> str:
    """Bash functions that make a block's OVS commands talk to the node in `run_dir` (a
    sandbox node's: its database socket, its switch's control socket and bridges)."""
    db = shlex.quote(f"unix:{run_dir / 'conf.sock'}")
    ctl = shlex.quote(str(run_dir / "ovs-vswitchd.ctl"))
    return "\n".join([
        f"ovs-vsctl() {{ command ovs-vsctl --db={db} \"$@\"; }}",
        f"ovs-appctl() {{ command ovs-appctl -t {ctl} \"$@\"; }}",
        f"export OVS_RUNDIR={shlex.quote(str(run_dir))}",  # (ovs-ofctl's BRIDGE: br-int.mgmt)
    ]) + "\n"  # fmt: skip


# ---- the parts, on their own ---------------------------------------------------------------


def test_a_transcript_pairs_each_command_with_its_output() -> None:
    text = "$ loom show\ntenant red\n$ loom create port --parent db \\\n    name=p1\n$ true\n"
    assert transcript(text) == [
        ("loom show", "tenant red\n"), ("loom create port --parent db \\\n    name=p1", ""),
        ("true", ""),
    ]  # fmt: skip


def test_an_expected_output_leaves_open_only_what_it_says() -> None:
    expected = "tenant red\n    switch a (5f4cb578-593a-4326-ad5e-7a7b221b1a67) key …\n...\nend\n"
    actual = "tenant red\n    switch a (0bfa244b-5479-481e-b087-9fbe0642eb9b) key 12  \nx\ny\nend\n"
    assert matches(expected, actual)
    assert matches(expected, actual.replace("x\ny\n", ""))  # `...`: no line too
    assert not matches(expected, actual.replace("switch a", "switch b"))
    assert not matches(expected, actual + "more\n")
    assert not matches("generation 24\n", "generation 25\n")


def test_blocks_are_read_with_their_language_and_where_they_run() -> None:
    text = (
        "## Recipes\ntext\n```sh on-node=hv1\novs-vsctl show\n```\n\n"
        "```\n$ loom status\nok\n```\n## Next\n"
    )
    found = blocks(section(text, "## Recipes"))
    assert [(b.language, b.options, b.text, b.is_transcript) for b in found] == [
        ("sh", {"on-node": "hv1"}, "ovs-vsctl show\n", False),
        ("", {}, "$ loom status\nok\n", True),
    ]


# ---- against `loom up --demo` ----------------------------------------------------------------


@dataclass
class Tour:
    """A `loom up --demo` to run a guide against."""

    cwd: Path
    api_port: int
    manager_port: int
    output: str
    """What `loom up --demo` printed up to "Ctrl-C stops everything."."""
    extra: dict[str, OvsNode] = field(default_factory=dict)
    """Nodes a guide adds (`on-node=` a name the demo does not have), started empty."""

    def localize(self, text: str) -> str:
        """The guide's text with this deployment's ports."""
        text = text.replace("127.0.0.1:8080", f"127.0.0.1:{self.api_port}")
        return text.replace("127.0.0.1:6640", f"127.0.0.1:{self.manager_port}")

    def node_dir(self, name: str) -> Path:
        """The run directory of node `name`: the demo's, else one started here for the
        guide (a dummy-datapath node with nothing configured but its daemons)."""
        demo = self.cwd / "run" / "loom" / "demo" / "nodes" / name
        if demo.exists():
            return demo
        if name not in self.extra:
            node = OvsNode(self.cwd / "extra-nodes", name, 100 + len(self.extra))
            self.extra[name] = node  # (stopped by `_demo`, even if it fails to start)
            node.start()
        return self.extra[name].run_dir

    def bash(self, script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `script` in the tour's directory, stdout and stderr together."""
        return subprocess.run(["bash", "-c", script], cwd=self.cwd, text=True, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


@contextlib.contextmanager
def _demo(tmp: Path) -> Iterator[Tour]:
    cwd = tmp / "checkout"
    cwd.mkdir()
    (cwd / ".venv").symlink_to(VENV)
    api, manager = free_port(), free_port()
    args = ["--demo", "--api-port", str(api), "--manager-port", str(manager)]
    with loom_up(*args, cwd=cwd) as (proc, output):
        assert proc.poll() is None, output
        tour = Tour(cwd, api, manager, output)
        try:
            yield tour
        finally:
            for node in tour.extra.values():
                node.stop()


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tour]:
    """`loom up --demo`, as `make run` starts it, for every guide of this module."""
    with _demo(tmp_path_factory.mktemp("tour")) as running:
        yield running


def _differs(expected: str, actual: str) -> str:
    return "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                           "the guide", "the run", lineterm=""))  # fmt: skip


MARK = "\x1e loom-guide {} \x1e"
"""Printed between a transcript's commands (an ASCII record separator: never in output)."""


def _session(tour: Tour, prelude: str, commands: list[str]) -> list[tuple[int, str]]:
    """Run `commands` one after another in one shell (what one sets, the next sees, as in a
    terminal); each one's exit status and output."""
    script = [prelude]
    for i, command in enumerate(commands):
        if command == "make run":  # (this module's own `loom up --demo`)
            script.append(f"printf '{MARK.format(i)}\\n'")
            continue
        script.append(f"printf '{MARK.format(i)}\\n'\n{{ {command}\n}} 2>&1\n"
                      f"printf '{MARK.format('rc')}%d\\n' $?")  # fmt: skip
    done = tour.bash("\n".join(script))
    results = []
    for i, command in enumerate(commands):
        if command == "make run":
            results.append((0, tour.output))
            continue
        start = done.stdout.index(MARK.format(i) + "\n") + len(MARK.format(i)) + 1
        end = done.stdout.index(MARK.format("rc"), start)
        code = int(done.stdout[end + len(MARK.format("rc")) :].split("\n", 1)[0])
        results.append((code, done.stdout[start:end]))
    return results


def _run_block(tour: Tour, block: Block, where: str) -> None:
    """Run one block of a guide (see the module docstring); fail with what differs."""
    prelude = ""
    if "on-node" in block.options:
        prelude = node_prelude(tour.node_dir(block.options["on-node"]))
    text = tour.localize(block.text)
    if block.is_transcript:
        pairs = transcript(text)
        outputs = _session(tour, prelude, [command for command, _ in pairs])
        for (command, expected), (code, actual) in zip(pairs, outputs, strict=True):
            assert code == 0, f"{where}:{block.line}: $ {command}\nexit {code}\n{actual}"
            assert matches(expected, actual), (
                f"{where}:{block.line}: $ {command}\n{_differs(expected, actual)}"
            )
    elif block.language == "sh":
        done = tour.bash(prelude + "set -euo pipefail\n" + text)
        assert done.returncode == 0, f"{where}:{block.line}:\n{text}\n{done.stdout}"
    elif block.language == "python":
        done = subprocess.run([".venv/bin/python", "-c", text], cwd=tour.cwd, text=True,
                              capture_output=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, f"{where}:{block.line}:\n{text}\n{done.stderr}"


def _guide(path: Path, heading: str) -> list[Block]:
    text = path.read_text()
    body = section(text, heading)
    first = text[: text.index(body)].count("\n") + 1
    found = blocks(body, first)
    assert found, f"{path.name}: no blocks under {heading}"
    return found


@pytest.mark.ovs
@pytest.mark.zk
@pytest.mark.system
@pytest.mark.timeout(900)
def test_the_readme_tour_runs_as_written(tour: Tour) -> None:
    for block in _guide(README, "## A tour"):
        _run_block(tour, block, "README.md")


@pytest.mark.ovs
@pytest.mark.zk
@pytest.mark.system
@pytest.mark.timeout(900)
def test_the_operations_recipes_run_as_written(tour: Tour) -> None:
    for block in _guide(OPERATIONS, "## Recipes"):
        _run_block(tour, block, "docs/operations.md")
