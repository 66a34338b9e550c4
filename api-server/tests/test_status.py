"""Status routes of logical switch ports and transport nodes: honest until controllers report."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from loom_api.store import Store, WriteView
from loom_common.liveness import LEASE_S, Heartbeat
from loom_common.testing import wait_for

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
SWITCHES = f"{API}/logical-switches"
NODES = f"{API}/transport-nodes"
MISSING = "00000000-0000-0000-0000-000000000001"


@pytest.fixture
def switch(tenant_a: ApiClient) -> dict[str, Any]:
    return tenant_a.create(SWITCHES, {"name": "web"})


@pytest.fixture
def port(tenant_a: ApiClient, switch: dict[str, Any]) -> dict[str, Any]:
    return tenant_a.create(f"{SWITCHES}/{switch['id']}/ports", {"ips": ["10.0.0.5"]})


@pytest.fixture
def node(admin: ApiClient) -> dict[str, Any]:
    return admin.create(NODES, {"name": "hv-1", "node_type": "hypervisor", "system_id": "hv-1"})


def status_url(switch: dict[str, Any], port: dict[str, Any]) -> str:
    return f"{SWITCHES}/{switch['id']}/ports/{port['id']}/status"


def set_status(store: Store, table: str, ident: str, status: dict[str, str]) -> None:
    """Write a row's `status` column as a controller would."""

    def write(view: WriteView) -> None:
        row = next(r for r in view.rows(table) if str(r.uuid) == ident)
        view.update(row, status=status)

    store.write(write)


def test_port_status_is_down_and_not_realized_without_controllers(
    tenant_a: ApiClient, switch: dict[str, Any], port: dict[str, Any]
) -> None:
    response = tenant_a.get(status_url(switch, port))
    assert response.status_code == 200
    assert response.get_json() == {
        "id": port["id"],
        "up": False,
        "realized": False,
        "transport_node": None,
    }
    assert port["status"] == {"up": False, "realized": False, "transport_node": None}


def test_port_status_reports_what_a_controller_wrote(
    tenant_a: ApiClient, switch: dict[str, Any], port: dict[str, Any], store: Store
) -> None:
    set_status(
        store,
        "Logical_Switch_Port",
        port["id"],
        {"up": "true", "realized": "true", "transport_node": "hv-1"},
    )
    body = tenant_a.get(status_url(switch, port)).get_json()
    assert body == {"id": port["id"], "up": True, "realized": True, "transport_node": "hv-1"}


def test_port_status_not_found_cases(
    tenant_a: ApiClient,
    tenant_b: ApiClient,
    anonymous: ApiClient,
    admin: ApiClient,
    switch: dict[str, Any],
    port: dict[str, Any],
) -> None:
    other = tenant_a.create(SWITCHES, {"name": "other"})
    assert tenant_a.get(status_url(other, port)).status_code == 404  # wrong switch
    assert tenant_a.get(status_url(switch, {"id": MISSING})).status_code == 404
    assert tenant_a.get(status_url(switch, {"id": "junk"})).status_code == 404
    assert tenant_a.get(status_url({"id": MISSING}, port)).status_code == 404
    response = tenant_b.get(status_url(switch, port))
    assert response.status_code == 404
    assert response.get_json()["error"] == "not_found"
    assert anonymous.get(status_url(switch, port)).status_code == 401
    assert admin.get(status_url(switch, port)).status_code == 200
    assert tenant_a.post(status_url(switch, port), json={}).status_code == 405


def test_node_status_is_disconnected_without_controllers(
    admin: ApiClient, node: dict[str, Any]
) -> None:
    response = admin.get(f"{NODES}/{node['id']}/status")
    assert response.status_code == 200
    assert response.get_json() == {
        "id": node["id"],
        "connected": False,
        "controller": None,
        "realized_generation": 0,
        "message": None,
        "bfd": {},
    }


def test_node_status_reports_what_a_controller_wrote(
    admin: ApiClient, node: dict[str, Any], store: Store
) -> None:
    set_status(
        store,
        "Transport_Node",
        node["id"],
        {"connected": "true", "controller": "pc-2", "realized_generation": "7",
         "bfd:gw1": "down", "bfd:sn1": "up"},
    )  # fmt: skip
    body = admin.get(f"{NODES}/{node['id']}/status").get_json()
    assert body["connected"] is True
    assert body["controller"] == "pc-2"
    assert body["realized_generation"] == 7
    assert body["bfd"] == {"gw1": "down", "sn1": "up"}


def test_node_status_is_for_the_admin_only(
    admin: ApiClient, tenant_a: ApiClient, anonymous: ApiClient, node: dict[str, Any]
) -> None:
    assert tenant_a.get(f"{NODES}/{node['id']}/status").status_code == 404
    assert anonymous.get(f"{NODES}/{node['id']}/status").status_code == 401
    assert admin.get(f"{NODES}/{MISSING}/status").status_code == 404
    assert admin.get(f"{NODES}/junk/status").status_code == 404


def test_node_status_ages_out_when_its_controller_stops_beating(
    admin: ApiClient, node: dict[str, Any], store: Store, config_db: Any
) -> None:
    """A node whose controller wrote "connected" shows not connected once the controller's
    heartbeat stops (a dead or hung controller writes nothing more)."""
    beat = Heartbeat(config_db.remote, "pc-2", interval=0.1).start()
    try:
        said = {"connected": "true", "controller": "pc-2", "realized_generation": "7"}
        set_status(store, "Transport_Node", node["id"], said)
        wait_for(lambda: beat.beats >= 3, 10, what="three beats")
        body = admin.get(f"{NODES}/{node['id']}/status").get_json()
        assert body["connected"] is True
        assert body["message"] is None
    finally:
        beat.stop()
    url = f"{NODES}/{node['id']}/status"
    wait_for(lambda: admin.get(url).get_json()["connected"] is False, LEASE_S + 10,
             what="the node shown not connected")  # fmt: skip
    body = admin.get(url).get_json()
    assert body["controller"] == "pc-2"
    assert body["message"].startswith("its physical controller pc-2 has not been heard from")
    assert store.liveness.silent_for("pc-2", time.monotonic()) > LEASE_S
