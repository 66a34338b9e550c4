"""Limits on what one request may make the API server do: body size, JSON nesting, bulk size;
and on the HTTP server's connections: how many, per client, and how long idle or arriving.

A request is refused before it costs much: a body longer than `max_body_bytes` is refused
(413) by waitress as soon as its `Content-Length` is known, or once a chunked body passes the
limit, and again by the app (Flask's `MAX_CONTENT_LENGTH`) under any other WSGI server; a
body nested deeper than `max_json_depth` is refused (400) after a parse that cannot recurse
without bound (orjson stops at 1024 levels by itself) and an iterative depth check, so no
later recursive code sees it; a Neutron bulk create of more than `max_bulk_items` objects is
refused (400) before anything is validated or written.

Why the defaults:

- `max_body_bytes` = 1 MiB. The largest legitimate bodies are Neutron bulk creates
  (`{"ports": [...]}`): a port with a name, a description, a fixed IP, a device id and
  owner, a host and a security group is about 400 bytes of JSON, so 1 MiB holds a bulk of
  about 2,600 such ports, well above `max_bulk_items`; the largest native body, a security
  profile, holds thousands of rules in 1 MiB. Waitress buffers up to this much per request
  before the app runs, so the limit also bounds the memory a client can make it hold per
  connection.
- `max_json_depth` = 32. The deepest legitimate body is 4 levels (`{"ports": [{"fixed_ips":
  [{...}]}]}`, a router's `external_gateway_info.external_fixed_ips`); 32 leaves room and
  keeps every recursive walk of a body far from Python's recursion limit.
- `max_bulk_items` = 500. One bulk create is one OVSDB transaction, validated and written
  under the store's lock; 500 such ports (200 KB) commit in seconds on a 2-core machine,
  which bounds how long one request holds up every other writer.
- `max_waits` = 4 (`python -m loom_api` makes it half its `--threads`). A write with
  `X-Loom-Wait-For-Realization` holds a request thread while it waits (up to 300 s), so
  without a bound a few clients asking to wait would take every thread and every other
  request would queue behind them. Past the bound a write is answered at once, as a wait of
  0 s would be (`X-Loom-Realized` says whether it is realized yet; the client asks
  `/realization` later), so waiting clients can hold at most that many threads.

The HTTP server's connections are held to `ConnectionLimits` (how: `loom_api.serving`).
Why the defaults:

- `max_connections` = 1000. A connection costs a file descriptor, a few small buffers and
  a place in every turn of the server's poll loop, not a thread (a connection's request
  waits for one of `--threads`), so the bound is on memory and descriptors; it is far above
  what the API's clients hold (a cloud manager's connection pools, the CLI, the web page),
  and the open-file limit is raised to fit it at start.
- `max_connections_per_client` = 100, by source address. A cloud manager's connection
  pools (10 per host per process in python-requests, times its workers) fit; one address
  alone cannot take the whole server. Past it, the client's own quietest connection is
  closed to make room, so only requests in progress count against it. Every local client
  (`loom up`'s CLI, demo and web page on 127.0.0.1) shares one address, and fits too.
- `idle_timeout` = 15 s with no request. Longer than the web page's 2 s poll and a CLI
  session's pauses, so keep-alive still saves reconnecting; short, so idle connections are
  reclaimed quickly (waitress's own is 120 s).
- `request_timeout` = 30 s from a request's first byte to its last: a whole request, a
  1 MiB body included, arrives in that time at about 35 KB/s, which any client on a
  datacenter network exceeds, while a client trickling a byte at a time cannot keep a
  connection open by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from loom_api import errors

#: App config keys (`create_app(config=...)`) of the limits.
MAX_BODY_BYTES = "LOOM_MAX_BODY_BYTES"
MAX_JSON_DEPTH = "LOOM_MAX_JSON_DEPTH"
MAX_BULK_ITEMS = "LOOM_MAX_BULK_ITEMS"
MAX_WAITS = "LOOM_MAX_WAITS"

DEFAULT_MAX_BODY_BYTES = 1 << 20
DEFAULT_MAX_JSON_DEPTH = 32
DEFAULT_MAX_BULK_ITEMS = 500
DEFAULT_MAX_WAITS = 4
DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 100
DEFAULT_IDLE_TIMEOUT = 15.0
DEFAULT_REQUEST_TIMEOUT = 30.0
#: The deepest nesting the parser itself accepts (orjson's fixed limit): a configured depth
#: may not exceed it.
PARSER_MAX_DEPTH = 1024


@dataclass(frozen=True)
class Limits:
    """The limits one request is held to (module docstring)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    max_bulk_items: int = DEFAULT_MAX_BULK_ITEMS
    max_waits: int = DEFAULT_MAX_WAITS

    def __post_init__(self) -> None:
        """Refuse limits that are out of range.

        Raises:
            ValueError: a limit below 1, or a depth above what the parser accepts.
        """
        for name in ("max_body_bytes", "max_json_depth", "max_bulk_items", "max_waits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.max_json_depth > PARSER_MAX_DEPTH:
            raise ValueError(f"max_json_depth must be at most {PARSER_MAX_DEPTH}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Limits:
        """Return the limits an app config sets (the defaults for keys it leaves out).

        Raises:
            ValueError: a limit out of range.
        """
        return cls(
            max_body_bytes=config.get(MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES),
            max_json_depth=config.get(MAX_JSON_DEPTH, DEFAULT_MAX_JSON_DEPTH),
            max_bulk_items=config.get(MAX_BULK_ITEMS, DEFAULT_MAX_BULK_ITEMS),
            max_waits=config.get(MAX_WAITS, DEFAULT_MAX_WAITS),
        )


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds on the HTTP server's connections (module docstring)."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def __post_init__(self) -> None:
        """Refuse bounds that are out of range.

        Raises:
            ValueError: a count below 1, a timeout not above 0, or a per-client limit above
                the total.
        """
        for name in ("max_connections", "max_connections_per_client"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("idle_timeout", "request_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.max_connections_per_client > self.max_connections:
            raise ValueError("max_connections_per_client must be at most max_connections")

    @property
    def sweep_interval(self) -> float:
        """How often the server looks for connections past a timeout: a few times per the
        shorter timeout, at most once a second (the poll loop wakes at least that often)."""
        return min(1.0, min(self.idle_timeout, self.request_timeout) / 4)


def parse_json(raw: bytes, max_depth: int) -> Any:
    """Parse a request body and check it: nesting depth, then no NUL in any string.

    Args:
        raw: the body (UTF-8 JSON).
        max_depth: the deepest nesting of arrays and objects allowed (a scalar is depth 0,
            `{"a": 1}` depth 1).

    Returns:
        The parsed body.

    Raises:
        errors.MalformedJson: not JSON (empty, invalid, not UTF-8, NaN or infinite numbers).
        errors.JsonTooDeep: nested deeper than `max_depth`.
        errors.ValidationFailed: a key or string holds NUL (OVSDB strings cannot), naming
            the field.
    """
    if not raw.strip():
        raise errors.MalformedJson(detail="the body is empty")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own 1024-level stop
            raise errors.JsonTooDeep(limit=max_depth) from None
        raise errors.MalformedJson(detail=str(exc)) from None
    check_tree(body, max_depth)
    return body


def check_tree(body: Any, max_depth: int) -> None:
    """Walk a parsed body without recursion: refuse deep nesting and NUL characters.

    Raises:
        errors.JsonTooDeep: an array or object more than `max_depth` levels down.
        errors.ValidationFailed: a key or string holding NUL, naming its field (dotted).
    """
    stack: list[tuple[Any, str, int]] = [(body, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise errors.ValidationFailed(
                    field=path or None, detail=f"{path or 'the body'}: strings cannot contain NUL"
                )
            continue
        if not isinstance(value, dict | list):
            continue
        if depth >= max_depth:
            raise errors.JsonTooDeep(limit=max_depth)
        if isinstance(value, dict):
            for key, item in value.items():
                if "\x00" in key:
                    raise errors.ValidationFailed(
                        field=path or None,
                        detail=f"{path or 'the body'}: strings cannot contain NUL",
                    )
                stack.append((item, f"{path}.{key}" if path else key, depth + 1))
        else:
            stack.extend(
                (item, f"{path}.{index}" if path else str(index), depth + 1)
                for index, item in enumerate(value)
            )
