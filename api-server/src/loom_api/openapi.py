"""Generates the OpenAPI 3.1 document of the native API from the collection table and models.

The document is derived, never written by hand: every collection registered in
`loom_api.views.native.COLLECTIONS` gets its five operations, its request schemas come from
the resource's pydantic `model` (unknown fields forbidden, as the API enforces), and its
response schema is the model plus the resource's `read_only` fields. The endpoints that are
not collections (health, realization, status, an object's status, a node's flows, trace)
take their answers' and queries' schemas from their views' pydantic models (`Reply`
subclasses, `*Query`), as components beside the collections'; only their operations'
summaries and the error responses are written here, once.

`python -m loom_api.openapi > schemas/api/openapi.json` (`make openapi`) writes the committed
copy; a test fails when the committed copy differs from what this module generates.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from importlib import metadata
from typing import Any

import pydantic
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

from loom_api import errors
from loom_api.http import (
    GENERATION_HEADER,
    MAX_WAIT_SECONDS,
    REALIZED_GENERATION_HEADER,
    REALIZED_HEADER,
    WAIT_HEADER,
)
from loom_api.service import crud, types
from loom_api.service.gateways import GatewayServiceStatus
from loom_api.service.nodes import NodeStatus
from loom_api.service.ports import PortStatus
from loom_api.views import flows, native, settings, status, trace

OPENAPI_VERSION = "3.1.0"
SERVER_URL = "/api/v1"
REF = "#/components/schemas/{model}"
UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

JsonDict = dict[str, Any]

# ---- schemas of the value types ----------------------------------------------------------

#: JSON Schema of the string types that pydantic validates with plain functions (types.py);
#: pydantic can only say "string" for them, so the document says what the functions accept.
_FUNCTION_SCHEMAS: dict[Any, JsonDict] = {
    types._mac: {
        "type": "string",
        "pattern": "^[0-9a-fA-F][02468aceACE](:[0-9a-fA-F]{2}){5}$",
        "description": "A unicast MAC address, xx:xx:xx:xx:xx:xx (stored lower-case).",
    },
    types._ip: {
        "type": "string",
        "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}],
        "description": "An IPv4 or IPv6 address (stored in its compressed form).",
    },
    types._cidr: {
        "type": "string",
        "description": "A network prefix (CIDR) with no host bits set, like 10.0.0.0/24.",
        "examples": ["10.0.0.0/24"],
    },
    types._interface: {
        "type": "string",
        "description": "An address with its prefix length, like 10.0.0.1/24.",
        "examples": ["10.0.0.1/24"],
    },
}


class _LoomJsonSchema(GenerateJsonSchema):
    """pydantic's JSON Schema generator, knowing what Loom's validator functions accept."""

    def _known(self, schema: Any) -> JsonDict | None:
        function = schema.get("function", {}).get("function")
        known = _FUNCTION_SCHEMAS.get(function)
        return copy.deepcopy(known) if known is not None else None

    def function_after_schema(
        self, schema: core_schema.AfterValidatorFunctionSchema
    ) -> JsonSchemaValue:
        """Describe a string checked by one of types.py's functions; else pydantic's default."""
        return self._known(schema) or super().function_after_schema(schema)


class _ReplyJsonSchema(_LoomJsonSchema):
    """The generator of answers and query parameters: no defaults (an answer carries every
    value it has; an absent parameter's meaning is its description's)."""

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        """Describe the value without its default."""
        return self.generate_inner(schema["schema"])


def _uuid(description: str) -> JsonDict:
    return {"type": "string", "format": "uuid", "pattern": UUID_PATTERN, "description": description}


def _nullable(schema: JsonDict) -> JsonDict:
    return {"anyOf": [schema, {"type": "null"}]}


ERROR_SCHEMA: JsonDict = errors.ErrorBody.model_json_schema(
    mode="serialization", schema_generator=_ReplyJsonSchema
)


def read_only_schema(resource: crud.Resource, name: str) -> JsonDict:
    """Return the JSON Schema of read-only field `name` of `resource`.

    `id` and `*_id` fields are object ids, `revision` and `*_key` are integers the API
    allocates, `status` is what the controllers report; any other read-only field is
    documented without constraining its value.
    """
    if name == "id":
        schema = _uuid("The object's id, assigned by the API.")
    elif name == "revision":
        schema = {
            "type": "integer",
            "minimum": 1,
            "description": "Incremented by every change; the ETag is this number, quoted.",
        }
    elif name.endswith("_key"):
        schema = {"type": "integer", "minimum": 0, "description": "Allocated by Loom."}
    elif name.endswith("_id"):
        schema = _uuid("The id of the object this one belongs to.")
    elif name.endswith("_ids"):
        schema = {"type": "array", "items": _uuid("An object id.")}
    elif name == "status" and resource.table in _STATUS_MODELS:
        schema = {"$ref": REF.format(model=_STATUS_MODELS[resource.table].__name__)}
    elif name == "status":
        schema = {"type": "object", "description": "As the controllers report it."}
    else:
        schema = {"description": f"Set by Loom ({name})."}
    schema["readOnly"] = True
    return schema


# ---- names -----------------------------------------------------------------------------------


def _snake(kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_")


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in _snake(kind).split("_"))


def _openapi_path(flask_path: str, resource: crud.Resource) -> str:
    """Turn Flask's `/x/<parent_id>/ports` into OpenAPI's `/x/{logical_switch_id}/ports`."""

    def name(match: re.Match[str]) -> str:
        arg = match.group(1)
        if arg == "parent_id" and resource.parent is not None:
            arg = f"{_snake(resource.parent.kind)}_id"
        return "{" + arg + "}"

    return re.sub(r"<(?:\w+:)?(\w+)>", name, flask_path)


# ---- reusable parts ------------------------------------------------------------------------

_ERROR_RESPONSES: dict[str, tuple[str, str]] = {
    "400": (
        "BadRequest",
        "The request is invalid: malformed JSON (`malformed_json`), JSON nested deeper than "
        "the server's limit (`json_too_deep`, 32 levels by default), an unknown field "
        "(`unknown_field`), an unknown or repeated query parameter (`unknown_parameter`), a "
        "wrong type or bad value (`invalid_value`), a reference to a missing object "
        "(`missing_reference`). `field` names the field or parameter at fault.",
    ),
    "401": ("Unauthenticated", "No bearer token, or an unknown one (`unauthenticated`)."),
    "403": (
        "Forbidden",
        "The token may not do this: a tenant token writing admin objects or acting for "
        "another tenant (`forbidden`).",
    ),
    "404": ("NotFound", "No such object, or not visible to this token (`not_found`)."),
    "409": (
        "Conflict",
        "The change contradicts the stored configuration: a duplicate name, address or key "
        "(`conflict`), or a delete of an object still in use, naming its users (`in_use`).",
    ),
    "412": (
        "PreconditionFailed",
        "`If-Match` named a stale ETag: someone changed the object (`precondition_failed`).",
    ),
    "413": (
        "BodyTooLarge",
        "The body is longer than the server's limit (`body_too_large`, 1 MiB by default); "
        "it was refused without being read.",
    ),
    "415": ("UnsupportedMediaType", "The body is not `application/json`."),
    "503": (
        "Unavailable",
        "The configuration database is unreachable (`database_unavailable`: nothing was "
        "written) or was lost while committing (`outcome_unknown`: read back before "
        "retrying), or cannot write to its disk (`storage_full`: nothing was written; "
        "`Retry-After`).",
    ),
}


def _header(description: str, schema: JsonDict) -> JsonDict:
    return {"description": description, "schema": schema}


_HEADERS: JsonDict = {
    "ETag": _header(
        "The object's revision, quoted; send it back in `If-Match`.", {"type": "string"}
    ),
    "Location": _header("The URL path of the created object.", {"type": "string"}),
    "ConfigGeneration": _header(
        "The configuration generation this change committed as.",
        {"type": "integer", "minimum": 1},
    ),
    "Realized": _header(
        f"Sent when the request carried `{WAIT_HEADER}`: whether the generation was realized "
        "on the transport nodes within the wait.",
        {"type": "string", "enum": ["true", "false"]},
    ),
    "RealizedGeneration": _header(
        f"Sent when the request carried `{WAIT_HEADER}`: the realized generation.",
        {"type": "integer", "minimum": 0},
    ),
}

_PARAMETERS: JsonDict = {
    "IfMatch": {
        "name": "If-Match",
        "in": "header",
        "required": False,
        "description": "Change only if the object's ETag is one of these (or `*`); else 412.",
        "schema": {"type": "string"},
    },
    "WaitForRealization": {
        "name": WAIT_HEADER,
        "in": "header",
        "required": False,
        "description": "Wait up to this many seconds for the change to be realized on the "
        f"transport nodes; the answer says whether it was (`{REALIZED_HEADER}`).",
        "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
    },
    "Limit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "The most items in one page.",
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": crud.MAX_LIMIT,
            "default": crud.DEFAULT_LIMIT,
        },
    },
    "Cursor": {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "`next_cursor` of the previous page (an object id); the list "
        "continues after it.",
        "schema": {"type": "string", "format": "uuid", "pattern": UUID_PATTERN},
    },
    "Tenant": {
        "name": "tenant",
        "in": "query",
        "required": False,
        "description": "Only objects of this tenant.",
        "schema": {"type": "string"},
    },
    "Name": {
        "name": "name",
        "in": "query",
        "required": False,
        "description": "Only objects with exactly this name.",
        "schema": {"type": "string"},
    },
    "Tag": {
        "name": "tag",
        "in": "query",
        "required": False,
        "description": "Only objects carrying this tag.",
        "schema": {"type": "string"},
    },
}


def _ref(kind: str, name: str) -> JsonDict:
    return {"$ref": f"#/components/{kind}/{name}"}


def _errors(*codes: str) -> JsonDict:
    return {code: _ref("responses", _ERROR_RESPONSES[code][0]) for code in codes}


def _json_content(schema: JsonDict) -> JsonDict:
    return {"application/json": {"schema": schema}}


def _path_parameter(name: str, description: str) -> JsonDict:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


# ---- one collection --------------------------------------------------------------------------


class _Collection:
    """The paths, operations and schemas of one registered resource."""

    def __init__(self, flask_path: str, resource: crud.Resource, request_schema: JsonDict):
        self.resource = resource
        self.path = _openapi_path(flask_path, resource)
        self.kind = resource.kind
        self.snake = _snake(resource.kind)
        self.name = _camel(resource.kind)
        self.tag = self.kind[0].upper() + self.kind[1:] + "s"
        self.request = request_schema
        self.parent_params = [
            _path_parameter(arg, f"The id of the {resource.parent.kind}.")
            for arg in re.findall(r"\{(\w+)\}", self.path)
            if resource.parent is not None
        ]

    # -- schemas

    def schemas(self) -> dict[str, JsonDict]:
        """Return the response, replace, patch and list schemas (the create one is the model)."""
        model = self.request
        fields = sorted(self.resource.read_only)
        read_only = {name: read_only_schema(self.resource, name) for name in fields}
        note = (
            f" Read-only fields ({', '.join(fields)}) may be repeated, unchanged." if fields else ""
        )
        immutable = sorted(self.resource.immutable)
        if immutable:
            note += f" Fixed at creation: {', '.join(immutable)}."

        response = copy.deepcopy(model)
        response["title"] = self.name
        response["description"] = f"A {self.kind}, as the API returns it."
        response["properties"] = {
            **{k: _without_default(v) for k, v in model["properties"].items()},
            **read_only,
        }
        response["required"] = sorted(response["properties"])

        replace = copy.deepcopy(model)
        replace["title"] = f"{self.name}Replace"
        replace["description"] = f"The whole new state of a {self.kind} (PUT).{note}"
        replace["properties"] = {**model["properties"], **read_only}

        patch = copy.deepcopy(replace)
        patch["title"] = f"{self.name}Patch"
        patch["description"] = (
            f"Fields of a {self.kind} to change (PATCH); the result is validated whole.{note}"
        )
        patch.pop("required", None)

        page = {
            "type": "object",
            "title": f"{self.name}List",
            "description": f"One page of {self.kind}s, ordered by id.",
            "additionalProperties": False,
            "required": ["items", "next_cursor"],
            "properties": {
                "items": {"type": "array", "items": {"$ref": REF.format(model=self.name)}},
                "next_cursor": {
                    "type": ["string", "null"],
                    "description": "Pass as `cursor` for the next page; null on the last.",
                },
            },
        }
        return {
            self.name: response,
            f"{self.name}Replace": replace,
            f"{self.name}Patch": patch,
            f"{self.name}List": page,
        }

    # -- operations

    def _changed(self, status: str, description: str, *, etag: bool, location: bool) -> JsonDict:
        headers: JsonDict = {
            GENERATION_HEADER: {**_ref("headers", "ConfigGeneration"), "required": True},
            REALIZED_HEADER: _ref("headers", "Realized"),
            REALIZED_GENERATION_HEADER: _ref("headers", "RealizedGeneration"),
        }
        if etag:
            headers["ETag"] = {**_ref("headers", "ETag"), "required": True}
        if location:
            headers["Location"] = {**_ref("headers", "Location"), "required": True}
        out: JsonDict = {"description": description, "headers": headers}
        if status != "204":
            out["content"] = _json_content({"$ref": REF.format(model=self.name)})
        return {status: out}

    def _security_note(self) -> str:
        resource = self.resource
        if not resource.tenant_readable:
            return " Admin token only."
        if resource.admin_writes_only:
            return " Tenants may read; only the admin token may change them."
        if resource.tenant_owned:
            return " Tenant tokens see and change only their tenant's objects."
        return ""

    def paths(self, request_name: str) -> dict[str, JsonDict]:
        """Return the collection's path items (list/create and get/replace/patch/delete)."""
        parent_404 = ("404",) if self.resource.parent is not None else ()
        body = {
            "required": True,
            "content": _json_content({"$ref": REF.format(model=request_name)}),
        }
        change_params = [_ref("parameters", "WaitForRealization")]
        item_params = [*change_params, _ref("parameters", "IfMatch")]
        note = self._security_note()
        collection = {
            "parameters": self.parent_params,
            "get": {
                "operationId": f"list_{self.snake}s",
                "summary": f"List {self.kind}s",
                "description": f"One page of the {self.kind}s visible to the token.{note}",
                "tags": [self.tag],
                "parameters": [
                    _ref("parameters", p) for p in ("Limit", "Cursor", "Tenant", "Name", "Tag")
                ],
                "responses": {
                    "200": {
                        "description": f"A page of {self.kind}s.",
                        "content": _json_content({"$ref": REF.format(model=f"{self.name}List")}),
                    },
                    **_errors("400", "401", *parent_404, "503"),
                },
            },
            "post": {
                "operationId": f"create_{self.snake}",
                "summary": f"Create a {self.kind}",
                "description": f"Create a {self.kind}; read-only fields are refused.{note}",
                "tags": [self.tag],
                "parameters": change_params,
                "requestBody": body,
                "responses": {
                    **self._changed("201", "Created.", etag=True, location=True),
                    **_errors("400", "401", "403", *parent_404, "409", "413", "415", "503"),
                },
            },
        }
        id_param = _path_parameter("id", f"The {self.kind}'s id.")
        item = {
            "parameters": [*self.parent_params, id_param],
            "get": {
                "operationId": f"get_{self.snake}",
                "summary": f"Get a {self.kind}",
                "description": f"The {self.kind} and its ETag.{note}",
                "tags": [self.tag],
                "responses": {
                    "200": {
                        "description": f"The {self.kind}.",
                        "headers": {"ETag": {**_ref("headers", "ETag"), "required": True}},
                        "content": _json_content({"$ref": REF.format(model=self.name)}),
                    },
                    **_errors("400", "401", "404", "503"),
                },
            },
            "put": self._update("put", f"Replace a {self.kind}", "Replace", item_params, note),
            "patch": self._update("patch", f"Patch a {self.kind}", "Patch", item_params, note),
            "delete": {
                "operationId": f"delete_{self.snake}",
                "summary": f"Delete a {self.kind}",
                "description": f"Delete the {self.kind}; refused (409, naming them) while "
                f"other objects use it.{note}",
                "tags": [self.tag],
                "parameters": item_params,
                "responses": {
                    **self._changed("204", "Deleted.", etag=False, location=False),
                    **_errors("400", "401", "403", "404", "409", "412", "503"),
                },
            },
        }
        return {self.path: collection, f"{self.path}/{{id}}": item}

    def _update(
        self, method: str, summary: str, suffix: str, params: list[JsonDict], note: str
    ) -> JsonDict:
        verb = "replace" if method == "put" else "patch"
        return {
            "operationId": f"{verb}_{self.snake}",
            "summary": summary,
            "description": f"{summary}; with `If-Match`, only if it has not changed since.{note}",
            "tags": [self.tag],
            "parameters": params,
            "requestBody": {
                "required": True,
                "content": _json_content({"$ref": REF.format(model=f"{self.name}{suffix}")}),
            },
            "responses": {
                **self._changed("200", "Changed.", etag=True, location=False),
                **_errors("400", "401", "403", "404", "409", "412", "413", "415", "503"),
            },
        }


