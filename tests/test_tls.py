"""Transport nodes over TLS: a node gets its flows only with a certificate that names it.

A physical controller listens on `pssl:` with a controller certificate (`loom_common.pki`);
three nodes dial it over `ssl:`: hv1 with a certificate for hv1, hv2 with a valid
certificate for another node (hv9), hv3 with one from another PKI. Each has a VIF of one
switch. Only hv1 is taken: it gets its table and shows connected; hv2 is refused once it
says who it is, hv3 at the handshake; neither gets a flow, and both show not connected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.testing import ApiClient, running_store
from loom_common.ovsdb import OvsdbServer
from loom_common.pki import Pki, server_context
from loom_common.testing import wait_for
from loom_logical.controller import LogicalController
from loom_ovs.sandbox import OvsNode, Sandbox
from loom_physical.controller import PhysicalController

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
    tls = server_context(pki.issue("physical-0", "controller"))
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
    finally:
        logical.stop()


def test_credentials_are_all_or_nothing_on_the_command_line() -> None:
    from loom_physical.__main__ import main

    with pytest.raises(SystemExit):
        main(["--universal-db", "unix:/x", "--config-db", "unix:/y", "--listen",
              "pssl:0:127.0.0.1"])  # fmt: skip
    with pytest.raises(SystemExit):
        main(["--universal-db", "unix:/x", "--config-db", "unix:/y",
              "--private-key", "k.pem"])  # fmt: skip
