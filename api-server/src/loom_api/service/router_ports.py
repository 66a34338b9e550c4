"""Logical router ports: a MAC and an address/prefix of a router, attached to one logical switch.

Each router port has a peer on its switch: a `Logical_Switch_Port` with attachment `router`,
the same MAC and the router port's address. The peer is created, updated and deleted in the
same transaction as the router port, so the two never disagree and neither exists alone.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from loom_api import errors
from loom_api.service import keys
from loom_api.service.common import Owned, owned_api, owner
from loom_api.service.crud import Caller, Resource, describe, reference
from loom_api.service.ports import (
    LogicalSwitchPorts,
    allocate_port_key,
    random_mac,
)
from loom_api.service.routers import LogicalRouters
from loom_api.service.subnets import check_port_addresses
from loom_api.service.switches import LogicalSwitches
from loom_api.service.types import HostInterface, MacAddress, Uuid
from loom_api.store import ReadView, WriteView

#: Port keys within one router.
ROUTER_PORT_KEYS = (1, 32767)

#: The request fields of a router port that map onto the peer switch port's `mac` and `ips`.
_PEER_FIELDS = {"mac": "mac", "ips": "ip_prefix"}


class LogicalRouterPortBody(Owned):
    """A logical router port."""

    mac: MacAddress | None = None
    ip_prefix: HostInterface
    logical_switch_id: Uuid


def peer_port(view: ReadView, router_port: Any) -> Any | None:
    """Return the switch-side port of `router_port`, or None."""
    for port in view.children("Logical_Switch_Port", "logical_switch", router_port.logical_switch):
        if router_port in port.router_port:
            return port
    return None


def _check_address(ip_prefix: str) -> None:
    """Refuse a router address that is the network's own or its broadcast address."""
    interface = ipaddress.ip_interface(ip_prefix)
    network = interface.network
    reserved = {network.network_address}
    if network.version == 4:
        reserved.add(network.broadcast_address)
    if network.num_addresses > 2 and interface.ip in reserved:
        raise errors.ValidationFailed(
            field="ip_prefix",
            detail=f"{interface.ip} is the network or broadcast address of {network}",
        )


class LogicalRouterPorts(Resource):
    """`/api/v1/logical-routers/{id}/ports`."""

    kind = "logical router port"
    table = "Logical_Router_Port"
    model = LogicalRouterPortBody
    immutable = frozenset({"logical_switch_id"})
    read_only = frozenset({"id", "revision", "port_key", "logical_router_id", "peer_port_id"})
    parent_column = "logical_router"
    parent = LogicalRouters

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the router port's representation, with the id of its switch-side peer."""
        peer = peer_port(view, row)
        return {
            **owned_api(row),
            "logical_router_id": str(row.logical_router.uuid),
            "mac": row.mac,
            "ip_prefix": row.ip_prefix,
            "logical_switch_id": str(row.logical_switch.uuid),
            "port_key": row.port_key,
            "peer_port_id": str(peer.uuid) if peer is not None else None,
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the switch, the address and the MAC; on replace, update the peer port too.

        Raises:
            errors.MissingReference: the switch does not exist in the router's tenant.
            errors.ValidationFailed: the tenant differs from the router's, or a bad address
                (the prefix's network or broadcast address, or an address outside the
                switch's subnets of its IP version).
            errors.Conflict: an overlapping network on the router, a second port on the same
                switch, or a MAC or address already used on the switch.
        """
        tenant = parent.tenant
        requested = tenant if body.tenant is None else body.tenant
        cols = {"tenant": owner(caller, requested, row), "name": body.name, "tags": list(body.tags)}
        if cols["tenant"] != tenant:
            raise errors.ValidationFailed(
                field="tenant", detail="a router port belongs to its router's tenant"
            )
        switch = reference(
            view,
            LogicalSwitches,
            caller,
            body.logical_switch_id,
            "logical_switch_id",
            tenant=tenant,
        )
        _check_address(body.ip_prefix)
        self._check_router(view, parent, row, switch, body.ip_prefix)
        mac = body.mac or (row.mac if row is not None else random_mac(self._rng))
        address = str(ipaddress.ip_interface(body.ip_prefix).ip)
        check_port_addresses(view, switch, [address], "ip_prefix")
        peer = peer_port(view, row) if row is not None else None
        try:
            LogicalSwitchPorts._check_unique(view, switch, peer, mac, [address])
        except errors.Conflict as exc:
            raise errors.Conflict(
                field=_PEER_FIELDS.get(exc.field or ""), detail=exc.text
            ) from None
        if peer is not None:
            view.update(peer, mac=mac, ips=[address], revision=peer.revision + 1)
        return {
            **cols,
            "logical_router": parent,
            "logical_switch": switch,
            "mac": mac,
            "ip_prefix": body.ip_prefix,
        }

    @staticmethod
    def _check_router(
        view: ReadView, router: Any, row: Any | None, switch: Any, ip_prefix: str
    ) -> None:
        network = ipaddress.ip_interface(ip_prefix).network
        for other in view.children("Logical_Router_Port", "logical_router", router):
            if row is not None and other.uuid == row.uuid:
                continue
            if other.logical_switch.uuid == switch.uuid:
                raise errors.Conflict(
                    field="logical_switch_id",
                    detail=f"router port {other.uuid} already connects this router to "
                    f"logical switch {switch.uuid}",
                )
            other_network = ipaddress.ip_interface(other.ip_prefix).network
            if other_network.version == network.version and network.overlaps(other_network):
                raise errors.Conflict(
                    field="ip_prefix",
                    detail=f"{network} overlaps {other_network} of router port {other.uuid} "
                    "on this router",
                )

    def on_create(self, view: WriteView, row: Any, parent: Any) -> None:
        """Allocate the port key within the router and create the switch-side peer port."""
        used = (p.port_key for p in view.children(self.table, "logical_router", parent))
        row.port_key = keys.allocate(used, *ROUTER_PORT_KEYS, "port key on this router")
        switch = row.logical_switch
        view.insert(
            "Logical_Switch_Port",
            revision=1,
            logical_switch=switch,
            tenant=switch.tenant,
            name=row.name,
            description="switch side of a logical router port",
            mac=row.mac,
            ips=[str(ipaddress.ip_interface(row.ip_prefix).ip)],
            port_security=False,
            admin_state_up=True,
            attachment_type="router",
            router_port=[row],
            port_key=allocate_port_key(view, switch),
        )

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Static routes leaving through the port block its deletion."""
        routes = [
            r
            for r in view.children("Static_Route", "logical_router", row.logical_router)
            if row in r.output_port
        ]
        return describe("static route", routes)

    def on_delete(self, view: WriteView, row: Any) -> None:
        """Delete the switch-side peer port with the router port."""
        peer = peer_port(view, row)
        if peer is not None:
            view.delete(peer)