def _without_default(schema: JsonDict) -> JsonDict:
    return {k: v for k, v in schema.items() if k != "default"}


def _add_links(parts: list[_Collection], paths: dict[str, JsonDict]) -> None:
    """Link each create to what its new object's id opens: the object, its child collections."""
    for part in parts:
        created = paths[part.path]["post"]["responses"]["201"]
        links = created.setdefault("links", {})
        carried = {p["name"]: f"$request.path.{p['name']}" for p in part.parent_params}
        for verb in ("get", "replace", "patch", "delete"):
            links[f"{verb}_{part.snake}"] = {
                "operationId": f"{verb}_{part.snake}",
                "parameters": {**carried, "id": "$response.body#/id"},
                "description": f"The new {part.kind}.",
            }
        for child in parts:
            parent = child.resource.parent
            if parent is None or not isinstance(part.resource, parent):
                continue
            for param in child.parent_params:
                for verb, name in (("list", f"{child.snake}s"), ("create", child.snake)):
                    links[f"{verb}_{name}"] = {
                        "operationId": f"{verb}_{name}",
                        "parameters": {param["name"]: "$response.body#/id"},
                        "description": f"The {child.kind}s of the new {part.kind}.",
                    }


# ---- the endpoints that are not collections --------------------------------------------------

