"""The Neutron v2.0 API mapped onto Loom's native model (no Flask here; `views.neutron` serves it).

One store, no second source of truth: every Neutron object IS a row of `Loom_Config`, under
the same id, so what one API writes the other reads.

- network: a `Logical_Switch`. `router:external`, `shared`, `mtu` and
  `port_security_enabled` are `external_ids:neutron:*`; an `l3_ext` provider network
  (`provider:physical_network` = an L3 gateway service id, as in the NVP plugin) keeps the
  service in `neutron:gateway_service`; an external network without provider attributes
  is served by the deployment's default L3 gateway service.
- subnet: a `Subnet` of the network's switch; the gateway defaults to the prefix's first
  address; `description`, `host_routes` and the IPv6 modes are `external_ids:neutron:*`.
- port: a `Logical_Switch_Port` attached as `vif` with `vif_id` = the port's id (Nova's
  iface-id). `fixed_ips` are its `ips` (allocated from the subnets' pools when absent),
  `security_groups` its `security_profiles`, `port_security_enabled` its `port_security`;
  `device_id`, `device_owner`, `binding:*` are `external_ids:neutron:*`.
- router: a `Logical_Router`; its `routes` are its `Static_Route`s.
- router interface: a `Logical_Router_Port` (`neutron:device_owner=network:router_interface`)
  whose switch-side peer `Logical_Switch_Port` is the interface's Neutron port.
- `external_gateway_info`: a `Logical_Router_Port` on the external network's switch
  (`network:router_gateway`); the network's L3 gateway service becomes the router's (on a
  network without one, the router follows the default service as it changes); while
  `enable_snat`, one SNAT `NAT_Rule` (`neutron:snat=true`) per IPv4 interface subnet,
  translating to the gateway address.
- floating IP: a `NAT_Rule` of type floating-ip with `neutron:floating_network_id`; an
  unassociated one has no router, internal IP or port. Its `status` and the extension
  attribute `loom:status_reason` tell whether anything translates it (below).
- security group: a `Security_Profile` (a project's `default` group: `neutron:default=true`);
  a security group rule: a `Security_Rule` in its profile's `rules`.
- `project_id` and `tenant_id`: the row's `tenant`; `revision_number`: its `revision` (a
  rule's is its group's).

Neutron-only attributes live in `external_ids` under the `neutron:` prefix, as OVN keeps
them. Objects made through the native API appear in Neutron with Neutron's defaults.
Differences from Neutron, each deliberate:

- a router has one port per network and one address per port (the native model's);
  `allowed_address_pairs` must be empty; ICMP rules cannot carry type/code (the native rule
  model has port ranges for TCP, UDP and SCTP only); under `noauth` a create without
  `project_id` belongs to the native admin tenant ("admin") instead of failing.
- NAT is done by an L3 gateway service: a floating IP is associated, as in Neutron,
  whenever a router joins the port's subnet to the floating network (else
  `ExternalGatewayForFloatingIPNotFound`, 404), and translated by that router's service
  (the `l3_ext` network's, or the default one). A floating IP's address, and a router
  gateway's (its SNAT address), must be free on the uplink network behind the service:
  another router's NAT rule there, any project's, is a 409 `Conflict` (naming that rule to
  the admin only), as is the uplink's own address or next hop, which are never allocated.
- a floating IP's `status` is ACTIVE only while it is translated: associated through a
  router whose gateway service has an IPv4 uplink, with IPv4 addresses, and no logical
  controller warning about it (the warnings `/api/v1/status` lists). Otherwise it is DOWN,
  and the extension attribute `loom:status_reason` (extension `loom-status-reason`) says
  why ("not associated with a port", the router without a gateway service, as when the
  deployment has no default one, the controller's warning); it is null while ACTIVE.
- input limits: names (and `device_id`, `device_owner`, `binding:host_id`) and
  descriptions at most 255 characters, tags 1 to 60 (as Neutron), and no control
  characters in any of them (C0, DEL, C1; a description may hold tab and line breaks); at
  most 64 tags per object (Neutron sets no count), 16 `fixed_ips` per port, 32
  `security_groups`, 10 `allowed_address_pairs`, a `binding:profile` of at most 4095
  characters of JSON, 30 `routes` per router, and per subnet 20 `host_routes`, 5
  `dns_nameservers` (Neutron's default quotas) and 64 `allocation_pools`.
- addresses: a fixed IP may not be unspecified, loopback, multicast, 255.255.255.255 or
  carry a zone index (`fe80::1%eth0`), nor, as in Neutron, be its subnet's network or IPv4
  broadcast address (`InvalidIpForSubnet`); a subnet may not be a multicast, loopback or
  0.0.0.0/x prefix; a subnet that would leave the addresses of ports made through the native
  API outside the network's subnets is refused (409 `Conflict`, naming them); an extra
  route's destination and next hop must be of one IP version.

Modules: `common` (the generic operations), `errors` (Neutron's error types), `addressing`
(the subnet, address, gateway-port and floating-IP look-ups and fixed-IP allocation the
collections share), one module per collection, `interfaces` (add/remove_router_interface).
"""

