"""The Neutron v2.0 API's routes: `GET /` (versions), `/v2.0/...` collections and actions.

Views only translate HTTP to `loom_api.neutron` calls. Authentication follows the operator's
choice (`LOOM_NEUTRON_AUTH` in the app config): `token` (the default) takes `X-Auth-Token` (or
a bearer token) and maps it to the native admin and tenant tokens; `noauth`, like Neutron's
`auth_strategy = noauth`, lets every request act as the admin, the project coming from the
body's `project_id`/`tenant_id`. Errors under `/v2.0` are rendered Neutron's way,
`{"NeutronError": {"type", "message", "detail"}}`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException

from loom_api import errors, http, neutron
from loom_api.neutron import common, interfaces, listing
from loom_api.neutron import errors as neutron_errors
from loom_api.service.crud import ADMIN

#: App config key of the Neutron authentication strategy, and its values.
AUTH_CONFIG = "LOOM_NEUTRON_AUTH"
AUTH_STRATEGIES = ("token", "noauth")
PREFIX = "/v2.0"

bp = Blueprint("neutron", __name__)


def context() -> common.Context:
    """Return who is calling under the configured strategy.

    Raises:
        neutron_errors.NotAuthenticated: `token` strategy without a valid token.
    """
    if current_app.config.get(AUTH_CONFIG, "token") == "noauth":
        return common.Context(ADMIN)
    try:
        return common.Context(http.caller())
    except errors.Unauthenticated:
        raise neutron_errors.NotAuthenticated() from None


def _query() -> dict[str, list[str]]:
    return request.args.to_dict(flat=False)


def _respond(result: common.Result, status: int) -> Response:
    if result.body is None:
        response = Response(status=status)
    else:
        response = jsonify(result.body)
        response.status_code = status
    if result.generation is not None:
        response.headers[http.GENERATION_HEADER] = str(result.generation)
    return response


def render_error(exc: errors.LoomApiError) -> tuple[Response, int]:
    """Render any API error as Neutron does."""
    body, status = neutron_errors.render(exc)
    response = jsonify(body)
    response.headers.update(exc.headers())
    return response, status


def render_http_error(exc: HTTPException) -> tuple[Response, int]:
    """Render a routing error (unknown URL, wrong method) under `/v2.0` as Neutron does."""
    status = exc.code or 500
    name = "HTTP" + "".join(part.capitalize() for part in (exc.name or "Error").split())
    body = {"NeutronError": {"type": name, "message": exc.description, "detail": ""}}
    return jsonify(body), status


def is_neutron_path(path: str) -> bool:
    """Return whether `path` belongs to the Neutron API (its errors are Neutron's)."""
    return path == "/" or path == PREFIX or path.startswith(PREFIX + "/")


bp.register_error_handler(errors.LoomApiError, render_error)


@bp.get("/")
def versions() -> Response:
    """The versions document (no token needed, as in Neutron)."""
    return jsonify(neutron.versions(request.host_url))


@bp.get(PREFIX)
@bp.get(PREFIX + "/")
def resources() -> Response:
    """The collections of v2.0."""
    context()
    return jsonify(neutron.resources(request.host_url))


@bp.get(PREFIX + "/extensions")
def extensions() -> Response:
    """The extensions this API implements."""
    context()
    return jsonify({"extensions": [neutron.extension(*e) for e in neutron.EXTENSIONS]})


@bp.get(PREFIX + "/extensions/<alias>")
def extension(alias: str) -> Response:
    """One extension."""
    context()
    for entry in neutron.EXTENSIONS:
        if entry[0] == alias:
            return jsonify({"extension": neutron.extension(*entry)})
    raise neutron_errors.ResourceNotFound(detail=f"extension {alias}")


def _bulk_checked(res: common.NeutronResource, data: Any) -> Any:
    """Return a create body, refusing a bulk create of more objects than the limit.

    Raises:
        neutron_errors.BadRequest: naming the collection.
    """
    items = data.get(res.collection) if isinstance(data, dict) else None
    most = http.limits().max_bulk_items
    if isinstance(items, list) and len(items) > most:
        raise neutron_errors.BadRequest(
            field=res.collection,
            detail=f"A bulk request creates at most {most} {res.collection}, not {len(items)}",
        )
    return data


def _register(path: str, res: common.NeutronResource) -> None:
    """Add the collection's routes: one view per method, so a HEAD (Flask serves it with the
    GET view, without the body) can never reach a write."""
    endpoint = path.replace("-", "_")

    def list_items() -> Response:
        ctx = context()
        query = _query()
        page = listing.list_items(http.store(), res, ctx, query)
        body: dict[str, Any] = {res.collection: page.items}
        if page.next_marker is not None:
            args = {k: v for k, v in query.items() if k != "marker"}
            args["marker"] = [page.next_marker]
            href = f"{request.base_url}?{urlencode(args, doseq=True)}"
            body[f"{res.collection}_links"] = [{"rel": "next", "href": href}]
        return jsonify(body)

    def create() -> Response:
        ctx = context()
        data = _bulk_checked(res, http.json_body())
        return _respond(common.create(http.store(), res, ctx, data), 201)

    def show(ident: str) -> Response:
        ctx = context()
        return _respond(common.show(http.store(), res, ctx, ident, _query()), 200)

    def update(ident: str) -> Response:
        ctx = context()
        if_match = request.headers.get("If-Match")
        data = http.json_body()
        return _respond(common.update(http.store(), res, ctx, ident, data, if_match), 200)

    def delete(ident: str) -> Response:
        ctx = context()
        if_match = request.headers.get("If-Match")
        return _respond(common.delete(http.store(), res, ctx, ident, if_match), 204)

    base, item = f"{PREFIX}/{path}", f"{PREFIX}/{path}/<ident>"
    bp.add_url_rule(base, f"{endpoint}_list", list_items, methods=["GET"])
    bp.add_url_rule(base, f"{endpoint}_create", create, methods=["POST"])
    bp.add_url_rule(item, f"{endpoint}_item", show, methods=["GET"])
    bp.add_url_rule(item, f"{endpoint}_update", update, methods=["PUT"])
    bp.add_url_rule(item, f"{endpoint}_delete", delete, methods=["DELETE"])
    if path != "security-group-rules":  # rules have no tags column
        _register_tags(path, res, endpoint)


def _register_tags(path: str, res: common.NeutronResource, endpoint: str) -> None:
    def current_tags(ident: str) -> list[str]:
        body = common.show(http.store(), res, context(), ident, {}).body or {}
        tags: list[str] = body[res.member]["tags"]
        return tags

    def get_tags(ident: str) -> Response:
        return jsonify({"tags": current_tags(ident)})

    def replace_tags(ident: str) -> Response:
        ctx = context()
        data = http.json_body()
        if not isinstance(data, dict) or not isinstance(data.get("tags"), list):
            raise neutron_errors.BadRequest(detail="The body must be {'tags': [...]}")
        wanted = common.parse_tags(data["tags"])
        result = common.set_tags(http.store(), res, ctx, ident, lambda tags: wanted)
        return _respond(common.Result({"tags": wanted}, result.generation), 200)

    def delete_tags(ident: str) -> Response:
        ctx = context()
        result = common.set_tags(http.store(), res, ctx, ident, lambda tags: [])
        return _respond(common.Result(None, result.generation), 204)

    def has_tag(ident: str, tag: str) -> Response:
        if tag not in current_tags(ident):
            raise neutron_errors.ResourceNotFound(detail=f"tag {tag}")
        return Response(status=204)

    def add_tag(ident: str, tag: str) -> Response:
        ctx = context()
        added = common.parse_tags([tag])[0]
        result = common.set_tags(http.store(), res, ctx, ident, lambda tags: [*tags, added])
        return _respond(common.Result(None, result.generation), 201)

    def remove_tag(ident: str, tag: str) -> Response:
        ctx = context()
        store = http.store()
        result = common.set_tags(store, res, ctx, ident, lambda tags: common.without(tags, tag))
        return _respond(common.Result(None, result.generation), 204)

    base = f"{PREFIX}/{path}/<ident>/tags"
    one = f"{base}/<tag>"
    bp.add_url_rule(base, f"{endpoint}_tags", get_tags, methods=["GET"])
    bp.add_url_rule(base, f"{endpoint}_tags_put", replace_tags, methods=["PUT"])
    bp.add_url_rule(base, f"{endpoint}_tags_delete", delete_tags, methods=["DELETE"])
    bp.add_url_rule(one, f"{endpoint}_tag", has_tag, methods=["GET"])
    bp.add_url_rule(one, f"{endpoint}_tag_put", add_tag, methods=["PUT"])
    bp.add_url_rule(one, f"{endpoint}_tag_delete", remove_tag, methods=["DELETE"])


for _path, _resource in neutron.RESOURCES.items():
    _register(_path, _resource)


@bp.put(PREFIX + "/routers/<ident>/add_router_interface")
def add_router_interface(ident: str) -> Response:
    """Connect the router to a subnet or port."""
    ctx = context()
    return _respond(interfaces.add_interface(http.store(), ctx, ident, http.json_body()), 200)


@bp.put(PREFIX + "/routers/<ident>/remove_router_interface")
def remove_router_interface(ident: str) -> Response:
    """Disconnect the router from a subnet or port."""
    ctx = context()
    return _respond(interfaces.remove_interface(http.store(), ctx, ident, http.json_body()), 200)
