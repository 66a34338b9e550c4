"""The OVSDB layer's errors."""

from __future__ import annotations

from loom_common.errors import LoomError


class OvsdbError(LoomError):
    """An ovsdb-tool or ovsdb-server step failed."""

    message = "%(detail)s"


class TransactError(OvsdbError):
    """An OVSDB transaction failed (an operation's error, or the connection's)."""


class ConnectionClosed(TransactError):
    """The server closed the connection (it stopped, or a RAFT member left its cluster)."""
