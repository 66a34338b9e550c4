"""Whether a physical controller is still there, as the config DB's readers can tell.

A node's `Transport_Node.status` says `connected: true` and names its controller as long as
that controller last wrote it so; a controller that died (or hangs) writes nothing more, so
its nodes' rows would say "connected" for good. Each physical controller therefore beats:
every `HEARTBEAT_S` it increments its counter `heartbeat:<name>` in
`Loom_Global.external_ids` (`Heartbeat`, a thread with its own connection, as ZooKeeper's
session is kept by a thread of its own: a controller busy in a long pass still beats, a
stopped or dead process does not). A reader (the API server) notes when each counter last
changed by its own clock (`Liveness`), so no two hosts' clocks are compared; a controller
whose counter has not moved for `LEASE_S` is silent, and its nodes' status says so
(`node_view`). A controller that never beat (none yet seen since the reader started) is
given the benefit of the doubt until `LEASE_S` after the reader first looked.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from loom_common.ovsdb import OvsdbError, RawConnection, ops

log = logging.getLogger(__name__)

HEARTBEAT = "heartbeat:"
"""`Loom_Global.external_ids` key prefix: + a physical controller's name -> its counter."""
HEARTBEAT_S = 1.0
"""Seconds between a controller's beats."""
LEASE_S = 5.0
"""Seconds without a beat after which a controller is taken for gone."""


HTTP = "http:"
"""`Loom_Global.external_ids` key prefix: + a physical controller's name -> the URL of its
HTTP endpoint (`loom_common.httpd`), where the API server asks it for a node's flows."""


def heartbeat_op(uuid: str, controller: str, beat: int, url: str | None = None) -> dict[str, Any]:
    """The `Loom_Global` mutation that sets `controller`'s counter to `beat` (and its
    endpoint's `url`)."""
    entries = {HEARTBEAT + controller: str(beat)}
    if url is not None:
        entries[HTTP + controller] = url
    return ops.mutate("Loom_Global", ops.where_uuid(uuid), ops.set_keys("external_ids", entries))


class Liveness:
    """The controllers' beats as one reader saw them (pure: time is a parameter)."""

    def __init__(self, now: float) -> None:
        self._since = now
        self._beats: dict[str, tuple[str, float]] = {}
        """Controller -> (its last counter seen, when it was first seen with it)."""

    def observe(self, external_ids: Mapping[str, str], now: float) -> None:
        """Look at `Loom_Global.external_ids` as it is at `now`."""
        for key, value in external_ids.items():
            if key.startswith(HEARTBEAT):
                name = key[len(HEARTBEAT) :]
                last = self._beats.get(name)
                if last is None or last[0] != value:
                    self._beats[name] = (value, now)

    def silent_for(self, controller: str, now: float) -> float:
        """Seconds since `controller`'s counter last moved (or since this reader began
        looking, if it has seen no beat of it)."""
        last = self._beats.get(controller)
        return now - (last[1] if last is not None else self._since)

    def gone(self, controller: str, now: float) -> bool:
        """`controller` has not beaten for `LEASE_S`."""
        return self.silent_for(controller, now) > LEASE_S


def node_view(status: Mapping[str, str], liveness: Liveness, now: float) -> dict[str, str]:
    """A node's `Transport_Node.status` as a reader should show it: as written, unless it
    says connected to a controller that is gone, then not connected, and why."""
    controller = status.get("controller")
    if status.get("connected") != "true" or not controller or not liveness.gone(controller, now):
        return dict(status)
    silent = liveness.silent_for(controller, now)
    return {**status, "connected": "false",
            "message": f"its physical controller {controller} has not been heard from "
                       f"for {silent:.0f} s"}  # fmt: skip


class Heartbeat:
    """A physical controller's beat: a thread that increments `heartbeat:<name>` every
    `interval` seconds on a connection of its own to the config DB (reconnecting when it is
    lost, quietly after the first failure)."""

    def __init__(
        self,
        remote: str,
        controller: str,
        *,
        interval: float = HEARTBEAT_S,
        connect: Callable[[str], RawConnection] = RawConnection,
        url: str | None = None,
    ) -> None:
        self.url = url
        """The controller's HTTP endpoint, published with each beat (None: none)."""
        self._remote = remote
        self._controller = controller
        self._interval = interval
        self._connect = connect
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loom-heartbeat", daemon=True)
        self.beats = 0
        """Beats written (tests wait on it)."""

    def start(self) -> Heartbeat:
        """Start beating."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating (the counter stays where it is: readers see it go silent)."""
        self._stop.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        conn: RawConnection | None = None
        failing = False
        while not self._stop.is_set():
            try:
                conn = conn or self._connect(self._remote)
                self._beat(conn)
                if failing:
                    log.info("heartbeat: written again to %s", self._remote)
                failing = False
            except (OSError, OvsdbError) as exc:
                if not failing:
                    log.warning("heartbeat: cannot write to %s: %s", self._remote, exc)
                failing = True
                if conn is not None:
                    conn.close()
                conn = None
            self._stop.wait(self._interval)
        if conn is not None:
            conn.close()

    def _beat(self, conn: RawConnection) -> None:
        (result,) = conn.transact("Loom_Config", [ops.select("Loom_Global", [], ["_uuid"])])
        rows = result.get("rows", [])
        if not rows:
            return  # no configuration yet: nothing to say the nodes are connected to
        self.beats += 1
        conn.transact("Loom_Config", [heartbeat_op(rows[0]["_uuid"][1], self._controller,
                                                    self.beats, self.url)])  # fmt: skip
