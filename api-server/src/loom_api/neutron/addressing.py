"""Addressing look-ups the Neutron collections share: which subnet holds an address, which
addresses a network has taken, a router's gateway port, floating IPs, and fixed-IP allocation.

Networks, subnets, ports, routers and floating IPs all need these; they live here, below
every collection module, so the collections import them and not each other (the import
graph among the Neutron modules has no cycle, `tests/test_import_cycles.py`).
"""

from __future__ import annotations

import ipaddress
import uuid as uuidlib
from typing import Any

from loom_api.neutron import errors
from loom_api.neutron.common import Address, Part, children, ext, flag
from loom_api.service.gateways import Uplink, default_service
from loom_api.service.subnets import next_free_address, reserved_addresses
from loom_api.service.types import Uuid, unusable_host
from loom_api.store import ReadView

#: `device_owner` of the router port that is a router's Neutron gateway, and of its interfaces.
GATEWAY_OWNER = "network:router_gateway"
INTERFACE_OWNER = "network:router_interface"


class FixedIp(Part):
    """One requested fixed IP: a subnet, an address, or both."""

    subnet_id: Uuid | None = None
    ip_address: Address | None = None


# ---- look-ups --------------------------------------------------------------------------


def is_external(row: Any) -> bool:
    """Return whether the switch is a Neutron external network."""
    return flag(row, "router_external")


def fip_rows(view: ReadView) -> list[Any]:
    """Return every floating IP (a `NAT_Rule` of type floating-ip)."""
    return [n for n in view.rows("NAT_Rule") if n.type == "floating-ip"]


def network_fips(view: ReadView, switch: Any) -> list[Any]:
    """Return the Neutron floating IPs whose address is on network `switch`."""
    return [f for f in fip_rows(view) if ext(f, "floating_network_id") == str(switch.uuid)]


def router_ports(view: ReadView, router: Any) -> list[Any]:
    """Return the router ports of `router` (this transaction's included)."""
    return children(view, "Logical_Router_Port", "logical_router", router)


def gateway_port(view: ReadView, router: Any) -> Any | None:
    """Return the router port that is `router`'s Neutron gateway, or None."""
    return next(
        (p for p in router_ports(view, router) if ext(p, "device_owner") == GATEWAY_OWNER), None
    )


def router_fips(view: ReadView, router: Any) -> list[Any]:
    """Return the floating IPs associated through `router`."""
    return [n for n in fip_rows(view) if router in n.logical_router]


def floating_network(view: ReadView, fip: Any) -> Any | None:
    """Return the network a floating IP's address belongs to.

    Neutron floating IPs record it; a floating-ip NAT rule made through the native API has
    the network of its router's gateway, if the router has one.
    """
    ident = ext(fip, "floating_network_id")
    if ident:
        return view.get("Logical_Switch", uuidlib.UUID(ident))
    if fip.logical_router:
        gateway = gateway_port(view, fip.logical_router[0])
        if gateway is not None:
            return gateway.logical_switch
    return None


def network_service(view: ReadView, network: Any) -> Any | None:
    """Return the L3 gateway service behind external network `network`: the one it names
    (`l3_ext`), else the deployment's default; None for other networks."""
    if not is_external(network):
        return None
    ident = ext(network, "gateway_service")
    if ident:
        return view.get("Gateway_Service", uuidlib.UUID(ident))
    return default_service(view)


