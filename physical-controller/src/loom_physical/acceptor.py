"""The nodes that dial the physical controller, until each says who it is.

`Acceptor` runs the OVSDB manager's listener (`loom_ovs.manager.Manager`) on a thread of
its own: it takes every node that dials in at once and reads its database
(`NodeSession.start`). Done in the loop, a node waited for the pass under way: at a cold
start with thousands of nodes, passes of many seconds, and the nodes gave up on
connections that their inactivity probe found silent (and dialled again: churn). The loop
takes the sessions whose node said its system-id (`identified`), and with TLS only those
whose certificate names that node.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

from loom_common.ovsdb import OvsdbError, readable
from loom_common.pki import names_node
from loom_ovs.manager import Manager, NodeSession

log = logging.getLogger(__name__)


class Acceptor:
    """Sessions accepted and started on a thread, handed to the loop once identified."""

    def __init__(self, manager: Manager, wake: Callable[[], None], name: str) -> None:
        self.manager = manager
        self._wake = wake
        self._name = name
        self.refused: dict[str, str] = {}
        """Node -> why its connection was refused (its certificate names another node)."""
        self.pending: list[NodeSession] = []
        """Sessions whose node has not said its system-id yet (the loop's)."""
        self._accepted: collections.deque[NodeSession] = collections.deque()
        """Sessions the thread started, for the loop to take."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen, and accept on a thread."""
        self.manager.start()
        self._thread = threading.Thread(target=self._accepting, name=f"accept-{self._name}",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _accepting(self) -> None:
        waits = self.manager.fds()
        while not self._stop.is_set():
            if not readable(waits, 0.5):
                continue
            for session in self.manager.accept():
                try:
                    session.start()
                except (OSError, OvsdbError) as exc:
                    log.warning("node from %s: could not read its database: %s", session.peer,
                                exc)  # fmt: skip
                    session.close()
                    continue
                self._accepted.append(session)
                self._wake()

    def identified(self) -> list[tuple[str, NodeSession]]:
        """The sessions whose node said its system-id since the last call (on the loop's
        thread), refusing those whose certificate names another node."""
        while self._accepted:
            self.pending.append(self._accepted.popleft())
        still, found = [], []
        for session in self.pending:
            session.poll()
            system_id = session.system_id
            if not session.alive:
                continue
            if system_id is None:
                still.append(session)
            elif self.manager.tls is not None and not names_node(session.certified, system_id):
                why = f"its certificate names {session.certified!r}, not {system_id!r}"
                log.warning("node %s at %s refused: %s", system_id, session.peer, why,
                            extra={"node": system_id, "peer": session.peer})  # fmt: skip
                self.refused[system_id] = why
                session.close()
            else:
                found.append((system_id, session))
        self.pending = still
        return found

    def stop(self, timeout: float) -> None:
        """Stop accepting; close the sessions not handed over and the listener."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for session in [*self.pending, *self._accepted]:
            session.close()
        self.manager.close()
