"""Unix stream sockets at paths of any length.

A `sockaddr_un` holds 108 bytes, and a state directory a few levels deep (an operator's,
or a test's under pytest-xdist's `popen-gwN/`) passes that: Python's `connect` and `bind`
refuse it with "AF_UNIX path too long" while ovsdb-server, which makes the same socket,
is fine. OVS names such a path by its directory's descriptor on Linux
(`/proc/self/fd/N/NAME`, as `lib/socket-util-unix.c` and python-ovs's `socket_util` do);
so does this module.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

SUN_PATH_MAX = 107
"""The longest path `sockaddr_un` holds (108 bytes with its terminating NUL)."""


@contextlib.contextmanager
def _short(path: str) -> Iterator[str]:
    """`path`, or a name of it short enough for `sockaddr_un` while the block runs."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield path
        return
    directory, name = os.path.split(path)
    fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def connect(path: str, timeout: float | None) -> socket.socket:
    """A stream socket connected to the unix socket at `path` (`timeout` set on it).

    Raises:
        OSError: nothing listens there (it is closed then).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        with _short(path) as name:
            sock.connect(name)
    except OSError:
        sock.close()
        raise
    return sock


def bind(sock: socket.socket, path: str) -> None:
    """Bind `sock` (AF_UNIX) to `path`."""
    with _short(path) as name:
        sock.bind(name)