def subnet_of(view: ReadView, switch: Any, address: str) -> Any | None:
    """Return the subnet of `switch` whose prefix holds `address`, or None."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    for subnet in view.children("Subnet", "logical_switch", switch):
        if ip in ipaddress.ip_network(subnet.cidr):
            return subnet
    return None


def used_addresses(view: ReadView, switch: Any, *, skip: Any = None) -> set[str]:
    """Return the addresses taken on `switch`: its ports', its floating IPs', and on an
    external network its gateway service's uplink address and next hop (no NAT rule may
    have them).

    Args:
        view: the replica (with the current transaction's changes).
        switch: the logical switch.
        skip: a port whose own addresses do not count (the port being updated).
    """
    used: set[str] = set()
    for port in children(view, "Logical_Switch_Port", "logical_switch", switch):
        if skip is None or port.uuid != skip.uuid:
            used.update(port.ips)
    used.update(f.external_ip for f in network_fips(view, switch))
    service = network_service(view, switch)
    if service is not None:
        uplink = Uplink.of(service)
        used.update(a for a in (uplink.address, uplink.next_hop) if a is not None)
    return used


# ---- allocation -------------------------------------------------------------------------


def ip_key(address: str) -> tuple[int, int]:
    """Sort key of an address: IPv4 first, then by value."""
    ip = ipaddress.ip_address(address)
    return ip.version, int(ip)


def _subnets(view: ReadView, network: Any) -> list[Any]:
    rows = children(view, "Subnet", "logical_switch", network)
    return sorted(rows, key=lambda s: (s.ip_version, ipaddress.ip_network(s.cidr)))


def _in_subnet(address: str, subnet: Any) -> bool:
    return ipaddress.ip_address(address) in ipaddress.ip_network(subnet.cidr)


def assign_addresses(
    view: ReadView, network: Any, requested: list[FixedIp] | None, port: Any | None
) -> list[str]:
    """Return the addresses a port gets on `network`.

    Args:
        view: the replica, with the current transaction's changes.
        network: the port's logical switch.
        requested: the request's `fixed_ips` (None: not given).
        port: the port being updated, or None for a new port.

    Raises:
        errors.InvalidInput: a subnet of another network, or an address outside its subnet.
        errors.IpAddressInUse: an address another port or floating IP holds.
        errors.IpAddressGenerationFailure: a subnet (or every subnet of a version) is full.
    """
    net_id = str(network.uuid)
    used = used_addresses(view, network, skip=port)
    if requested is None:
        return list(port.ips) if port is not None else _automatic(view, network, used)
    chosen: list[str] = []
    current = sorted(port.ips, key=ip_key) if port is not None else []
    for i, entry in enumerate(requested):
        subnet = _requested_subnet(view, network, entry.subnet_id)
        if entry.ip_address is not None:
            address = _requested_address(view, network, subnet, entry.ip_address, f"fixed_ips.{i}")
            if address in used or address in chosen:
                raise errors.IpAddressInUse(field="fixed_ips", net_id=net_id, ip=address)
            chosen.append(address)
        elif subnet is not None:
            kept = next((a for a in current if a not in chosen and _in_subnet(a, subnet)), None)
            free = kept or next_free_address(subnet, used | set(chosen))
            if free is None:
                raise errors.IpAddressGenerationFailure(field="fixed_ips", net_id=net_id)
            chosen.append(free)
        else:
            raise errors.BadRequest(
                field=f"fixed_ips.{i}",
                detail="Invalid input for fixed_ips. Reason: an entry needs a subnet_id or an "
                "ip_address.",
            )
    return chosen


def _automatic(view: ReadView, network: Any, used: set[str]) -> list[str]:
    """One address per IP version, from the first subnet of that version with a free one."""
    chosen = []
    for version in (4, 6):
        candidates = [s for s in _subnets(view, network) if s.ip_version == version]
        if not candidates:
            continue
        address = next(
            (a for s in candidates if (a := next_free_address(s, used)) is not None), None
        )
        if address is None:
            raise errors.IpAddressGenerationFailure(field="fixed_ips", net_id=str(network.uuid))
        chosen.append(address)
        used.add(address)
    return chosen


def _requested_subnet(view: ReadView, network: Any, ident: str | None) -> Any | None:
    if ident is None:
        return None
    subnet = view.get("Subnet", uuidlib.UUID(ident))
    if subnet is None or subnet.logical_switch != network:
        raise errors.InvalidInput(
            field="fixed_ips",
            detail=f"Failed to create port on network {network.uuid}, because fixed_ips "
            f"included invalid subnet {ident}",
        )
    return subnet


def _requested_address(
    view: ReadView, network: Any, subnet: Any | None, text: str, field: str
) -> str:
    """Check a requested fixed IP as Neutron does; return it in canonical form.

    Raises:
        errors.BadRequest: not an address (a zone index included), or one no host can have
            (unspecified, loopback, multicast, 255.255.255.255).
        errors.InvalidIpForSubnet: outside the requested subnet, or its network address or
            (IPv4) broadcast address (Neutron's `check_subnet_ip`).
        errors.InvalidIpForNetwork: in no subnet of the network.
    """
    try:
        if "%" in text:
            raise ValueError(text)
        ip = ipaddress.ip_address(text)
    except ValueError:
        raise errors.BadRequest(
            field=field,
            detail=f"Invalid input for fixed_ips. Reason: '{text}' is not a valid IP address.",
        ) from None
    reason = unusable_host(ip)
    if reason is not None:
        raise errors.BadRequest(
            field=field, detail=f"Invalid input for fixed_ips. Reason: '{ip}' is {reason}."
        )
    address = str(ip)
    if subnet is not None and not _in_subnet(address, subnet):
        raise errors.InvalidIpForSubnet(field=field, ip=address)
    holder = subnet if subnet is not None else subnet_of(view, network, address)
    if holder is None:
        raise errors.InvalidIpForNetwork(field=field, ip=address)
    if int(ip) in reserved_addresses(ipaddress.ip_network(holder.cidr)):
        raise errors.InvalidIpForSubnet(field=field, ip=address)
    return address
