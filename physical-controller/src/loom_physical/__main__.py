"""`loom-physical-controller`: run one physical controller until SIGINT or SIGTERM.

    loom-physical-controller --universal-db unix:... --config-db unix:...
        [--listen ptcp:6640:127.0.0.1] [--name NAME] [--zookeeper HOSTS] [--pass-log FILE]
        [--listen pssl:6640:IP --private-key K --certificate C --ca-cert CA]
        [--db-private-key K --db-certificate C --db-ca-cert CA]

Transport nodes dial `--listen` (their Manager row); over `pssl:` each must present a
certificate signed by `--ca-cert` (OVS's switchca) that names its `system-id`, and the
controller presents `--certificate` (signed by the controllerca the nodes trust), on
their OVSDB connections and on OpenFlow connections to `ssl:` addresses. The databases'
remotes may be `unix:`, `tcp:` or `ssl:` (with the `--db-*` credentials). Without
`--zookeeper` it masters every node that connects; with it, it joins the physical
controllers' cluster there. `--pass-log` appends one JSON line per pass that computed or
pushed something (`loom_common.passlog`).
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
    parser = argparse.ArgumentParser(prog="loom-physical-controller", description=__doc__)
    parser.add_argument("--universal-db", required=True, help="Loom_Universal OVSDB remote")
    parser.add_argument("--config-db", required=True, help="Loom_Config OVSDB remote")
    parser.add_argument("--listen", default="ptcp:6640:127.0.0.1", help="manager address")
    parser.add_argument("--name", default=f"physical-{socket.gethostname()}")
    parser.add_argument("--zookeeper", help="ZooKeeper hosts (host:port,...) for a cluster")
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--pass-log", type=Path, help="append a JSON line per pass here")
    parser.add_argument("--private-key", type=Path, help="with pssl: this controller's key")
    parser.add_argument("--certificate", type=Path, help="with pssl: its certificate")
    parser.add_argument("--ca-cert", type=Path,
                        help="with pssl: the CA certificate nodes' are signed by")  # fmt: skip
    logs.add_arguments(parser)
    metrics.add_arguments(parser)
    add_tls_arguments(parser)
    args = parser.parse_args(argv)
    tls_from_arguments(parser, args, args.universal_db, args.config_db)
    tls_files = (args.private_key, args.certificate, args.ca_cert)
    if args.listen.startswith("pssl:") != all(tls_files) or any(tls_files) != all(tls_files):
        parser.error("--listen pssl: needs --private-key, --certificate and --ca-cert "
                     "(and they need pssl:)")  # fmt: skip
    logs.setup_from_arguments("physical", args)
    from loom_physical.controller import PhysicalController  # after logging is set up

    log = logging.getLogger("loom_physical")
    http_url = metrics.serve_from_arguments(parser, args, log)

    tls = None
    if args.listen.startswith("pssl:"):
        from loom_common.pki import Credentials

        tls = Credentials(args.private_key, args.certificate, args.ca_cert)

    def start() -> PhysicalController:
        controller = PhysicalController(
            args.universal_db,
            args.config_db,
            name=args.name,
            listen=args.listen,
            zookeeper=args.zookeeper,
            session_timeout=args.session_timeout,
            pass_log=args.pass_log,
            tls=tls,
            http_url=http_url,
        ).start()
        log.info("physical controller %s listening on %s", args.name, controller.target)
        return controller

    return run_until_stopped(start, log)


if __name__ == "__main__":
    raise SystemExit(main())
