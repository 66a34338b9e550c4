"""Neutron API authentication: `X-Auth-Token` mapped to the native tokens, and `noauth`.

With the default `token` strategy a request needs the admin token or a tenant token (in
`X-Auth-Token`, as OpenStack clients send it, or as a bearer token); a tenant acts for its
own project only and sees its own objects plus external networks. `noauth` is chosen by
`create_app`'s config or `python -m loom_api --neutron-auth noauth`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import openstack
import pytest
from flask import Flask
from openstack import exceptions

from loom_api import create_app
from loom_api.__main__ import parse_args
from loom_api.auth import Tokens
from loom_api.store import Store

if TYPE_CHECKING:  # (mypy checks api-server/tests as top-level modules)
    from loom_api.testing import ApiClient

pytestmark = [
    pytest.mark.ovs,
    pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning"),
]

V2 = "/v2.0"


def admin_token(app: Flask) -> str:
    tokens: Tokens = app.extensions["loom.tokens"]
    return tokens.admin


def post(app: Flask, path: str, body: Any, token: str | None) -> Any:
    headers = {"X-Auth-Token": token} if token else {}
    return app.test_client().post(path, json=body, headers=headers)


def get(app: Flask, path: str, token: str | None) -> Any:
    headers = {"X-Auth-Token": token} if token else {}
    return app.test_client().get(path, headers=headers)


def test_token_is_required(app: Flask) -> None:
    for response in (
        get(app, f"{V2}/networks", None),
        get(app, f"{V2}/networks", "wrong"),
        post(app, f"{V2}/networks", {"network": {}}, None),
    ):
        assert response.status_code == 401
        assert response.get_json()["NeutronError"]["type"] == "NotAuthenticated"
    assert get(app, "/", None).status_code == 200  # the versions document is public
    bearer = app.test_client().get(
        f"{V2}/networks", headers={"Authorization": f"Bearer {admin_token(app)}"}
    )
    assert bearer.status_code == 200


def test_admin_token_acts_for_any_project(app: Flask) -> None:
    response = post(
        app, f"{V2}/networks", {"network": {"project_id": "tenant-a"}}, admin_token(app)
    )
    assert response.status_code == 201
    assert response.get_json()["network"]["project_id"] == "tenant-a"
    own = post(app, f"{V2}/networks", {"network": {"name": "mine"}}, admin_token(app))
    assert own.get_json()["network"]["project_id"] == "admin"


def test_tenant_tokens_are_isolated(app: Flask, tenant_a: ApiClient) -> None:
    created = post(app, f"{V2}/networks", {"network": {"name": "a-net"}}, "token-a")
    assert created.status_code == 201
    network = created.get_json()["network"]
    assert network["project_id"] == "tenant-a"
    # The native API sees the same switch for the same tenant.
    assert tenant_a.get(f"/api/v1/logical-switches/{network['id']}").status_code == 200

    other = get(app, f"{V2}/networks/{network['id']}", "token-b")
    assert other.status_code == 404
    assert other.get_json()["NeutronError"]["type"] == "NetworkNotFound"
    foreign = post(app, f"{V2}/networks", {"network": {"project_id": "tenant-a"}}, "token-b")
    assert foreign.status_code == 400
    assert "requires admin privileges" in foreign.get_json()["NeutronError"]["message"]
    external = post(app, f"{V2}/networks", {"network": {"router:external": True}}, "token-b")
    assert external.status_code == 403
    assert external.get_json()["NeutronError"]["type"] == "PolicyNotAuthorized"

    public = post(
        app,
        f"{V2}/networks",
        {"network": {"name": "pub", "router:external": True}},
        admin_token(app),
    ).get_json()["network"]
    seen_by_b = get(app, f"{V2}/networks", "token-b").get_json()["networks"]
    assert [n["name"] for n in seen_by_b] == ["pub"]
    seen_by_a = get(app, f"{V2}/networks", "token-a").get_json()["networks"]
    assert {n["name"] for n in seen_by_a} == {"a-net", "pub"}
    assert get(app, f"{V2}/networks/{public['id']}", "token-b").status_code == 200
    # Seeing the external network is not owning it.
    client = app.test_client()
    headers = {"X-Auth-Token": "token-b"}
    for response in (
        client.put(
            f"{V2}/networks/{public['id']}", json={"network": {"name": "x"}}, headers=headers
        ),
        client.delete(f"{V2}/networks/{public['id']}", headers=headers),
        client.put(f"{V2}/networks/{public['id']}/tags/mine", headers=headers),
    ):
        assert response.status_code == 403
        assert response.get_json()["NeutronError"]["type"] == "PolicyNotAuthorized"
    assert (
        get(app, f"{V2}/networks/{public['id']}", "token-b").get_json()["network"]["name"] == "pub"
    )

    # Each tenant's first use created its default security group, visible to it alone.
    groups_b = get(app, f"{V2}/security-groups", "token-b").get_json()["security_groups"]
    assert [(g["name"], g["project_id"]) for g in groups_b] == [("default", "tenant-b")]


def test_noauth_configuration(store: Store, app: Flask) -> None:
    noauth = create_app(store, app.extensions["loom.tokens"], {"LOOM_NEUTRON_AUTH": "noauth"})
    response = post(noauth, f"{V2}/networks", {"network": {"project_id": "p"}}, None)
    assert response.status_code == 201
    with pytest.raises(ValueError, match="LOOM_NEUTRON_AUTH"):
        create_app(store, app.extensions["loom.tokens"], {"LOOM_NEUTRON_AUTH": "keystone"})
    base = ["--db", "tcp:127.0.0.1:1", "--admin-token", "t"]
    assert parse_args(base).neutron_auth == "token"
    assert parse_args([*base, "--neutron-auth", "noauth"]).neutron_auth == "noauth"
    with pytest.raises(SystemExit):
        parse_args([*base, "--neutron-auth", "keystone"])


@pytest.fixture
def token_conn(live_api: str, app: Flask) -> Iterator[Any]:
    """openstacksdk with a token (auth_type admin_token) against the token strategy."""
    connection = openstack.connect(
        auth_type="admin_token",
        auth={"token": "token-a", "endpoint": live_api},
        network_endpoint_override=live_api,
    )
    yield connection
    connection.close()


def test_openstacksdk_sends_x_auth_token(token_conn: Any) -> None:
    network = token_conn.network.create_network(name="sdk-net")
    assert network.project_id == "tenant-a"
    assert [n.id for n in token_conn.network.networks()] == [network.id]
    with pytest.raises(exceptions.BadRequestException):
        token_conn.network.create_network(name="x", project_id="tenant-b")
