"""The API server daemon: `python -m loom_api --db REMOTE --listen HOST:PORT --admin-token T`."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType

from waitress.server import create_server

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.store import Store
from loom_schemas import CONFIG_SCHEMA, schema_path


def _tenant_token(text: str) -> tuple[str, str]:
    tenant, sep, token = text.partition("=")
    if not sep or not tenant or not token:
        raise argparse.ArgumentTypeError(f"expected TENANT=TOKEN, got {text!r}")
    return tenant, token


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="loom-api", description=__doc__)
    parser.add_argument("--db", required=True, help="config DB remote(s), e.g. tcp:127.0.0.1:6641")
    parser.add_argument("--listen", default="127.0.0.1:8080", help="HOST:PORT to serve on")
    parser.add_argument("--admin-token", required=True, help="the operator's bearer token")
    parser.add_argument(
        "--tenant-token",
        action="append",
        default=[],
        type=_tenant_token,
        metavar="TENANT=TOKEN",
        help="a tenant's bearer token (repeatable)",
    )
    parser.add_argument("--threads", type=int, default=8, help="request threads")
    parser.add_argument(
        "--neutron-auth",
        choices=("token", "noauth"),
        default="token",
        help="Neutron API authentication: X-Auth-Token mapped to the tokens above (token), "
        "or every request acting as the admin, like Neutron's auth_strategy=noauth (noauth)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the API server until SIGTERM or SIGINT."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for duplicate in ("file", "syslog"):  # python-ovs vlog mirrors each line to these three
        logging.getLogger(duplicate).disabled = True
    host, _, port = args.listen.rpartition(":")
    store = Store(args.db, str(schema_path(CONFIG_SCHEMA)))
    store.start()
    store.wait_connected(timeout=10.0)  # serve anyway: requests get 503 until it connects
    tokens = Tokens(admin=args.admin_token, tenants={tok: ten for ten, tok in args.tenant_token})
    app = create_app(store, tokens, {"LOOM_NEUTRON_AUTH": args.neutron_auth})
    server = create_server(app, host=host, port=int(port), threads=args.threads)

    def stop(signum: int, frame: FrameType | None) -> None:
        server.close()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    logging.getLogger("loom_api").info("serving on http://%s:%s", host, port)
    try:
        server.run()
    except OSError:  # the listening socket closed by stop()
        pass
    finally:
        store.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
