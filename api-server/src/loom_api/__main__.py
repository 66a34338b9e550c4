"""The API server daemon: `python -m loom_api --db REMOTE --listen HOST:PORT --admin-token-file F`.

The admin token comes from exactly one of `--admin-token-file PATH`, the environment
(`LOOM_ADMIN_TOKEN`) or `--admin-token T` (kept for compatibility; `ps` shows it); tenant
tokens from `--tenant-tokens-file PATH` (`TENANT=TOKEN` lines) and/or `--tenant-token`.
`--max-body-bytes`, `--max-json-depth` and `--max-bulk-items` set the request limits,
`--max-connections`, `--max-connections-per-client`, `--idle-timeout` and
`--request-timeout` the connections' (`loom_api.limits`). The config DB's remote may be
`unix:`, `tcp:` or `ssl:` (with `--db-private-key`, `--db-certificate`, `--db-ca-cert`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from loom_api import create_app, limits, serving
from loom_api.auth import Tokens, TokenSourceError, admin_token, parse_tenant_tokens, tokens_of
from loom_api.store import Store
from loom_common import logs
from loom_common.ovsdb import add_tls_arguments, tls_from_arguments
from loom_schemas import CONFIG_SCHEMA, schema_path


def _tenant_token(text: str) -> tuple[str, str]:
    tenant, sep, token = text.partition("=")
    if not sep or not tenant or not token:
        raise argparse.ArgumentTypeError(f"expected TENANT=TOKEN, got {text!r}")
    return tenant, token


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="loom-api", description=__doc__)
    parser.add_argument("--db", required=True, help="config DB remote(s), e.g. tcp:127.0.0.1:6641")
    parser.add_argument("--listen", default="127.0.0.1:8080", help="HOST:PORT to serve on")
    admin = parser.add_mutually_exclusive_group()
    admin.add_argument(
        "--admin-token-file",
        type=Path,
        metavar="PATH",
        help="a file holding the operator's bearer token (or set LOOM_ADMIN_TOKEN)",
    )
    admin.add_argument(
        "--admin-token", help="the operator's bearer token (visible in ps: prefer the file)"
    )
    parser.add_argument(
        "--tenant-tokens-file",
        type=Path,
        metavar="PATH",
        help="a file of tenants' bearer tokens, one TENANT=TOKEN per line (# comments)",
    )
    parser.add_argument(
        "--tenant-token",
        action="append",
        default=[],
        type=_tenant_token,
        metavar="TENANT=TOKEN",
        help="a tenant's bearer token (repeatable; visible in ps: prefer the file)",
    )
    parser.add_argument("--threads", type=int, default=8, help="request threads")
    parser.add_argument(
        "--neutron-auth",
        choices=("token", "noauth"),
        default="token",
        help="Neutron API authentication: X-Auth-Token mapped to the tokens above (token), "
        "or every request acting as the admin, like Neutron's auth_strategy=noauth (noauth)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=_positive,
        default=limits.DEFAULT_MAX_BODY_BYTES,
        help="refuse (413) request bodies longer than this, before reading them "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--max-json-depth",
        type=_positive,
        default=limits.DEFAULT_MAX_JSON_DEPTH,
        help="refuse (400) bodies nesting arrays and objects deeper than this, at most "
        f"{limits.PARSER_MAX_DEPTH} (default: %(default)s)",
    )
    parser.add_argument(
        "--max-bulk-items",
        type=_positive,
        default=limits.DEFAULT_MAX_BULK_ITEMS,
        help="refuse (400) Neutron bulk creates of more objects than this (default: %(default)s)",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive,
        default=limits.DEFAULT_MAX_CONNECTIONS,
        help="open connections at most; past it the quietest one not in a request is closed, "
        "or (every one in a request) the new one is answered 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=_positive,
        default=limits.DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        help="open connections from one source address at most; past it that address's "
        "quietest one not in a request is closed, or the new one answered 429 "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=limits.DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="close a connection with no request and no traffic for this long "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--request-timeout",
        type=_seconds,
        default=limits.DEFAULT_REQUEST_TIMEOUT,
        metavar="SECONDS",
        help="answer 408 and close a connection whose request (headers and body) has not "
        "arrived this long after its first byte (default: %(default)s)",
    )
    add_tls_arguments(parser)
    logs.add_arguments(parser)
    args = parser.parse_args(argv)
    tls_from_arguments(parser, args, args.db)
    if args.max_json_depth > limits.PARSER_MAX_DEPTH:
        parser.error(f"--max-json-depth must be at most {limits.PARSER_MAX_DEPTH}")
    if args.max_connections_per_client > args.max_connections:
        parser.error("--max-connections-per-client must be at most --max-connections")
    args.connections = limits.ConnectionLimits(
        max_connections=args.max_connections,
        max_connections_per_client=args.max_connections_per_client,
        idle_timeout=args.idle_timeout,
        request_timeout=args.request_timeout,
    )
    try:
        args.tokens = _tokens(args)
    except (OSError, TokenSourceError) as exc:
        parser.error(str(exc))
    return args


def _tokens(args: argparse.Namespace) -> Tokens:
    """Return the tokens from the sources the command line and environment name.

    Raises:
        TokenSourceError: see `auth.admin_token`, `auth.tokens_of`.
        OSError: a token file cannot be read.
    """
    path: Path | None = args.admin_token_file
    token = admin_token(
        flag=args.admin_token,
        file_text=path.read_text() if path is not None else None,
        file_name=str(path),
        env=os.environ,
    )
    pairs = list(args.tenant_token)
    if args.tenant_tokens_file is not None:
        text = args.tenant_tokens_file.read_text()
        pairs += parse_tenant_tokens(text, str(args.tenant_tokens_file))
    return tokens_of(token, pairs)


def main(argv: list[str] | None = None) -> int:
    """Run the API server until SIGTERM or SIGINT."""
    args = parse_args(argv)
    logs.setup_from_arguments("api", args)
    host, _, port = args.listen.rpartition(":")
    config = {
        "LOOM_NEUTRON_AUTH": args.neutron_auth,
        limits.MAX_BODY_BYTES: args.max_body_bytes,
        limits.MAX_JSON_DEPTH: args.max_json_depth,
        limits.MAX_BULK_ITEMS: args.max_bulk_items,
        limits.MAX_WAITS: max(1, args.threads // 2),
    }
    try:
        serving.ensure_descriptors(args.connections)
    except ValueError as exc:
        logging.getLogger("loom_api").error("cannot serve: %s (--max-connections)", exc)
        return 2
    store = Store(args.db, str(schema_path(CONFIG_SCHEMA)))
    store.start()
    store.wait_connected(timeout=10.0)  # serve anyway: requests get 503 until it connects
    app = create_app(store, args.tokens, config)
    server = serving.create_server(
        app,
        host=host,
        port=int(port),
        threads=args.threads,
        max_body_bytes=args.max_body_bytes,
        connections=args.connections,
    )

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
