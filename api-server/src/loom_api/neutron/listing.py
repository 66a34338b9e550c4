"""Neutron list queries: attribute filters, tag filters, sorting, `limit`/`marker` paging.

Filters compare an attribute with one or more values (`?name=a&name=b` is "a or b");
`fixed_ips=ip_address=X` and `fixed_ips=subnet_id=Y` look inside ports' fixed IPs; `tags`,
`tags-any`, `not-tags`, `not-tags-any` take comma-separated tags. `limit` and `marker` page
the result; `fields` picks the attributes. A filter on an attribute the collection does not
have is refused (Neutron's filter validation), whether or not the list is empty: the
attributes are the request models' and `READ_ONLY_ATTRIBUTES`.

Sorting is Neutron's (`neutron.api.api_common.get_sorts`): `sort_key` and `sort_dir` come
in pairs (`?sort_key=name&sort_dir=asc&sort_key=id&sort_dir=desc`: by name, then by id
descending), as many of one as of the other; each key must be a sortable attribute (one
whose value is a scalar: not `NOT_SORTABLE`'s lists and objects) and each direction `asc`
or `desc`, else 400 with Neutron's message. Ties keep the order of `id`, and no value
(null) sorts before any value, as Neutron's SQL does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loom_api.neutron import errors
from loom_api.neutron.common import Context, NeutronResource, Query, select_fields
from loom_api.store import Store

#: Query parameters that are not attribute filters.
_CONTROL = frozenset({"fields", "limit", "marker", "sort_key", "sort_dir", "page_reverse"})
_TAG_FILTERS = frozenset({"tags", "tags-any", "not-tags", "not-tags-any"})

#: The attributes of each collection's objects that no request sets (besides `id` and
#: `revision_number`, which every collection has); with the request models' attributes,
#: what a filter may name. A test checks that they cover every attribute shown.
READ_ONLY_ATTRIBUTES: dict[str, frozenset[str]] = {
    "networks": frozenset({
        "availability_zone_hints", "availability_zones", "ipv4_address_scope",
        "ipv6_address_scope", "l2_adjacency", "provider:segmentation_id", "status", "subnets",
    }),
    "subnets": frozenset({"segment_id", "service_types", "subnetpool_id"}),
    "ports": frozenset({"binding:vif_details", "binding:vif_type", "extra_dhcp_opts", "status"}),
    "routers": frozenset({
        "availability_zone_hints", "availability_zones", "distributed", "flavor_id", "ha",
        "status",
    }),
    "floatingips": frozenset({"loom:status_reason", "port_forwardings", "router_id", "status"}),
    "security_groups": frozenset({"security_group_rules", "shared"}),
    "security_group_rules": frozenset({
        "belongs_to_default_sg", "normalized_cidr", "remote_address_group_id",
    }),
}  # fmt: skip


#: Attributes whose values are lists or objects, which Neutron does not sort by (no
#: `is_sort_key`). A test checks that every attribute objects show with such a value is here.
NOT_SORTABLE = frozenset({
    "allocation_pools", "allowed_address_pairs", "availability_zone_hints",
    "availability_zones", "binding:profile", "binding:vif_details", "dns_nameservers",
    "external_gateway_info", "extra_dhcp_opts", "fixed_ips", "host_routes",
    "port_forwardings", "routes", "security_group_rules", "security_groups",
    "service_types", "subnets", "tags",
})  # fmt: skip


@dataclass
class Listing:
    """One page of a list and the marker of the next page (None at the end)."""

    items: list[dict[str, Any]]
    next_marker: str | None = None


def list_items(store: Store, res: NeutronResource, ctx: Context, query: Query) -> Listing:
    """Return the objects of `res` visible to `ctx` that pass the query (module docstring).

    Raises:
        errors.BadRequest: a filter on an attribute the collection does not have, or a bad
            `limit`, `marker` or `sort_dir`.
    """
    res.prepare(store, ctx, query)
    everything = store.read(lambda v: res.represent(v, ctx))
    known = attributes(res).union(*everything)  # (what the objects show counts, too)
    for key in query:
        if key not in _CONTROL and key not in _TAG_FILTERS and key not in known:
            raise errors.BadRequest(field=key, detail=f"{key} is not a valid filter")
    sorts = sort_order(res, query)
    return _page([item for item in everything if _matches(item, query)], sorts, query)


def attributes(res: NeutronResource) -> frozenset[str]:
    """Return the attributes of `res`'s objects: its request models' and read-only ones."""
    names = {"id", "revision_number", *READ_ONLY_ATTRIBUTES.get(res.collection, ())}
    for model in (res.create_model, res.update_model):
        names.update(field.alias or name for name, field in model.model_fields.items())
    return frozenset(names)


def sort_keys(res: NeutronResource) -> frozenset[str]:
    """Return the attributes `res`'s lists may be sorted by."""
    return attributes(res) - NOT_SORTABLE