#: The `status` of objects by table (a read-only field of their answers), the answers of
#: their status routes by table, and every answer of an endpoint that is not a collection:
#: their components are generated from these models (the views' and services' own).
_STATUS_MODELS: dict[str, type[pydantic.BaseModel]] = {
    "Logical_Switch_Port": PortStatus,
    "Transport_Node": NodeStatus,
    "Gateway_Service": GatewayServiceStatus,
}
_STATUS_ROUTE_MODELS: dict[str, type[pydantic.BaseModel]] = {
    "Logical_Switch_Port": native.LogicalSwitchPortStatus,
    "Transport_Node": native.TransportNodeStatus,
}
_REPLY_MODELS: list[type[pydantic.BaseModel]] = [
    *_STATUS_MODELS.values(),
    *_STATUS_ROUTE_MODELS.values(),
    status.Health,
    status.Realization,
    status.Status,
    flows.NodeFlows,
    trace.Trace,
    settings.Settings,
]


def _reply_schemas() -> dict[str, JsonDict]:
    """Return the components of the answers in `_REPLY_MODELS` and the models they use."""
    keys, defs = models_json_schema(
        [(m, "serialization") for m in _REPLY_MODELS],
        ref_template=REF,
        schema_generator=_ReplyJsonSchema,
    )
    for model in _REPLY_MODELS:
        assert keys[(model, "serialization")]["$ref"] == REF.format(model=model.__name__)
    schemas: dict[str, JsonDict] = defs["$defs"]
    for schema in schemas.values():  # (a docstring's line breaks are its source's)
        if "description" in schema:
            schema["description"] = " ".join(schema["description"].split())
    return schemas


