"""What the physical controller's loop waits on: the nodes' sockets in `epoll` sets, the
databases' links, a wake-up pipe."""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from loom_common.ovsdb import readable
from loom_common.reconnect import Link
from loom_ovs.manager import NodeSession

if TYPE_CHECKING:
    from loom_physical.executor import NodeLink

POLL_MS = 1000
"""The longest wait between passes, in milliseconds."""
SWEEP_S = 1.0
"""Seconds between looks at every node's session for updates nobody said were there
(else a pass reads the nodes that are readable, were written to, or whose keep-alive
thread kept updates)."""
RECONNECT_S = 0.1
"""Seconds between tries to reach a switch that lost its table (its ovs-vswitchd is
restarting: a try is a connect to its socket, and its table goes in at the first that
succeeds)."""


class NodeSockets:
    """The nodes' sockets (OVSDB sessions, or OpenFlow channels) in one `epoll` set, kept
    as nodes come and go: a pass asks which are readable at the cost of those that are, not
    of every node (a `poll` of every socket is paid per node at every pass)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._fd_node: dict[int, str] = {}
        self._node_fd: dict[str, int] = {}

    def watch(self, node: str, fd: int) -> None:
        """`node`'s session is on `fd` now."""
        self.drop(node)
        try:
            self._epoll.register(fd, select.EPOLLIN)
        except FileExistsError:  # (a number reused while the kernel still holds the old)
            self._epoll.modify(fd, select.EPOLLIN)
        self._fd_node[fd], self._node_fd[node] = node, fd

    def drop(self, node: str) -> None:
        """`node` is gone (its socket may be closed already: the kernel dropped it then)."""
        fd = self._node_fd.pop(node, None)
        if fd is not None and self._fd_node.get(fd) == node:  # (not a number reused since)
            self._fd_node.pop(fd, None)
            with contextlib.suppress(OSError):
                self._epoll.unregister(fd)

    def watching(self, node: str) -> int | None:
        """The descriptor watched for `node` (None: none)."""
        return self._node_fd.get(node)

    def ready(self) -> set[str]:
        """The nodes whose socket is readable (or closed) now."""
        return {node for fd, _ in self._epoll.poll(0) if (node := self._fd_node.get(fd))}

    def fileno(self) -> int:
        """Readable when a node's socket is (for `readable` with the other descriptors)."""
        return self._epoll.fileno()

    def close(self) -> None:
        """Close the `epoll` set (not the sockets)."""
        self._epoll.close()


class Waits:
    """What the loop waits on between passes: a wake-up pipe (`wake`, from any thread), the
    databases' links, the nodes' OVSDB sessions and their kept OpenFlow channels. What a
    switch sends on an idle channel (its echo requests) is answered here, and waited on
    again: no pass for it unless the channel ended (its switch may have lost its table)."""

    def __init__(self) -> None:
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.node_fds = NodeSockets()
        self.channel_fds = NodeSockets()
        """The nodes' kept OpenFlow channels: one that is readable is read between pushes."""
        self.channels_ended: set[str] = set()
        """Nodes whose channel ended while the loop waited (`answer_channels`)."""
        self.to_read: set[str] | None = None
        """The nodes the next pass reads (None: every node): readable, or written to since
        they were read (a transaction's reply can bring their updates along)."""
        self._swept = 0.0
        """When every node's session was last looked at (one closed elsewhere is seen)."""

    def wake(self) -> None:
        """Make the wait return (any thread)."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"w")

    def read_later(self, nodes: Iterable[str]) -> None:
        """The next pass reads `nodes` (written to: a reply may bring their updates)."""
        if self.to_read is not None:
            self.to_read.update(nodes)

    def take_to_read(self) -> set[str] | None:
        """The nodes to read now (None: every node), once."""
        names, self.to_read = self.to_read, set()
        return names

    def node_gone(self, node: str) -> None:
        """Node `node` disconnected."""
        self.node_fds.drop(node)
        self.channel_fds.drop(node)
        if self.to_read is not None:
            self.to_read.discard(node)

    def watch_channel(self, node: str, link: NodeLink | None) -> None:
        """Watch node `node`'s channel as it is now (after a push: it may have connected
        again, or been closed)."""
        fd = link.switch.channel.fileno() if link is not None and link.switch else None
        if fd is None:
            self.channel_fds.drop(node)
        elif self.channel_fds.watching(node) != fd:
            self.channel_fds.watch(node, fd)

    def wait(self, links: Iterable[Link], nodes: Mapping[str, NodeLink],
             pending: Iterable[NodeSession], kept: set[NodeSession], *, hurry: bool,
             stopped: threading.Event) -> None:  # fmt: skip
        """Wait until a node, a database or `wake` has something, a link is due to
        reconnect, or `POLL_MS` passed (`RECONNECT_S` with `hurry`: a switch that lost its
        table is tried often); the nodes with something to read are noted."""
        only_channels = self._wait_for_input(links, nodes, pending, hurry)
        while not self.answer_channels(nodes) and only_channels and not stopped.is_set():
            only_channels = self._wait_for_input(links, nodes, pending, hurry)
        if self.to_read is not None:
            self.to_read |= self.node_fds.ready()
            while kept:  # (added to by keep-alive threads: popped one at a time)
                session = kept.pop()
                if session.system_id is not None:
                    self.to_read.add(session.system_id)

    def answer_channels(self, nodes: Mapping[str, NodeLink]) -> bool:
        """Read the channels that are readable (`Channel.check`); True if one ended (its
        node is looked at by the next pass)."""
        ended = False
        for node in self.channel_fds.ready():
            link = nodes.get(node)
            if link is None or link.switch is None or not link.switch.channel.check():
                self.channel_fds.drop(node)
                self.channels_ended.add(node)
                ended = True
        return ended

    def _wait_for_input(self, links: Iterable[Link], nodes: Mapping[str, NodeLink],
                        pending: Iterable[NodeSession], hurry: bool) -> bool:  # fmt: skip
        """Wait (see `wait`); True if what woke it was the channels alone."""
        channels = self.channel_fds.fileno()
        fds = [self._wake_r, channels]
        timeout = RECONNECT_S if hurry else POLL_MS / 1000
        for db in links:
            if db.has_pending():
                return False
            fd = db.fileno()
            if fd is not None:
                fds.append(fd)
            else:
                timeout = min(timeout, db.retry_in() or 0.0)
        to_read = self.to_read
        if to_read is None:
            return False  # (the first pass reads every node)
        if time.monotonic() - self._swept > SWEEP_S:  # a safety net, cheap per node
            self._swept = time.monotonic()
            for n, link in nodes.items():
                if not link.session.alive or link.session.replica.has_pending():
                    to_read.add(n)
        for node in to_read:  # written to: a reply may have brought more
            found = nodes.get(node)
            if found is not None and found.session.alive and found.session.replica.has_pending():
                return False
        fds.append(self.node_fds.fileno())
        fds += [s.fileno() for s in pending if s.alive]
        ready = readable(fds, timeout)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_r, 4096):
                    pass
        return set(ready) == {channels}

    def close(self) -> None:
        """Close the `epoll` sets and the pipe (not the nodes' sockets)."""
        self.node_fds.close()
        self.channel_fds.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
