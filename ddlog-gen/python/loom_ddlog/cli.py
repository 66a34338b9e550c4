"""`loom-ddlog`: run rule programs against `.dat` command scripts, check them, benchmark."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from loom_ddlog import _native
from loom_ddlog._native import CompileError

USAGE = """\
loom-ddlog run PROGRAM.dl [MORE.dl ...] [--record FILE] [--workers N] < SCRIPT.dat
loom-ddlog check PROGRAM.dl [MORE.dl ...]
loom-ddlog bench [--scale S] [--txns N] [--churn N] [--seed N] [--workers N]"""


def _compile(paths: Sequence[str]) -> _native.CompiledProgram | None:
    try:
        return _native.compile_files(list(paths))
    except CompileError as e:
        print(e, file=sys.stderr)
        return None


def run(argv: Sequence[str]) -> int:
    """Compile the programs, run the script from stdin, print the engine's output.

    Returns:
        0, or 1 on a compile or script-parse error (on stderr, as
        ``file:line:col: error: message``) or if any command failed at run time.
    """
    ap = argparse.ArgumentParser(prog="loom-ddlog run", description=run.__doc__)
    ap.add_argument("programs", nargs="+", metavar="PROGRAM.dl")
    ap.add_argument("--record", metavar="FILE", help="also record the transactions to FILE")
    ap.add_argument("--workers", type=int, default=1, help="engine worker threads (1)")
    args = ap.parse_args(argv)
    compiled = _compile(args.programs)
    if compiled is None:
        return 1
    engine = _native.Engine(compiled, args.workers)
    if args.record:
        engine.record(args.record)
    try:
        output, errors = engine.run_script(sys.stdin.read(), "<stdin>")
    except CompileError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        if args.record:
            engine.record(None)
    sys.stdout.write(output)
    return 1 if errors else 0


def check(argv: Sequence[str]) -> int:
    """Compile the programs; print a one-line summary, or the first error and return 1."""
    ap = argparse.ArgumentParser(prog="loom-ddlog check", description=check.__doc__)
    ap.add_argument("programs", nargs="+", metavar="PROGRAM.dl")
    args = ap.parse_args(argv)
    compiled = _compile(args.programs)
    if compiled is None:
        return 1
    roles = [role for _, role, _, _ in compiled.relations()]
    print(
        f"ok: {len(roles)} relations ({roles.count('input')} input, "
        f"{roles.count('output')} output, {roles.count('internal')} internal)"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `loom-ddlog` command."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "run":
        return run(rest)
    if command == "check":
        return check(rest)
    if command == "bench":
        from loom_ddlog import bench  # imported here: heavy, and only for this command

        return bench.main(rest)
    print(f"loom-ddlog: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