def _reply(model: type[pydantic.BaseModel], description: str) -> JsonDict:
    """Return a 200 response whose body is `model` (a component of `_reply_schemas`)."""
    return {
        "description": description,
        "content": _json_content({"$ref": REF.format(model=model.__name__)}),
    }


def _query_parameters(model: type[pydantic.BaseModel]) -> list[JsonDict]:
    """Return the query parameters that `model` describes, one per field (by alias).

    A field without a default is a required parameter; None stands for an absent parameter,
    so the null branch of an optional field's schema is no value a client sends.
    """
    schema = model.model_json_schema(by_alias=True, schema_generator=_ReplyJsonSchema)
    assert "$defs" not in schema, f"{model.__name__}: a query parameter is a plain value"
    required = set(schema.get("required", ()))
    parameters = []
    for name, field in schema["properties"].items():
        value = {k: v for k, v in field.items() if k not in ("title", "description")}
        branches = [b for b in value.get("anyOf", ()) if b != {"type": "null"}]
        if len(branches) == 1:
            value = branches[0]
        parameters.append(
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "description": field["description"],
                "schema": value,
            }
        )
    return parameters


def _object_status_paths(parts: list[_Collection]) -> dict[str, JsonDict]:
    """Document `GET <object>/status` of switch ports and transport nodes (views/native.py)."""
    out: dict[str, JsonDict] = {}
    for part in parts:
        model = _STATUS_ROUTE_MODELS.get(part.resource.table)
        if model is None:
            continue
        out[f"{part.path}/{{id}}/status"] = {
            "parameters": [*part.parent_params, _path_parameter("id", f"The {part.kind}'s id.")],
            "get": {
                "operationId": f"get_{part.snake}_status",
                "summary": f"Get a {part.kind}'s status",
                "description": _described(_STATUS_MODELS[part.resource.table]),
                "tags": [part.tag],
                "responses": {
                    "200": _reply(model, "The status."),
                    **_errors("400", "401", "404", "503"),
                },
            },
        }
    return out


