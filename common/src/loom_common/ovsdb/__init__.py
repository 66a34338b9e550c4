"""Loom's one OVSDB layer: deploying ovsdb-server, speaking to it, and what is said.

- `server`: deployment — `OvsdbServer` (one ovsdb-server on one database file, created
  and converted from the schema), `OvsdbCluster` (a 3-member RAFT cluster), their health
  checks, free ports, the OVS tools.
- `client`: the JSON-RPC client — `RawConnection` (RFC 7047 with `orjson`; measured faster
  than python-ovs's IDL for the controllers' 10^4..10^6 rows), TLS for `ssl:` remotes,
  `readable`.
- `replica`: `Replica`, tables kept by a `monitor` (or `monitor_cond`, for tables
  followed only where a condition holds) on a `RawConnection`.
- `codec` (pure): OVSDB JSON values to Python and back, and a column's type.
- `ops` (pure): the transaction operations (`insert`, `update`, `mutate`, `delete`,
  `select`, `wait`, `comment`) and their conditions and mutations.
- `errors`: `OvsdbError` and the transaction's errors.

The API server's store keeps python-ovs's IDL (`loom_api.store` says why).

`from loom_common.ovsdb import X` imports `X` from its module when first asked for: the pure
modules (`from loom_common.ovsdb.codec import omap`) are importable without the client's
sockets and threads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loom_common.ovsdb.client import (
        KEEPALIVE_IDLE as KEEPALIVE_IDLE,
    )
    from loom_common.ovsdb.client import (
        QUIET as QUIET,
    )
    from loom_common.ovsdb.client import (
        RECV_SIZE as RECV_SIZE,
    )
    from loom_common.ovsdb.client import (
        RawConnection as RawConnection,
    )
    from loom_common.ovsdb.client import (
        add_tls_arguments as add_tls_arguments,
    )
    from loom_common.ovsdb.client import (
        readable as readable,
    )
    from loom_common.ovsdb.client import (
        tls_from_arguments as tls_from_arguments,
    )
    from loom_common.ovsdb.client import (
        use_tls as use_tls,
    )
    from loom_common.ovsdb.codec import (
        pack_uuid as pack_uuid,
    )
    from loom_common.ovsdb.codec import (
        unpack_uuid as unpack_uuid,
    )
    from loom_common.ovsdb.errors import (
        ConnectionClosed as ConnectionClosed,
    )
    from loom_common.ovsdb.errors import (
        OvsdbError as OvsdbError,
    )
    from loom_common.ovsdb.errors import (
        TransactError as TransactError,
    )
    from loom_common.ovsdb.replica import (
        SHORT as SHORT,
    )
    from loom_common.ovsdb.replica import (
        Change as Change,
    )
    from loom_common.ovsdb.replica import (
        Replica as Replica,
    )
    from loom_common.ovsdb.replica import (
        compact as compact,
    )
    from loom_common.ovsdb.server import (
        EPHEMERAL_RANGE as EPHEMERAL_RANGE,
    )
    from loom_common.ovsdb.server import (
        JEMALLOC as JEMALLOC,
    )
    from loom_common.ovsdb.server import (
        MIN_FREE_BYTES as MIN_FREE_BYTES,
    )
    from loom_common.ovsdb.server import (
        TORN_LOG as TORN_LOG,
    )
    from loom_common.ovsdb.server import (
        ClusterRole as ClusterRole,
    )
    from loom_common.ovsdb.server import (
        OvsdbCluster as OvsdbCluster,
    )
    from loom_common.ovsdb.server import (
        OvsdbServer as OvsdbServer,
    )
    from loom_common.ovsdb.server import (
        check_server as check_server,
    )
    from loom_common.ovsdb.server import (
        free_port as free_port,
    )
    from loom_common.ovsdb.server import (
        free_ports as free_ports,
    )
    from loom_common.ovsdb.server import (
        health_verdict as health_verdict,
    )
    from loom_common.ovsdb.server import (
        reachable as reachable,
    )
    from loom_common.ovsdb.server import (
        schema_name as schema_name,
    )
    from loom_common.ovsdb.server import (
        tool as tool,
    )

_HOMES: dict[str, str] = {
    "ConnectionClosed": "errors",
    "OvsdbError": "errors",
    "TransactError": "errors",
    "EPHEMERAL_RANGE": "server",
    "JEMALLOC": "server",
    "MIN_FREE_BYTES": "server",
    "TORN_LOG": "server",
    "ClusterRole": "server",
    "OvsdbCluster": "server",
    "OvsdbServer": "server",
    "check_server": "server",
    "free_port": "server",
    "free_ports": "server",
    "health_verdict": "server",
    "reachable": "server",
    "schema_name": "server",
    "tool": "server",
    "KEEPALIVE_IDLE": "client",
    "QUIET": "client",
    "RECV_SIZE": "client",
    "RawConnection": "client",
    "add_tls_arguments": "client",
    "readable": "client",
    "tls_from_arguments": "client",
    "use_tls": "client",
    "SHORT": "replica",
    "Change": "replica",
    "Replica": "replica",
    "compact": "replica",
    "pack_uuid": "codec",
    "unpack_uuid": "codec",
}
"""Each name this package exports -> the module that defines it."""

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """`name` from its module (imported then: see the docstring)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
