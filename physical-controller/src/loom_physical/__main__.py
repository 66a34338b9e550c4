"""`loom-physical-controller`: run one physical controller until SIGINT or SIGTERM.

    loom-physical-controller --universal-db unix:... --config-db unix:...
        [--listen ptcp:6640:127.0.0.1] [--name NAME] [--zookeeper HOSTS] [--pass-log FILE]

Transport nodes dial `--listen` (their Manager row). Without `--zookeeper` it masters every
node that connects; with it, it joins the physical controllers' cluster there. `--pass-log`
appends one JSON line per pass that computed or pushed something (`PassLog`).
"""

from __future__ import annotations

import argparse
import logging
import socket
from pathlib import Path

from loom_common.runner import run_until_stopped


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the controller until a signal (exit 0) or until it gives
    up (exit 1)."""
    parser = argparse.ArgumentParser(prog="loom-physical-controller", description=__doc__)
    parser.add_argument("--universal-db", required=True, help="Loom_Universal OVSDB remote")
    parser.add_argument("--config-db", required=True, help="Loom_Config OVSDB remote")
    parser.add_argument("--listen", default="ptcp:6640:127.0.0.1", help="manager address")
    parser.add_argument("--name", default=f"physical-{socket.gethostname()}")
    parser.add_argument("--zookeeper", help="ZooKeeper hosts (host:port,...) for a cluster")
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--pass-log", type=Path, help="append a JSON line per pass here")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from loom_physical.controller import PhysicalController  # after logging is set up

    log = logging.getLogger("loom_physical")

    def start() -> PhysicalController:
        controller = PhysicalController(
            args.universal_db,
            args.config_db,
            name=args.name,
            listen=args.listen,
            zookeeper=args.zookeeper,
            session_timeout=args.session_timeout,
            pass_log=args.pass_log,
        ).start()
        log.info("physical controller %s listening on %s", args.name, controller.target)
        return controller

    return run_until_stopped(start, log)


if __name__ == "__main__":
    raise SystemExit(main())
