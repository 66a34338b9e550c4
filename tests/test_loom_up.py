"""`loom up` end to end: it starts the config DB and the API, serves, and a signal stops all."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_common.ovsdb import free_port, tool
from loom_common.pki import Credentials, Pki
from loom_common.procs import pid_exists
from loom_common.testing import wait_for

pytestmark = [pytest.mark.ovs, pytest.mark.zk]

LOOM = Path(sys.executable).parent / "loom"


def _descendants(pid: int) -> set[int]:
    """Return the PIDs of every descendant of `pid`."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True)
    parents: dict[int, list[int]] = {}
    for line in out.stdout.splitlines():
        child, parent = (int(x) for x in line.split())
        parents.setdefault(parent, []).append(child)
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    """GET `url`; return the status and body, error statuses included."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            status: int = r.status
            return status, r.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()
    except urllib.error.URLError as exc:  # nobody listens there
        return 0, str(exc).encode()


@contextlib.contextmanager
def _loom_up(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run `loom up ARGS...`; yield it with its banner (up to "Ctrl-C ...").

    Never leaves it running: on a failed test it gets SIGTERM (and stops its daemons); as a
    last resort it and its descendants are killed by PID.
    """
    proc = subprocess.Popen(
        [str(LOOM), "up", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C stops everything." in line:  # (a JSON object's message with --log-format)
                break
        yield proc, "".join(lines)
    finally:
        if proc.poll() is None:
            children = _descendants(proc.pid)
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                for pid in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        proc.stdout.close()


def _wait_for_logical_realization(universal: str, generation: int, timeout: float = 30) -> None:
    """Wait until the logical controller has written `generation` to the universal DB."""
    deadline = time.monotonic() + timeout
    query = json.dumps(["Loom_Universal", {"op": "select", "table": "Universal_Global",
                                           "where": []}])  # fmt: skip
    while True:
        out = subprocess.run(
            [tool("ovsdb-client"), "transact", universal, query], capture_output=True, text=True
        )
        rows = json.loads(out.stdout)[0]["rows"] if out.returncode == 0 else []
        if rows and rows[0]["generation"] >= generation:
            return
        assert time.monotonic() < deadline, f"generation {generation} not written: {rows}"
        time.sleep(0.05)


def _db_remotes(banner: str, label: str) -> tuple[str, str]:
    """A database's line of the banner: (its TCP remote, its remote for this host)."""
    (line,) = [ln for ln in banner.splitlines() if f"{label}:" in ln]
    m = re.search(r":\s+(\S+) \(this host: (\S+)\)", line)
    assert m is not None, line
    return m.group(1), m.group(2)


def _only_loom_certificates_reach(remote: str, pki: Pki) -> None:
    """A database's TCP port answers a client with a Loom process's certificate, and
    nobody else: not a plain TCP client, not a transport node's certificate."""
    first = remote.split(",")[0]

    def list_dbs(target: str, who: Credentials | None) -> subprocess.CompletedProcess[str]:
        tls = []
        if who is not None:
            tls = [f"--private-key={who.private_key}", f"--certificate={who.certificate}",
                   f"--ca-cert={who.peer_ca}"]  # fmt: skip
        return subprocess.run([tool("ovsdb-client"), "--timeout=5", *tls, "list-dbs", target],
                              capture_output=True, text=True)  # fmt: skip

    loom = list_dbs(first, pki.internal("loom-test-client"))
    assert loom.returncode == 0, loom.stderr
    assert "Loom_" in loom.stdout
    node = pki.issue("hv-test", "switch")
    trusting_loom = Credentials(node.private_key, node.certificate,
                                pki.ca_certificate("controller"))  # fmt: skip
    assert list_dbs(first, trusting_loom).returncode != 0
    assert list_dbs("tcp:" + first.partition(":")[2], None).returncode != 0


def _loom(state: Path, *args: str) -> str:
    """Run a `loom` client command on the deployment in `state`; its output (it must
    succeed)."""
    done = subprocess.run([str(LOOM), *args, "--state-dir", str(state)], capture_output=True,
                          text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                      if not k.startswith("LOOM_")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _the_client_commands_work(state: Path) -> None:
    """`loom create/list/get/set/show/status/delete` against the running deployment, found
    through the client file `loom up` left (no URL or token given)."""
    switch = _loom(state, "create", "switch", "name=web", "tenant=t1", "--wait").strip()
    _loom(state, "create", "port", "--parent", "web", "name=p1", "mac=50:54:00:00:00:01",
          'ips=["10.0.0.5"]', "attachment.type=vif", "attachment.vif_id=vif-1")  # fmt: skip
    listed = _loom(state, "list", "ports", "--parent", switch).splitlines()
    assert listed[0].split() == ["ID", "NAME", "MAC", "IPS", "TRANSPORT_NODE", "UP"]
    assert listed[1].split()[1:] == ["p1", "50:54:00:00:00:01", "10.0.0.5", "-", "no"]
    assert json.loads(_loom(state, "get", "port", "p1", "--parent", "web", "--format",
                            "json"))["ips"] == ["10.0.0.5"]  # fmt: skip
    _loom(state, "set", "switch", "web", "description=front end", "--wait")
    assert '"front end"' in _loom(state, "get", "switch", switch)
    shown = _loom(state, "show")
    assert f"    switch web ({switch})" in shown
    assert "        port p1: 50:54:00:00:00:01 10.0.0.5 (vif) on not bound, down" in shown
    assert "lag 0" in _loom(state, "status")
    _loom(state, "delete", "port", "p1", "--parent", "web", "--wait")
    assert len(_loom(state, "list", "ports", "--parent", "web").splitlines()) == 1
    refused = subprocess.run([str(LOOM), "create", "switch", "bogus=1", "--state-dir",
                              str(state)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 1
    assert "POST /logical-switches: 400" in refused.stderr
    assert "bogus" in refused.stderr
    _names_serve_wherever_ids_do(state)


def _names_serve_wherever_ids_do(state: Path) -> None:
    """A reference field takes a name as `--parent` does; a name two objects have is
    refused, listing both."""
    profile = _loom(state, "create", "profile", "name=web-profile", "tenant=t1").strip()
    _loom(state, "create", "port", "--parent", "web", "name=p2",
          'security_profile_ids=["web-profile"]')  # fmt: skip
    port = json.loads(_loom(state, "get", "port", "p2", "--parent", "web", "--format", "json"))
    assert port["security_profile_ids"] == [profile]
    first = _loom(state, "create", "switch", "name=twin", "tenant=t1").strip()
    second = _loom(state, "create", "switch", "name=twin", "tenant=t2").strip()
    router = _loom(state, "create", "router", "name=r1", "tenant=t1").strip()
    ambiguous = subprocess.run(
        [str(LOOM), "create", "router-port", "--parent", router, "logical_switch_id=twin",
         "ip_prefix=10.9.0.1/24", "mac=00:00:00:aa:00:09", "--state-dir", str(state)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ambiguous.returncode == 1
    assert "several switches named 'twin'" in ambiguous.stderr, ambiguous.stderr
    assert f"{first} (tenant t1)" in ambiguous.stderr
    assert f"{second} (tenant t2)" in ambiguous.stderr


def _every_daemon_serves_metrics(banner: str) -> None:
    """The banner names each daemon's /metrics; each answers in Prometheus text with what
    that daemon is to export."""
    urls = {name: url for url, name in re.findall(r"metrics:\s+(\S+) \((.+)\)", banner)}
    assert set(urls) == {"API server", "logical controller 0", "physical controller 0"}, banner
    wanted = {"API server": ("loom_api_requests_total", 'loom_api_generation{kind="config"}'),
              "logical controller 0": ('loom_controller_pass_seconds_bucket{component="logical"',
                                       'loom_controller_generation{component="logical"',
                                       'loom_native_memory_bytes{component="logical"'),
              "physical controller 0": ("loom_physical_nodes{",
                                        'loom_cluster_member{component="physical"')}  # fmt: skip
    for name, url in urls.items():
        status, body = _get(url)
        assert status == 200, (name, body)
        for metric in wanted[name]:
            assert metric in body.decode(), (name, metric)


def test_up_serves_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    args = ["--api-port", str(port), "--admin-token", "t", "--state-dir", str(tmp_path / "s")]
    with _loom_up(*args) as (proc, banner):
        assert f"API:         http://127.0.0.1:{port}/api/v1" in banner, banner
        token_file = tmp_path / "s" / "admin-token"
        assert f"admin token: in {token_file} (--admin-token)\n" in banner, banner
        assert token_file.read_text() == "t\n"
        config, _ = _db_remotes(banner, "config DB")
        universal_tls, universal = _db_remotes(banner, "universal DB")
        assert config.startswith("ssl:127.0.0.1:"), banner  # TLS only, for other hosts
        assert universal_tls.startswith("ssl:127.0.0.1:"), banner
        assert universal.startswith("unix:"), banner  # this host's daemons
        assert "ZooKeeper:   127.0.0.1:" in banner
        assert "nodes dial:  ssl:127.0.0.1:" in banner  # TLS by default, its PKI made here
        assert "loom up: the config DB\n" in banner  # its start-up steps (not a terminal)
        assert "loom up: ready in " in banner
        assert (tmp_path / "s" / "pki" / "switchca" / "cacert.pem").exists()
        children = _descendants(proc.pid)
        assert len(children) >= 5, "expected 2 ovsdb-servers, ZooKeeper, API, controller"

        assert _get(f"http://127.0.0.1:{port}/api/v1/health")[0] == 200
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/logical-switches",
            data=json.dumps({"name": "ls0"}).encode(),
            headers={"Authorization": "Bearer t", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 201
            generation = int(response.headers["X-Loom-Config-Generation"])
            assert generation >= 1
        _wait_for_logical_realization(universal, generation)
        _only_loom_certificates_reach(config, Pki(tmp_path / "s" / "pki"))
        _the_client_commands_work(tmp_path / "s")
        _every_daemon_serves_metrics(banner)

        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, rest
        assert "Loom stopped." in rest
        assert not [pid for pid in children if pid_exists(pid)]


def test_up_db_cluster_with_tenant_token_and_sigterm(tmp_path: Path) -> None:
    port = free_port()
    args = ["--api-port", str(port), "--state-dir", str(tmp_path / "s"), "--db-cluster",
            "--tenant-token", "tenant-a=ta"]  # fmt: skip
    with _loom_up(*args) as (proc, banner):
        assert "config DB:" in banner, banner
        members, local = _db_remotes(banner, "config DB")
        assert [m.partition(":")[0] for m in members.split(",")] == ["ssl"] * 3, banner
        assert len(local.split(",")) == 3, banner
        _only_loom_certificates_reach(members, Pki(tmp_path / "s" / "pki"))
        token_file = (tmp_path / "s" / "admin-token").resolve()
        assert f"admin token: in {token_file} (random, made for this run)\n" in banner, banner
        admin = token_file.read_text().strip()
        assert len(admin) >= 20, "a generated token is long and random"
        assert admin not in banner, "the banner ends up in logs: never the token"
        children = _descendants(proc.pid)
        assert len(children) >= 6, "expected 4 ovsdb-servers, ZooKeeper, API, controller"

        url = f"http://127.0.0.1:{port}/api/v1/logical-switches"
        assert _get(url, admin)[0] == 200
        assert _get(url, "ta")[0] == 200
        assert _get(f"http://127.0.0.1:{port}/v2.0/networks")[0] == 401, "token auth by default"

        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, rest
        assert not [pid for pid in children if pid_exists(pid)]


def _command_lines() -> list[str]:
    out = subprocess.run(["ps", "-e", "-ww", "-o", "args="], capture_output=True, text=True)
    return out.stdout.splitlines()


def test_up_takes_tokens_from_files_and_a_second_up_is_refused(tmp_path: Path) -> None:
    """Tokens from files reach the API, and no command line shows them; a second `loom up`
    on the same state directory says in one line who holds it and touches nothing."""
    port = free_port()
    state = tmp_path / "s"
    admin_file, tenants_file = tmp_path / "admin", tmp_path / "tenants"
    admin_file.write_text("admin-secret-from-a-file\n")
    tenants_file.write_text("# tenant tokens\ntenant-b=tenant-b-secret-from-a-file\n")
    args = [
        "--api-port",
        str(port),
        "--state-dir",
        str(state),
        "--admin-token-file",
        str(admin_file),
        "--tenant-tokens-file",
        str(tenants_file),
    ]
    with _loom_up(*args) as (proc, banner):
        assert "secret-from-a-file" not in banner, "a token printed"
        assert f"(--admin-token-file {admin_file})" in banner, banner
        url = f"http://127.0.0.1:{port}/api/v1/logical-switches"
        status, body = _get(url, "admin-secret-from-a-file")
        assert status == 200, (body, banner)
        assert _get(url, "tenant-b-secret-from-a-file")[0] == 200
        assert _get(url, "wrong")[0] == 401
        shown = [line for line in _command_lines() if "secret-from-a-file" in line]
        assert shown == [], "a token on a command line"

        pid_files = {p: p.read_text() for p in state.rglob("*.pid")}
        assert len(pid_files) >= 5
        second = subprocess.run(
            [str(LOOM), "up", "--api-port", str(free_port()), "--state-dir", str(state)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 1
        assert second.stderr == (
            f"loom up: the state directory {state} is in use by loom (pid {proc.pid}); stop "
            "it first, or give another --state-dir\n"
        )
        assert {p: p.read_text() for p in state.rglob("*.pid")} == pid_files
        assert _get(url, "admin-secret-from-a-file")[0] == 200, "the first one still serves"


def test_up_neutron_noauth_on_another_address_and_a_fixed_manager_port(tmp_path: Path) -> None:
    """`--listen` moves every listener (another loopback address here), `--manager-port`
    fixes where nodes dial (`--neutron-auth noauth` on the way)."""
    port, manager = free_port(), free_port()
    args = ["--api-port", str(port), "--admin-token", "t", "--state-dir", str(tmp_path / "s"),
            "--neutron-auth", "noauth", "--listen", "127.0.0.2", "--manager-port",
            str(manager), "--log-format", "json"]  # fmt: skip
    with _loom_up(*args) as (proc, json_banner):
        own = [json.loads(line) for line in json_banner.splitlines()]  # every line of loom up's
        assert {line["component"] for line in own} == {"up"}, json_banner
        banner = "".join(line["message"] + "\n" for line in own)
        assert f"Neutron API: http://127.0.0.2:{port}/v2.0 (noauth)" in banner, banner
        assert f"nodes dial:  ssl:127.0.0.2:{manager} (OVSDB manager)" in banner, banner
        assert _db_remotes(banner, "config DB")[0].startswith("ssl:127.0.0.2:"), banner
        status, body = _get(f"http://127.0.0.2:{port}/v2.0/networks")
        assert status == 200, body
        assert json.loads(body) == {"networks": []}
        assert _get(f"http://127.0.0.2:{port}/api/v1/logical-switches")[0] == 401
        assert _get(f"http://127.0.0.1:{port}/api/v1/health")[0] == 0, "not on 127.0.0.1"
        request = urllib.request.Request(
            f"http://127.0.0.2:{port}/v2.0/networks", method="POST",
            data=json.dumps({"network": {"name": "n1"}}).encode(),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 201
        state = tmp_path / "s"
        lines = [json.loads(line) for line in (state / "api-server.log").read_text().splitlines()]
        assert {line["component"] for line in lines} == {"api"}
        messages = [line["message"] for line in lines]
        assert any("connected" in m for m in messages), messages  # python-ovs's, as JSON
        ovs_lines = [line["message"] for line in lines if line["logger"].startswith("ovs.")]
        assert ovs_lines, "python-ovs's lines under their module's logger"
        assert not [m for m in ovs_lines if re.match(r"\d{4}-\d\d-\d\dT.*\|\d{5}\|", m)], (
            "a python-ovs line formatted twice"
        )
        assert len(messages) == len(set(messages)), "no line logged twice"
        audits = [line["message"] for line in lines if line["logger"] == "loom.audit"]
        assert len(audits) == 1, audits
        assert audits[0].startswith("noauth POST /v2.0/networks -> 201, generation ")
        (audit,) = [line for line in lines if line["logger"] == "loom.audit"]
        assert audit["generation"] >= 1
        assert audit["object"] == "/v2.0/networks"
        logical = (state / "logical-controller.log").read_text().splitlines()
        assert logical, "the logical controller logs"
        assert all(json.loads(line)["component"] == "logical" for line in logical)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
        assert proc.returncode == 0


def _processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,args="], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if text in line and "ps -e" not in line]


def test_up_fails_cleanly_when_the_api_cannot_start(tmp_path: Path) -> None:
    """The API port is taken: loom up says which daemon failed, stops the DB, exits 1."""
    state = tmp_path / "s"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(LOOM), "up", "--api-port", str(port), "--admin-token", "t",
             "--state-dir", str(state)],
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
    assert result.returncode == 1, result
    assert "loom up: api-server: exited" in result.stderr
    assert (state / "api-server.log").exists()
    assert not _processes_mentioning(str(state))


@pytest.mark.system
@pytest.mark.timeout(300)
def test_loom_up_demo_check(tmp_path: Path) -> None:
    """`loom up --demo --check`: the whole deployment, 4 simulated nodes, two tenants;
    exit 0 only if every expected connectivity outcome held, and nothing is left running."""
    done = subprocess.run(
        [str(LOOM), "up", "--demo", "--check", "--state-dir", str(tmp_path / "state"),
         "--api-port", str(free_port())],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "demo: every outcome held" in done.stdout
    report = json.loads((tmp_path / "state" / "demo" / "demo.json").read_text())
    results = report["results"]
    assert len(results) == 90
    if os.geteuid() == 0:  # VMs in network namespaces: real ping and TCP
        assert report["datapath"] == "netdev"
        assert len(report["transfers"]) == 2
        assert all(t["bytes"] == t["sent"] > 0 for t in report["transfers"])
    assert any(r["expected"] and r["observed"] for r in results)
    assert any(not r["expected"] and not r["observed"] for r in results)
    assert "Loom stopped." in done.stdout


DAEMON_PIDS = {
    "config DB": "config-db/config-ovsdb-server.pid",
    "universal DB": "universal-db/universal-ovsdb-server.pid",
    "ZooKeeper": "zookeeper/zk.pid",
    "API server": "api-server.pid",
    "logical controller": "logical-controller.pid",
    "physical controller": "physical-controller.pid",
}
"""Each daemon `loom up` runs, and its pid file under the state directory."""


def _running_pid(path: Path, parent: int) -> int | None:
    """The PID in `path` if that process runs and descends from `parent` (ours to signal)."""
    try:
        pid = int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_exists(pid) and pid in _descendants(parent) else None


def _serving(url: str) -> bool:
    """The API answers `url` with 200 (not refused, not 503)."""
    try:
        return _get(url)[0] == 200
    except OSError:  # (URLError is one) refused: the API server is down
        return False


def _create_switch(port: int, name: str) -> int:
    """Create a switch through the API; return the generation acknowledged."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/logical-switches",
        data=json.dumps({"name": name}).encode(),
        headers={"Authorization": "Bearer t", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201
        return int(response.headers["X-Loom-Config-Generation"])


@pytest.mark.system
@pytest.mark.timeout(300)
def test_up_restarts_each_daemon_that_dies(tmp_path: Path) -> None:
    """kill -9 of each daemon in turn: `loom up` starts it again and says so, the API serves
    again, and a write made afterwards is realized; how long from the kill until the
    restarted daemon was ready and the API served is printed (the fault matrix's figures)."""
    port = free_port()
    state = tmp_path / "s"
    args = ["--api-port", str(port), "--admin-token", "t", "--state-dir", str(state)]
    health = f"http://127.0.0.1:{port}/api/v1/health"
    with _loom_up(*args) as (proc, banner):
        assert proc.stdout is not None
        _, universal = _db_remotes(banner, "universal DB")
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.extend(proc.stdout or []), daemon=True)
        reader.start()
        downtime: dict[str, float] = {}
        for i, (name, pid_file) in enumerate(DAEMON_PIDS.items()):
            path = state / pid_file
            pid = _running_pid(path, proc.pid)
            assert pid is not None, f"{name}: no running process in {path}"
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            deadline = killed + 60
            line = f"loom: {name} restarted ("
            while not (any(s.startswith(line) for s in said) and _serving(health)):
                assert proc.poll() is None, "loom up exited"
                assert time.monotonic() < deadline, f"{name} not restarted: {said}"
                time.sleep(0.02)
            downtime[name] = round(time.monotonic() - killed, 2)
            assert _running_pid(path, proc.pid) not in (None, pid)
            _wait_for_logical_realization(universal, _create_switch(port, f"ls{i}"), timeout=60)
        print(json.dumps({"kill_to_restarted_and_api_serving_s": downtime}))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        reader.join(timeout=10)
    text = "".join(said)
    for name in DAEMON_PIDS:
        assert f"loom: {name} exited; restarting it in " in text, text
    assert "not restarting it again" not in text
    assert "Loom stopped." in text


def _chromium() -> str:
    """Headless Chromium's path (a missing one fails the test: `make install` installs it)."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium (Debian's) is needed: make install installs it"
    return chromium


def _chromium_env(scratch: str) -> dict[str, str]:
    """Chromium's environment: its temporary files (the singleton socket's directory, which
    a killed Chromium leaves) in `scratch`, which the caller removes (short: the socket's
    path must fit a sockaddr_un)."""
    return {**os.environ, "TMPDIR": scratch}


def _page(url: str, profile: Path) -> str:
    """The DOM headless Chromium has after the page's scripts ran (virtual time: the
    page's fetches answered and drawn); its files in `profile`."""
    chromium = _chromium()
    with tempfile.TemporaryDirectory(prefix="lc") as scratch:
        done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                               f"--user-data-dir={profile}", "--virtual-time-budget=8000",
                               "--dump-dom", url], env=_chromium_env(scratch),
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Browser:
    """Headless Chromium driven over its DevTools pipe (`--remote-debugging-pipe`: JSON
    messages ended by NUL on file descriptors 3 and 4, no library needed): open a page,
    evaluate expressions in it. `close()` stops it by PID. Its files go to `profile` (a
    Chromium killed leaves its singleton files where it keeps them)."""

    def __init__(self, profile: Path) -> None:
        chromium = _chromium()
        self._scratch = tempfile.mkdtemp(prefix="lc")
        theirs_r, ours_w = os.pipe()
        ours_r, theirs_w = os.pipe()

        def onto_3_and_4() -> None:  # (in the child: Chromium's pipe descriptors)
            # (first out of the way: one of them may be 3 or 4 already)
            high_r, high_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (theirs_r, theirs_w))
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        # close_fds=False: the descriptors dup2 made must survive until exec (Python's own
        # are close-on-exec anyway)
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=onto_3_and_4, close_fds=False, env=_chromium_env(self._scratch),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(theirs_r)
        os.close(theirs_w)
        self._w, self._r = ours_w, ours_r
        self._buffer = b""
        self._id = 0
        self.session = ""

    def _call(self, method: str, params: dict[str, Any], session: str = "") -> Any:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._w, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._r, 65536)
                assert chunk, "chromium closed its DevTools pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                assert "error" not in reply, reply
                return reply["result"]

    def open(self, url: str) -> None:
        """Open `url` in a new tab, which `evaluate` then looks at."""
        target = self._call("Target.createTarget", {"url": url})["targetId"]
        self.session = self._call("Target.attachToTarget",
                                  {"targetId": target, "flatten": True})["sessionId"]  # fmt: skip

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the open page."""
        result = self._call("Runtime.evaluate", {"expression": expression,
                                                 "returnByValue": True}, self.session)  # fmt: skip
        return result["result"].get("value")

    def close(self) -> None:
        """Stop Chromium (by its PID) and close the pipe."""
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._w)
        os.close(self._r)
        shutil.rmtree(self._scratch, ignore_errors=True)


def test_the_web_page_follows_changes_without_a_reload(tmp_path: Path) -> None:
    """The page, open in a browser, draws a port created after it loaded, in the same
    document (a marker set in the page survives: no reload)."""
    port = free_port()
    state = tmp_path / "s"
    args = ["--api-port", str(port), "--admin-token", "t", "--state-dir", str(state)]
    with _loom_up(*args):
        _loom(state, "create", "switch", "name=web", "tenant=acme")
        _loom(state, "create", "port", "--parent", "web", "name=p1", "--wait")
        browser = Browser(tmp_path / "chromium")
        try:
            browser.open(f"http://127.0.0.1:{port}/ui/#token=t")
            ports = "document.querySelectorAll('[data-kind=port]').length"
            wait_for(lambda: browser.evaluate(ports) == 1, 60, "the page drew p1")
            browser.evaluate("window.loomMarker = 'same document'")
            _loom(state, "create", "port", "--parent", "web", "name=p2", "--wait")
            wait_for(lambda: browser.evaluate(ports) == 2, 60, "the page drew p2")
            names = "[...document.querySelectorAll('[data-kind=port]')].map(g => g.dataset.name)"
            assert browser.evaluate(names) == ["p1", "p2"]
            assert browser.evaluate("window.loomMarker") == "same document"
        finally:
            browser.close()


def test_the_web_page_draws_each_tenants_topology_and_the_generations(tmp_path: Path) -> None:
    """`/ui/` against a running `loom up`: a tenant's router, switch and ports (a VIF not
    bound anywhere yet, the router's port), the generations and the switch's warning;
    without a token, or with a wrong one, the page asks for one and shows nothing."""
    port = free_port()
    state = tmp_path / "s"
    args = ["--api-port", str(port), "--admin-token", "t", "--state-dir", str(state)]
    with _loom_up(*args):
        switch = _loom(state, "create", "switch", "name=web", "tenant=acme",
                       "replication_mode=service-node").strip()  # fmt: skip
        _loom(state, "create", "port", "--parent", "web", "name=p1", "mac=50:54:00:00:00:01",
              'ips=["10.0.0.5"]', "attachment.type=vif", "attachment.vif_id=vif-1")  # fmt: skip
        _loom(state, "create", "router", "name=edge", "tenant=acme")
        _loom(state, "create", "router-port", "--parent", "edge", f"logical_switch_id={switch}",
              "ip_prefix=10.0.0.1/24", "--wait")  # fmt: skip
        generation = json.loads(_loom(state, "status", "--format", "json"))["status"]
        dom = _page(f"http://127.0.0.1:{port}/ui/#token=t", tmp_path / "chromium")
        assert 'data-tenant="acme"' in dom, dom
        # (the switch asks for service-node replication, and its zone has no service node:
        # a warning, drawn on the switch and listed)
        assert '<g class="switch warned" data-kind="switch" data-name="web">' in dom, dom
        assert re.search(r'class="router" data-kind="router" data-name="edge"', dom), dom
        assert re.search(r'class="port down" data-kind="port" data-name="p1" data-node=""', dom)
        assert "10.0.0.5 · not bound" in dom
        assert "10.0.0.1 · router" in dom
        assert re.search(r'class="port other" data-kind="port" data-name="[^"]*" data-node=""',
                         dom)  # (the router's port on the switch)  # fmt: skip
        wanted = generation["config_generation"]
        assert f'<body data-generation="{wanted}">' in dom
        assert f"generation {wanted} · computed" in dom
        assert re.search(r"<li>replication \S+: switch web asks for service-node replication",
                         dom)  # fmt: skip
        for url in (f"http://127.0.0.1:{port}/ui/", f"http://127.0.0.1:{port}/ui/#token=wrong"):
            asked = _page(url, tmp_path / "chromium")
            assert '<form id="login">' in asked, asked  # shown (not hidden)
            assert 'data-kind="switch"' not in asked
        assert "that token is not accepted" in asked
        assert _get(f"http://127.0.0.1:{port}/ui/secret.txt")[0] == 404


@pytest.mark.timeout(300)
def test_trace_verdicts_are_the_packets_the_demo_sent(tmp_path: Path) -> None:
    """`loom trace` (and `loom flows`) against `loom up --demo`: for every packet the demo
    sent (ICMP, TCP 22 and TCP 23 between every pair of VMs of both tenants, which use the
    same addresses: across hypervisors, over each tenant's router), the trace through the
    universal flows delivers it to the destination's port exactly when the real packet got
    there. Through the sender's hypervisor's installed table (`--on-node`) the packet leaves
    by tunnel to the node of the port that has its address in the sender's own tenant. The
    command prints each table with its stage and object, and the verdict; `loom flows`
    finds the realized demo's node in sync."""
    from loom_lab.demo import SUBNETS, TENANTS, VMS

    vms = {f"{t}/{name}": (f"{SUBNETS[subnet]}.{host}", node)
           for t in TENANTS for name, subnet, node, host in VMS}  # fmt: skip
    state, port = tmp_path / "s", free_port()
    with _loom_up("--demo", "--api-port", str(port), "--admin-token", "t", "--state-dir",
                  str(state)):  # fmt: skip
        results = json.loads((state / "demo" / "demo.json").read_text())["results"]
        assert len(results) == 90

        def traced(src: str, packet: str, node: str | None = None) -> dict[str, Any]:
            query = {"from": src, "packet": packet, **({"node": node} if node else {})}
            url = f"http://127.0.0.1:{port}/api/v1/trace?{urllib.parse.urlencode(query)}"
            status, body = _get(url, "t")
            assert status == 200, body
            return dict(json.loads(body))

        for r in results:
            kind = r["kind"]
            wanted = "icmp4" if kind == "icmp" else f"tcp.dst == {kind.split('/')[1]}"
            body = traced(r["src"], f"ip4.dst == {vms[r['dst']][0]} && {wanted}")
            delivered = {d["name"] for d in body["verdict"]["delivered"]}
            assert (r["dst"] in delivered) == r["observed"], (r, body["verdict"])
        for src, (_, node) in vms.items():
            for dst, (ip, _) in vms.items():
                if dst == src:
                    continue
                tenant = src.split("/")[0]
                mine = next(v for v, (i, _) in vms.items() if i == ip and v.startswith(tenant))
                if mine == src:  # (the other tenant's VM with the sender's own address)
                    continue
                verdict = traced(src, f"ip4.dst == {ip} && icmp4", node)["verdict"]
                assert [(t["node"], t["port"]["name"]) for t in verdict["tunneled"]] == [
                    (vms[mine][1], mine)], (src, dst, verdict)  # fmt: skip
        printed = _loom(
            state, "trace", "--from", "red/vm1", "ip4.dst == 10.0.2.13 && tcp.dst == 23"
        )
        assert "switch red-net-a (key " in printed
        assert "router red-router (key " in printed
        assert re.search(r"\n +41 ls_out_acl +\d+ +\S+ +\[every switch\]\n", printed), printed
        assert printed.rstrip().splitlines()[-1].startswith(
            "verdict: dropped at table 41 ls_out_acl by every switch: "), printed  # fmt: skip
        allowed = _loom(
            state, "trace", "--from", "red/vm1", "ip4.dst == 10.0.2.13 && tcp.dst == 22"
        )
        assert "[security rule web: ingress IPv4 tcp 22]" in allowed, allowed
        assert allowed.rstrip().splitlines()[-1] == "verdict: delivered to red/vm3 (bound on hv3)"
        # As a reply of an established connection, TCP 23 passes the profile both ways.
        replied = _loom(state, "trace", "--from", "red/vm1", "--ct", "trk,est,rpl", "--ct",
                        "trk,est,rpl", "ip4.dst == 10.0.2.13 && tcp.dst == 23")  # fmt: skip
        assert replied.count("conntrack answered est|rpl|trk") == 2, replied
        assert replied.rstrip().splitlines()[-1] == "verdict: delivered to red/vm3 (bound on hv3)"
        flows = _loom(state, "flows", "hv1").splitlines()  # (the demo is realized: in sync)
        assert re.fullmatch(r"node hv1 \(physical controller \S+\): (\d+) flows computed, "
                            r"\1 installed, in sync", flows[0]), flows  # fmt: skip
        hv1 = _loom(state, "trace", "--from", "red/vm1", "--on-node", "hv1", "ip4.dst == 10.0.2.13")
        assert hv1.rstrip().splitlines()[-1] == (
            "verdict: tunneled to hv3 for red/vm3 (out of loom-geneve)")  # fmt: skip
