"""The logical controller reports back to the API: the generation its universal flows
realize, and the warnings its rules found (tenants see their own)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from loom_api import create_app
from loom_api.auth import Tokens
from loom_api.store import Store
from loom_api.testing import ApiClient
from loom_common.ovsdb import OvsdbServer
from loom_logical.controller import LogicalController


def wait_status(
    client: ApiClient, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0
) -> dict[str, Any]:
    """Poll /api/v1/status until `predicate` holds for it."""
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get("/api/v1/status").get_json()
        if predicate(body):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


@pytest.mark.ovs
def test_status_shows_logical_generation_and_warnings(
    store: Store, controller: LogicalController
) -> None:
    app = create_app(store, Tokens(admin="adm", tenants={"tok-a": "a", "tok-b": "b"}))
    admin = ApiClient(app.test_client(), "adm")
    tenant_a = ApiClient(app.test_client(), "tok-a")
    tenant_b = ApiClient(app.test_client(), "tok-b")

    switch = admin.create(
        "/api/v1/logical-switches", {"name": "s", "tenant": "a", "replication_mode": "source"}
    )
    router = admin.create("/api/v1/logical-routers", {"name": "r", "tenant": "a"})
    admin.create(
        f"/api/v1/logical-routers/{router['id']}/ports",
        {"ip_prefix": "10.0.0.1/24", "logical_switch_id": switch["id"]},
    )
    response = admin.post(
        f"/api/v1/logical-routers/{router['id']}/routes",
        {"prefix": "192.168.0.0/16", "next_hop": "172.31.0.1"},
    )
    assert response.status_code == 201
    route = response.get_json()
    generation = int(response.headers["X-Loom-Config-Generation"])

    body = wait_status(admin, lambda b: b["logical_generation"] >= generation and b["warnings"])
    assert body["warnings"] == [{
        "source": route["id"], "kind": "static-route",
        "message": "static route 192.168.0.0/16: no port of the router reaches next hop 172.31.0.1",
    }]  # fmt: skip
    realization = admin.get(f"/api/v1/realization?generation={generation}").get_json()
    assert realization["logically_realized"] is True
    assert realization["realized"] is False  # no physical controller yet
    assert tenant_a.get("/api/v1/status").get_json()["warnings"] == body["warnings"]
    assert tenant_b.get("/api/v1/status").get_json()["warnings"] == []

    deleted = admin.delete(f"/api/v1/logical-routers/{router['id']}/routes/{route['id']}")
    assert deleted.status_code == 204
    wait_status(admin, lambda b: b["warnings"] == [])


@pytest.mark.ovs
def test_a_switch_left_to_the_default_replicates_without_warning_and_takes_service_nodes(
    store: Store,
    controller: LogicalController,
    universal_db: OvsdbServer,
    dump: Callable[[str], dict[str, list[dict[str, Any]]]],
) -> None:
    """A switch created with the defaults in a zone of hypervisors only (as the demo's):
    source replication and no warning; a service node added to the zone later: the switch
    replicates through it (the default is decided by the rules, not stored)."""
    app = create_app(store, Tokens(admin="adm", tenants={}))
    admin = ApiClient(app.test_client(), "adm")
    zone = admin.create("/api/v1/transport-zones", {"name": "tz"})["id"]

    def node(name: str, kind: str, ip: str) -> int:
        response = admin.post("/api/v1/transport-nodes", {
            "name": name, "node_type": kind, "system_id": name, "transport_zone_ids": [zone],
            "tunnel_endpoints": [{"encap": "geneve", "ip": ip}]})  # fmt: skip
        assert response.status_code == 201, response.get_json()
        return int(response.headers["X-Loom-Config-Generation"])

    for i in (1, 2):
        node(f"hv{i}", "hypervisor", f"192.168.0.{i}")
    response = admin.post("/api/v1/logical-switches", {
        "name": "web", "tenant": "a", "transport_zone_id": zone})  # fmt: skip
    assert response.status_code == 201
    switch = response.get_json()
    assert switch["replication_mode"] is None
    generation = int(response.headers["X-Loom-Config-Generation"])

    def replication() -> tuple[str, list[str]]:
        rows = dump(universal_db.remote)["Replication_Set"]
        (row,) = [r for r in rows if r["datapath"] == switch["tunnel_key"]]
        return row["mode"], sorted(row["service_nodes"].values())

    body = wait_status(admin, lambda b: b["logical_generation"] >= generation)
    assert body["warnings"] == []
    assert replication() == ("source", [])

    generation = node("sn1", "service-node", "192.168.1.1")
    body = wait_status(admin, lambda b: b["logical_generation"] >= generation)
    assert replication() == ("service-node", ["sn1"])
    assert body["warnings"] == []
