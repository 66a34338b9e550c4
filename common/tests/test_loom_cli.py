"""The `loom` command: `loom db` on real servers, and the pieces of `loom up` it shares."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loom_common import cli
from loom_common.ovsdb import free_port, tool
from loom_common.procs import pid_exists
from loom_common.supervise import RestartPolicy, Supervisor

LOOM = Path(sys.executable).parent / "loom"


def _ovsdb_pids(state: Path) -> list[int]:
    """The PIDs recorded in the pid files under `state` (ovsdb-server writes them too)."""
    return [int(p.read_text()) for p in sorted(state.rglob("*ovsdb-server.pid"))]


def _list_dbs(remote: str) -> list[str]:
    out = subprocess.run(
        [tool("ovsdb-client"), "--timeout=10", "list-dbs", remote],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


@contextlib.contextmanager
def _loom(state: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run `loom ARGS...`; yield it with its first line of output; never leave it running.

    If a test fails with `loom` still up, it gets SIGTERM (it then stops its servers); as a
    last resort it and the servers it recorded under `state` are killed by PID.
    """
    proc = subprocess.Popen(
        [str(LOOM), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    try:
        yield proc, proc.stdout.readline()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                for pid in _ovsdb_pids(state):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        proc.stdout.close()


@pytest.mark.ovs
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_db_standalone_serves_until_signal(tmp_path: Path, how: signal.Signals) -> None:
    port = free_port()
    with _loom(tmp_path, "db", "--state-dir", str(tmp_path), "--port", str(port)) as (proc, line):
        assert line.strip() == f"config DB: tcp:127.0.0.1:{port}", line
        assert "Loom_Config" in _list_dbs(f"tcp:127.0.0.1:{port}")
        (pid,) = _ovsdb_pids(tmp_path)
        assert pid_exists(pid)
        proc.send_signal(how)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, rest
        assert not pid_exists(pid)
        assert (tmp_path / "config-db" / "config.db").exists()


@pytest.mark.ovs
def test_db_cluster_prints_every_member_and_stops_them(tmp_path: Path) -> None:
    with _loom(tmp_path, "db", "--state-dir", str(tmp_path), "--cluster") as (proc, line):
        assert line.startswith("config DB: "), line
        remotes = line.removeprefix("config DB: ").strip().split(",")
        assert len(remotes) == 3
        assert all(r.startswith("tcp:127.0.0.1:") for r in remotes)
        for remote in remotes:
            assert "Loom_Config" in _list_dbs(remote)
        pids = _ovsdb_pids(tmp_path)
        assert len(pids) == 3
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, rest
        assert not [pid for pid in pids if pid_exists(pid)]


def test_up_options_and_defaults() -> None:
    args = cli.parse_args(["up"])
    assert (args.api_port, args.admin_token, args.state_dir) == (8080, None, "run/loom")
    assert (args.db_cluster, args.tenant_token) == (False, [])
    args = cli.parse_args(
        ["up", "--api-port", "9000", "--admin-token", "t", "--state-dir", "s", "--db-cluster",
         "--tenant-token", "a=x", "--tenant-token", "b=y"]
    )  # fmt: skip
    assert (args.api_port, args.admin_token, args.state_dir) == (9000, "t", "s")
    assert (args.db_cluster, args.tenant_token) == (True, ["a=x", "b=y"])


@pytest.mark.parametrize("bad", ["a", "=x", "a="])
def test_up_rejects_malformed_tenant_token(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse_args(["up", "--tenant-token", bad])
    assert "expected TENANT=TOKEN" in capsys.readouterr().err


def test_api_command_is_the_contract_with_loom_api(tmp_path: Path) -> None:
    tokens = tmp_path / "tenant-tokens"
    assert cli.api_command("tcp:127.0.0.1:1,tcp:127.0.0.1:2", 8080, tokens) == [
        sys.executable, "-m", "loom_api", "--db=tcp:127.0.0.1:1,tcp:127.0.0.1:2",
        "--listen=127.0.0.1:8080", f"--tenant-tokens-file={tokens}",
    ]  # fmt: skip
    noauth = cli.api_command("tcp:127.0.0.1:1", 8080, None, "noauth")
    assert noauth[-1] == "--neutron-auth=noauth"
    assert not any("token=" in arg for arg in noauth), "no secret on the command line"


def test_the_demo_is_found_through_the_lab_s_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`loom up --demo` runs the module the lab declares in the `loom.demo` group; without the
    lab, it is refused with one line that says what is missing."""
    assert cli.demo_module() == "loom_lab.demo"  # the workspace installs the lab
    deployment = cli.Deployment(tmp_path, api_port=8080, admin_token="secret", tenant_tokens=[],
                                db_cluster=False)  # fmt: skip
    assert deployment.demo_command(check=True)[1:3] == ["-m", "loom_lab.demo"]
    assert "secret" not in str(deployment.demo_command(check=True)), "the token is in its env"
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    with pytest.raises(cli.NoDemo, match=r"--demo needs Loom's lab .* 'loom.demo'"):
        cli.demo_module()


def test_the_admin_token_comes_from_a_file_the_environment_or_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "admin"
    path.write_text("  from-file\n")
    args = cli.parse_args(["up", "--admin-token-file", str(path)])
    assert cli.admin_token(args, {cli.TOKEN_ENV: "from-env"}) == (
        "from-file",
        f"--admin-token-file {path}",
    )
    args = cli.parse_args(["up", "--admin-token", "from-flag"])
    assert cli.admin_token(args, {cli.TOKEN_ENV: "from-env"}) == ("from-env", cli.TOKEN_ENV)
    assert cli.admin_token(args, {}) == ("from-flag", "--admin-token")
    generated, source = cli.admin_token(cli.parse_args(["up"]), {})
    assert len(generated) >= 20
    assert source == "random, made for this run"
    path.write_text("\n")
    with pytest.raises(cli.UsageError, match="is empty"):
        cli.admin_token(cli.parse_args(["up", "--admin-token-file", str(path)]), {})
    with pytest.raises(cli.UsageError, match=r"--admin-token-file: .*No such file"):
        cli.admin_token(cli.parse_args(["up", "--admin-token-file", str(tmp_path / "x")]), {})


def test_secrets_are_written_for_their_owner_only(tmp_path: Path) -> None:
    path = cli.write_secret(tmp_path / "d" / "tenant-tokens", "a=x\n")
    assert path.read_text() == "a=x\n"
    assert path.stat().st_mode & 0o777 == 0o600


def test_first_signal_raises_stopped_later_ones_are_ignored() -> None:
    installed: dict[int, object] = {}

    def install(signum: int, handler: object) -> None:
        installed[signum] = handler

    cli.stop_on_signals(install)
    handler = installed[signal.SIGTERM]
    assert callable(handler)
    with pytest.raises(cli.Stopped) as stopped:
        handler(signal.SIGTERM, None)
    assert stopped.value.signum == signal.SIGTERM
    assert installed == {signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_IGN}


class _Proc:
    def __init__(self) -> None:
        self.running = True
        self.stopped = False
        self.restarts = 0

    def stop(self) -> None:
        self.running = False
        self.stopped = True

    def restart(self) -> None:
        self.restarts += 1
        self.running = True


def test_watch_restarts_a_dead_daemon_reports_the_demo_once_and_stop_is_newest_first(
    tmp_path: Path,
) -> None:
    deployment = cli.Deployment(
        tmp_path, api_port=1, admin_token="t", tenant_tokens=[], db_cluster=False
    )
    db, api, demo = _Proc(), _Proc(), _Proc()
    deployment.processes = {"config DB": db, "API server": api, "demo nodes": demo}
    reports: list[str] = []
    ticks = [0]

    def sleep(seconds: float) -> None:
        ticks[0] += 1
        if ticks[0] == 1:
            api.running = demo.running = False
        if ticks[0] == 3:
            raise cli.Stopped(signal.SIGINT)

    supervisor = Supervisor(deployment.processes, lambda n: n not in cli.UNSUPERVISED,
                            policy=RestartPolicy(first_delay=0.0), where=str(tmp_path))  # fmt: skip
    with pytest.raises(cli.Stopped):
        cli.watch(deployment, sleep=sleep, err=reports.append, supervisor=supervisor)
    assert api.restarts == 1
    assert api.running
    assert db.restarts == 0
    assert demo.restarts == 0
    assert reports[0] == "loom: API server exited; restarting it in 0.00 s"
    assert reports[1].startswith("loom: API server restarted (")
    assert reports[2:] == [f"loom: demo nodes exited; see its log under {tmp_path}"]

    del deployment.processes["demo nodes"]
    order: list[str] = []
    db.stop = lambda: order.append("db")  # type: ignore[method-assign]
    api.stop = lambda: order.append("api")  # type: ignore[method-assign]
    deployment.stop()
    assert order == ["api", "db"]
    assert deployment.processes == {}


def test_loom_up_s_own_lines_are_json_objects_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with cli.own_lines("json"):
        print("Loom is up. State in run/loom", flush=True)
        print("  API:", end="")  # a line written in parts is one object
        print("         http://127.0.0.1:8080/api/v1")
        print("loom up: api-server: exited", file=sys.stderr)
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(line["component"], line["level"], line["logger"]) for line in lines] == [
        ("up", "INFO", "loom.up")
    ] * 2
    assert [line["message"] for line in lines] == [
        "Loom is up. State in run/loom",
        "  API:         http://127.0.0.1:8080/api/v1",
    ]
    (problem,) = [json.loads(line) for line in err.splitlines()]
    assert (problem["level"], problem["message"]) == ("WARNING", "loom up: api-server: exited")
    with cli.own_lines("text"):
        print("as written")
    assert capsys.readouterr().out == "as written\n"
