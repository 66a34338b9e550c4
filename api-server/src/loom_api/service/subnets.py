"""Subnets of a logical switch: a prefix, its gateway, the pools addresses are handed out from.

A subnet is addressing metadata on a switch (the Neutron layer's subnets map onto it): ports
still carry their addresses themselves. `next_free_address` is the pure allocator the Neutron
layer uses to give a port a fixed IP when it asks for none.

Subnets constrain the addresses of their own IP version (`address_problem`): on a switch with
IPv4 subnets, a port's IPv4 addresses must each be in one of them and be neither its network
nor its broadcast address (IPv6 likewise, with the subnet-router anycast address reserved).
An IP version the switch has no subnet of stays L2-only: any address of it is accepted.
Link-local addresses (169.254.0.0/16, fe80::/10) are in no subnet by definition and are
always accepted. A new subnet that would leave a port's address invalid is refused (409,
naming the ports); a subnet still holding a port's address cannot be deleted; a subnet's
prefix cannot change.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import Field

from loom_api import errors
from loom_api.service.common import Body, Owned, owned_api, owner
from loom_api.service.crud import Caller, Resource, describe, first, optional
from loom_api.service.switches import LogicalSwitches
from loom_api.service.types import DNS_NAMESERVERS_MAX, POOLS_MAX, Cidr, IpAddress
from loom_api.store import ReadView, WriteView

IpAddr = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNet = ipaddress.IPv4Network | ipaddress.IPv6Network


class AllocationPool(Body):
    """An inclusive range of addresses handed out to ports."""

    start: IpAddress
    end: IpAddress


class SubnetBody(Owned):
    """A subnet; `allocation_pools` defaults to the whole prefix but its reserved addresses."""

    cidr: Cidr
    gateway_ip: IpAddress | None = None
    allocation_pools: Annotated[list[AllocationPool], Field(max_length=POOLS_MAX)] | None = None
    enable_dhcp: bool = True
    dns_nameservers: list[IpAddress] = Field(default_factory=list, max_length=DNS_NAMESERVERS_MAX)


# ---- pure address arithmetic (on integers: one subnet's addresses share a version) -------


def address(version: int, value: int) -> IpAddr:
    """Return the IPv`version` address whose integer value is `value`."""
    return ipaddress.IPv4Address(value) if version == 4 else ipaddress.IPv6Address(value)


def reserved_addresses(network: IpNet) -> set[int]:
    """Return the addresses of `network` never given to ports: network and broadcast.

    IPv4 /31 and /32 and IPv6 /127 and /128 have none (RFC 3021, RFC 6164); IPv6 has no
    broadcast but reserves the subnet-router anycast address (the network's own).
    """
    if network.num_addresses <= 2:
        return set()
    if network.version == 4:
        return {int(network.network_address), int(network.broadcast_address)}
    return {int(network.network_address)}


def default_pools(network: IpNet, gateway: int | None) -> list[tuple[int, int]]:
    """Return the whole of `network` minus its reserved addresses and `gateway`, as ranges."""
    low, high = int(network.network_address), int(network.broadcast_address)
    reserved = reserved_addresses(network)
    if low in reserved:
        low += 1
    if high in reserved:
        high -= 1
    if gateway is None or not low <= gateway <= high:
        return [(low, high)] if low <= high else []
    pools = []
    if low < gateway:
        pools.append((low, gateway - 1))
    if gateway < high:
        pools.append((gateway + 1, high))
    return pools


def parse_pool(text: str) -> tuple[int, int, int]:
    """Parse a stored pool, "start-end", into (IP version, start, end)."""
    start_text, _, end_text = text.partition("-")
    start, end = ipaddress.ip_address(start_text), ipaddress.ip_address(end_text)
    return start.version, int(start), int(end)


def format_pool(version: int, start: int, end: int) -> str:
    """Return the stored form of a pool, "start-end"."""
    return f"{address(version, start)}-{address(version, end)}"


def next_free_address(subnet: Any, used: Iterable[str]) -> str | None:
    """Return the lowest address of `subnet`'s pools not in `used`, or None when all are used.

    Pure: nothing is read or written. Cost is O(u log u) in the used addresses, whatever the
    size of the pools (an IPv6 /64 is never enumerated).

    Args:
        subnet: a `Subnet` row (or anything with `allocation_pools`, a list of "start-end"
            strings, and `gateway_ip`, a 0..1 list).
        used: the addresses already taken on the subnet's switch (other versions and
            addresses outside the pools are ignored; so are strings that are not addresses).

    Returns:
        The address as a string, or None when every pool is exhausted.
    """
    taken: dict[int, set[int]] = {4: set(), 6: set()}
    for text in [*used, *subnet.gateway_ip]:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            continue
        taken[ip.version].add(int(ip))
    for version, start, end in sorted(parse_pool(p) for p in subnet.allocation_pools):
        candidate = start
        for value in sorted(taken[version]):
            if value < candidate:
                continue
            if value > candidate or value > end:
                break
            candidate += 1
        if candidate <= end:
            return str(address(version, candidate))
    return None


def switch_used_addresses(view: ReadView, switch: Any) -> set[str]:
    """Return every address the ports of `switch` (router peers included) hold."""
    used: set[str] = set()
    for port in view.children("Logical_Switch_Port", "logical_switch", switch):
        used.update(port.ips)
    return used


# ---- validation --------------------------------------------------------------------------


def switch_subnets(view: ReadView, switch: Any) -> list[tuple[IpNet, Any]]:
    """Return the prefixes of `switch`'s subnets, each with its `Subnet` row."""
    return [
        (ipaddress.ip_network(s.cidr), s) for s in view.children("Subnet", "logical_switch", switch)
    ]


