"""Transport nodes over TLS: a node gets its flows only with a certificate that names it.

A physical controller listens on `pssl:` with a controller certificate (`loom_common.pki`);
three nodes dial it over `ssl:`: hv1 with a certificate for hv1, hv2 with a valid
certificate for another node (hv9), hv3 with one from another PKI. Each has a VIF of one
switch and says its OpenFlow is at an `ssl:` address. Only hv1 is taken: its br-int listens
there with `pssl:`, gets its table over that OpenFlow connection and shows connected; hv2
is refused once it says who it is, hv3 at the handshake; neither gets a flow, and both show
not connected. And the OpenFlow channel itself refuses a switch whose certificate names
another node, or that no trusted authority signed.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.testing import ApiClient, running_store
from loom_common.apiclient import Http
from loom_common.cli import TOKEN_ENV, api_command, has_row
from loom_common.ovsdb import OvsdbServer, free_port, tool
from loom_common.pki import Credentials, Pki, client_context
from loom_common.procs import Daemon
from loom_common.testing import wait_for
from loom_logical.controller import LogicalController
from loom_ovs.channel import Channel, ChannelError
from loom_ovs.sandbox import OvsNode, Sandbox
from loom_physical.controller import PhysicalController
from loom_schemas import CONFIG_SCHEMA, UNIVERSAL_SCHEMA, schema_path

pytestmark = [pytest.mark.ovs, pytest.mark.system]

TOKEN = "tls-admin"
WAIT = 60.0


def _flows(node: OvsNode) -> int:
    """Flows in the node's br-int (0 if it has none, or no br-int)."""
    try:
        text = node.ofctl("dump-flows")
    except Exception:
        return 0
    return sum("actions=" in line for line in text.splitlines())


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki").ensure()


@pytest.fixture
def controller(
    config_db: OvsdbServer, universal_db: OvsdbServer, pki: Pki
) -> Iterator[PhysicalController]:
    tls = pki.issue("physical-0", "controller")
    physical = PhysicalController(universal_db.remote, config_db.remote,
                                  listen="pssl:0:127.0.0.1", tls=tls).start()  # fmt: skip
    try:
        yield physical
    finally:
        physical.stop()


def test_a_node_gets_its_flows_only_with_a_certificate_that_names_it(
    config_db: OvsdbServer, universal_db: OvsdbServer, controller: PhysicalController,
    pki: Pki, tmp_path: Path,
) -> None:  # fmt: skip
    assert controller.target.startswith("ssl:127.0.0.1:")
    stranger_pki = Pki(tmp_path / "stranger").ensure()
    trust = pki.ca_certificate("controller")
    certificates = {
        "hv1": pki.issue("hv1", "switch"),
        "hv2": pki.issue("hv9", "switch"),  # valid, but another node's
        "hv3": stranger_pki.issue("hv3", "switch"),  # signed by nobody we trust
    }
    logical = LogicalController(config_db.remote, universal_db.remote).start()
    try:
        with running_store(config_db.remote) as store, Sandbox(tmp_path / "nodes") as sandbox:
            app: Flask = create_app(store, Tokens(admin=TOKEN, tenants={}))
            api = ApiClient(app.test_client(), TOKEN)
            zone = api.create("/api/v1/transport-zones", {"name": "tz"})["id"]
            sw = api.create("/api/v1/logical-switches", {"name": "sw", "tenant": "t"})["id"]
            nodes = {}
            for i, (name, cert) in enumerate(sorted(certificates.items()), start=1):
                node = sandbox.add_node(name)
                node.vsctl("set", "Open_vSwitch", ".",
                           f"external_ids:loom-openflow=ssl:127.0.0.1:{free_port()}")  # fmt: skip
                node.set_ssl(cert.private_key, cert.certificate, trust)
                node.set_managers([controller.target])
                api.create("/api/v1/transport-nodes", {
                    "name": name, "node_type": "hypervisor", "system_id": name,
                    "transport_zone_ids": [zone],
                    "tunnel_endpoints": [{"encap": "geneve", "ip": node.encap_ip}]})  # fmt: skip
                mac = f"50:54:00:00:0a:{i:02x}"
                api.create(f"/api/v1/logical-switches/{sw}/ports", {
                    "name": f"p{i}", "mac": mac, "ips": [f"10.0.0.{i}"],
                    "attachment": {"type": "vif", "vif_id": f"vif-{i}"}})  # fmt: skip
                node.add_vif(f"p{i}", f"vif-{i}", mac)
                nodes[name] = node

            wait_for(lambda: _flows(nodes["hv1"]) > 10, WAIT, "hv1's table")
            wait_for(lambda: "hv2" in controller.refused, WAIT, "hv2 refused")
            wait_for(lambda: controller.manager.refused, WAIT, "hv3 refused at the handshake")
            assert controller.refused["hv2"] == "its certificate names 'hv9', not 'hv2'"
            assert set(controller.nodes) == {"hv1"}
            assert _flows(nodes["hv2"]) == 0
            assert _flows(nodes["hv3"]) == 0
            items = api.get("/api/v1/transport-nodes").get_json()["items"]
            status = {item["name"]: item["status"]["connected"] for item in items}
            assert status == {"hv1": True, "hv2": False, "hv3": False}
            listener = nodes["hv1"].vsctl("--columns=target", "list", "Controller")
            assert "pssl:" in listener, listener
            assert controller.nodes["hv1"].switch is not None
            assert controller.nodes["hv1"].switch.remote.startswith("ssl:127.0.0.1:")
    finally:
        logical.stop()


