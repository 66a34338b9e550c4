"""Programming models through the API: a switch's `programming_model` (native) and
`loom:programming_model` (`/v2.0`), Hoverboard transport nodes, and the deployment-wide
default and span (`/api/v1/settings`), each refused with the field named when wrong."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask

from loom_api import create_app
from loom_api.store import Store

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"


def _refused(response: Any, status: int, field: str | None) -> None:
    body = response.get_json()
    assert response.status_code == status, body
    assert body["field"] == field, body


def _stored(store: Store, table: str, column: str) -> list[Any]:
    return store.read(lambda view: [getattr(r, column) for r in view.rows(table)])


def test_a_switch_names_its_model_or_leaves_it_to_the_default(
    admin: ApiClient, store: Store
) -> None:
    sw = admin.create(f"{API}/logical-switches", {"name": "big", "tenant": "t",
                                                  "programming_model": "hoverboard"})  # fmt: skip
    assert sw["programming_model"] == "hoverboard"
    assert _stored(store, "Logical_Switch", "programming_model") == [["hoverboard"]]
    plain = admin.create(f"{API}/logical-switches", {"name": "small", "tenant": "t"})
    assert plain["programming_model"] is None
    changed = admin.patch(f"{API}/logical-switches/{sw['id']}", {"programming_model": "auto"})
    assert changed.status_code == 200
    assert changed.get_json()["programming_model"] == "auto"
    back = admin.patch(f"{API}/logical-switches/{sw['id']}", {"programming_model": None})
    assert back.get_json()["programming_model"] is None
    _refused(admin.post(f"{API}/logical-switches", {"name": "x", "tenant": "t",
                                                     "programming_model": "magic"}),
             400, "programming_model")  # fmt: skip


def test_a_hoverboard_is_a_transport_node_type(admin: ApiClient) -> None:
    zone = admin.create(f"{API}/transport-zones", {"name": "tz"})["id"]
    node = admin.create(f"{API}/transport-nodes", {
        "name": "hb1", "node_type": "hoverboard", "system_id": "hb1",
        "transport_zone_ids": [zone], "tunnel_endpoints": [{"encap": "geneve", "ip": "10.9.0.1"}],
    })  # fmt: skip
    assert node["node_type"] == "hoverboard"


def test_the_settings_default_change_and_refusals(
    admin: ApiClient, tenant_a: ApiClient, store: Store
) -> None:
    assert admin.get(f"{API}/settings").get_json() == {
        "programming_model": "preprogrammed", "hoverboard_span": 64}  # fmt: skip
    done = admin.patch(f"{API}/settings", {"programming_model": "auto", "hoverboard_span": 8})
    assert done.status_code == 200, done.get_json()
    assert done.get_json() == {"programming_model": "auto", "hoverboard_span": 8}
    assert int(done.headers["X-Loom-Config-Generation"]) > 0
    assert _stored(store, "Loom_Global", "programming_model") == [["auto"]]
    # A field left out stays; null returns one to its default.
    assert admin.patch(f"{API}/settings", {"hoverboard_span": None}).get_json() == {
        "programming_model": "auto", "hoverboard_span": 64}  # fmt: skip
    assert tenant_a.get(f"{API}/settings").get_json()["programming_model"] == "auto"
    assert tenant_a.patch(f"{API}/settings", {"programming_model": "hoverboard"}).status_code == 403
    _refused(admin.patch(f"{API}/settings", {"programming_model": "fast"}), 400,
             "programming_model")  # fmt: skip
    _refused(admin.patch(f"{API}/settings", {"hoverboard_span": 0}), 400, "hoverboard_span")
    _refused(admin.patch(f"{API}/settings", {"span": 3}), 400, "span")
    _refused(admin.patch(f"{API}/settings?x=1", {}), 400, "x")
    assert _stored(store, "Loom_Global", "programming_model") == [["auto"]]


def test_a_network_carries_the_extension_attribute(app: Flask, store: Store) -> None:
    noauth = create_app(store, app.extensions["loom.tokens"], {"LOOM_NEUTRON_AUTH": "noauth"})
    client = noauth.test_client()
    made = client.post("/v2.0/networks", json={"network": {
        "name": "n", "project_id": "p", "loom:programming_model": "hoverboard"}})  # fmt: skip
    assert made.status_code == 201, made.get_json()
    net = made.get_json()["network"]
    assert net["loom:programming_model"] == "hoverboard"
    assert _stored(store, "Logical_Switch", "programming_model") == [["hoverboard"]]
    moved = client.put(f"/v2.0/networks/{net['id']}",
                       json={"network": {"loom:programming_model": None}})  # fmt: skip
    assert moved.status_code == 200, moved.get_json()
    assert moved.get_json()["network"]["loom:programming_model"] is None
    wrong = client.post("/v2.0/networks", json={"network": {
        "name": "m", "project_id": "p", "loom:programming_model": "x"}})  # fmt: skip
    assert wrong.status_code == 400
    assert "loom:programming_model" in wrong.get_json()["NeutronError"]["message"]
