"""Hostile-input benchmark (`loom-api-bench --hostile`): what refusing bad bodies costs.

Starts a real API server process (`python -m loom_api`, tokens from files) on a real
ovsdb-server on loopback and times `creates` logical-switch creates, one after another on a
keep-alive connection (each phase's switches are deleted after it, untimed, so every phase
starts from the same database): first quietly, then while attacker processes, holding a
tenant token, send as fast as the server refuses them (`PHASES`)

- oversized bodies: 50 MB declared, streamed until the server closes the connection;
- deeply nested bodies: `{"name": "attack", "tags": [[[...]]]}` 1,000 and 100,000 levels
  deep (2 KB and 200 KB);

one such client at a time, then both at once; then, as a yardstick, while two processes
send the cheapest valid request (`GET /api/v1/health`) as fast as it is answered. Last, each
kind of request runs alone for a moment to measure the server CPU time one costs (from
/proc), against a create's.

Prints one JSON document: p50/p99 create latency per phase and the ratios to the quiet
phase (the target: at most 2 at p50 while one client attacks), the server CPU time per
request, what the attackers sent and got back, and whether anything they sent was written.
Everything runs on 127.0.0.1 and takes about a minute.
"""

from __future__ import annotations

import http.client
import multiprocessing
import os
import socket
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loom_api import limits
from loom_common.ovsdb import OvsdbServer
from loom_common.procstat import ProcessUsage
from loom_lab.api_process import TOKEN, HttpClient, api_server, percentile
from loom_schemas import CONFIG_SCHEMA, schema_path

#: What the report saw hang the server: a 50 MB body.
HUGE = 50 * (1 << 20)
NESTED_DEPTHS = (1_000, 100_000)
ATTACK_TENANT = "mallory"
ATTACK_TOKEN = "bench-attacker-token"
ATTACK_NAME = "attack"
#: The ratio of hostile to quiet latency the limits are meant to keep (p50 and p99).
TARGET_RATIO = 2.0
WAIT = 30.0


