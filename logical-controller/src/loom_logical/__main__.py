"""`loom-logical-controller`: run one logical controller until SIGINT or SIGTERM.

    loom-logical-controller --config-db tcp:127.0.0.1:6641 --universal-db tcp:127.0.0.1:6642
        [--name NAME] [--zookeeper HOSTS [--session-timeout SECONDS]] [--pass-log FILE]
        [--db-private-key FILE --db-certificate FILE --db-ca-cert FILE]

The databases' remotes may be `unix:`, `tcp:` or `ssl:` (with the `--db-*` credentials).

Without `--zookeeper` it is the only logical controller and writes every shard; with it,
it joins the cluster of logical controllers there (see `loom_logical.controller`).
`--pass-log` appends one JSON line per pass that wrote (`loom_common.passlog`).
"""

from __future__ import annotations

import argparse
import logging
import socket
from pathlib import Path

from loom_common import logs, metrics
from loom_common.ovsdb import add_tls_arguments, tls_from_arguments
from loom_common.runner import run_until_stopped


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the controller until a signal (exit 0) or until it gives
    up (exit 1)."""
    parser = argparse.ArgumentParser(prog="loom-logical-controller", description=__doc__)
    parser.add_argument("--config-db", required=True, help="Loom_Config OVSDB remote")
    parser.add_argument("--universal-db", required=True, help="Loom_Universal OVSDB remote")
    parser.add_argument("--name", default=f"logical-{socket.gethostname()}")
    parser.add_argument("--zookeeper", help="ZooKeeper hosts (host:port,...) for a cluster")
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2, help="engine worker threads")
    parser.add_argument("--pass-log", type=Path, help="append a JSON line per pass here")
    logs.add_arguments(parser)
    metrics.add_arguments(parser)
    add_tls_arguments(parser)
    args = parser.parse_args(argv)
    tls_from_arguments(parser, args, args.config_db, args.universal_db)
    logs.setup_from_arguments("logical", args)
    from loom_logical.controller import LogicalController  # after logging is set up

    log = logging.getLogger("loom_logical")
    metrics.serve_from_arguments(parser, args, log)

    def start() -> LogicalController:
        controller = LogicalController(
            args.config_db,
            args.universal_db,
            name=args.name,
            zookeeper=args.zookeeper,
            session_timeout=args.session_timeout,
            workers=args.workers,
            pass_log=args.pass_log,
        ).start()
        log.info("logical controller %s running", args.name)
        return controller

    return run_until_stopped(start, log)


if __name__ == "__main__":
    raise SystemExit(main())