def test_the_openflow_channel_takes_only_the_node_it_expects(pki: Pki, tmp_path: Path) -> None:
    mine = pki.issue("physical-0", "controller")
    stranger = Pki(tmp_path / "stranger").ensure().issue("physical-0", "controller")
    port = free_port()
    with Sandbox(tmp_path / "nodes") as sandbox:
        node = sandbox.add_node("hv1")
        theirs = pki.issue("hv9", "switch")
        node.set_ssl(theirs.private_key, theirs.certificate, theirs.peer_ca)
        node.vsctl("add-br", "br-int", "--", "set-fail-mode", "br-int", "secure", "--",
                   "set", "bridge", "br-int", "protocols=OpenFlow15", "--",
                   "set-controller", "br-int", f"pssl:{port}:127.0.0.1")  # fmt: skip
        remote = f"ssl:127.0.0.1:{port}"
        right = Channel(remote, tls=client_context(mine), peer="hv9")
        wait_for(lambda: _counts(right), WAIT, "br-int listening on pssl:")
        right.close()
        with pytest.raises(ChannelError, match="names 'hv9', not 'hv1'"):
            Channel(remote, tls=client_context(mine), peer="hv1").flow_count()
        with pytest.raises(ChannelError, match="connect"):
            Channel(remote, tls=client_context(stranger), peer="hv9").flow_count()


def _counts(channel: Channel) -> bool:
    """Whether the channel reaches its switch yet (the listener opens after the bridge)."""
    try:
        return channel.flow_count() >= 0
    except ChannelError:
        return False


def test_credentials_are_all_or_nothing_on_the_command_line() -> None:
    from loom_physical.__main__ import main

    with pytest.raises(SystemExit):
        main(["--universal-db", "unix:/x", "--config-db", "unix:/y", "--listen",
              "pssl:0:127.0.0.1"])  # fmt: skip
    with pytest.raises(SystemExit):
        main(["--universal-db", "unix:/x", "--config-db", "unix:/y",
              "--private-key", "k.pem"])  # fmt: skip


def _tls_args(who: Credentials) -> list[str]:
    return ["--db-private-key", str(who.private_key), "--db-certificate",
            str(who.certificate), "--db-ca-cert", str(who.peer_ca)]  # fmt: skip