def address_problem(address: str, subnets: Iterable[tuple[IpNet, Any]]) -> str | None:
    """Return why `address` cannot be a port's on a switch with `subnets`, or None (pure).

    Args:
        address: the port's address.
        subnets: (prefix, row) pairs, as `switch_subnets` returns them; a row is used only
            in the message (its `uuid`), so None will do for a subnet not yet written.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"{address!r} is not an address"
    same = [(network, row) for network, row in subnets if network.version == ip.version]
    if not same or ip.is_link_local:
        return None
    holder = next(((network, row) for network, row in same if ip in network), None)
    if holder is None:
        prefixes = ", ".join(sorted(str(network) for network, _ in same))
        return f"{ip} is in no IPv{ip.version} subnet of the switch ({prefixes})"
    network, row = holder
    if int(ip) in reserved_addresses(network):
        which = "network" if ip == network.network_address else "broadcast"
        named = f"subnet {row.uuid} ({network})" if row is not None else f"subnet {network}"
        return f"{ip} is the {which} address of {named}"
    return None


def check_port_addresses(view: ReadView, switch: Any, addresses: Iterable[str], field: str) -> None:
    """Refuse (400) addresses a port cannot have on `switch` (see the module docstring).

    Raises:
        errors.ValidationFailed: naming `field`, the address and the subnets.
    """
    subnets = switch_subnets(view, switch)
    if not subnets:
        return
    for address in addresses:
        problem = address_problem(address, subnets)
        if problem is not None:
            raise errors.ValidationFailed(
                field=field, detail=f"{problem}; logical switch {switch.uuid} has subnets"
            )


def check_prefix(network: IpNet) -> None:
    """Refuse (400 on `cidr`) a prefix that cannot be a subnet of hosts.

    Raises:
        errors.ValidationFailed: a multicast or loopback prefix, or one starting at the
            unspecified address (0.0.0.0/8, ::/128, and every prefix holding them).
    """
    for reason, bad in (
        ("multicast", network.is_multicast),
        ("loopback", network.is_loopback),
        ("unspecified-address", network.network_address.is_unspecified),
    ):
        if bad:
            raise errors.ValidationFailed(
                field="cidr", detail=f"{network} is a {reason} prefix; hosts cannot be on it"
            )


def ports_left_invalid(view: ReadView, switch: Any, network: IpNet) -> list[tuple[Any, str]]:
    """Return the (port, address) pairs of `switch` that a new subnet `network` makes invalid.

    Only addresses of `network`'s IP version are affected: once the switch has a subnet of
    that version, each must be in one (and not a reserved address of it).
    """
    subnets = [*switch_subnets(view, switch), (network, None)]
    return [
        (port, address)
        for port in view.children("Logical_Switch_Port", "logical_switch", switch)
        for address in sorted(port.ips)
        if _version(address) == network.version and address_problem(address, subnets)
    ]


def _version(address: str) -> int:
    try:
        return ipaddress.ip_address(address).version
    except ValueError:
        return 0


def check_gateway(network: IpNet, gateway_ip: str | None) -> int | None:
    """Validate `gateway_ip` against `network`; return it as an integer (None stays None).

    Raises:
        errors.ValidationFailed: the gateway is outside `network` or a reserved address.
    """
    if gateway_ip is None:
        return None
    gateway = ipaddress.ip_address(gateway_ip)
    if gateway not in network:
        raise errors.ValidationFailed(
            field="gateway_ip", detail=f"gateway_ip {gateway} is not in {network}"
        )
    if int(gateway) in reserved_addresses(network):
        raise errors.ValidationFailed(
            field="gateway_ip",
            detail=f"gateway_ip {gateway} is the network or broadcast address of {network}",
        )
    return int(gateway)


def check_pools(
    network: IpNet, gateway: int | None, pools: list[AllocationPool]
) -> list[tuple[int, int]]:
    """Validate `pools` against `network` and `gateway`; return them as sorted ranges.

    Raises:
        errors.ValidationFailed: naming the pool (`allocation_pools.<i>`, and `.start` or
            `.end` when one end is at fault).
    """
    reserved = reserved_addresses(network)
    ranges: list[tuple[int, int, int]] = []
    for i, pool in enumerate(pools):
        field = f"allocation_pools.{i}"
        for name in ("start", "end"):
            ip = ipaddress.ip_address(getattr(pool, name))
            if ip not in network:
                raise errors.ValidationFailed(
                    field=f"{field}.{name}", detail=f"{ip} is not in {network}"
                )
            if int(ip) in reserved:
                raise errors.ValidationFailed(
                    field=f"{field}.{name}",
                    detail=f"{ip} is the network or broadcast address of {network}",
                )
        start, end = int(ipaddress.ip_address(pool.start)), int(ipaddress.ip_address(pool.end))
        if start > end:
            raise errors.ValidationFailed(
                field=f"{field}.start",
                detail=f"pool start {pool.start} is above its end {pool.end}",
            )
        if gateway is not None and start <= gateway <= end:
            raise errors.ValidationFailed(
                field=field,
                detail=f"pool {pool.start}-{pool.end} contains gateway_ip "
                f"{address(network.version, gateway)}",
            )
        ranges.append((start, end, i))
    ranges.sort()
    for (_, end, _), (start, _, i) in itertools.pairwise(ranges):
        if start <= end:
            raise errors.ValidationFailed(
                field=f"allocation_pools.{i}", detail="allocation pools overlap"
            )
    return [(start, end) for start, end, _ in ranges]


class Subnets(Resource):
    """`/api/v1/logical-switches/{id}/subnets`."""

    kind = "subnet"
    table = "Subnet"
    model = SubnetBody
    immutable = frozenset({"cidr"})
    read_only = frozenset({"id", "revision", "logical_switch_id", "ip_version"})
    parent_column = "logical_switch"
    parent = LogicalSwitches

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the subnet's representation; pools as {"start", "end"} objects."""
        pools = sorted(parse_pool(p) for p in row.allocation_pools)
        return {
            **owned_api(row),
            "logical_switch_id": str(row.logical_switch.uuid),
            "cidr": row.cidr,
            "ip_version": row.ip_version,
            "gateway_ip": first(row.gateway_ip),
            "allocation_pools": [
                {"start": str(address(v, s)), "end": str(address(v, e))} for v, s, e in pools
            ],
            "enable_dhcp": row.enable_dhcp,
            "dns_nameservers": sorted(row.dns_nameservers),
        }

    def columns(
        self, view: WriteView, caller: Caller, body: Any, parent: Any, row: Any | None
    ) -> dict[str, Any]:
        """Check the gateway, the pools, the name servers, and overlaps on the switch.

        Raises:
            errors.ValidationFailed: a gateway or pool outside the prefix, a pool containing
                the gateway, inverted or overlapping pools, or a repeated name server.
            errors.Conflict: the prefix overlaps another subnet of the switch.
        """
        tenant = parent.tenant
        requested = tenant if body.tenant is None else body.tenant
        cols = {"tenant": owner(caller, requested, row), "name": body.name, "tags": list(body.tags)}
        if cols["tenant"] != tenant:
            raise errors.ValidationFailed(
                field="tenant", detail="a subnet belongs to its switch's tenant"
            )
        network = ipaddress.ip_network(body.cidr)
        check_prefix(network)
        gateway = check_gateway(network, body.gateway_ip)
        if body.allocation_pools is None:
            pools = default_pools(network, gateway)
        else:
            pools = check_pools(network, gateway, body.allocation_pools)
        if len(set(body.dns_nameservers)) != len(body.dns_nameservers):
            raise errors.ValidationFailed(
                field="dns_nameservers", detail="dns_nameservers has duplicates"
            )
        for other in view.children(self.table, "logical_switch", parent):
            if row is not None and other.uuid == row.uuid:
                continue
            other_network = ipaddress.ip_network(other.cidr)
            if other_network.version == network.version and network.overlaps(other_network):
                raise errors.Conflict(
                    field="cidr",
                    detail=f"{network} overlaps {other.cidr} of subnet {other.uuid} on this switch",
                    overlaps=str(other.uuid),
                )
        if row is None:
            self._check_ports_fit(view, parent, network)
        return {
            **cols,
            "logical_switch": parent,
            "cidr": str(network),
            "ip_version": network.version,
            "gateway_ip": optional(body.gateway_ip),
            "allocation_pools": [format_pool(network.version, s, e) for s, e in pools],
            "enable_dhcp": body.enable_dhcp,
            "dns_nameservers": list(body.dns_nameservers),
        }

    @staticmethod
    def _check_ports_fit(view: ReadView, switch: Any, network: IpNet) -> None:
        """Refuse (409 on `cidr`) a new subnet that would leave ports' addresses invalid."""
        invalid = ports_left_invalid(view, switch, network)
        if invalid:
            ports = ", ".join(f"port {port.uuid} ({address})" for port, address in invalid[:5])
            more = f" and {len(invalid) - 5} more" if len(invalid) > 5 else ""
            raise errors.Conflict(
                field="cidr",
                detail=f"with subnet {network} on logical switch {switch.uuid}, addresses its "
                f"ports hold would be outside its IPv{network.version} subnets or reserved: "
                f"{ports}{more}; change those ports first",
            )

    def users(self, view: ReadView, row: Any) -> list[str]:
        """Ports of the switch holding an address of the subnet block its deletion."""
        network = ipaddress.ip_network(row.cidr)
        ports = [
            p
            for p in view.children("Logical_Switch_Port", "logical_switch", row.logical_switch)
            if any(_in(address, network) for address in p.ips)
        ]
        return describe("logical switch port", ports)


def _in(address: str, network: IpNet) -> bool:
    try:
        return ipaddress.ip_address(address) in network
    except ValueError:
        return False
