"""The fault matrix: one daemon killed (or hung) under load, and what it cost.

Each `Fault` names a process of the site and how it fails: `kill` (SIGKILL: a crash),
`hang` (SIGSTOP for longer than the ZooKeeper session, then SIGCONT), `pause` (SIGSTOP for
`PAUSE_FOR` seconds while the writer also creates and deletes ports: rows that come and go
while the process cannot read them) or `full` (the disk
under the config DB — a tmpfs the matrix mounts, `loom_common.testing.SmallDisk` — filled
for `FULL_FOR` seconds past the first refused write, then freed). `inject` runs one
with a write load through the API and a ping between VMs on two nodes under way, and
returns its row:

- `resumed_cleanly` (a hung or paused process): it runs at the row's end, was never
  restarted, and its log has no failed pass since the fault — it took its place again
  rather than failing once it could read again;
- `restarted_by`: who brings it back — `loom up`'s supervisor (`loom_common.supervise`,
  restarting the daemon on its own files and ports), or nobody (a hung process: its
  ZooKeeper session expires and a standby takes its shards);
- `restarted_s`: from the fault until the supervisor had it ready again (for a full disk:
  from the space's return until every member it restarted on its health was ready);
- `api_downtime_s`: the longest time without an acknowledged write from the fault until the
  row ends;
- `acked_writes` and `acked_lost` (must be 0): writes the API acknowledged, and those the
  configuration does not have afterwards;
- `realized_s`: from the end of the fault (restart or SIGCONT) until the last acknowledged
  generation is realized on every node;
- `pings` and `pings_lost`: echoes between the VMs from the first answered to the last,
  and those unanswered (`lost_echoes` their sequence numbers, `fault_echo` the last
  answered when the fault began);
- `universal_equals_fresh`: the universal DB equals what a fresh start computes from the
  configuration (`loom_nvp.fresh`).
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from loom_nvp import fresh
from loom_nvp.load import Writer
from loom_nvp.ping import Pinger
from loom_nvp.site import Site

if TYPE_CHECKING:
    from loom_common.testing import SmallDisk

WAIT = 120.0
"""The longest any step of a row may take."""
PAUSE_FOR = 10.0
"""How long a `pause` lasts: more than twice the ZooKeeper session."""
FULL_FOR = 5.0
"""How long a full disk lasts past the first write it refused."""


@dataclass(frozen=True)
class Fault:
    """One row of the matrix."""

    row: str
    """The row's name."""
    process: str
    """The site's process name (`Deployment.processes`)."""
    kind: Literal["kill", "hang", "pause", "full"]


def physical_master(site: Site, node: str) -> str:
    """The process name of the physical controller that masters `node` now."""
    reply = site.api.request("GET", "/transport-nodes")
    controller = next(item["status"].get("controller") for item in reply.body["items"]
                      if item["name"] == node)  # fmt: skip
    assert controller, f"{node} has no controller"
    i = int(str(controller).rpartition("-")[2])
    names = site.controller_names("physical")
    return names[i] if len(names) > 1 else names[0]


