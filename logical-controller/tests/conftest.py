"""Fixtures for logical-controller tests: the API in-process on a real config DB, a logical
controller between it and a real universal DB, and the scenario runner of the snapshot tests.

A scenario (`tests/snapshots/NAME.yaml`) is a list of steps, each one API call or one
physical fact:

    - create: logical-switches/{sw}/ports    # POST; `{name}` is the id created `as: name`
      as: p1
      body: {name: p1, mac: "00:00:00:00:00:01", attachment: {type: vif, vif_id: vif1}}
    - update: logical-switches/{sw}/ports/{p1}   # PATCH
      body: {admin_state_up: false}
    - delete: logical-switches/{sw}/ports/{p1}
    - locate: {port: p1, node: hv1}       # a physical controller saw p1's VIF on hv1

After every step the runner waits until the controller has written what the step caused
(a configuration generation, or the location), then renders the universal database.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import uuid as uuid_module
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.store import Store
from loom_api.testing import ApiClient, running_store
from loom_common.ovsdb import OvsdbServer, tool
from loom_common.procs import Daemon
from loom_common.testing import serve_db
from loom_ddlog import Program
from loom_logical.controller import LogicalController
from loom_logical.outputs import parse_flow
from loom_physical.translate import UniversalFlow, physical
from loom_schemas import UNIVERSAL_SCHEMA
from loom_schemas.pipeline import STAGES

ADMIN_TOKEN = "admin-secret"
WAIT = 30.0
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def store(config_db: OvsdbServer) -> Iterator[Store]:
    """A started API store on the test's config DB."""
    with running_store(config_db.remote) as s:
        yield s


@pytest.fixture
def admin(store: Store) -> ApiClient:
    """An admin API client (Flask test client, in-process)."""
    app: Flask = create_app(store, Tokens(admin=ADMIN_TOKEN, tenants={}))
    return ApiClient(app.test_client(), ADMIN_TOKEN)


@pytest.fixture
def controller(config_db: OvsdbServer, universal_db: OvsdbServer) -> Iterator[LogicalController]:
    """A running logical controller between the two databases, stopped at teardown."""
    c = LogicalController(config_db.remote, universal_db.remote).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def universal_db_2(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OvsdbServer]:
    """A second universal DB (for a second, fresh controller), stopped at teardown."""
    with serve_db(request, tmp_path / "universal-db-2", UNIVERSAL_SCHEMA) as server:
        yield server


@pytest.fixture
def dump() -> Callable[[str], dict[str, list[dict[str, Any]]]]:
    """`dump_universal`, for tests."""
    return dump_universal


