"""Logical routers: distributed L3 datapaths with a tunnel key, uplinked by an L3 gateway service.

A router's ports (`router_ports`), static routes (`routes`) and NAT rules (`nat`) are nested
collections under it; while any of them exists the router cannot be deleted.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from loom_api import errors
from loom_api.service import keys
from loom_api.service.common import Body, Owned, owned_api, owned_columns, owner
from loom_api.service.crud import (
    Caller,
    Resource,
    describe,
    first,
    optional,
    ref_id,
    reference,
)
from loom_api.service.gateways import (
    FOLLOWS_DEFAULT,
    GatewayServices,
    Uplink,
    check_router_addresses,
    follows_default,
)
from loom_api.service.types import Description, Tags, Tenant, Uuid
from loom_api.store import ReadView, WriteView

#: Router tunnel keys: the datapath key range above the switches' (schema, switches.py).
ROUTER_KEYS = (8388608, 16777215)


class LogicalRouterBody(Owned):
    """A logical router."""

    description: Description = ""
    admin_state_up: bool = True
    gateway_service_id: Uuid | None = None


class RouterChildBody(Body):
    """Fields of a router's unnamed children (static routes, NAT rules)."""

    tenant: Tenant | None = None
    tags: Tags = Field(default_factory=list)


def child_columns(
    caller: Caller, body: RouterChildBody, router: Any, row: Any | None
) -> dict[str, Any]:
    """Return the `tenant`, `tags` and `logical_router` columns of a router's child.

    The tenant defaults to the router's, and must be the router's.

    Raises:
        errors.Forbidden: a tenant token names another tenant.
        errors.ValidationFailed: the tenant is not the router's.
    """
    tenant = owner(caller, router.tenant if body.tenant is None else body.tenant, row)
    if tenant != router.tenant:
        raise errors.ValidationFailed(field="tenant", detail="it belongs to its router's tenant")
    return {"tenant": tenant, "tags": list(body.tags), "logical_router": router}


def child_api(row: Any) -> dict[str, Any]:
    """Return `id`, `revision`, `tenant`, `tags` and `logical_router_id` of a router's child."""
    router = row.logical_router
    if isinstance(router, list):
        router = first(router)
    return {
        "id": str(row.uuid),
        "revision": row.revision,
        "tenant": row.tenant,
        "tags": sorted(row.tags),
        "logical_router_id": str(router.uuid) if router is not None else None,
    }


def router_nat_rules(view: ReadView, router: Any) -> list[Any]:
    """Return the NAT rules of `router` (NAT_Rule.logical_router is optional, so not indexed)."""
    return [n for n in view.rows("NAT_Rule") if router in n.logical_router]


class LogicalRouters(Resource):
    """`/api/v1/logical-routers`."""

    kind = "logical router"
    table = "Logical_Router"
    model = LogicalRouterBody
    read_only = frozenset({"id", "revision", "tunnel_key"})

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the router's representation."""
        return {
            **owned_api(row),
            "description": row.description,
            "admin_state_up": row.admin_state_up,
            "gateway_service_id": ref_id(row.gateway_service),
            "tunnel_key": row.tunnel_key,
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the gateway service is an L3 one (and kept while NAT needs it).

        A router that followed the default L3 service (`gateways.FOLLOWS_DEFAULT`) and is
        given another service, or none, keeps that one from then on.

        Raises:
            errors.MissingReference: no such gateway service.
            errors.ValidationFailed: the gateway service is not an L3 service.
            errors.Conflict: removing the gateway service of a router with NAT rules, or
                moving them to a service whose uplink network has one of their external
                addresses (another router's) or has it as its next hop.
        """
        gateway = reference(
            view, GatewayServices, caller, body.gateway_service_id, "gateway_service_id"
        )
        if gateway is not None and gateway.type != "l3":
            raise errors.ValidationFailed(
                field="gateway_service_id",
                detail=f"gateway service {gateway.uuid} is {gateway.type}; a router needs an "
                "L3 gateway service",
            )
        if gateway is None and row is not None and row.gateway_service:
            nats = router_nat_rules(view, row)
            if nats:
                raise errors.Conflict(
                    field="gateway_service_id",
                    detail="NAT needs the gateway service; still used by "
                    + ", ".join(describe("NAT rule", nats)),
                )
        if gateway is not None and row is not None and gateway not in row.gateway_service:
            check_router_addresses(
                view,
                row,
                router_nat_rules(view, row),
                Uplink.of(gateway),
                "gateway_service_id",
                admin=caller.is_admin,
            )
        cols = {
            **owned_columns(caller, body, row),
            "description": body.description,
            "admin_state_up": body.admin_state_up,
            "gateway_service": optional(gateway),
        }
        if row is not None and follows_default(row) and optional(gateway) != row.gateway_service:
            cols["external_ids"] = {k: v for k, v in row.external_ids.items()
                                    if k != FOLLOWS_DEFAULT}  # fmt: skip
        return cols

    def on_create(self, view: WriteView, row: Any, parent: Any) -> None:
        """Allocate the router's tunnel key."""
        used = (r.tunnel_key for r in view.rows(self.table) if r.uuid != row.uuid)
        row.tunnel_key = keys.allocate(used, *ROUTER_KEYS, "logical router tunnel key")

    def users(self, view: ReadView, row: Any) -> list[str]:
        """The router's ports, static routes and NAT rules block its deletion."""
        ports = view.children("Logical_Router_Port", "logical_router", row)
        routes = view.children("Static_Route", "logical_router", row)
        return (
            describe("logical router port", ports)
            + describe("static route", routes)
            + describe("NAT rule", router_nat_rules(view, row))
        )