def sort_order(res: NeutronResource, query: Query) -> list[tuple[str, bool]]:
    """Return the query's sorts as (key, ascending) pairs, first key first.

    Raises:
        errors.BadRequest: as many `sort_key` as `sort_dir` values are not given, or a key
            is not a sortable attribute, or a direction is not `asc` or `desc` (Neutron's
            messages).
    """
    keys = [key for key in query.get("sort_key", []) if key]  # (Neutron drops empty ones)
    dirs = [way for way in query.get("sort_dir", []) if way]
    if len(keys) != len(dirs):
        raise errors.BadRequest(
            field="sort_key" if len(keys) > len(dirs) else "sort_dir",
            detail="The number of sort_keys and sort_dirs must be same",
        )
    valid = sort_keys(res)
    absent = [key for key in keys if key not in valid]
    if absent:
        raise errors.BadRequest(field="sort_key",
                                detail=f"{absent} is invalid attribute for sort_keys")  # fmt: skip
    invalid = [way for way in dirs if way not in ("asc", "desc")]
    if invalid:
        raise errors.BadRequest(
            field="sort_dir",
            detail=f"{invalid} is invalid value for sort_dirs, valid value is 'asc' and 'desc'",
        )
    return [(key, way == "asc") for key, way in zip(keys, dirs, strict=True)]


def _sorted(items: list[dict[str, Any]], sorts: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """Return `items` in the order of `sorts`, ties in the order of their ids."""
    items = sorted(items, key=lambda item: str(item["id"]))
    for key, ascending in reversed(sorts):  # (stable sorts: the first key sorted last)
        items.sort(key=_by(key), reverse=not ascending)
    return items


def _by(key: str) -> Callable[[dict[str, Any]], tuple[int, Any]]:
    return lambda item: _sortable(item.get(key))


def _page(items: list[dict[str, Any]], sorts: list[tuple[str, bool]], query: Query) -> Listing:
    items = _sorted(items, sorts)
    marker = _first(query, "marker")
    if marker is not None:
        position = next((i for i, item in enumerate(items) if item["id"] == marker), None)
        if position is None:
            raise errors.BadRequest(field="marker", detail=f"marker {marker} is not in the list")
        items = items[position + 1 :]
    limit_text = _first(query, "limit")
    next_marker = None
    if limit_text is not None:
        if not limit_text.isdigit() or int(limit_text) < 1:
            raise errors.BadRequest(field="limit", detail="limit must be a positive integer")
        limit = int(limit_text)
        if len(items) > limit:
            items = items[:limit]
            next_marker = items[-1]["id"]
    fields = query.get("fields", [])
    return Listing([select_fields(item, fields) for item in items], next_marker)


def _first(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _sortable(value: Any) -> tuple[int, Any]:
    """A sort key for one attribute's value: null first, then numbers (and booleans) by
    value, then text."""
    if value is None:
        return (0, 0)
    if isinstance(value, int | float):
        return (1, value)
    return (2, str(value))


def _matches(item: dict[str, Any], query: Query) -> bool:
    for key, values in query.items():
        if key in _CONTROL:
            continue
        if key in _TAG_FILTERS:
            if not _tags_match(key, set(item.get("tags", [])), values):
                return False
            continue
        if key not in item:  # (an attribute this object does not show)
            return False
        if not _value_matches(key, item[key], values):
            return False
    return True


def _tags_match(kind: str, tags: set[str], values: list[str]) -> bool:
    wanted = {tag for value in values for tag in value.split(",") if tag}
    if kind == "tags":
        return wanted <= tags
    if kind == "tags-any":
        return bool(wanted & tags)
    if kind == "not-tags":
        return not wanted <= tags
    return not wanted & tags


def _value_matches(key: str, value: Any, wanted: list[str]) -> bool:
    if isinstance(value, bool):
        return any(w.lower() == str(value).lower() for w in wanted)
    if value is None:
        return any(w in ("", "None", "null") for w in wanted)
    if isinstance(value, list):
        if key == "fixed_ips":
            return all(_fixed_ip_matches(value, w) for w in wanted)
        return any(str(v) in wanted for v in value)
    if isinstance(value, dict):
        raise errors.BadRequest(field=key, detail=f"{key} is not a valid filter")
    return str(value) in wanted


def _fixed_ip_matches(fixed_ips: list[dict[str, Any]], wanted: str) -> bool:
    name, _, value = wanted.partition("=")
    if name == "ip_address_substr":
        return any(value in str(ip.get("ip_address")) for ip in fixed_ips)
    if name not in ("ip_address", "subnet_id"):
        raise errors.BadRequest(field="fixed_ips", detail=f"fixed_ips filter {wanted!r}")
    return any(str(ip.get(name)) == value for ip in fixed_ips)
