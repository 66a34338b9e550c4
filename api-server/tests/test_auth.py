"""Bearer-token authentication and tenant isolation of the native API.

401 without a valid token; tenant tokens see and change only their tenant's objects (404
across tenants, 403 when naming another tenant); only the admin writes transport zones,
transport nodes and gateway services, and only the admin sees transport nodes. The daemon
takes the admin token from exactly one of a file, the environment or its command line, and
tenant tokens from a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from loom_api.__main__ import parse_args
from loom_api.auth import (
    ADMIN_TOKEN_ENV,
    Tokens,
    TokenSourceError,
    admin_token,
    parse_tenant_tokens,
    tokens_of,
)

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = pytest.mark.ovs

API = "/api/v1"
SWITCHES = f"{API}/logical-switches"
ZONES = f"{API}/transport-zones"
NODES = f"{API}/transport-nodes"
GATEWAYS = f"{API}/gateway-services"
QUEUES = f"{API}/qos-queues"
PROFILES = f"{API}/security-profiles"
ROUTERS = f"{API}/logical-routers"


def assert_error(response: Any, status: int, code: str, field: str | None = None) -> None:
    body = response.get_json()
    assert response.status_code == status, body
    assert body["error"] == code
    assert body["field"] == field


def ids(client: ApiClient, url: str) -> set[str]:
    response = client.get(url)
    assert response.status_code == 200
    return {item["id"] for item in response.get_json()["items"]}


# ---- authentication ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", SWITCHES),
        ("POST", SWITCHES),
        ("GET", f"{SWITCHES}/00000000-0000-0000-0000-000000000000"),
        ("DELETE", f"{SWITCHES}/00000000-0000-0000-0000-000000000000"),
        ("GET", f"{API}/status"),
        ("GET", f"{API}/realization"),
        ("GET", NODES),
    ],
)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": "Bearer "},
        {"Authorization": "Basic YWRtaW46c2VjcmV0"},
        {"Authorization": "admin-secret"},  # the admin token, without the scheme
        {"X-Auth-Token": "wrong-token"},
    ],
)
def test_401_without_a_valid_token(
    anonymous: ApiClient, method: str, path: str, headers: dict[str, str]
) -> None:
    body: dict[str, Any] | None = {} if method == "POST" else None
    response = anonymous.client.open(path, method=method, headers=headers, json=body)
    assert_error(response, 401, "unauthenticated")


def test_401_writes_nothing(anonymous: ApiClient, admin: ApiClient) -> None:
    assert anonymous.post(SWITCHES, {"name": "x"}).status_code == 401
    assert ids(admin, SWITCHES) == set()


def test_health_and_document_need_no_token(anonymous: ApiClient) -> None:
    assert anonymous.get(f"{API}/health").status_code == 200
    assert anonymous.get(f"{API}/openapi.json").status_code == 200


def test_x_auth_token_is_accepted(anonymous: ApiClient) -> None:
    response = anonymous.client.get(SWITCHES, headers={"X-Auth-Token": "token-a"})
    assert response.status_code == 200


def test_bearer_scheme_is_case_insensitive(anonymous: ApiClient) -> None:
    response = anonymous.client.get(SWITCHES, headers={"Authorization": "bearer token-a"})
    assert response.status_code == 200


# ---- tenant isolation --------------------------------------------------------------------


@pytest.fixture
def a_switch(tenant_a: ApiClient) -> dict[str, Any]:
    created: dict[str, Any] = tenant_a.create(SWITCHES, {"name": "a-net"})
    return created


def test_tenant_objects_belong_to_the_token(tenant_a: ApiClient, a_switch: dict[str, Any]) -> None:
    assert a_switch["tenant"] == "tenant-a"
    explicit = tenant_a.post(SWITCHES, {"tenant": "tenant-a"})
    assert explicit.status_code == 201


def test_tenants_see_only_their_objects(
    admin: ApiClient, tenant_a: ApiClient, tenant_b: ApiClient, a_switch: dict[str, Any]
) -> None:
    b_switch = tenant_b.create(SWITCHES, {"name": "b-net"})
    admin_switch = admin.create(SWITCHES, {"name": "admin-net"})
    assert ids(tenant_a, SWITCHES) == {a_switch["id"]}
    assert ids(tenant_b, SWITCHES) == {b_switch["id"]}
    assert ids(admin, SWITCHES) == {a_switch["id"], b_switch["id"], admin_switch["id"]}
    filtered = tenant_a.get(SWITCHES, query_string={"tenant": "tenant-b"}).get_json()
    assert filtered["items"] == []


def test_another_tenants_object_is_404(
    tenant_a: ApiClient, tenant_b: ApiClient, a_switch: dict[str, Any]
) -> None:
    url = f"{SWITCHES}/{a_switch['id']}"
    assert_error(tenant_b.get(url), 404, "not_found")
    assert_error(tenant_b.patch(url, {"name": "mine"}), 404, "not_found")
    assert_error(tenant_b.put(url, {"name": "mine"}), 404, "not_found")
    assert_error(tenant_b.delete(url), 404, "not_found")
    assert_error(tenant_b.get(f"{url}/ports"), 404, "not_found")
    assert_error(tenant_b.post(f"{url}/ports", {}), 404, "not_found")
    assert tenant_a.get(url).get_json()["name"] == "a-net"


def test_another_tenants_port_is_404(
    tenant_a: ApiClient, tenant_b: ApiClient, a_switch: dict[str, Any]
) -> None:
    port = tenant_a.create(f"{SWITCHES}/{a_switch['id']}/ports", {})
    url = f"{SWITCHES}/{a_switch['id']}/ports/{port['id']}"
    assert_error(tenant_b.get(url), 404, "not_found")
    assert_error(tenant_b.delete(url), 404, "not_found")
    assert tenant_a.get(url).status_code == 200


def test_naming_another_tenant_is_403(
    tenant_a: ApiClient, admin: ApiClient, a_switch: dict[str, Any]
) -> None:
    for url in (SWITCHES, QUEUES, PROFILES, ROUTERS):
        assert_error(tenant_a.post(url, {"tenant": "tenant-b"}), 403, "forbidden", "tenant")
    assert ids(admin, QUEUES) == set()
    change = tenant_a.patch(f"{SWITCHES}/{a_switch['id']}", {"tenant": "tenant-b"})
    assert change.status_code == 400  # a tenant never changes, whoever asks
    assert change.get_json()["field"] == "tenant"


def test_references_stay_within_a_tenant(
    tenant_a: ApiClient, tenant_b: ApiClient, admin: ApiClient, a_switch: dict[str, Any]
) -> None:
    b_queue = tenant_b.create(QUEUES, {"name": "b-gold"})
    ports = f"{SWITCHES}/{a_switch['id']}/ports"
    response = tenant_a.post(ports, {"qos_queue_id": b_queue["id"]})
    assert_error(response, 400, "missing_reference", "qos_queue_id")
    # Not even the admin can point tenant-a's port at tenant-b's queue.
    response = admin.post(ports, {"qos_queue_id": b_queue["id"]})
    assert_error(response, 400, "missing_reference", "qos_queue_id")
    b_profile = tenant_b.create(PROFILES, {"name": "b-web"})
    response = tenant_a.post(ports, {"security_profile_ids": [b_profile["id"]]})
    assert_error(response, 400, "missing_reference", "security_profile_ids")


# ---- admin-only objects ------------------------------------------------------------------------


@pytest.fixture
def zone(admin: ApiClient) -> dict[str, Any]:
    created: dict[str, Any] = admin.create(ZONES, {"name": "tz"})
    return created


@pytest.fixture
def gateway_node(admin: ApiClient) -> dict[str, Any]:
    body = {"name": "gw1", "node_type": "gateway", "system_id": "gw-1"}
    created: dict[str, Any] = admin.create(NODES, body)
    return created


@pytest.fixture
def gateway(admin: ApiClient, gateway_node: dict[str, Any]) -> dict[str, Any]:
    body = {"name": "l2", "type": "l2", "gateway_node_ids": [gateway_node["id"]]}
    created: dict[str, Any] = admin.create(GATEWAYS, body)
    return created


def test_tenants_cannot_write_transport_zones(
    tenant_a: ApiClient, admin: ApiClient, zone: dict[str, Any]
) -> None:
    url = f"{ZONES}/{zone['id']}"
    assert_error(tenant_a.post(ZONES, {"name": "mine"}), 403, "forbidden")
    assert_error(tenant_a.put(url, {"name": "mine"}), 403, "forbidden")
    assert_error(tenant_a.patch(url, {"name": "mine"}), 403, "forbidden")
    assert_error(tenant_a.delete(url), 403, "forbidden")
    assert admin.get(url).get_json()["name"] == "tz"
    # ... but may read them, to place their switches.
    assert ids(tenant_a, ZONES) == {zone["id"]}
    assert tenant_a.get(url).status_code == 200
    placed = tenant_a.post(SWITCHES, {"transport_zone_id": zone["id"]})
    assert placed.status_code == 201


def test_tenants_cannot_write_gateway_services(
    tenant_a: ApiClient, gateway: dict[str, Any], gateway_node: dict[str, Any]
) -> None:
    url = f"{GATEWAYS}/{gateway['id']}"
    body = {"name": "mine", "type": "l2", "gateway_node_ids": [gateway_node["id"]]}
    assert_error(tenant_a.post(GATEWAYS, body), 403, "forbidden")
    assert_error(tenant_a.put(url, body), 403, "forbidden")
    assert_error(tenant_a.delete(url), 403, "forbidden")
    assert ids(tenant_a, GATEWAYS) == {gateway["id"]}  # readable, to attach to them


def test_transport_nodes_are_admin_only(
    tenant_a: ApiClient, admin: ApiClient, gateway_node: dict[str, Any]
) -> None:
    url = f"{NODES}/{gateway_node['id']}"
    body = {"name": "hv", "node_type": "hypervisor", "system_id": "hv-1"}
    assert_error(tenant_a.post(NODES, body), 403, "forbidden")
    assert_error(tenant_a.put(url, body), 403, "forbidden")
    assert_error(tenant_a.delete(url), 403, "forbidden")
    assert ids(tenant_a, NODES) == set()
    assert_error(tenant_a.get(url), 404, "not_found")
    assert ids(admin, NODES) == {gateway_node["id"]}


def test_tenant_status_and_realization(tenant_a: ApiClient, a_switch: dict[str, Any]) -> None:
    assert tenant_a.get(f"{API}/status").status_code == 200
    answer = tenant_a.get(f"{API}/realization").get_json()
    assert answer["realized"] is False


# ---- where the daemon takes its tokens from ------------------------------------------------


def test_admin_token_from_each_source() -> None:
    def one(**kw: Any) -> str:
        sources: dict[str, Any] = {"flag": None, "file_text": None, "file_name": None, "env": {}}
        return admin_token(**{**sources, **kw})

    assert one(file_text="  from-file\n", file_name="f") == "from-file"
    assert one(env={ADMIN_TOKEN_ENV: "from-env"}) == "from-env"
    assert one(flag="from-flag") == "from-flag"
    assert one(flag="from-flag", env={ADMIN_TOKEN_ENV: ""}) == "from-flag"  # empty = unset
    with pytest.raises(TokenSourceError, match=r"no admin token.*--admin-token-file"):
        one()
    with pytest.raises(TokenSourceError, match="--admin-token-file f and LOOM_ADMIN_TOKEN"):
        one(file_text="a", file_name="f", env={ADMIN_TOKEN_ENV: "b"})
    with pytest.raises(TokenSourceError, match="more than once"):
        one(flag="a", file_text="a", file_name="f")
    with pytest.raises(TokenSourceError, match="empty"):
        one(file_text="\n", file_name="f")


def test_tenant_tokens_file_lines() -> None:
    text = "# tenants\n\nred = tok=en==\n  blue=other\n"
    assert parse_tenant_tokens(text, "t") == [("red", "tok=en=="), ("blue", "other")]
    for bad in ("red", "=token", "red=", "red=  "):
        with pytest.raises(TokenSourceError, match="t:2: expected TENANT=TOKEN"):
            parse_tenant_tokens(f"ok=fine\n{bad}\n", "t")


def test_tokens_must_be_distinct() -> None:
    tokens = tokens_of("admin", [("red", "r"), ("red", "r2"), ("blue", "b")])
    assert tokens.tenants == {"r": "red", "r2": "red", "b": "blue"}
    with pytest.raises(TokenSourceError, match="red's token is the admin token"):
        tokens_of("admin", [("red", "admin")])
    with pytest.raises(TokenSourceError, match="red and blue share a token"):
        tokens_of("admin", [("red", "same"), ("blue", "same")])


def test_daemon_reads_token_files_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    admin_file = tmp_path / "admin"
    admin_file.write_text("file-secret\n")
    tenants_file = tmp_path / "tenants"
    tenants_file.write_text("red=red-secret\n")
    base = ["--db", "tcp:127.0.0.1:1"]
    args = parse_args(
        [*base, f"--admin-token-file={admin_file}", f"--tenant-tokens-file={tenants_file}",
         "--tenant-token", "blue=blue-secret"]
    )  # fmt: skip
    assert args.tokens == Tokens("file-secret", {"red-secret": "red", "blue-secret": "blue"})
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "env-secret")
    assert parse_args(base).tokens.admin == "env-secret"
    for argv, message in [
        ([f"--admin-token-file={admin_file}"], "given more than once"),
        (["--admin-token-file", str(tmp_path / "missing")], "No such file"),
    ]:
        with pytest.raises(SystemExit) as exited:
            parse_args([*base, *argv])
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
    monkeypatch.delenv(ADMIN_TOKEN_ENV)
    with pytest.raises(SystemExit):
        parse_args(base)
    assert "no admin token" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args([*base, "--admin-token=a", f"--admin-token-file={admin_file}"])
    assert "not allowed with argument" in capsys.readouterr().err
