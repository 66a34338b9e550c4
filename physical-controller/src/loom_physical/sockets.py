"""The nodes' sockets in one `epoll` set (the physical controller's loop waits on it)."""

from __future__ import annotations

import contextlib
import select


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