def test_loom_daemons_reach_databases_on_other_hosts_over_tls(pki: Pki, tmp_path: Path) -> None:
    """The databases' TCP ports take only TLS (`OvsdbServer(tls=)`, as `loom up` runs them
    with a PKI); the API server and the logical controller, given `ssl:` remotes and
    `--db-*` credentials, read and write them as over a unix socket: a switch created
    through the API is computed into the universal DB. Without credentials a daemon
    refuses an `ssl:` remote at once (usage error, exit 2)."""
    config = OvsdbServer(tmp_path / "config", schema_path(CONFIG_SCHEMA),
                         tls=pki.internal("config-db")).start()  # fmt: skip
    universal = OvsdbServer(tmp_path / "universal", schema_path(UNIVERSAL_SCHEMA),
                            name="universal", tls=pki.internal("universal-db")).start()  # fmt: skip
    daemons: list[Daemon] = []
    try:
        assert config.remote.startswith("ssl:")
        api_port = free_port()
        env = {**os.environ, TOKEN_ENV: TOKEN}
        bare = subprocess.run(api_command(config.remote, api_port), capture_output=True,
                              text=True, env=env, timeout=60)  # fmt: skip
        assert bare.returncode == 2, bare.stderr
        assert "an ssl: database remote needs --db-private-key" in bare.stderr

        api = Daemon("api-server", [*api_command(config.remote, api_port),
                                    *_tls_args(pki.internal("api"))],
                     tmp_path, env=env)  # fmt: skip
        daemons.append(api)
        http = Http(f"http://127.0.0.1:{api_port}", TOKEN)
        api.start(ready=lambda: http.request("GET", "/health").status == 200,
                  timeout=WAIT)  # fmt: skip
        logical = Daemon("logical-controller", [
            sys.executable, "-m", "loom_logical", "--name", "logical-tls", "--config-db",
            config.remote, "--universal-db", universal.remote,
            *_tls_args(pki.internal("logical-tls"))], tmp_path)  # fmt: skip
        daemons.append(logical)
        logical.start(ready=lambda: has_row(universal.unix_remote, "Logical_Controller",
                                            "logical-tls"), timeout=WAIT)  # fmt: skip

        reply = http.request("POST", "/logical-switches", {"name": "sw", "tenant": "t"})
        assert reply.status == 201, reply.body
        switch = reply.body["id"]
        wait_for(lambda: switch in subprocess.run(
            [tool("ovsdb-client"), "dump", universal.unix_remote, "Loom_Universal"],
            capture_output=True, text=True).stdout, WAIT, "the switch computed")  # fmt: skip
    finally:
        for daemon in reversed(daemons):
            daemon.stop()
        universal.stop()
        config.stop()


def test_a_silent_peer_holds_up_no_node(pki: Pki) -> None:
    """TLS handshakes run beside the acceptor: a node that dials while a silent peer's
    handshake is pending is taken at once (the silent one is refused only later)."""
    from loom_common.ovsdb import readable
    from loom_common.pki import server_context
    from loom_ovs.manager import Manager

    manager = Manager("pssl:0:127.0.0.1", lambda: None,
                      server_context(pki.issue("physical-0", "controller"))).start()  # fmt: skip
    host, port = manager.target.split(":")[1:]
    silent = socket.create_connection((host, int(port)))
    node = socket.create_connection((host, int(port)))
    node.settimeout(WAIT)
    context = client_context(pki.issue("hv1", "switch"))
    client: list[ssl.SSLSocket] = []  # (the node's side shakes hands in a thread of its own)
    shaker = threading.Thread(target=lambda: client.append(context.wrap_socket(node)))
    shaker.start()
    try:
        sessions = []

        def taken() -> bool:
            if readable(manager.fds(), 0.1):
                sessions.extend(manager.accept())
            return bool(sessions)

        wait_for(taken, WAIT, "the node's session")
        assert [s.certified for s in sessions] == ["hv1"]
        assert manager.refused == [], "the silent peer's handshake is still pending"
        wait_for(lambda: taken() and manager.refused, WAIT, "the silent peer refused")
        shaker.join(WAIT)
        for session in sessions:
            session.close()
        assert client, "the node's handshake finished"
        client[0].close()
    finally:
        silent.close()
        node.close()
        manager.close()