def _described(model: type[pydantic.BaseModel]) -> str:
    """Return the description the model's schema carries (its docstring)."""
    return str(model.model_json_schema()["description"])


def _node_flows_path(tag: str) -> dict[str, JsonDict]:
    """Document `GET /transport-nodes/{id}/flows` (views/flows.py)."""
    return {
        "/transport-nodes/{id}/flows": {
            "parameters": [_path_parameter("id", "The transport node's id.")],
            "get": {
                "operationId": "get_transport_node_flows",
                "summary": "A transport node's computed and installed OpenFlow tables",
                "description": "Asked of the physical controller that masters the node: how "
                "many flows it computes for the node and the node holds, and what a "
                "reconciliation would change; with `tables=true` both whole tables.",
                "tags": [tag],
                "parameters": _query_parameters(flows.FlowsQuery),
                "responses": {
                    "200": _reply(flows.NodeFlows, "The tables."),
                    **_errors("400", "401", "404", "503"),
                },
            },
        }
    }


def _settings_path() -> dict[str, JsonDict]:
    """Document `/settings` (views/settings.py)."""
    answer = _reply(settings.Settings, "The settings in effect.")
    return {
        "/settings": {
            "get": {
                "operationId": "get_settings",
                "summary": "The deployment-wide settings",
                "tags": ["Status"],
                "responses": {"200": answer, **_errors("400", "401", "503")},
            },
            "patch": {
                "operationId": "update_settings",
                "summary": "Change deployment-wide settings (admin only)",
                "description": "Changes the fields the body names; `null` returns one to its "
                "default.",
                "tags": ["Status"],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("schemas", "SettingsChange")}},
                },
                "responses": {"200": answer, **_errors("400", "401", "403", "413", "415", "503")},
            },
        }
    }