from __future__ import annotations

from typing import Any

from loom_api.neutron.common import NeutronResource
from loom_api.neutron.floatingips import FLOATING_IPS
from loom_api.neutron.networks import NETWORKS
from loom_api.neutron.ports import PORTS
from loom_api.neutron.routers import ROUTERS
from loom_api.neutron.security_groups import SECURITY_GROUP_RULES, SECURITY_GROUPS
from loom_api.neutron.subnets import SUBNETS

#: The `/v2.0` collections: URL path segment -> resource.
RESOURCES: dict[str, NeutronResource] = {
    "networks": NETWORKS,
    "subnets": SUBNETS,
    "ports": PORTS,
    "routers": ROUTERS,
    "floatingips": FLOATING_IPS,
    "security-groups": SECURITY_GROUPS,
    "security-group-rules": SECURITY_GROUP_RULES,
}

#: Neutron API extensions this layer implements (alias, name, description).
EXTENSIONS: list[tuple[str, str, str]] = [
    ("router", "Neutron L3 Router", "Routers, router interfaces and floating IPs"),
    ("ext-gw-mode", "Neutron L3 Configurable external gateway mode", "enable_snat"),
    ("extraroute", "Neutron Extra Route", "Extra routes on routers"),
    ("external-net", "Neutron external network", "router:external networks"),
    ("security-group", "security-group", "Security groups and their rules"),
    ("port-security", "Port Security", "port_security_enabled on networks and ports"),
    ("binding", "Port Binding", "binding:host_id, binding:vnic_type, binding:profile"),
    ("provider", "Provider Network", "provider:network_type l3_ext (NVP's)"),
    ("standard-attr-description", "standard-attr-description", "description attributes"),
    ("standard-attr-revisions", "Resource revision numbers", "revision_number"),
    ("standard-attr-tag", "Tag support for resources", "tags in bodies and filters"),
    ("project-id", "project_id field enabled", "project_id beside tenant_id"),
    ("revision-if-match", "If-Match constraints based on revision_number", "If-Match"),
    ("stateful-security-group", "Stateful security group", "stateful"),
    ("loom-status-reason", "Loom status reason", "loom:status_reason: why a floating IP is DOWN"),
]


def versions(base_url: str) -> dict[str, Any]:
    """Return the document `GET /` answers: the one API version, v2.0."""
    return {
        "versions": [
            {
                "id": "v2.0",
                "status": "CURRENT",
                "links": [{"rel": "self", "href": f"{base_url.rstrip('/')}/v2.0/"}],
            }
        ]
    }


def resources(base_url: str) -> dict[str, Any]:
    """Return the document `GET /v2.0/` answers: the collections."""
    root = f"{base_url.rstrip('/')}/v2.0"
    return {
        "resources": [
            {
                "name": res.member,
                "collection": path,
                "links": [{"rel": "self", "href": f"{root}/{path}"}],
            }
            for path, res in RESOURCES.items()
        ]
    }


def extension(alias: str, name: str, description: str) -> dict[str, Any]:
    """Return one extension's description."""
    return {
        "alias": alias,
        "name": name,
        "description": description,
        "updated": "2013-01-01T00:00:00-00:00",
        "links": [],
    }