def inject(site: Site, fault: Fault, *, switch: str, src: Any, dst_ip: str,
           scratch: Path, disk: SmallDisk | None = None) -> dict[str, Any]:  # fmt: skip
    """Run `fault` under load (see the module docstring); its row. A `full` fault fills
    `disk`, which holds the config DB."""
    writer = Writer(site.api, switch, prefix=fault.row.replace(" ", "-"),
                    churn=fault.kind == "pause").start()  # fmt: skip
    pinger = Pinger(src, dst_ip).start()
    row: dict[str, Any] = {"row": fault.row, "process": fault.process, "fault": fault.kind}
    try:
        writer.wait_acked(5, WAIT)
        pinger.wait_replies(5, WAIT)
        restarts = site.supervisor.restarts.get(fault.process, 0)
        log = _log_of(site, fault.process) if fault.kind in ("hang", "pause") else None
        logged = log.stat().st_size if log is not None else 0
        began = time.monotonic()
        fault_echo = max(pinger.replied)
        if fault.kind == "kill":
            site.signal(fault.process, signal.SIGKILL)
            site.wait(lambda: site.supervisor.restarts.get(fault.process, 0) > restarts,
                      WAIT, f"{fault.process} restarted")  # fmt: skip
            row["restarted_by"] = "loom up's supervisor"
            row["restarted_s"] = round(time.monotonic() - began, 3)
        elif fault.kind == "full":
            assert disk is not None, "a full disk needs the disk under the config DB"
            row.update(_fill(site, disk, writer, began))
        else:
            site.signal(fault.process, signal.SIGSTOP)
            try:
                # the fault's length: past the session, so its shards move
                time.sleep(PAUSE_FOR if fault.kind == "pause" else site.session_timeout + 2.0)
            finally:
                site.signal(fault.process, signal.SIGCONT)
            row["restarted_by"] = "nobody: its ZooKeeper session expired, a standby took over"
        ended = time.monotonic()
        writer.wait_acked(5, WAIT)
    finally:
        writer.stop()
    try:
        generation = writer.last_generation
        site.wait(lambda: site.api.realized(generation), WAIT, f"generation {generation}")
        row["realized_s"] = round(time.monotonic() - ended, 3)
        pinger.wait_replies(len(pinger.replied) + 5, WAIT)
    finally:
        pings, lost = pinger.stop()
    if fault.kind in ("hang", "pause"):
        failed = log is not None and " pass failed (" in log.read_text()[logged:]
        row["resumed_cleanly"] = (site.supervisor.restarts.get(fault.process, 0) == restarts
                                  and site.process(fault.process).running
                                  and not failed)  # fmt: skip
    if writer.churn:
        row["churn_left"] = writer.leftover()
    if lost:
        row["fault_echo"] = fault_echo
    return tally(site, row, writer, began, (pings, lost), generation, scratch)


def tally(site: Site, row: dict[str, Any], writer: Writer, began: float,
          echoes: tuple[int, list[int]], generation: int,
          scratch: Path) -> dict[str, Any]:  # fmt: skip
    """`row` with what every row says of its writes, its pings (`echoes`: how many, and
    those lost) and the universal DB at `generation` against a fresh computation."""
    row["api_downtime_s"] = round(writer.longest_gap(began), 3)
    row["acked_writes"] = len(writer.acked)
    row["acked_lost"] = len(writer.lost())
    row["refused_writes"] = len(writer.refused)
    pings, lost = echoes
    row["pings"], row["pings_lost"] = pings, len(lost)
    if lost:
        row["lost_echoes"] = lost
    check = fresh.compare(site.deployment.local_db_remote, site.deployment.local_universal_remote,
                          generation, scratch)  # fmt: skip
    row["universal_equals_fresh"] = check["equal"]
    if not check["equal"]:
        row["universal_differences"] = check["differences"]
    return row


def _log_of(site: Site, name: str) -> Path | None:
    """The log file of process `name`, if it is a daemon with one."""
    path = getattr(site.process(name), "log_path", None)
    return Path(path) if path is not None else None


def _fill(site: Site, disk: SmallDisk, writer: Writer, began: float) -> dict[str, Any]:
    """Fill `disk` until the API has refused a write for `FULL_FOR` seconds, free it, and
    wait until every config DB member the supervisor restarted on its health (none for a
    standalone server, which writes again by itself) is ready again."""
    members = [n for n in site.deployment.processes if n.startswith("config DB")]
    restarts = {n: site.supervisor.restarts.get(n, 0) for n in members}
    disk.fill()
    try:
        site.wait(lambda: any(at > began for at, _, _ in writer.refused), WAIT,
                  "a write refused on the full disk")  # fmt: skip
        refused = next(at for at, _, _ in writer.refused if at > began)
        site.wait(lambda: time.monotonic() > refused + FULL_FOR, FULL_FOR + 5, "the full spell")
        errors = sorted({f"{status} {error}" for at, status, error in writer.refused
                         if at > began})  # fmt: skip
    finally:
        disk.free()
    freed = time.monotonic()
    writer.wait_acked(1, WAIT)
    restarted = [n for n in members if site.supervisor.restarts.get(n, 0) > restarts[n]]
    return {
        "restarted_by": ("loom up's supervisor, on the members' health" if restarted
                         else "nobody: it writes again by itself"),
        "restarted": restarted,
        "restarted_s": round(time.monotonic() - freed, 3),
        "full_s": round(freed - began, 3),
        "refused_while_full": errors,
    }  # fmt: skip
