"""`loom-logical-controller`: run one logical controller until SIGINT or SIGTERM.

    loom-logical-controller --config-db tcp:127.0.0.1:6641 --universal-db tcp:127.0.0.1:6642
        [--name NAME] [--zookeeper HOSTS [--session-timeout SECONDS]]

Without `--zookeeper` it is the only logical controller and writes every shard; with it,
it joins the cluster of logical controllers there (see `loom_logical.controller`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
from types import FrameType


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the controller, stop it on a signal."""
    parser = argparse.ArgumentParser(prog="loom-logical-controller", description=__doc__)
    parser.add_argument("--config-db", required=True, help="Loom_Config OVSDB remote")
    parser.add_argument("--universal-db", required=True, help="Loom_Universal OVSDB remote")
    parser.add_argument("--name", default=f"logical-{socket.gethostname()}")
    parser.add_argument("--zookeeper", help="ZooKeeper hosts (host:port,...) for a cluster")
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2, help="engine worker threads")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from loom_logical.controller import LogicalController  # after logging is set up

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    controller = LogicalController(
        args.config_db,
        args.universal_db,
        name=args.name,
        zookeeper=args.zookeeper,
        session_timeout=args.session_timeout,
        workers=args.workers,
    ).start()
    logging.getLogger("loom_logical").info("logical controller %s running", args.name)
    try:
        stop.wait()
    finally:
        controller.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
