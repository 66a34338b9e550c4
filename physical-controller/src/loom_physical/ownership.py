"""Which connected nodes a physical controller computes and which it masters.

Alone, a controller masters every node that connects. With ZooKeeper it is a
`loom_common.cluster.membership.Member` of the physical cluster: the shards are the
configured and connected transport nodes' system-ids, the leader assigns each a master and
a hot standby; a controller computes the nodes it masters or stands by for and writes only
those it masters, its writes fenced by the assignment's zxid (`token`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from loom_common.cluster import membership


class Ownership:
    """The cluster's view of this controller's nodes, asked once per change of the view or
    of the nodes connected (each answer is a look at every node)."""

    def __init__(self, name: str, zookeeper: str | None, session_timeout: float, root: str,
                 wake: Callable[[], None]) -> None:  # fmt: skip
        self._name, self._hosts, self._timeout, self._root = name, zookeeper, session_timeout, root
        self._wake = wake
        self._zk: Any = None
        self.member: membership.Member | None = None
        """Its membership of the physical cluster (None: alone, it masters every node)."""
        self._version = 0
        """Counts the nodes connecting and going."""
        self._owned: tuple[Any, tuple[set[str], frozenset[str]]] = (None, (set(), frozenset()))
        self._shards: set[str] | None = None
        self.shards_due = True
        """Nodes were configured, removed, connected or gone since the shards were set."""

    def start(self) -> None:
        """Join the cluster (with ZooKeeper hosts)."""
        if self._hosts:
            self._zk = membership.connect(self._hosts, session_timeout=self._timeout)
            self.member = membership.Member(self._zk, self._name, None, root=self._root,
                                            on_change=lambda _: self._wake()).start()  # fmt: skip

    def stop(self, timeout: float) -> None:
        """Leave the cluster."""
        if self.member is not None:
            self.member.stop(timeout)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    @property
    def zk_connected(self) -> bool:
        """Its ZooKeeper session is connected (False alone)."""
        return bool(self._zk is not None and self._zk.connected)

    def nodes_changed(self) -> None:
        """A node connected or went."""
        self._version += 1
        self.shards_due = True

    def of(self, nodes: Collection[str]) -> tuple[set[str], frozenset[str]]:
        """(masters, computed) of the connected `nodes`."""
        view = self.member.view if self.member is not None else None
        key = (view, self._version)
        if self._owned[0] != key:
            if view is None:
                owned = (set(nodes), frozenset(nodes))
            else:
                ours = view.masters | view.standbys
                owned = ({n for n in nodes if view.may_write(n)},
                         frozenset(n for n in nodes if n in ours))  # fmt: skip
            self._owned = (key, owned)
        return self._owned[1]

    def may_write(self, node: str) -> bool:
        """This controller masters `node` now (the view changes on ZooKeeper's thread)."""
        return self.member is None or self.member.view.may_write(node)

    def token(self) -> int | None:
        """The fencing token of writes now: the assignment's zxid (None: alone)."""
        if self.member is None or self.member.view.zxid < 0:
            return None
        return int(self.member.view.zxid)

    def set_shards(self, shards: set[str]) -> None:
        """The nodes to assign (when this member leads) are `shards`."""
        self.shards_due = False
        if self.member is not None and shards != self._shards:
            self._shards = shards
            self.member.set_shards(shards)