def dump_universal(remote: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the universal DB, by table, as {column: python value}; the flows of
    `Universal_Flow` groups one row each ({datapath, source, cookie, pipeline, stage,
    priority, match, actions})."""
    tables = dump_universal_rows(remote)
    flows = []
    for group in tables.get("Universal_Flow", []):
        for column in ("flows", "local_flows"):
            texts = group.get(column, [])
            for text in texts if isinstance(texts, list) else [texts]:
                flows.append({
                    "datapath": group["datapath"], "source": group["source"],
                    "cookie": group["cookie"], "local": column == "local_flows",
                    **parse_flow(text),
                })  # fmt: skip
    tables["Universal_Flow"] = flows
    return tables


def transact(remote: str, request: list[Any]) -> list[Any]:
    """Run one OVSDB transaction (`[db, op, ...]`) with `ovsdb-client`; its results."""
    done = subprocess.run(
        [tool("ovsdb-client"), "transact", remote, json.dumps(request)],
        check=True,
        capture_output=True,
        text=True,
    )
    results: list[Any] = json.loads(done.stdout)
    return results


def dump_universal_rows(remote: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the universal DB, by table, as {column: python value}."""
    out = subprocess.run(
        [tool("ovsdb-client"), "--format=json", "dump", remote, "Loom_Universal"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    tables: dict[str, list[dict[str, Any]]] = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        caption = doc.get("caption", "")
        name = caption.split()[0] if caption else ""
        tables[name] = [
            dict(zip(doc["headings"], map(_value, row), strict=True)) for row in doc["data"]
        ]
    return tables


def _value(datum: Any) -> Any:
    """An OVSDB JSON datum as a plain value (sets as sorted lists, maps as dicts)."""
    if isinstance(datum, list) and datum and datum[0] in ("set", "map", "uuid"):
        kind, body = datum
        if kind == "uuid":
            return body
        if kind == "set":
            return sorted(_value(v) for v in body)
        return {_value(k): _value(v) for k, v in body}
    return datum


class Scenario:
    """Runs one scenario's steps against the API and renders the universal DB."""

    def __init__(
        self,
        admin: ApiClient,
        controller: LogicalController,
        universal: OvsdbServer,
        config: OvsdbServer,
    ) -> None:
        self.admin = admin
        self.controller = controller
        self.universal = universal
        self.config = config
        self.ids: dict[str, str] = {}
        self.names: dict[str, str] = {}

    def sub(self, value: Any) -> Any:
        """`value` with every `{name}` replaced by the id created as `name`."""
        if isinstance(value, str):
            return re.sub(r"\{([\w-]+)\}", lambda m: self.ids[m.group(1)], value)
        if isinstance(value, list):
            return [self.sub(v) for v in value]
        if isinstance(value, dict):
            return {k: self.sub(v) for k, v in value.items()}
        return value

    def run(self, steps: list[dict[str, Any]]) -> None:
        """Run every step, waiting after each until the controller has written its effect."""
        for step in steps:
            generation = None
            if "create" in step:
                response = self.admin.post(
                    "/api/v1/" + self.sub(step["create"]), self.sub(step["body"])
                )
                assert response.status_code == 201, (step, response.get_json())
                created = response.get_json()
                self._learn(step.get("as"), created)
                generation = int(response.headers["X-Loom-Config-Generation"])
            elif "update" in step:
                response = self.admin.patch(
                    "/api/v1/" + self.sub(step["update"]), self.sub(step["body"])
                )
                assert response.status_code == 200, (step, response.get_json())
                self._learn(None, response.get_json())
                generation = int(response.headers["X-Loom-Config-Generation"])
            elif "delete" in step:
                response = self.admin.delete("/api/v1/" + self.sub(step["delete"]))
                assert response.status_code == 204, (step, response.get_json())
                generation = int(response.headers["X-Loom-Config-Generation"])
            elif "raw" in step:
                generation = self.raw(self.sub(step["raw"]))
            elif "locate" in step:
                self.locate(self.ids[step["locate"]["port"]], step["locate"]["node"])
                continue
            else:
                raise AssertionError(f"unknown step {step}")
            written = self.controller.wait_generation(generation, WAIT)
            assert written >= generation, f"generation {generation} not written in {WAIT}s"

    def _learn(self, name: str | None, obj: dict[str, Any]) -> None:
        """Remember `obj`'s id under `name`, and stable names for it and its children."""
        if name:
            self.ids[name] = obj["id"]
            self.names[obj["id"]] = name
        if obj.get("peer_port_id") and name:
            self.names[obj["peer_port_id"]] = f"{name}.peer"

    def raw(self, ops: list[dict[str, Any]]) -> int:
        """Commit `ops` on the config DB directly, as a writer other than the API could
        (configuration the API would refuse), with the generation bump the API makes;
        return that generation. An insert with `as: NAME` gets a uuid made from the name,
        so the row has a stable name and a stable order."""
        ops = [self._named(op) for op in ops]
        bump = [
            {"op": "mutate", "table": "Loom_Global", "where": [],
             "mutations": [["generation", "+=", 1]]},
            {"op": "select", "table": "Loom_Global", "where": [], "columns": ["generation"]},
        ]  # fmt: skip
        results = transact(self.config.remote, ["Loom_Config", *ops, *bump])
        assert all("error" not in r for r in results if r), results
        return int(results[-1]["rows"][0]["generation"])

    def _named(self, op: dict[str, Any]) -> dict[str, Any]:
        name = op.get("as")
        if name is None:
            return op
        uuid = str(uuid_module.uuid5(uuid_module.NAMESPACE_URL, f"loom-scenario:{name}"))
        self.ids[name] = uuid
        self.names[uuid] = name
        return {**{k: v for k, v in op.items() if k != "as"}, "uuid": uuid}

    def locate(self, port: str, node: str) -> None:
        """Write `port`'s chassis as the physical controller of `node` would; wait for it."""
        ops = [
            "Loom_Universal",
            {
                "op": "update",
                "table": "Port_Binding",
                "where": [["logical_port", "==", port]],
                "row": {"chassis": node},
            },
        ]
        results = transact(self.universal.remote, ops)
        assert results == [{"count": 1}], f"no binding of {port}: {results}"
        assert self.controller.wait_pass(lambda c: c.location(port) == node, WAIT), (
            f"the controller did not see {port} on {node}"
        )

    def render(self) -> str:
        """The universal DB as sorted text, with config ids and hashes named."""
        tables = dump_universal(self.universal.remote)
        dp_name = {row["key"]: f"{row['kind']}:{row['name']}" for row in tables.get("Datapath", [])}
        self._name_rules()
        by_id = conj_ids(list(self.names))
        conj = {}
        for row in tables.get("Universal_Flow", []):
            m = re.match(r"conj_id=(\d+),", row["match"])
            if m:
                assert int(m.group(1)) in by_id, f"conj_id {m.group(1)} is no rule's: {row}"
                conj[m.group(1)] = self.name(by_id[int(m.group(1))])
        macs = {
            row["uplink_mac"]: f"<uplink-mac:{row['name']}>"
            for row in tables.get("Gateway_Assignment", [])
            if isinstance(row["uplink_mac"], str)
        }

        def dp(key: int) -> str:
            return dp_name.get(key, "switches" if key == 0 else str(key))

        def ranked(nodes: Any) -> list[str]:  # weights are hashes of ids: show the set
            return sorted(nodes.values()) if isinstance(nodes, dict) else []

        formats: dict[str, Callable[[dict[str, Any]], str]] = {
            "Datapath": lambda r: (
                f"{dp(r['key'])} key={r['key']} shard={r['shard']} "
                f"mode={r['replication_mode']} zone={r['transport_zone']} "
                f"encap={r['encap']} tenant={r['tenant']} config={r['config_id']}"
            ),
            "Port_Binding": lambda r: (
                f"{dp(r['datapath'])} {r['name']} key={r['port_key']} {r['type']} "
                f"port={r['logical_port']} mac={r['mac']} ips={r['ips']} "
                f"vif={r['vif_id']} peer={r['peer']} gw={r['gateway_service']} "
                f"vlan={r['vlan']} stateful={r['stateful']}"
            ),
            "Universal_Flow": lambda r: (
                f"{dp(r['datapath'])}{' local:' + r['source'] if r['local'] else ''} "
                f"{r['pipeline']} {r['stage']} {r['priority']:5d} [{r['match']}] {r['actions']}"
            ),
            "Replication_Set": lambda r: (
                f"{dp(r['datapath'])} {r['mode']} nodes={ranked(r['service_nodes'])}"
            ),
            "Tunnel": lambda r: (
                f"{r['from_node']} -> {r['to_node']} {r['encap']} {r['remote_ip']} bfd={r['bfd']}"
            ),
            "Node_Endpoint": lambda r: f"{r['node']} {r['encap']} {r['ip']}",
            "Gateway_Assignment": lambda r: (
                f"{r['name']} {r['kind']} service={r['service']} nodes={ranked(r['nodes'])} "
                f"ip={r['uplink_ip']} next_hop={r['uplink_next_hop']} "
                f"vlan={r['uplink_vlan']} mac={r['uplink_mac']}"
            ),
            "Warning": lambda r: f"{r['kind']} {r['source']}: {r['message']}",
        }

        def named(line: str) -> str:  # sorted after naming: ids differ between runs
            for number, name in conj.items():
                line = re.sub(rf"\b{number}\b", f"<conj:{name}>", line)
            for mac, name in macs.items():
                line = line.replace(mac, name)
            return UUID_RE.sub(lambda m: f"<{self.name(m.group(0))}>", line)

        lines: list[str] = []
        for table, fmt in formats.items():
            lines.append(f"## {table}")
            lines.extend(sorted(named(fmt(r)) for r in tables.get(table, [])))
        return "\n".join(lines) + "\n"

    def normalize_openflow(self, text: str) -> str:
        """OpenFlow text (localized flows) with what differs between runs named: cookies
        (the CRC-32 of a config id; the category beside it is the stage's, which the table
        already names), conjunction ids, uplink MACs."""
        tables = dump_universal(self.universal.remote)
        self._name_rules()
        by_id = conj_ids(list(self.names))
        for number, uuid in by_id.items():
            text = re.sub(rf"\b{number}\b", f"<conj:{self.name(uuid)}>", text)
        for row in tables.get("Gateway_Assignment", []):
            if isinstance(row["uplink_mac"], str):
                text = text.replace(row["uplink_mac"], f"<uplink-mac:{row['name']}>")
        cookies = {f"{zlib.crc32(u.encode()):#x}": self.name(u) for u in self.names}
        cookies |= {f"{zlib.crc32(f'{u}-uplink'.encode()):#x}": f"{self.name(u)}-uplink"
                    for u in self.names}  # fmt: skip
        return re.sub(
            r"cookie=(0x[0-9a-f]+?)00[0-9a-f]{2}4c4d\b",
            lambda m: f"cookie=<{cookies.get(m.group(1), 'unnamed')}>",
            text,
        )

    def _name_rules(self) -> None:
        """Name every security rule by what it says (the API gives rules no ids)."""
        select = {"op": "select", "table": "Security_Rule", "where": []}
        (reply,) = transact(self.config.remote, ["Loom_Config", select])
        for row in reply["rows"]:
            values = {k: _value(v) for k, v in row.items()}
            what = " ".join(
                str(values[k] if values[k] != [] else None)
                for k in ("direction", "ethertype", "protocol", "port_range_min",
                          "port_range_max", "remote_prefix")
            )  # fmt: skip
            remote = values["remote_profile"]
            if remote != []:
                what += f" {self.names.get(remote, remote)}"
            self.names[values["_uuid"]] = f"rule[{what}]"

    def name(self, uuid: str) -> str:
        """The scenario's name for config id `uuid`."""
        return self.names.get(uuid, "unnamed")


_ID32 = Program.compile(
    "input relation S(s: string)\n"
    "output relation Id(s: string, id: bit<32>)\n"
    # rules/logical/common.dl's id32 (a conjunction id is id32 of its rule's uuid)
    "Id(s, (hash64(s) & 64'hffffffff) as bit<32>) :- S(s).\n",
    "id32.dl",
)


def conj_ids(uuids: list[str]) -> dict[int, str]:
    """The conjunction id the rules give each of `uuids` (when it is a rule's), computed by
    the engine's own `hash64`."""
    with _ID32.transaction() as txn:
        for uuid in uuids:
            txn.insert("S", (uuid,))
        txn.commit()
    return {ident: uuid for uuid, ident in _ID32.dump("Id")}


@pytest.fixture
def golden_check(request: pytest.FixtureRequest) -> Callable[[Path, str, str], None]:
    """Compare `rendered` with the golden file (`pytest --update-snapshots` rewrites it);
    on a difference, fail with the diff, saying what differs (`what`)."""

    def check(golden: Path, rendered: str, what: str) -> None:
        if request.config.getoption("--update-snapshots"):
            golden.write_text(rendered)
            return
        assert golden.exists(), f"{golden} is missing: run pytest --update-snapshots and review it"
        expected = golden.read_text()
        if rendered != expected:
            diff = "".join(difflib.unified_diff(
                expected.splitlines(keepends=True), rendered.splitlines(keepends=True),
                fromfile=str(golden), tofile="rendered"))  # fmt: skip
            pytest.fail(f"{what} differs from {golden.name}:\n{diff}")

    return check


@pytest.fixture
def scenario(
    admin: ApiClient,
    controller: LogicalController,
    universal_db: OvsdbServer,
    config_db: OvsdbServer,
) -> Callable[[list[dict[str, Any]]], Scenario]:
    """Run a list of steps; returns the Scenario (render() it to compare)."""

    def run(steps: list[dict[str, Any]]) -> Scenario:
        s = Scenario(admin, controller, universal_db, config_db)
        s.run(steps)
        return s

    return run


VSWITCH_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


class DummySwitch:
    """A real ovs-vswitchd (dummy datapath) with one bridge, to check flows are valid."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.db = OvsdbServer(state_dir, VSWITCH_SCHEMA, name="conf")
        self.ctl = state_dir / "ovs-vswitchd.ctl"
        self.mgmt = state_dir / "br-int.mgmt"
        self.vswitchd = Daemon(
            "ovs-vswitchd",
            [
                tool("ovs-vswitchd"),
                f"unix:{self.db.socket_path}",
                "--enable-dummy=system",
                "--disable-system",
                "--disable-system-route",
                "--no-chdir",
                f"--unixctl={self.ctl}",
                f"--log-file={state_dir / 'ovs-vswitchd.log'}",
                "-vconsole:off",
            ],
            state_dir,
            env={"OVS_RUNDIR": str(state_dir)},
        )

    def vsctl(self, *args: str) -> str:
        """Run ovs-vsctl against this switch's database."""
        return subprocess.run(
            [tool("ovs-vsctl"), f"--db=unix:{self.db.socket_path}", "--timeout=30", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def start(self) -> DummySwitch:
        """Start both daemons and create br-int (dummy datapath, fail mode secure)."""
        self.db.start()
        self.vsctl("--no-wait", "init")
        self.vswitchd.start(ready=self.ctl.exists)
        self.vsctl(
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath_type=dummy",
            "fail-mode=secure",
            "protocols=OpenFlow15",
        )
        return self

    def replace_flows(self, flows: list[str]) -> subprocess.CompletedProcess[str]:
        """Replace the bridge's flows with `flows` (ovs-ofctl syntax), in one bundle."""
        path = self.state_dir / "flows.txt"
        path.write_text("\n".join(flows) + "\n")
        return subprocess.run(
            [
                tool("ovs-ofctl"),
                "-O",
                "OpenFlow15",
                "--bundle",
                "replace-flows",
                f"unix:{self.mgmt}",
                str(path),
            ],
            capture_output=True,
            text=True,
        )

    def stop(self) -> None:
        """Stop both daemons."""
        self.vswitchd.stop()
        self.db.stop()


@pytest.fixture(scope="module")
def dummy_switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DummySwitch]:
    """One dummy-datapath OVS for a test module, stopped at teardown."""
    switch = DummySwitch(tmp_path_factory.mktemp("ovs"))
    try:
        yield switch.start()
    finally:
        switch.stop()


NEXTHOP_MAC = "00:00:00:00:00:fe"
"""The MAC every L3 service's next hop has in these tests."""


class AnyNextHop(dict[str, str]):
    """Identifier values for `localize`: every `${nexthop_mac:G}` is `NEXTHOP_MAC`."""

    def __missing__(self, ident: str) -> str:
        if ident.startswith("nexthop_mac:"):
            return NEXTHOP_MAC
        raise KeyError(ident)


def localize(row: dict[str, Any], bindings: Mapping[str, str] | None = None) -> str:
    """One universal flow (a `dump_universal` row) as an ovs-ofctl flow, as the physical
    controller translates it (`loom_physical.translate`: the same on every node)."""
    flow = UniversalFlow(STAGES[row["stage"]], row["priority"], row["match"], row["actions"])
    out = physical(row["datapath"], flow, row["cookie"], bindings or AnyNextHop())
    return out.text()


@pytest.fixture
def openflow_check(dummy_switch: DummySwitch) -> Callable[[str], int]:
    """Check that every universal flow of a universal DB, localized with dummy bindings, is
    accepted by a real ovs-vswitchd (syntax, prerequisites, action consistency); returns
    the number of flows installed. (The same flow wanted for two objects is one OpenFlow
    flow, as the physical controller installs it.)"""

    def check(remote: str) -> int:
        rows = dump_universal(remote).get("Universal_Flow", [])
        # one flow per match (the same flow may be in two objects' rows, with their cookies)
        by_match = {re.sub(r",cookie=0x[0-9a-f]+", "", f): f
                    for f in sorted(localize(r) for r in rows)}  # fmt: skip
        flows = sorted(by_match.values())
        result = dummy_switch.replace_flows(flows)
        assert result.returncode == 0, f"ovs-ofctl rejected the flows: {result.stderr}"
        dumped = subprocess.run(
            [tool("ovs-ofctl"), "-O", "OpenFlow15", "dump-flows", f"unix:{dummy_switch.mgmt}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        installed = [line for line in dumped.splitlines() if "actions=" in line]
        assert len(installed) == len(flows), (len(installed), len(flows))
        return len(flows)

    return check
