"""The fault matrix's row of a node's ovs-vswitchd restarted, and what it cost.

kill -9 of a hypervisor's ovs-vswitchd, started again at once on the same database, as its
init system restarts it (an OVS upgrade stops and starts it the same way): the switch comes
back with empty OpenFlow tables while its ovsdb-server, which kept running, stayed
connected to the physical controllers. With a write load through the API and a VM on
that node pinging a VM on another, `restarted` returns the row (`loom_nvp.faults`' fields,
and):

- `restarted_by`: the node's init (here: the harness, at once);
- `restarted_s`: from the kill until ovs-vswitchd answered again (with its underlay's
  address, route and neighbours, which the host's network configuration gives it);
- `forwarding_back_s`: from then until the first echo answered again;
- `status_down_after_s`: from the kill until the node's status (the API's
  `/transport-nodes`) no longer said it realizes the generation it had (None: never seen
  so by a look every 20 ms), and `status_back_s`: from the switch up until it said so again;
- `pings` and `pings_lost`: as `faults`' (lost: the echoes of the time the switch forwarded
  nothing).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from loom_nvp.faults import WAIT, tally
from loom_nvp.load import Writer
from loom_nvp.ping import Pinger
from loom_nvp.site import Site


class _StatusWatch:
    """Looks at a node's realized generation every 20 ms, on a thread: when it was first
    seen below `generation`, and when at it again after that."""

    def __init__(self, site: Site, node: str, generation: int) -> None:
        self.site, self.node, self.generation = site, node, generation
        self.down_at: float | None = None
        self.back_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status-watch", daemon=True)

    def start(self) -> _StatusWatch:
        self._thread.start()
        return self

    def _realized(self) -> int | None:
        reply = self.site.api.request("GET", "/transport-nodes")
        if reply.status != 200:
            return None
        for item in reply.body["items"]:
            if item["name"] == self.node:
                return int(item["status"].get("realized_generation") or 0)
        return None

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            realized = self._realized()
            if realized is None:
                continue
            now = time.monotonic()
            if realized < self.generation and self.down_at is None:
                self.down_at = now
            elif realized >= self.generation and self.down_at is not None:
                self.back_at = now
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=10)


def restarted(site: Site, node: str, *, switch: str, src: Any, dst_ip: str,
              scratch: Path) -> dict[str, Any]:  # fmt: skip
    """Restart `node`'s ovs-vswitchd under load (see the module docstring); its row."""
    row: dict[str, Any] = {"row": "a node's ovs-vswitchd restarted",
                           "process": f"ovs-vswitchd of {node}", "fault": "restart"}  # fmt: skip
    ovs = site.sandbox.nodes[node]
    writer = Writer(site.api, switch, prefix="vswitchd-restarted").start()
    pinger = Pinger(src, dst_ip).start()
    watch = _StatusWatch(site, node, 0)
    try:
        writer.wait_acked(5, WAIT)
        pinger.wait_replies(5, WAIT)
        watch.generation = generation = writer.last_generation
        site.wait(lambda: site.api.realized(generation), WAIT, f"generation {generation}")
        watch.start()
        began = time.monotonic()
        ovs.vswitchd.kill9()
        site.sandbox.restart_vswitchd(ovs)
        up = time.monotonic()
        row["restarted_by"] = "the node's init (the harness, at once)"
        row["restarted_s"] = round(up - began, 3)
        answered = len(pinger.replied)
        site.wait(lambda: len(pinger.replied) > answered, WAIT, "an echo answered again")
        row["forwarding_back_s"] = round(time.monotonic() - up, 3)
        writer.wait_acked(5, WAIT)
    finally:
        writer.stop()
    try:
        last = writer.last_generation
        site.wait(lambda: site.api.realized(last), WAIT, f"generation {last}")
        row["realized_s"] = round(time.monotonic() - up, 3)
        site.wait(lambda: watch.back_at is not None or watch.down_at is None, WAIT,
                  f"{node}'s status realized again")  # fmt: skip
        pinger.wait_replies(len(pinger.replied) + 5, WAIT)
    finally:
        pings, lost = pinger.stop()
        watch.stop()
    down_at, back_at = watch.down_at, watch.back_at
    row["status_down_after_s"] = round(down_at - began, 3) if down_at is not None else None
    row["status_back_s"] = round(back_at - up, 3) if back_at is not None else None
    return tally(site, row, writer, began, (pings, lost), last, scratch)
