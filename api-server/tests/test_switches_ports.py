"""Logical switches and their ports through the native API, on a real ovsdb-server.

CRUD and defaults, ETags and If-Match, PUT vs PATCH, read-only fields, pagination, filters,
Location, the configuration generation and the realization wait.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

SWITCHES = "/api/v1/logical-switches"
ZONES = "/api/v1/transport-zones"
QUEUES = "/api/v1/qos-queues"
MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


def ports_of(switch: dict[str, Any]) -> str:
    return f"{SWITCHES}/{switch['id']}/ports"


def generation(response: Any) -> int:
    return int(response.headers["X-Loom-Config-Generation"])


# ---- switches ----------------------------------------------------------------------------


def test_switch_created_with_defaults(admin: ApiClient) -> None:
    response = admin.post(SWITCHES, {})
    assert response.status_code == 201
    body = response.get_json()
    assert body == {
        "id": body["id"],
        "revision": 1,
        "tenant": "admin",
        "name": "",
        "tags": [],
        "description": "",
        "transport_zone_id": None,
        "replication_mode": None,  # (the default: the logical controllers decide)
        "programming_model": None,  # (the deployment's default)
        "admin_state_up": True,
        "tunnel_key": body["tunnel_key"],
    }
    assert isinstance(body["tunnel_key"], int)
    assert body["tunnel_key"] >= 1
    assert response.headers["ETag"] == '"1"'
    assert response.headers["Location"] == f"{SWITCHES}/{body['id']}"
    assert generation(response) >= 1


def test_switch_round_trip_and_location(admin: ApiClient) -> None:
    zone = admin.create(ZONES, {"name": "tz1", "encap": "vxlan"})
    response = admin.post(
        SWITCHES,
        {
            "name": "web",
            "tenant": "acme",
            "description": "front end",
            "transport_zone_id": zone["id"],
            "replication_mode": "source",
            "admin_state_up": False,
            "tags": ["blue", "prod"],
        },
    )
    assert response.status_code == 201
    created = response.get_json()
    fetched = admin.get(response.headers["Location"])
    assert fetched.status_code == 200
    assert fetched.get_json() == created
    assert fetched.headers["ETag"] == '"1"'
    assert created["tenant"] == "acme"
    assert created["transport_zone_id"] == zone["id"]
    assert created["replication_mode"] == "source"
    assert created["tags"] == ["blue", "prod"]


def test_switch_replication_mode_set_and_back_to_the_default(admin: ApiClient) -> None:
    """A switch names its replication mode or leaves it to the default (null): stored as
    given, so the rules decide the default where the switch is, as service nodes come and
    go; null given again returns it to the default; another word is refused, by name."""
    url = f"{SWITCHES}/{admin.create(SWITCHES, {'name': 'sw'})['id']}"
    assert admin.get(url).get_json()["replication_mode"] is None
    patched = admin.patch(url, {"replication_mode": "service-node"})
    assert patched.status_code == 200, patched.get_json()
    assert admin.get(url).get_json()["replication_mode"] == "service-node"
    patched = admin.patch(url, {"replication_mode": None})
    assert patched.status_code == 200, patched.get_json()
    assert admin.get(url).get_json()["replication_mode"] is None
    refused = admin.patch(url, {"replication_mode": "default"})
    assert refused.status_code == 400
    assert refused.get_json()["field"] == "replication_mode"
    assert admin.get(url).get_json()["replication_mode"] is None


def test_switch_tunnel_keys_are_distinct(admin: ApiClient) -> None:
    keys = [admin.create(SWITCHES, {"name": f"s{i}"})["tunnel_key"] for i in range(5)]
    assert len(set(keys)) == 5


def test_get_missing_or_malformed_id_is_404(admin: ApiClient) -> None:
    for ident in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        response = admin.get(f"{SWITCHES}/{ident}")
        assert response.status_code == 404
        assert response.get_json()["error"] == "not_found"


def test_delete_switch(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {})
    response = admin.delete(f"{SWITCHES}/{switch['id']}")
    assert response.status_code == 204
    assert response.data == b""
    assert generation(response) > 0
    assert admin.get(f"{SWITCHES}/{switch['id']}").status_code == 404
    assert admin.delete(f"{SWITCHES}/{switch['id']}").status_code == 404


# ---- PUT vs PATCH, ETags ------------------------------------------------------------------


def test_patch_merges_and_put_replaces(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {"name": "a", "description": "keep me", "tags": ["x"]})
    url = f"{SWITCHES}/{switch['id']}"

    patched = admin.patch(url, {"name": "b"})
    assert patched.status_code == 200
    body = patched.get_json()
    assert (body["name"], body["description"], body["tags"]) == ("b", "keep me", ["x"])
    assert body["revision"] == 2
    assert patched.headers["ETag"] == '"2"'

    replaced = admin.put(url, {"name": "c"})
    assert replaced.status_code == 200
    body = replaced.get_json()
    assert (body["name"], body["description"], body["tags"]) == ("c", "", [])
    assert body["revision"] == 3
    assert body["tunnel_key"] == switch["tunnel_key"]
    assert body["id"] == switch["id"]


def test_if_match_stale_etag_is_412(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {"name": "a"})
    url = f"{SWITCHES}/{switch['id']}"
    ok = admin.patch(url, {"name": "b"}, headers={"If-Match": '"1"'})
    assert ok.status_code == 200
    assert ok.headers["ETag"] == '"2"'

    for method in (admin.patch, admin.put):
        stale = method(url, {"name": "c"}, headers={"If-Match": '"1"'})
        assert stale.status_code == 412
        assert stale.get_json()["error"] == "precondition_failed"
    assert admin.get(url).get_json()["name"] == "b"

    stale_delete = admin.delete(url, headers={"If-Match": '"1"'})
    assert stale_delete.status_code == 412
    assert admin.patch(url, {"name": "d"}, headers={"If-Match": "*"}).status_code == 200
    assert admin.delete(url, headers={"If-Match": '"3"'}).status_code == 204


def test_read_only_fields_refused_on_post(admin: ApiClient) -> None:
    for field, value in (
        ("id", "00000000-0000-0000-0000-000000000001"),
        ("revision", 1),
        ("tunnel_key", 7),
    ):
        response = admin.post(SWITCHES, {field: value})
        assert response.status_code == 400, field
        assert response.get_json()["field"] == field
    assert admin.get(SWITCHES).get_json()["items"] == []


def test_read_only_fields_accepted_unchanged_on_put(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {"name": "a"})
    url = f"{SWITCHES}/{switch['id']}"
    response = admin.put(url, {**switch, "description": "changed"})
    assert response.status_code == 200
    current = response.get_json()
    assert current["description"] == "changed"
    assert current["revision"] == 2

    changed = admin.put(url, {**current, "tunnel_key": switch["tunnel_key"] + 1})
    assert changed.status_code == 400
    assert changed.get_json()["field"] == "tunnel_key"


# ---- pagination and filters ----------------------------------------------------------------


def test_pagination_has_no_duplicates_or_gaps(admin: ApiClient) -> None:
    created = {admin.create(SWITCHES, {"name": f"s{i:02}"})["id"] for i in range(25)}
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": 7} if cursor is None else {"limit": 7, "cursor": cursor}
        page = admin.get(SWITCHES, query_string=query).get_json()
        assert len(page["items"]) <= 7
        seen.extend(item["id"] for item in page["items"])
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 4
    assert len(seen) == len(set(seen)) == 25
    assert set(seen) == created
    assert seen == sorted(seen)


@pytest.mark.parametrize("limit", ["0", "1001", "many", "-1"])
def test_bad_limit_is_400(admin: ApiClient, limit: str) -> None:
    response = admin.get(SWITCHES, query_string={"limit": limit})
    assert response.status_code == 400
    assert response.get_json()["field"] == "limit"


def test_filters_tenant_name_tag(admin: ApiClient) -> None:
    a1 = admin.create(SWITCHES, {"tenant": "tenant-a", "name": "web", "tags": ["blue"]})
    a2 = admin.create(SWITCHES, {"tenant": "tenant-a", "name": "db", "tags": ["red"]})
    b1 = admin.create(SWITCHES, {"tenant": "tenant-b", "name": "web", "tags": ["blue", "red"]})

    def ids(**query: str) -> set[str]:
        response = admin.get(SWITCHES, query_string=query)
        assert response.status_code == 200
        return {item["id"] for item in response.get_json()["items"]}

    assert ids(tenant="tenant-a") == {a1["id"], a2["id"]}
    assert ids(name="web") == {a1["id"], b1["id"]}
    assert ids(tag="red") == {a2["id"], b1["id"]}
    assert ids(tenant="tenant-b", tag="blue") == {b1["id"]}
    assert ids(tenant="tenant-a", name="web", tag="red") == set()
    assert ids(tenant="nobody") == set()


# ---- generation and realization ----------------------------------------------------------------


def test_generation_strictly_increases_with_every_change(admin: ApiClient) -> None:
    switch_response = admin.post(SWITCHES, {"name": "g"})
    switch = switch_response.get_json()
    url = f"{SWITCHES}/{switch['id']}"
    generations = [generation(switch_response)]
    port_response = admin.post(ports_of(switch), {})
    generations.append(generation(port_response))
    generations.append(generation(admin.patch(url, {"name": "h"})))
    generations.append(generation(admin.put(url, {"name": "i"})))
    port_url = port_response.headers["Location"]
    generations.append(generation(admin.delete(port_url)))
    generations.append(generation(admin.delete(url)))
    assert generations == sorted(set(generations))
    assert generations == list(range(generations[0], generations[0] + 6))
    status = admin.get("/api/v1/status").get_json()
    assert status["config_generation"] == generations[-1]
    assert status["realized_generation"] == 0


def test_wait_for_realization_answers_not_realized(admin: ApiClient) -> None:
    response = admin.post(SWITCHES, {}, headers={"X-Loom-Wait-For-Realization": "0.2"})
    assert response.status_code == 201
    assert response.headers["X-Loom-Realized"] == "false"
    assert response.headers["X-Loom-Realized-Generation"] == "0"
    answer = admin.get(
        "/api/v1/realization",
        query_string={"generation": generation(response)},
        headers={"X-Loom-Wait-For-Realization": "0.1"},
    ).get_json()
    assert answer == {
        "generation": generation(response),
        "config_generation": generation(response),
        "realized_generation": 0,
        "realized": False,
        "logical_generation": 0,
        "logically_realized": False,
    }
    assert "X-Loom-Realized" not in admin.post(SWITCHES, {}).headers


# ---- ports -------------------------------------------------------------------------------------


def test_port_created_with_defaults(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {"tenant": "acme"})
    response = admin.post(ports_of(switch), {})
    assert response.status_code == 201
    port = response.get_json()
    assert MAC.match(port["mac"])
    assert int(port["mac"][:2], 16) & 3 == 2  # locally administered, unicast
    assert port == {
        "id": port["id"],
        "revision": 1,
        "tenant": "acme",  # a port belongs to its switch's tenant
        "name": "",
        "tags": [],
        "logical_switch_id": switch["id"],
        "description": "",
        "mac": port["mac"],
        "ips": [],
        "port_security": True,
        "admin_state_up": True,
        "qos_queue_id": None,
        "security_profile_ids": [],
        "attachment": {"type": "none"},
        "port_key": 1,
        "status": {"up": False, "realized": False, "transport_node": None},
    }
    assert response.headers["Location"] == f"{ports_of(switch)}/{port['id']}"
    assert admin.get(response.headers["Location"]).get_json() == port


def test_port_fields_round_trip(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {})
    queue = admin.create(QUEUES, {"name": "gold", "min_rate": 10, "max_rate": 100})
    port = admin.create(
        ports_of(switch),
        {
            "name": "vm1",
            "mac": "0A:00:00:00:00:01",
            "ips": ["10.0.0.5", "2001:db8:0:0::5"],
            "port_security": False,
            "qos_queue_id": queue["id"],
            "attachment": {"type": "vif", "vif_id": "vif-1"},
        },
    )
    assert port["mac"] == "0a:00:00:00:00:01"
    assert port["ips"] == sorted(["10.0.0.5", "2001:db8::5"])
    assert port["qos_queue_id"] == queue["id"]
    assert port["attachment"] == {"type": "vif", "vif_id": "vif-1"}
    assert port["port_security"] is False


def test_port_keys_distinct_per_switch(admin: ApiClient) -> None:
    first, second = admin.create(SWITCHES, {}), admin.create(SWITCHES, {})
    keys = [admin.create(ports_of(first), {})["port_key"] for _ in range(4)]
    assert len(set(keys)) == 4
    assert admin.create(ports_of(second), {})["port_key"] == 1


def test_port_mac_and_ip_unique_on_a_switch(admin: ApiClient) -> None:
    first, second = admin.create(SWITCHES, {}), admin.create(SWITCHES, {})
    admin.create(ports_of(first), {"mac": "02:00:00:00:00:01", "ips": ["10.0.0.1"]})
    mac = admin.post(ports_of(first), {"mac": "02:00:00:00:00:01"})
    assert mac.status_code == 409
    assert mac.get_json()["field"] == "mac"
    ip = admin.post(ports_of(first), {"ips": ["10.0.0.1"]})
    assert ip.status_code == 409
    assert ip.get_json()["field"] == "ips"
    elsewhere = admin.post(ports_of(second), {"mac": "02:00:00:00:00:01", "ips": ["10.0.0.1"]})
    assert elsewhere.status_code == 201


def test_port_read_only_fields(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {})
    for field, value in (("port_key", 3), ("logical_switch_id", switch["id"])):
        response = admin.post(ports_of(switch), {field: value})
        assert response.status_code == 400, field
        assert response.get_json()["field"] == field
    port = admin.create(ports_of(switch), {"name": "p"})
    url = f"{ports_of(switch)}/{port['id']}"
    replaced = admin.put(url, {**port, "name": "q"})
    assert replaced.status_code == 200
    body = replaced.get_json()
    assert (body["name"], body["mac"], body["port_key"]) == ("q", port["mac"], port["port_key"])
    moved = admin.put(url, {**body, "status": {**body["status"], "up": True}})
    assert moved.status_code == 400
    assert moved.get_json()["field"] == "status"


def test_port_patch_keeps_mac_put_without_mac_keeps_it_too(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {})
    port = admin.create(ports_of(switch), {"ips": ["10.0.0.9"]})
    url = f"{ports_of(switch)}/{port['id']}"
    patched = admin.patch(url, {"name": "n"}).get_json()
    assert (patched["mac"], patched["ips"]) == (port["mac"], ["10.0.0.9"])
    replaced = admin.put(url, {"name": "m"}).get_json()
    assert replaced["mac"] == port["mac"]  # a port keeps its MAC unless given a new one
    assert replaced["ips"] == []


def test_ports_are_scoped_to_their_switch(admin: ApiClient) -> None:
    first, second = admin.create(SWITCHES, {}), admin.create(SWITCHES, {})
    port = admin.create(ports_of(first), {})
    assert admin.get(f"{ports_of(second)}/{port['id']}").status_code == 404
    assert admin.get(ports_of(second)).get_json()["items"] == []
    assert [p["id"] for p in admin.get(ports_of(first)).get_json()["items"]] == [port["id"]]
    missing = admin.get(f"{SWITCHES}/00000000-0000-0000-0000-000000000000/ports")
    assert missing.status_code == 404


def test_port_pagination_and_filters(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {})
    made = [
        admin.create(ports_of(switch), {"name": f"p{i}", "tags": ["even" if i % 2 else "odd"]})
        for i in range(6)
    ]
    first = admin.get(ports_of(switch), query_string={"limit": 4}).get_json()
    rest = admin.get(
        ports_of(switch), query_string={"limit": 4, "cursor": first["next_cursor"]}
    ).get_json()
    assert rest["next_cursor"] is None
    ids = [p["id"] for p in first["items"] + rest["items"]]
    assert sorted(ids) == sorted(p["id"] for p in made)
    assert len(set(ids)) == 6
    odd = admin.get(ports_of(switch), query_string={"tag": "odd"}).get_json()["items"]
    assert {p["name"] for p in odd} == {"p0", "p2", "p4"}
    named = admin.get(ports_of(switch), query_string={"name": "p3"}).get_json()["items"]
    assert [p["id"] for p in named] == [made[3]["id"]]


def test_switch_with_ports_cannot_be_deleted(admin: ApiClient) -> None:
    switch = admin.create(SWITCHES, {})
    port = admin.create(ports_of(switch), {})
    response = admin.delete(f"{SWITCHES}/{switch['id']}")
    assert response.status_code == 409
    body = response.get_json()
    assert body["error"] == "in_use"
    assert f"logical switch port {port['id']}" in body["message"]
    assert admin.delete(f"{ports_of(switch)}/{port['id']}").status_code == 204
    assert admin.delete(f"{SWITCHES}/{switch['id']}").status_code == 204