def _status_line(sock: socket.socket) -> int:
    """Return the status of the response on `sock` (0 if the connection ended first)."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def oversized_attack(port: int, stop: Any, started: Any, out: Any) -> None:
    """Send 50 MB bodies, each on a new connection, until `stop` is set; report to `out`."""
    head = (
        (
            f"POST /api/v1/logical-switches HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {ATTACK_TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {HUGE}\r\n\r\n"
        ).encode()
        + b'{"name": "'
        + ATTACK_NAME.encode()
        + b'", "description": "'
    )
    block = b"x" * 65536
    statuses: Counter[int] = Counter()
    sent_total = most = 0
    began = time.perf_counter()
    while not stop.is_set():
        sent = 0
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
            try:
                sock.sendall(head)
                while sent < HUGE:
                    sock.sendall(block)
                    sent += len(block)
            except OSError:  # the server closed on us: what a refusal looks like
                pass
            statuses[_status_line(sock)] += 1
        sent_total += sent
        most = max(most, sent)
        started.set()
    report = {"kind": "oversized", "statuses": dict(statuses), "bytes_sent": sent_total}
    seconds = time.perf_counter() - began
    out.put({**report, "most_bytes_sent_on_one_connection": most, "seconds": seconds})


def nested_attack(port: int, stop: Any, started: Any, out: Any) -> None:
    """Send deeply nested bodies on a keep-alive connection until `stop` is set."""
    bodies = [
        b'{"name": "' + ATTACK_NAME.encode() + b'", "tags": ' + b"[" * d + b"]" * d + b"}"
        for d in NESTED_DEPTHS
    ]
    headers = {"Authorization": f"Bearer {ATTACK_TOKEN}", "Content-Type": "application/json"}
    statuses: Counter[int] = Counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    i = 0
    began = time.perf_counter()
    while not stop.is_set():
        try:
            conn.request("POST", "/api/v1/logical-switches", bodies[i % len(bodies)], headers)
            response = conn.getresponse()
            response.read()
            statuses[response.status] += 1
        except (OSError, http.client.HTTPException):
            statuses[0] += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        i += 1
        started.set()
    conn.close()
    seconds = time.perf_counter() - began
    report = {"kind": "nested", "statuses": dict(statuses), "depths": list(NESTED_DEPTHS)}
    out.put({**report, "seconds": seconds})


def flood(port: int, stop: Any, started: Any, out: Any) -> None:
    """Send the cheapest valid request (`GET /api/v1/health`) on a keep-alive connection
    until `stop` is set: the yardstick the refusals are compared with."""
    statuses: Counter[int] = Counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    began = time.perf_counter()
    while not stop.is_set():
        conn.request("GET", "/api/v1/health")
        response = conn.getresponse()
        response.read()
        statuses[response.status] += 1
        started.set()
    conn.close()
    out.put({"kind": "flood", "statuses": dict(statuses), "seconds": time.perf_counter() - began})


class Attack:
    """Attacker processes (`oversized_attack`, `nested_attack`, `flood`) against one port,
    started on entry (once each has sent something) and stopped on exit; `reports` then
    holds what each sent and got back."""

    def __init__(self, port: int, *targets: Callable[[int, Any, Any, Any], None]) -> None:
        self._spawn = multiprocessing.get_context("spawn")
        self._port = port
        self._targets = targets
        self._stop = self._spawn.Event()
        self._out = self._spawn.Queue()
        self._processes: list[Any] = []
        self.reports: list[dict[str, Any]] = []

    def __enter__(self) -> Attack:
        try:
            for target in self._targets:
                started = self._spawn.Event()
                process = self._spawn.Process(
                    target=target, args=(self._port, self._stop, started, self._out)
                )
                process.start()
                self._processes.append(process)
                if not started.wait(WAIT):
                    raise RuntimeError(f"attacker {target.__name__} sent nothing")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        try:
            self.reports = [self._out.get(timeout=WAIT) for _ in self._processes]
        finally:
            for process in self._processes:  # (only ever our own children)
                process.join(WAIT)
                if process.is_alive():
                    process.terminate()
                    process.join(WAIT)
        for report in self.reports:
            report["requests"] = sum(report["statuses"].values())
            report["per_s"] = round(report["requests"] / report.pop("seconds"), 1)


def _create_latencies(base: str, token: str, names: list[str]) -> list[float]:
    """Create one logical switch per name, one after another; return each latency (s).

    The switches are deleted afterwards (not timed), so that every phase starts from the
    same database: a create's cost grows with the switches there are (its tunnel key is
    chosen from all of them), and phases run one after another would otherwise be compared
    at different sizes (the median grew several times over between the first 300 creates
    and those after 1,500).
    """
    client = HttpClient(base, token)
    latencies = []
    made = []
    try:
        for name in names:
            began = time.perf_counter()
            status, body, _ = client.request("POST", "/api/v1/logical-switches", {"name": name})
            latencies.append(time.perf_counter() - began)
            if status != 201:
                raise RuntimeError(f"create {name}: {status} {body}")
            made.append(body["id"])
        for ident in made:
            status, body, _ = client.request("DELETE", f"/api/v1/logical-switches/{ident}")
            if status != 204:
                raise RuntimeError(f"delete {ident}: {status} {body}")
    finally:
        client.close()
    return latencies


def _figures(latencies: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(latencies) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 3),
    }


def _attacked_rows(base: str, token: str) -> int:
    """Return how many switches carry the attackers' name (anything they got written)."""
    client = HttpClient(base, token)
    try:
        status, body, _ = client.request("GET", f"/api/v1/logical-switches?name={ATTACK_NAME}")
    finally:
        client.close()
    if status != 200:
        raise RuntimeError(f"list: {status} {body}")
    return len(body["items"])


