"""API load benchmark: the NVP workload through the native API, against raw OVSDB writes.

Loads the NVP paper's controller workload (`loom_lab.workload`, `--scale S`, default
0.1; or `--workload FILE`) through a real API server process on a real ovsdb-server: one
transport zone, the hypervisors as transport nodes, the switches, the security profiles (one
per ACL'd port with its TCP 22/80/443 ingress rules, one isolation profile per isolated
switch), then the ports with their profiles. One object per request, `--clients` concurrent
keep-alive connections.

The baseline, run in the same invocation on a fresh ovsdb-server, writes the same rows with
one OVSDB `transact` per object and no API in between: the ratio says what the API (HTTP,
validation, tenant checks, key allocation, the generation) costs over the database itself.

Prints one JSON document: objects per second, p50/p99 latency per request kind, database size
(raw and compacted), and the ratio to the baseline. `--hostile` runs another benchmark
instead: create latency quietly and under hostile bodies (`loom_lab.api_bench_hostile`).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom_common.ovsdb import RawConnection
from loom_lab.api_process import TOKEN, api_server, percentile
from loom_lab.workload import add_arguments as add_workload_arguments
from loom_lab.workload import from_arguments as workload_from

TENANT = "bench"
PORT_PROFILE_RULES = [22, 80, 443]


@dataclass(frozen=True)
class Step:
    """One object to create: its kind, the name later steps refer to it by, path and body.

    Strings of the form `$name` in `path` segments and in `body` stand for the id of the
    object created by the step called `name`.
    """

    kind: str
    name: str
    path: str
    body: dict[str, Any]


def resolve(value: Any, ids: dict[str, str]) -> Any:
    """Replace every `$name` string inside `value` by `ids[name]`."""
    if isinstance(value, str):
        if value.startswith("$"):
            return ids[value[1:]]
        return "/".join(ids[p[1:]] if p.startswith("$") else p for p in value.split("/"))
    if isinstance(value, list):
        return [resolve(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, ids) for k, v in value.items()}
    return value


def _isolated(switch: dict[str, Any]) -> bool:
    return any(acl["kind"] == "isolation" for acl in switch["acls"])


def _acl_ports(switch: dict[str, Any]) -> set[str]:
    return {
        acl["match"].split('"')[1]
        for acl in switch["acls"]
        if acl["kind"] == "port" and 'outport == "' in acl["match"]
    }


def _web_rules() -> list[dict[str, Any]]:
    return [
        {"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
         "port_range_min": n, "port_range_max": n}
        for n in PORT_PROFILE_RULES
    ]  # fmt: skip


def phases(workload: dict[str, Any]) -> list[list[Step]]:
    """Return the creation steps in dependency order; steps within a phase are independent."""
    v1 = "/api/v1"
    zone = [Step("transport-zone", "tz", f"{v1}/transport-zones", {"name": "tz0"})]
    nodes = [
        Step("transport-node", f"hv:{hv['name']}", f"{v1}/transport-nodes",
             {"name": hv["name"], "node_type": "hypervisor", "system_id": hv["name"],
              "transport_zone_ids": ["$tz"],
              "tunnel_endpoints": [{"encap": hv["encap"], "ip": hv["ip"]}]})
        for hv in workload["hypervisors"]
    ]  # fmt: skip
    switches = [
        Step("logical-switch", f"ls:{sw['name']}", f"{v1}/logical-switches",
             {"tenant": TENANT, "name": sw["name"], "transport_zone_id": "$tz"})
        for sw in workload["switches"]
    ]  # fmt: skip
    profiles: list[Step] = []
    ports: list[Step] = []
    for sw in workload["switches"]:
        isolated = _isolated(sw)
        if isolated:
            rule = {"direction": "ingress", "ethertype": "IPv4", "remote_prefix": sw["subnet"]}
            profiles.append(
                Step("security-profile", f"iso:{sw['name']}", f"{v1}/security-profiles",
                     {"tenant": TENANT, "name": f"isolate-{sw['name']}", "rules": [rule]})
            )  # fmt: skip
        acl_ports = _acl_ports(sw)
        profiles.extend(
            Step("security-profile", f"pp:{port}", f"{v1}/security-profiles",
                 {"tenant": TENANT, "name": f"web-{port}", "rules": _web_rules()})
            for port in sorted(acl_ports)
        )  # fmt: skip
        for port in sw["ports"]:
            refs = ([f"$iso:{sw['name']}"] if isolated else []) + (
                [f"$pp:{port['name']}"] if port["name"] in acl_ports else []
            )
            ports.append(
                Step("logical-switch-port", f"lp:{port['name']}",
                     f"{v1}/logical-switches/$ls:{sw['name']}/ports",
                     {"name": port["name"], "mac": port["mac"], "ips": [port["ip"]],
                      "security_profile_ids": refs,
                      "attachment": {"type": "vif", "vif_id": port["name"]}})
            )  # fmt: skip
    return [zone, nodes, switches, profiles, ports]


@dataclass
class Results:
    """Latencies per kind, in seconds, and failures."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, seconds: float) -> None:
        """Record one request."""
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)


