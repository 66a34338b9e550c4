"""Networks: `Logical_Switch` rows, with Neutron's own attributes in `external_ids`.

A network IS a logical switch (same id); `name`, `description`, `admin_state_up`, `tags`
and the project are the switch's columns. `shared`, `router:external`, `mtu`,
`port_security_enabled` (the default of new ports) and an external network's L3 gateway
service (`provider:network_type` `l3_ext` with `provider:physical_network` = its id, as the
NVP plugin had it) live in `external_ids` under `neutron:`. An external network created
without provider attributes is served by the deployment's default L3 gateway service
(`service.gateways.default_service`), whichever it is at the time. Loom's own extension
attribute `loom:programming_model` (admin only, as Neutron's provider attributes are) is the
switch's `programming_model` column: `preprogrammed`, `hoverboard`, `auto`, or null (the
deployment's default). A switch made through the native API is a network with Neutron's
defaults, and a network is a switch to the native API.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Annotated, Any, Literal

from pydantic import Field

from loom_api.neutron import errors
from loom_api.neutron.addressing import is_external, network_fips
from loom_api.neutron.common import (
    Body,
    Context,
    Description,
    Name,
    NeutronResource,
    Tags,
    check_owner_unchanged,
    children,
    ext,
    flag,
    given,
    merged_ids,
    native_insert,
    native_update,
    owner,
    tenant_api,
)
from loom_api.neutron.security_groups import ensure_default_group
from loom_api.service import crud
from loom_api.service.switches import LogicalSwitches
from loom_api.service.types import Uuid
from loom_api.store import ReadView, WriteView

#: The MTU Neutron reports for an overlay network when none was set (1500 minus Geneve).
DEFAULT_MTU = 1442
#: `device_owner`s of ports Neutron removes with their network.
NETWORK_OWNED = ("network:dhcp",)

_SWITCHES = LogicalSwitches()


class NetworkBody(Body):
    """A network (create and update)."""

    name: Name | None = None
    description: Description | None = None
    admin_state_up: bool | None = None
    shared: bool | None = None
    router_external: bool | None = Field(None, alias="router:external")
    mtu: Annotated[int, Field(strict=True, ge=68, le=65535)] | None = None
    port_security_enabled: bool | None = None
    tags: Tags | None = None
    provider_network_type: Literal["l3_ext"] | None = Field(None, alias="provider:network_type")
    provider_physical_network: Uuid | None = Field(None, alias="provider:physical_network")
    programming_model: Literal["preprogrammed", "hoverboard", "auto"] | None = Field(
        None, alias="loom:programming_model"
    )


class Networks(NeutronResource):
    """`/v2.0/networks`."""

    collection = "networks"
    member = "network"
    table = "Logical_Switch"
    create_model = NetworkBody
    update_model = NetworkBody
    not_found = errors.NetworkNotFound
    admin_only = frozenset({
        "provider:network_type", "provider:physical_network", "provider:segmentation_id",
        "loom:programming_model",
    })  # fmt: skip

    def visible(self, ctx: Context, view: ReadView, row: Any) -> bool:
        """Projects see their own networks and every shared or external one."""
        return ctx.is_admin or row.tenant == ctx.tenant or flag(row, "shared") or is_external(row)

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the network; `subnets` lists the switch's subnets."""
        subnets = sorted(str(s.uuid) for s in view.children("Subnet", "logical_switch", row))
        gateway_service = ext(row, "gateway_service") or None
        return {
            "id": str(row.uuid),
            "name": row.name,
            "description": row.description,
            "admin_state_up": row.admin_state_up,
            "status": "ACTIVE",
            "subnets": subnets,
            "shared": flag(row, "shared"),
            "router:external": is_external(row),
            "mtu": int(ext(row, "mtu") or DEFAULT_MTU),
            "port_security_enabled": flag(row, "port_security_enabled", True),
            "provider:network_type": "l3_ext" if gateway_service else None,
            "provider:physical_network": gateway_service,
            "provider:segmentation_id": None,
            "loom:programming_model": crud.first(row.programming_model),
            "availability_zones": [],
            "availability_zone_hints": [],
            "ipv4_address_scope": None,
            "ipv6_address_scope": None,
            "l2_adjacency": True,
            "tags": sorted(row.tags),
            "revision_number": row.revision,
            **tenant_api(row.tenant),
        }

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Create the switch (native checks and tunnel key) and the project's default group."""
        tenant = owner(ctx, body)
        self._check_admin_only(ctx, body)
        row = native_insert(
            view,
            _SWITCHES,
            {
                "tenant": tenant,
                "name": body.name or "",
                "description": body.description or "",
                "admin_state_up": body.admin_state_up is not False,
                "programming_model": body.programming_model,
                "tags": list(body.tags or []),
            },
        )
        row.external_ids = merged_ids(None, **self._attributes(view, body))
        ensure_default_group(view, tenant)
        return row

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Change the switch's columns and the Neutron attributes the body names."""
        check_owner_unchanged(body, row)
        self._check_admin_only(ctx, body)
        if given(body, "provider_network_type") or given(body, "provider_physical_network"):
            raise errors.BadRequest(
                field="provider:network_type",
                detail="Cannot update read-only attribute provider:network_type",
            )
        if given(body, "router_external") and not body.router_external and is_external(row):
            self._check_not_used_externally(view, row)
        changes: dict[str, Any] = {}
        for name in ("name", "description", "admin_state_up"):
            if given(body, name) and getattr(body, name) is not None:
                changes[name] = getattr(body, name)
        if given(body, "tags"):
            changes["tags"] = list(body.tags or [])
        if given(body, "programming_model"):
            changes["programming_model"] = body.programming_model
        native_update(view, _SWITCHES, row, changes)
        attributes = {k: v for k, v in self._attributes(view, body).items() if given(body, k)}
        view.update(row, external_ids=merged_ids(row, **attributes))

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Delete the switch with its subnets and network-owned ports; refuse while in use."""
        ports = children(view, "Logical_Switch_Port", "logical_switch", row)
        owned = [p for p in ports if ext(p, "device_owner") in NETWORK_OWNED]
        busy = [p for p in ports if p not in owned]
        fips = network_fips(view, row)
        if busy or fips:
            users = crud.describe("port", busy) + crud.describe("floating IP", fips)
            raise errors.NetworkInUse(id=str(row.uuid), users=", ".join(users))
        for port in owned:
            view.delete(port)
        for subnet in children(view, "Subnet", "logical_switch", row):
            view.delete(subnet)
        view.delete(row)

    @staticmethod
    def _attributes(view: ReadView, body: Any) -> dict[str, str | bool | None]:
        """Return the Neutron attributes of `body` as external_ids values, by model field."""
        mtu = str(body.mtu) if body.mtu is not None else None
        gateway_service = None
        if body.provider_network_type == "l3_ext":
            gateway_service = _l3_gateway_service(view, body.provider_physical_network)
        elif body.provider_physical_network is not None:
            raise errors.BadRequest(
                field="provider:physical_network",
                detail="provider:physical_network needs provider:network_type l3_ext",
            )
        return {
            "shared": body.shared or None,
            "router_external": body.router_external or None,
            "mtu": mtu,
            "port_security_enabled": None if body.port_security_enabled in (None, True) else False,
            "gateway_service": gateway_service,
        }

    @staticmethod
    def _check_admin_only(ctx: Context, body: Any) -> None:
        for name, alias in (
            ("shared", "shared"),
            ("router_external", "router:external"),
            ("provider_network_type", "provider:network_type"),
            ("programming_model", "loom:programming_model"),
        ):
            if getattr(body, name) and not ctx.is_admin:
                raise errors.PolicyNotAuthorized(
                    field=alias, detail=f"Only an admin may set {alias} on a network."
                )

    @staticmethod
    def _check_not_used_externally(view: ReadView, row: Any) -> None:
        gateways = [
            p
            for p in view.rows("Logical_Router_Port")
            if p.logical_switch == row and ext(p, "device_owner") == "network:router_gateway"
        ]
        fips = network_fips(view, row)
        if gateways or fips:
            users = crud.describe("router gateway", gateways) + crud.describe("floating IP", fips)
            raise errors.Conflict(
                field="router:external",
                detail=f"External network {row.uuid} cannot be updated, as it is used by "
                + ", ".join(users),
            )


def _l3_gateway_service(view: ReadView, ident: str | None) -> str:
    """Check an `l3_ext` network's gateway service; return its id.

    Raises:
        errors.BadRequest: no id, no such service, or not an L3 service.
    """
    if ident is None:
        raise errors.BadRequest(
            field="provider:physical_network",
            detail="provider:network_type l3_ext needs provider:physical_network "
            "(the L3 gateway service id)",
        )
    row = view.get("Gateway_Service", uuidlib.UUID(ident))
    if row is None or row.type != "l3":
        raise errors.BadRequest(
            field="provider:physical_network",
            detail=f"{ident} is not an L3 gateway service",
        )
    return str(row.uuid)


NETWORKS = Networks()