PHASES: tuple[tuple[str, tuple[Callable[[int, Any, Any, Any], None], ...]], ...] = (
    ("oversized", (oversized_attack,)),
    ("nested", (nested_attack,)),
    ("hostile", (oversized_attack, nested_attack)),
    ("flood", (flood, flood)),
)
"""The attacked phases: one client sending oversized bodies (the case the target is set
for), one sending deeply nested ones, both at once, and two clients sending the cheapest
valid request (a yardstick: what any two busy clients cost the others)."""


def run_hostile(creates: int, cost_seconds: float = 2.0) -> dict[str, Any]:
    """Run the phases; return the figures (module docstring).

    Args:
        creates: creates timed per phase.
        cost_seconds: how long each kind of request runs alone to measure its server CPU.
    """
    phases: dict[str, list[float]] = {}
    attacks: dict[str, list[dict[str, Any]]] = {}
    cpu_ms: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="loom-api-hostile-") as tmp:
        root = Path(tmp)
        with (
            OvsdbServer(root / "db", schema_path(CONFIG_SCHEMA)) as db,
            api_server(db.remote, root, tenant_tokens={ATTACK_TENANT: ATTACK_TOKEN}) as base,
        ):
            port = int(base.rsplit(":", 1)[1])
            pid = int((root / "loom-api.pid").read_text())  # (api_server's Daemon's pid file)
            _create_latencies(base, TOKEN, [f"warm-{i}" for i in range(20)])
            before = ProcessUsage.of(pid).cpu_seconds
            phases["quiet"] = _create_latencies(base, TOKEN, [f"quiet-{i}" for i in range(creates)])
            cpu_ms["per_create"] = (ProcessUsage.of(pid).cpu_seconds - before) / creates * 1000
            for phase, targets in PHASES:
                with Attack(port, *targets) as attack:
                    names = [f"{phase}-{i}" for i in range(creates)]
                    phases[phase] = _create_latencies(base, TOKEN, names)
                attacks[phase] = attack.reports
            for target in (oversized_attack, nested_attack, flood):
                with Attack(port, target) as attack:
                    before = ProcessUsage.of(pid).cpu_seconds
                    time.sleep(cost_seconds)  # (a measuring window, not a synchronisation)
                    used = ProcessUsage.of(pid).cpu_seconds - before
                cpu_ms[f"per_{target.__name__}_request"] = (
                    used / attack.reports[0]["requests"] * 1000
                )
            written = _attacked_rows(base, TOKEN)
    figures = {phase: _figures(latencies) for phase, latencies in phases.items()}

    def ratio(phase: str, key: str) -> float:
        return round(figures[phase][key] / figures["quiet"][key], 2)

    targeted = ("oversized", "nested")
    return {
        "benchmark": "api-hostile",
        "cpus": os.cpu_count(),
        "creates_per_phase": creates,
        "limits": {
            "max_body_bytes": limits.DEFAULT_MAX_BODY_BYTES,
            "max_json_depth": limits.DEFAULT_MAX_JSON_DEPTH,
        },
        "quiet": figures["quiet"],
        **{phase: figures[phase] for phase in ("oversized", "nested", "hostile")},
        "ratios_p50": {p: ratio(p, "p50_ms") for p in ("oversized", "nested", "hostile")},
        "ratios_p99": {p: ratio(p, "p99_ms") for p in ("oversized", "nested", "hostile")},
        "target_ratio": TARGET_RATIO,
        "target_applies_to": "p50 with one attacking client (oversized, nested)",
        "within_target": max(ratio(p, "p50_ms") for p in targeted) <= TARGET_RATIO,
        "flood_of_valid_requests": figures["flood"],
        "flood_ratio_p50": ratio("flood", "p50_ms"),
        "flood_ratio_p99": ratio("flood", "p99_ms"),
        "server_cpu_ms": {key: round(value, 3) for key, value in cpu_ms.items()},
        "attackers": {phase: attacks[phase] for phase in ("oversized", "nested", "hostile")},
        "flooders": attacks["flood"],
        "attacker_rows_written": written,
    }