def _client_loop(
    host: str, port: int, steps: list[Step], ids: dict[str, str], results: Results, next_index: Any
) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=60)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    while True:
        with results.lock:
            i = next_index[0]
            next_index[0] += 1
        if i >= len(steps):
            break
        step = steps[i]
        payload = json.dumps(resolve(step.body, ids))
        start = time.perf_counter()
        conn.request("POST", resolve(step.path, ids), payload, headers)
        response = conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - start
        if response.status != 201:
            with results.lock:
                results.failures.append(f"{step.name}: {response.status} {data[:200]!r}")
            continue
        ids[step.name] = json.loads(data)["id"]
        results.add(step.kind, elapsed)
    conn.close()


def drive_api(base: str, plan: list[list[Step]], clients: int) -> tuple[Results, float]:
    """Create every step through the API at `base`; return latencies and the wall time."""
    host, _, port = base.removeprefix("http://").partition(":")
    ids: dict[str, str] = {}
    results = Results()
    start = time.perf_counter()
    for steps in plan:
        next_index = [0]
        threads = [
            threading.Thread(
                target=_client_loop, args=(host, int(port), steps, ids, results, next_index)
            )
            for _ in range(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return results, time.perf_counter() - start


# ---- the baseline: the same rows, one raw OVSDB transaction each -------------------------


class RawOvsdb:
    """A blocking JSON-RPC connection to ovsdb-server (python-ovs), for the baseline."""

    def __init__(self, remote: str) -> None:
        import ovs.jsonrpc
        import ovs.stream

        error, stream = ovs.stream.Stream.open_block(ovs.stream.Stream.open(remote))
        if error:
            raise OSError(error, f"cannot connect to {remote}")
        self._conn = ovs.jsonrpc.Connection(stream)
        self._jsonrpc = ovs.jsonrpc

    def transact(self, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run one transaction and return its result; raise on any error."""
        request = self._jsonrpc.Message.create_request("transact", ["Loom_Config", *ops])
        error, reply = self._conn.transact_block(request)
        if error or reply.error:
            raise RuntimeError(f"transact failed: {error or reply.error}")
        result: list[dict[str, Any]] = reply.result
        for op in result:
            if "error" in op:
                raise RuntimeError(f"transact failed: {op}")
        return result

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


def _uuids(values: list[str]) -> list[Any]:
    return ["set", [["uuid", v] for v in values]]


def _rules(rules: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Return insert ops for security rules and the set of their named uuids."""
    ops = [
        {"op": "insert", "table": "Security_Rule", "uuid-name": f"r{i}", "row": rule}
        for i, rule in enumerate(rules)
    ]
    return ops, ["set", [["named-uuid", f"r{i}"] for i in range(len(rules))]]


def raw_ops(step: Step, body: dict[str, Any], keys: dict[str, int]) -> list[dict[str, Any]]:
    """Return the OVSDB operations that write `step`'s object directly (no API).

    `body` has its `$name` references resolved; `keys` counts the keys handed out so far
    (the API allocates them; here the client does).
    """
    row: dict[str, Any] = {"revision": 1}
    ops: list[dict[str, Any]] = []
    if step.kind == "transport-zone":
        table = "Transport_Zone"
        row.update(name=body["name"], encap="geneve")
    elif step.kind == "transport-node":
        table = "Transport_Node"
        ep = body["tunnel_endpoints"][0]
        ops.append({"op": "insert", "table": "Tunnel_Endpoint", "uuid-name": "ep", "row": ep})
        row.update(name=body["name"], node_type=body["node_type"], system_id=body["system_id"],
                   transport_zones=_uuids(body["transport_zone_ids"]),
                   tunnel_endpoints=["set", [["named-uuid", "ep"]]])  # fmt: skip
    elif step.kind == "logical-switch":
        table = "Logical_Switch"
        keys["switch"] = keys.get("switch", 0) + 1
        row.update(tenant=TENANT, name=body["name"],
                   transport_zone=["uuid", body["transport_zone_id"]],
                   replication_mode="service-node", admin_state_up=True,
                   tunnel_key=keys["switch"])  # fmt: skip
    elif step.kind == "security-profile":
        table = "Security_Profile"
        ops, rules = _rules(body["rules"])
        row.update(tenant=TENANT, name=body["name"], stateful=True, rules=rules)
    else:
        table = "Logical_Switch_Port"
        switch = step.path.split("/")[-2]
        keys[switch] = keys.get(switch, 0) + 1
        row.update(logical_switch=["uuid", switch],
                   tenant=TENANT, name=body["name"], mac=body["mac"], ips=["set", body["ips"]],
                   port_security=True, admin_state_up=True,
                   security_profiles=_uuids(body["security_profile_ids"]),
                   attachment_type="vif", vif_id=body["attachment"]["vif_id"],
                   port_key=keys[switch])  # fmt: skip
    return [*ops, {"op": "insert", "table": table, "row": row}]


def drive_raw(remote: str, plan: list[list[Step]]) -> tuple[Results, float]:
    """Insert the same objects with one transaction each, no API; return latencies and time."""
    db = RawOvsdb(remote)
    results = Results()
    ids: dict[str, str] = {}
    keys: dict[str, int] = {}
    start = time.perf_counter()
    for steps in plan:
        for step in steps:
            path = resolve(step.path, ids)
            body = resolve(step.body, ids)
            began = time.perf_counter()
            reply = db.transact(raw_ops(Step(step.kind, step.name, path, body), body, keys))
            results.add(step.kind, time.perf_counter() - began)
            ids[step.name] = reply[-1]["uuid"][1]
    elapsed = time.perf_counter() - start
    db.close()
    return results, elapsed


def bump_generation(remote: str) -> None:
    """Count what `drive_raw` wrote as one configuration change (as the API counts each of
    its writes): the controllers' milestones are "generation N computed" and "realized" (a
    config DB loaded without the API has no `Loom_Global` row: generation 0, which any stamp
    meets)."""
    conn = RawConnection(remote)
    try:
        (found,) = conn.transact("Loom_Config", [
            {"op": "select", "table": "Loom_Global", "where": []}])  # fmt: skip
        if found["rows"]:
            conn.transact("Loom_Config", [{"op": "mutate", "table": "Loom_Global", "where": [],
                                           "mutations": [["generation", "+=", 1]]}])  # fmt: skip
        else:
            conn.transact("Loom_Config", [{"op": "insert", "table": "Loom_Global",
                                           "row": {"generation": 1}}])  # fmt: skip
    finally:
        conn.close()


# ---- running it --------------------------------------------------------------------------


def summarize(results: Results, elapsed: float) -> dict[str, Any]:
    """Return objects/s and per-kind p50/p99 latencies (ms) of one run."""
    count = sum(len(v) for v in results.latencies.values())
    every = [x for v in results.latencies.values() for x in v]
    return {
        "objects": count,
        "failures": len(results.failures),
        "first_failures": results.failures[:5],
        "seconds": round(elapsed, 3),
        "objects_per_s": round(count / elapsed, 1) if elapsed else None,
        "p50_ms": round(statistics.median(every) * 1000, 3) if every else None,
        "p99_ms": round(percentile(every, 0.99) * 1000, 3) if every else None,
        "per_kind": {
            kind: {
                "count": len(v),
                "p50_ms": round(statistics.median(v) * 1000, 3),
                "p99_ms": round(percentile(v, 0.99) * 1000, 3),
            }
            for kind, v in sorted(results.latencies.items())
        },
    }


def run(workload: dict[str, Any], clients: int) -> dict[str, Any]:
    """Run the API load and the baseline; return the figures."""
    from loom_common.ovsdb import OvsdbServer
    from loom_schemas import CONFIG_SCHEMA, schema_path

    plan = phases(workload)
    schema = schema_path(CONFIG_SCHEMA)
    with tempfile.TemporaryDirectory(prefix="loom-api-bench-") as tmp:
        root = Path(tmp)
        with OvsdbServer(root / "api-db", schema) as db, api_server(db.remote, root) as base:
            api_results, api_elapsed = drive_api(base, plan, clients)
            api_size = db.db_size()
            db.compact()
            api_compacted = db.db_size()
        with OvsdbServer(root / "raw-db", schema) as raw:
            raw_results, raw_elapsed = drive_raw(raw.remote, plan)
            raw_size = raw.db_size()
    api = summarize(api_results, api_elapsed)
    baseline = summarize(raw_results, raw_elapsed)
    return {
        "benchmark": "api-load",
        "scale": workload.get("scale"),
        "clients": clients,
        "api": api,
        "api_db_bytes": api_size,
        "api_db_bytes_compacted": api_compacted,
        "baseline_raw_ovsdb": baseline,
        "baseline_db_bytes": raw_size,
        "ratio_api_vs_raw_time": round(api_elapsed / raw_elapsed, 2) if raw_elapsed else None,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the JSON figures."""
    parser = argparse.ArgumentParser(prog="loom-api-bench", description=__doc__)
    add_workload_arguments(parser)
    parser.add_argument("--clients", type=int, default=4, help="concurrent API connections")
    parser.add_argument(
        "--hostile",
        action="store_true",
        help="instead: create latency quietly and under oversized and deeply nested bodies "
        "(loom_lab.api_bench_hostile)",
    )
    parser.add_argument(
        "--creates", type=int, default=300, help="creates timed per phase (--hostile)"
    )
    args = parser.parse_args(argv)
    if args.hostile:
        from loom_lab.api_bench_hostile import run_hostile

        print(json.dumps(run_hostile(args.creates), indent=2))
        return 0
    print(json.dumps(run(workload_from(args), args.clients), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