def _trace_path() -> dict[str, JsonDict]:
    """Document `GET /trace` (views/trace.py)."""
    return {
        "/trace": {
            "get": {
                "operationId": "trace_packet",
                "summary": "Where a packet from a port goes, flow by flow",
                "description": "Traced by a physical controller with `ofproto/trace`: "
                "through the universal flows of the port's datapaths on an ideal node (every "
                "port of them there), or with `node` through that node's installed table. A "
                "tenant traces its own ports; only the admin gives `node`.",
                "tags": ["Status"],
                "parameters": _query_parameters(trace.TraceQuery),
                "responses": {
                    "200": _reply(trace.Trace, "The trace."),
                    **_errors("400", "401", "403", "404", "409", "503"),
                },
            },
        }
    }


def _status_paths() -> dict[str, JsonDict]:
    """Document `/health`, `/realization`, `/status` (views/status.py) and this document."""
    health = _reply(status.Health, "Connected.")
    return {
        "/health": {
            "get": {
                "operationId": "health",
                "summary": "Whether the API reaches the configuration database",
                "tags": ["Status"],
                "security": [],
                "responses": {"200": health, "503": {**health, "description": "Unreachable."}},
            }
        },
        "/realization": {
            "get": {
                "operationId": "get_realization",
                "summary": "Whether a configuration generation is realized",
                "description": "Until controllers report realization, `realized` stays false. "
                f"`{WAIT_HEADER}` waits up to that many seconds for it.",
                "tags": ["Status"],
                "parameters": [
                    *_query_parameters(status.RealizationQuery),
                    _ref("parameters", "WaitForRealization"),
                ],
                "responses": {
                    "200": _reply(status.Realization, "The answer."),
                    **_errors("400", "401", "503"),
                },
            }
        },
        "/status": {
            "get": {
                "operationId": "get_status",
                "summary": "Configuration and realized generations",
                "tags": ["Status"],
                "responses": {
                    "200": _reply(status.Status, "The status."),
                    **_errors("400", "401", "503"),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "get_openapi",
                "summary": "This document",
                "tags": ["Status"],
                "security": [],
                "responses": {
                    "200": {
                        "description": "The OpenAPI document.",
                        "content": _json_content({"type": "object"}),
                    }
                },
            }
        },
    }


# ---- the document ----------------------------------------------------------------------------


def _request_schemas(
    models: list[type[pydantic.BaseModel]],
) -> tuple[list[str], dict[str, JsonDict]]:
    """Return the component name of each model's request schema, and all the schemas."""
    unique = list(dict.fromkeys(models))
    keys, defs = models_json_schema(
        [(m, "validation") for m in unique], ref_template=REF, schema_generator=_LoomJsonSchema
    )
    by_model = {m: keys[(m, "validation")]["$ref"].rsplit("/", 1)[1] for m in unique}
    return [by_model[m] for m in models], dict(defs.get("$defs", {}))


def build(collections: list[tuple[str, crud.Resource]] | None = None) -> JsonDict:
    """Return the OpenAPI document of the native API.

    Args:
        collections: the collection table; by default `views.native.collections()`.

    Returns:
        The document, a JSON-serializable dict.

    Raises:
        ValueError: two schemas would get the same component name.
    """
    if collections is None:
        collections = native.collections()
    names, schemas = _request_schemas(
        [*(resource.model for _, resource in collections), settings.SettingsChange]
    )
    names = names[: len(collections)]
    paths: dict[str, JsonDict] = {}
    tags: list[JsonDict] = []
    parts: list[_Collection] = []
    for (flask_path, resource), request_name in zip(collections, names, strict=True):
        part = _Collection(flask_path, resource, schemas[request_name])
        for name, schema in part.schemas().items():
            if name in schemas:
                raise ValueError(f"two OpenAPI schemas named {name!r}")
            schemas[name] = schema
        paths.update(part.paths(request_name))
        parts.append(part)
        if part.tag not in (t["name"] for t in tags):
            tags.append({"name": part.tag, "description": type(resource).__doc__ or ""})
    _add_links(parts, paths)
    for name, schema in _reply_schemas().items():
        if name in schemas:
            raise ValueError(f"two OpenAPI schemas named {name!r}")
        schemas[name] = schema
    paths.update(_object_status_paths(parts))
    nodes = next((p.tag for p in parts if p.resource.table == "Transport_Node"), "Status")
    paths.update(_node_flows_path(nodes))
    paths.update(_trace_path())
    paths.update(_settings_path())
    paths.update(_status_paths())
    schemas["Error"] = ERROR_SCHEMA
    tags.append({"name": "Status", "description": "Health, status and realization."})
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Loom native API",
            "version": metadata.version("loom-api-server"),
            "description": "The native REST API of Loom, a network virtualization controller. "
            "Authenticate with `Authorization: Bearer <token>` (`X-Auth-Token` is also "
            "accepted): the admin token, or a tenant token that sees and changes only its "
            "tenant's objects. Every change answers with the configuration generation it "
            f"committed as (`{GENERATION_HEADER}`). Errors are "
            '`{"error": code, "message": text, "field": name}`.',
        },
        "servers": [{"url": SERVER_URL}],
        "security": [{"bearer": []}],
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                name: {
                    "description": description,
                    "content": _json_content({"$ref": REF.format(model="Error")}),
                }
                for name, description in _ERROR_RESPONSES.values()
            },
            "parameters": _PARAMETERS,
            "headers": _HEADERS,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The admin token or a tenant token, set by the operator.",
                }
            },
        },
    }


def render(document: JsonDict) -> str:
    """Return `document` as stable JSON text (sorted keys, two-space indent, final newline)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    """Print the generated document (`python -m loom_api.openapi > schemas/api/openapi.json`)."""
    sys.stdout.write(render(build()))


if __name__ == "__main__":
    main()
