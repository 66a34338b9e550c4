"""Generates the OpenAPI 3.1 document of the native API from the collection table and models.

The document is derived, never written by hand: every collection registered in
`loom_api.views.native.COLLECTIONS` gets its five operations, its request schemas come from
the resource's pydantic `model` (unknown fields forbidden, as the API enforces), and its
response schema is the model plus the resource's `read_only` fields. The status endpoints and
the error responses are described here once.

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

from loom_api.http import (
    GENERATION_HEADER,
    MAX_WAIT_SECONDS,
    REALIZED_GENERATION_HEADER,
    REALIZED_HEADER,
    WAIT_HEADER,
)
from loom_api.service import crud, types

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


def _uuid(description: str) -> JsonDict:
    return {"type": "string", "format": "uuid", "pattern": UUID_PATTERN, "description": description}


def _nullable(schema: JsonDict) -> JsonDict:
    return {"anyOf": [schema, {"type": "null"}]}


ERROR_SCHEMA: JsonDict = {
    "type": "object",
    "description": "Every error the API returns.",
    "additionalProperties": False,
    "required": ["error", "message", "field"],
    "properties": {
        "error": {"type": "string", "description": "A stable machine-readable code."},
        "message": {"type": "string", "description": "What went wrong, for people."},
        "field": {
            "type": ["string", "null"],
            "description": "The request field at fault (dotted for nested fields), or null.",
        },
    },
}

#: Schemas of the `status` object by table (what the controllers report).
_STATUS_SCHEMAS: dict[str, JsonDict] = {
    "Logical_Switch_Port": {
        "type": "object",
        "description": "As the controllers report it; down and not realized until they do.",
        "additionalProperties": False,
        "required": ["up", "realized", "transport_node"],
        "properties": {
            "up": {"type": "boolean"},
            "realized": {"type": "boolean"},
            "transport_node": {"type": ["string", "null"]},
        },
    },
    "Transport_Node": {
        "type": "object",
        "description": "As the physical controllers report it; disconnected until they do.",
        "additionalProperties": False,
        "required": ["connected", "controller", "realized_generation", "message", "bfd"],
        "properties": {
            "connected": {"type": "boolean"},
            "controller": {"type": ["string", "null"]},
            "realized_generation": {"type": "integer", "minimum": 0},
            "message": {"type": ["string", "null"]},
            "bfd": {
                "type": "object",
                "description": "Its BFD sessions (tunnels to and from service and gateway"
                " nodes) that have come up: peer system-id -> up or down. A gateway node"
                " no peer reaches is not active.",
                "additionalProperties": {"enum": ["up", "down"]},
            },
        },
    },
    "Gateway_Service": {
        "type": "object",
        "description": "The gateway node currently active for the service, once one is.",
        "additionalProperties": False,
        "required": ["active_node"],
        "properties": {"active_node": {"type": ["string", "null"]}},
    },
}


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
    elif name == "status":
        schema = copy.deepcopy(
            _STATUS_SCHEMAS.get(
                resource.table,
                {"type": "object", "description": "As the controllers report it."},
            )
        )
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


# ---- the status endpoints --------------------------------------------------------------------


def _object_status_paths(parts: list[_Collection]) -> dict[str, JsonDict]:
    """Document `GET <object>/status` of switch ports and transport nodes (views/native.py)."""
    out: dict[str, JsonDict] = {}
    for part in parts:
        if part.resource.table not in ("Logical_Switch_Port", "Transport_Node"):
            continue
        status = copy.deepcopy(_STATUS_SCHEMAS[part.resource.table])
        status["properties"] = {"id": _uuid(f"The {part.kind}'s id."), **status["properties"]}
        status["required"] = ["id", *status["required"]]
        out[f"{part.path}/{{id}}/status"] = {
            "parameters": [*part.parent_params, _path_parameter("id", f"The {part.kind}'s id.")],
            "get": {
                "operationId": f"get_{part.snake}_status",
                "summary": f"Get a {part.kind}'s status",
                "description": status.pop("description"),
                "tags": [part.tag],
                "responses": {
                    "200": {"description": "The status.", "content": _json_content(status)},
                    **_errors("400", "401", "404", "503"),
                },
            },
        }
    return out


def _node_flows_path() -> dict[str, JsonDict]:
    """Document `GET /transport-nodes/{id}/flows` (views/flows.py)."""
    change = {"type": "object", "additionalProperties": False, "required": ["op", "flow"],
              "properties": {"op": {"enum": ["add", "modify", "delete"]},
                             "flow": {"type": "string"}}}  # fmt: skip
    table = {"type": "array", "items": {"type": "string"}}
    body = {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "node",
            "controller",
            "computed_flows",
            "installed_flows",
            "in_sync",
            "changes",
        ],
        "properties": {
            "node": {"type": "string", "description": "The node's system-id."},
            "controller": {"type": "string", "description": "The physical controller asked."},
            "computed_flows": {"type": "integer", "minimum": 0},
            "installed_flows": {"type": "integer", "minimum": 0},
            "in_sync": {"type": "boolean"},
            "changes": {
                "type": "array",
                "items": change,
                "description": "What a reconciliation would change.",
            },
            "computed": table,
            "installed": table,
        },
    }
    return {
        "/transport-nodes/{id}/flows": {
            "parameters": [_path_parameter("id", "The transport node's id.")],
            "get": {
                "operationId": "get_transport_node_flows",
                "summary": "A transport node's computed and installed OpenFlow tables",
                "description": "Asked of the physical controller that masters the node: how "
                "many flows it computes for the node and the node holds, and what a "
                "reconciliation would change; with `tables=true` both whole tables.",
                "tags": ["Transport Node"],
                "parameters": [
                    {
                        "name": "tables",
                        "in": "query",
                        "required": False,
                        "schema": {"enum": ["true", "false"]},
                        "description": "Include both whole tables.",
                    }
                ],
                "responses": {
                    "200": {"description": "The tables.", "content": _json_content(body)},
                    **_errors("400", "401", "404", "503"),
                },
            },
        }
    }


def _trace_path() -> dict[str, JsonDict]:
    """Document `GET /trace` (views/trace.py)."""
    step = {
        "type": "object",
        "description": "One OpenFlow table the packet was looked up in: its `stage` (a "
        "logical stage, or a physical table in capitals), the `datapath` the packet was in, "
        "the flow that matched (`priority`, `match`, `cookie`, `actions`; `match` null: no "
        "flow matched, the packet is dropped there) and the `object` whose universal row "
        "made it.",
    }
    body = {
        "type": "object",
        "required": ["from", "packet", "controller", "node", "port", "flow", "ct", "passes",
                     "verdict", "trace"],
        "properties": {
            "from": {"type": "string"},
            "packet": {"type": "string"},
            "controller": {"type": "string", "description": "The physical controller asked."},
            "node": {"type": ["string", "null"],
                     "description": "The node whose table was traced; null: the ideal node."},
            "port": {"type": "string", "description": "The port's id."},
            "flow": {"type": "string", "description": "The packet as `ofproto/trace` took it."},
            "ct": {"type": "array", "items": {"type": "string"}},
            "passes": {"type": "array", "items": {
                "type": "object", "required": ["ct_state", "flow", "steps", "datapath_actions"],
                "properties": {"ct_state": {"type": ["string", "null"]},
                               "flow": {"type": "string"},
                               "steps": {"type": "array", "items": step},
                               "datapath_actions": {"type": "string"}}}},
            "verdict": {"type": "object",
                        "required": ["outcome", "delivered", "uplink", "tunneled", "ended_at"],
                        "properties": {"outcome": {"type": "string"},
                                       "delivered": {"type": "array", "items": {"type": "object"}},
                                       "uplink": {"type": "boolean"},
                                       "uplink_source": {"type": ["string", "null"]},
                                       "tunneled": {"type": "array", "items": {"type": "object"}},
                                       "ended_at": {"type": ["object", "null"]}}},
            "trace": {"type": "string", "description": "`ofproto/trace`'s own text."},
            "described": {"type": "string", "description": "The packet in words (`IPv4 "
                          "protocol 0, no transport header, ...` for one naming no transport)."},
            "datapaths_read": {"type": "array", "items": {"type": "integer"},
                               "description": "The datapaths whose universal flows the "
                               "controller read for this trace (it does not follow them)."},
            "stand_in_next_hops": {"type": "array", "items": {"type": "string"},
                                   "description": "L3 next hops the ideal node resolved at a "
                                   "stand-in MAC (learned by ARP on the active gateway node)."},
        },
    }  # fmt: skip

    def query(name: str, required: bool, description: str) -> JsonDict:
        return {"name": name, "in": "query", "required": required,
                "schema": {"type": "string"}, "description": description}  # fmt: skip

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
                "parameters": [
                    query(
                        "from",
                        True,
                        "The port the packet leaves (id or name), or a router with an L3 "
                        "gateway service: the packet comes from the physical network into "
                        "its uplink.",
                    ),
                    query(
                        "packet",
                        False,
                        "Its fields, as ovn-trace takes them: "
                        "`ip4.dst == 10.0.2.5 && tcp.dst == 22`; the rest from the port.",
                    ),
                    query("node", False, "Trace through this node's installed table."),
                    query(
                        "ct",
                        False,
                        "What conntrack answers at each recirculation, "
                        "separated by `;` (default `trk,new`).",
                    ),
                ],
                "responses": {
                    "200": {"description": "The trace.", "content": _json_content(body)},
                    **_errors("400", "401", "403", "404", "409", "503"),
                },
            },
        }
    }


def _status_paths() -> dict[str, JsonDict]:
    health = {
        "type": "object",
        "additionalProperties": False,
        "required": ["status", "database"],
        "properties": {
            "status": {"type": "string", "enum": ["ok", "degraded"]},
            "database": {"type": "string", "enum": ["connected", "unreachable"]},
        },
    }
    generation = {"type": "integer", "minimum": 0}
    realization = {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "generation",
            "config_generation",
            "realized_generation",
            "realized",
            "logical_generation",
            "logically_realized",
        ],
        "properties": {
            "generation": {**generation, "description": "The generation asked about."},
            "config_generation": {**generation, "description": "The newest generation."},
            "realized_generation": {
                **generation,
                "description": "The newest generation realized on the transport nodes.",
            },
            "realized": {"type": "boolean"},
            "logical_generation": {
                **generation,
                "description": "The newest generation whose universal flows are written.",
            },
            "logically_realized": {"type": "boolean"},
        },
    }
    warning = {
        "type": "object",
        "additionalProperties": False,
        "required": ["source", "kind", "message"],
        "properties": {
            "source": {"type": "string", "description": "The id of the object at fault."},
            "kind": {"type": "string"},
            "message": {"type": "string"},
        },
    }
    status = {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "config_generation",
            "realized_generation",
            "logical_generation",
            "warnings",
            "database",
        ],
        "properties": {
            "config_generation": generation,
            "realized_generation": generation,
            "logical_generation": generation,
            "warnings": {
                "type": "array",
                "items": warning,
                "description": "Problems the logical controllers found in the configuration.",
            },
            "database": {"type": "string", "enum": ["connected"]},
        },
    }
    return {
        "/health": {
            "get": {
                "operationId": "health",
                "summary": "Whether the API reaches the configuration database",
                "tags": ["Status"],
                "security": [],
                "responses": {
                    "200": {"description": "Connected.", "content": _json_content(health)},
                    "503": {"description": "Unreachable.", "content": _json_content(health)},
                },
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
                    {
                        "name": "generation",
                        "in": "query",
                        "required": False,
                        "description": "The generation to ask about; the newest by default.",
                        "schema": generation,
                    },
                    _ref("parameters", "WaitForRealization"),
                ],
                "responses": {
                    "200": {"description": "The answer.", "content": _json_content(realization)},
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
                    "200": {"description": "The status.", "content": _json_content(status)},
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
        from loom_api.views import native

        collections = native.collections()
    names, schemas = _request_schemas([resource.model for _, resource in collections])
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
    paths.update(_object_status_paths(parts))
    paths.update(_node_flows_path())
    paths.update(_trace_path())
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
