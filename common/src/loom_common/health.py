"""`python -m loom_common.health`: the databases' health check for a host without `loom up`.

systemd restarts a daemon that exits, not one that runs and serves nothing (a RAFT member in
failure mode after its disk filled: `loom_common.ovsdb`). This command asks one ovsdb-server
`--checks` times, `--interval` seconds apart, what `loom up`'s supervisor asks every second
(`loom_common.ovsdb.check_server`), judges the answers as it does (`loom_common.supervise`:
faults in a row), prints one line and exits:

- 0: healthy (or not unhealthy long enough to act on);
- 1: unhealthy, every check a fault or unanswered (a run is short, so here silence counts
  as soon as a fault does): restart it (`docs/systemd/loom-config-db-health.service` does, after
  which the database unit's own `StartLimitBurst` bounds the restarts as it bounds crashes);
- 75 (`EX_TEMPFAIL`): unhealthy, but a restart would fail again (its filesystem is still
  full): do nothing until space returns.

`docs/systemd/loom-config-db-health.timer` runs it every few seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from loom_common.ovsdb import check_server
from loom_common.supervise import HealthPolicy, Streak, Verdict, judge, unhealthy

EXIT_UNHEALTHY = 1
EXIT_HOLD = 75


def verdict_of(
    ask: Callable[[], Verdict],
    policy: HealthPolicy,
    checks: int,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, str]:
    """Ask `checks` times, `policy.interval` apart (stopping early once unhealthy); return
    the exit status and the line to print."""
    streak = Streak()
    for i in range(checks):
        if i:
            sleep(policy.interval)
        streak = judge(streak, ask())
        if unhealthy(policy, streak):
            return EXIT_UNHEALTHY, f"unhealthy: {streak.last.reason} ({streak.count} in a row)"
    if streak.last.state == "hold":
        return EXIT_HOLD, f"unhealthy, not to be restarted yet: {streak.last.reason}"
    if streak.count:
        return 0, f"not unhealthy yet: {streak.last.reason} ({streak.count} of {checks})"
    return 0, "healthy"


def main(argv: list[str] | None = None) -> int:
    """Run the check (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m loom_common.health",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--ctl", type=Path, required=True, help="its --unixctl socket")
    parser.add_argument("--db", required=True, help="the database it serves (Loom_Config)")
    parser.add_argument("--file", type=Path, required=True, help="its database file")
    parser.add_argument("--clustered", action="store_true", help="it is a RAFT member")
    parser.add_argument("--checks", type=int, default=3, help="how many times to ask")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between checks")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds one check may take")
    args = parser.parse_args(argv)
    if args.checks < 1:
        parser.error("--checks must be at least 1")
    policy = HealthPolicy(interval=args.interval, timeout=args.timeout, failures=args.checks,
                          unanswered=args.checks)  # fmt: skip
    status, line = verdict_of(
        lambda: check_server(args.ctl, args.db, clustered=args.clustered, db_path=args.file,
                             timeout=args.timeout),
        policy, args.checks,
    )  # fmt: skip
    print(f"{args.db} ({args.ctl}): {line}", file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())
