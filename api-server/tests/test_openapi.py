"""The OpenAPI document: generated from the collection table, committed, served, valid."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, ClassVar

import pydantic
import pytest
import schemathesis
from flask import Flask

from loom_api import create_app, openapi
from loom_api.auth import Tokens
from loom_api.service import crud
from loom_api.service.common import Body
from loom_api.store import Store
from loom_api.views import native
from loom_schemas import CONFIG_SCHEMA, OPENAPI_DOCUMENT, schema_path

METHODS = {"get", "put", "post", "patch", "delete"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi.build()


def _resolve(doc: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    node: Any = doc
    for part in ref["$ref"].removeprefix("#/").split("/"):
        node = node[part]
    result: dict[str, Any] = node
    return result


def test_committed_document_is_the_generated_one() -> None:
    committed = schema_path(OPENAPI_DOCUMENT).read_text()
    assert committed == openapi.render(openapi.build()), (
        "schemas/api/openapi.json is out of date: run `make openapi` and commit the result"
    )


def test_rendering_is_stable(document: dict[str, Any]) -> None:
    assert openapi.render(document) == openapi.render(openapi.build())


def test_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1")
    schemathesis.openapi.from_dict(document).validate()


def test_every_registered_collection_has_its_operations(document: dict[str, Any]) -> None:
    paths = document["paths"]
    for flask_path, resource in native.collections():
        path = openapi._openapi_path(flask_path, resource)
        assert set(paths[path]) & METHODS == {"get", "post"}, path
        assert set(paths[f"{path}/{{id}}"]) & METHODS == {"get", "put", "patch", "delete"}, path


def test_status_endpoints_are_documented(document: dict[str, Any]) -> None:
    for path in ("/health", "/realization", "/status", "/openapi.json"):
        assert "get" in document["paths"][path]
    assert document["paths"]["/health"]["get"]["security"] == []
    assert document["paths"]["/openapi.json"]["get"]["security"] == []
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_the_other_endpoints_are_described_by_their_views_models(
    document: dict[str, Any],
) -> None:
    paths, schemas = document["paths"], document["components"]["schemas"]

    def answer(path: str) -> Any:
        return paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]

    for path, model in (
        ("/health", "Health"),
        ("/realization", "Realization"),
        ("/status", "Status"),
        ("/trace", "Trace"),
        ("/transport-nodes/{id}/flows", "NodeFlows"),
        ("/transport-nodes/{id}/status", "TransportNodeStatus"),
        ("/logical-switches/{logical_switch_id}/ports/{id}/status", "LogicalSwitchPortStatus"),
    ):
        assert answer(path) == {"$ref": f"#/components/schemas/{model}"}, path
    assert schemas["Status"]["properties"]["warnings"]["items"] == {
        "$ref": "#/components/schemas/StatusWarning"
    }
    # An answer carries no defaults; a field it may leave out is not required.
    flows = schemas["NodeFlows"]
    assert flows["additionalProperties"] is False
    assert {"computed", "installed"} & set(flows["required"]) == set()
    assert "default" not in flows["properties"]["computed"]
    assert schemas["LogicalSwitchPort"]["properties"]["status"] == {
        "$ref": "#/components/schemas/PortStatus",
        "readOnly": True,
    }
    # Query parameters by alias, required when the model has no default, never null.
    trace = paths["/trace"]["get"]["parameters"]
    assert [(p["name"], p["required"]) for p in trace] == [
        ("from", True), ("packet", False), ("node", False), ("ct", False)
    ]  # fmt: skip
    assert all(p["schema"] == {"type": "string"} for p in trace)
    generation = paths["/realization"]["get"]["parameters"][0]
    assert generation["schema"] == {"type": "integer", "minimum": 0}


def test_request_schemas_forbid_unknown_fields(document: dict[str, Any]) -> None:
    for path_item in document["paths"].values():
        for method in METHODS & set(path_item):
            body = path_item[method].get("requestBody")
            if body is None:
                continue
            schema = _resolve(document, body["content"]["application/json"]["schema"])
            assert schema["additionalProperties"] is False


def test_response_schemas_carry_the_read_only_fields(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for _, resource in native.collections():
        name = openapi._camel(resource.kind)
        response = schemas[name]
        for field in resource.read_only:
            assert response["properties"][field]["readOnly"] is True
            assert field in response["required"]
        create = schemas[resource.model.__name__]
        assert not resource.read_only & set(create["properties"]), "POST refuses read-only fields"
        assert resource.read_only <= set(schemas[f"{name}Replace"]["properties"])
        assert "required" not in schemas[f"{name}Patch"]


def test_every_operation_documents_its_errors(document: dict[str, Any]) -> None:
    error = {"$ref": "#/components/schemas/Error"}
    for path, path_item in document["paths"].items():
        for method in METHODS & set(path_item):
            operation = path_item[method]
            responses = operation["responses"]
            if operation.get("security") != []:
                assert "401" in responses, (method, path)
            if path != "/openapi.json":
                assert "503" in responses, (method, path)
            for status, response in responses.items():
                if status.startswith("4") or (status == "503" and path != "/health"):
                    content = _resolve(document, response)["content"]
                    assert content["application/json"]["schema"] == error


def test_changes_document_generation_etag_and_location(document: dict[str, Any]) -> None:
    item = document["paths"]["/logical-switches/{id}"]
    created = document["paths"]["/logical-switches"]["post"]["responses"]["201"]["headers"]
    assert {"ETag", "Location", "X-Loom-Config-Generation"} <= set(created)
    assert all(created[h]["required"] for h in ("ETag", "Location", "X-Loom-Config-Generation"))
    assert "X-Loom-Config-Generation" in item["delete"]["responses"]["204"]["headers"]
    params = [p["$ref"].rsplit("/", 1)[1] for p in item["put"]["parameters"]]
    assert {"IfMatch", "WaitForRealization"} <= set(params)
    listed = document["paths"]["/logical-switches"]["get"]["parameters"]
    names = {_resolve(document, p)["name"] for p in listed}
    assert names == {"limit", "cursor", "tenant", "name", "tag"}


def test_value_types_are_described(document: dict[str, Any]) -> None:
    port = document["components"]["schemas"]["LogicalSwitchPortBody"]["properties"]
    mac = port["mac"]["anyOf"][0]
    assert mac["pattern"].startswith("^")
    assert port["ips"]["items"]["anyOf"] == [{"format": "ipv4"}, {"format": "ipv6"}]
    attachment = document["components"]["schemas"]["L2GatewayAttachment"]["properties"]
    assert (attachment["vlan"]["minimum"], attachment["vlan"]["maximum"]) == (0, 4095)


class _WidgetBody(Body):
    """A test-only model."""

    size: int


class _Widgets(crud.Resource):
    """`/things/{id}/widgets`, a collection made up for this test."""

    kind = "widget"
    table = "Logical_Switch_Port"
    model: ClassVar[type[pydantic.BaseModel]] = _WidgetBody
    read_only = frozenset({"id", "revision", "widget_key", "thing_id", "status", "colour"})
    parent = native.COLLECTIONS[0][1].__class__


def test_new_collections_appear_from_the_table_alone() -> None:
    doc = openapi.build([("/things/<parent_id>/widgets", _Widgets())])
    parent_param = f"{openapi._snake(_Widgets.parent.kind)}_id"
    path = f"/things/{{{parent_param}}}/widgets"
    assert {"get", "post"} <= set(doc["paths"][path])
    assert doc["paths"][path]["parameters"][0]["name"] == parent_param
    props = doc["components"]["schemas"]["Widget"]["properties"]
    assert props["widget_key"]["type"] == "integer"
    assert props["thing_id"]["format"] == "uuid"
    assert props["colour"]["readOnly"] is True
    assert props["size"]["type"] == "integer"
    schemathesis.openapi.from_dict(doc).validate()


@pytest.fixture
def offline_app() -> Iterator[Flask]:
    """The app on a store that never connects: enough for endpoints that need no database."""
    store = Store("tcp:127.0.0.1:1", str(schema_path(CONFIG_SCHEMA)))
    yield create_app(store, Tokens(admin="t"))
    store.stop()


def test_served_document_is_the_committed_one(offline_app: Flask) -> None:
    response = offline_app.test_client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response.get_json() == json.loads(schema_path(OPENAPI_DOCUMENT).read_text())


def test_every_native_route_is_documented(offline_app: Flask, document: dict[str, Any]) -> None:
    def shape(path: str) -> str:
        return re.sub(r"\{\w+\}", "{}", path)

    documented = {
        (shape(path), method.upper())
        for path, item in document["paths"].items()
        for method in METHODS & set(item)
    }
    served = {
        (shape(re.sub(r"<(?:\w+:)?\w+>", "{}", rule.rule.removeprefix(openapi.SERVER_URL))), m)
        for rule in offline_app.url_map.iter_rules()
        if rule.rule.startswith(f"{openapi.SERVER_URL}/")
        for m in (rule.methods or set()) - {"HEAD", "OPTIONS"}
    }
    assert served == documented
