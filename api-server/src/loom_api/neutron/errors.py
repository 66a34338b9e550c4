"""Neutron's errors: the `type` names and messages Neutron answers with, as `LoomApiError`s.

Neutron renders an error as `{"NeutronError": {"type": T, "message": M, "detail": ""}}`,
where T is the name of the exception class on the server (`NetworkNotFound`,
`IpAddressInUse`, ...). Clients match on the HTTP status and sometimes on T, so the classes
below keep Neutron's names and message templates. They subclass `LoomApiError` (one base for
the whole API with templated messages, after ovsdbapp's `exceptions.py`); `to_neutron` turns
any other `LoomApiError` (from the native service code the Neutron layer calls) into the
nearest Neutron error, so the `/v2.0` boundary renders everything with one function, `render`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from loom_api import errors


class NeutronError(errors.LoomApiError):
    """Base of the Neutron errors; `neutron_type` defaults to the class name."""

    neutron_type: ClassVar[str | None] = None

    @property
    def type_name(self) -> str:
        """The `type` Neutron reports for this error."""
        return self.neutron_type or type(self).__name__


def render(exc: errors.LoomApiError) -> tuple[dict[str, Any], int]:
    """Return the Neutron error body for `exc` (any API error) and its HTTP status."""
    neutron = to_neutron(exc)
    body = {"NeutronError": {"type": neutron.type_name, "message": neutron.text, "detail": ""}}
    return body, exc.status


# ---- 400 ---------------------------------------------------------------------------------


class BadRequest(NeutronError):
    """A malformed request or an invalid attribute (400)."""

    neutron_type = "HTTPBadRequest"
    message = "%(detail)s"


class InvalidInput(NeutronError):
    """A value that is well-formed but not acceptable here (400)."""

    message = "Invalid input for operation: %(detail)s."


class BadRouterRequest(InvalidInput):
    """A router request that cannot be carried out (400)."""

    neutron_type = "BadRequest"
    message = "Bad router request: %(detail)s."


class InvalidIpForSubnet(InvalidInput):
    """A fixed IP outside the subnet it names (400)."""

    message = "IP address %(ip)s is not a valid IP for the specified subnet."


class InvalidIpForNetwork(InvalidInput):
    """A fixed IP in none of the network's subnets (400)."""

    message = "IP address %(ip)s is not a valid IP for any of the subnets on the specified network."


class ExternalNetworkRequired(InvalidInput):
    """A router gateway or floating IP on a network that is not external (400)."""

    neutron_type = "BadRequest"
    message = "Network %(net_id)s is not a valid external network."


class PortSecurityRequired(InvalidInput):
    """Security groups on a port without port security (400)."""

    neutron_type = "PortSecurityAndIPRequiredForSecurityGroups"
    message = (
        "Port security must be enabled and port must have an IP address in order to use "
        "security groups."
    )


# ---- 401, 403 ----------------------------------------------------------------------------


class NotAuthenticated(NeutronError):
    """No token, or an unknown one (401)."""

    status = 401
    message = "Authentication required: a valid X-Auth-Token is needed."


class PolicyNotAuthorized(NeutronError):
    """The caller may not do this (403)."""

    status = 403
    message = "%(detail)s"


# ---- 404 ---------------------------------------------------------------------------------


class NotFound(NeutronError):
    """An object that does not exist or is not visible to the caller (404)."""

    status = 404
    message = "%(kind)s %(id)s could not be found."


class NetworkNotFound(NotFound):
    """404 for a network."""

    message = "Network %(id)s could not be found."


class SubnetNotFound(NotFound):
    """404 for a subnet."""

    message = "Subnet %(id)s could not be found."


class PortNotFound(NotFound):
    """404 for a port."""

    message = "Port %(id)s could not be found."


class RouterNotFound(NotFound):
    """404 for a router."""

    message = "Router %(id)s could not be found."


class FloatingIPNotFound(NotFound):
    """404 for a floating IP."""

    message = "Floating IP %(id)s could not be found."


class SecurityGroupNotFound(NotFound):
    """404 for a security group."""

    message = "Security group %(id)s does not exist."


class SecurityGroupRuleNotFound(NotFound):
    """404 for a security group rule."""

    message = "Security group rule %(id)s does not exist."


class RouterInterfaceNotFound(NotFound):
    """remove_router_interface with a port that is not an interface of the router (404)."""

    message = "Router %(router_id)s does not have an interface with id %(port_id)s."


class RouterInterfaceNotFoundForSubnet(NotFound):
    """remove_router_interface with a subnet the router has no interface on (404)."""

    message = "Router %(router_id)s has no interface on subnet %(subnet_id)s."


class ExternalGatewayForFloatingIPNotFound(NotFound):
    """A floating IP for a port no router connects to the floating network (404)."""

    message = (
        "External network %(net_id)s is not reachable from subnet %(subnet_id)s. "
        "Therefore, cannot associate Port %(port_id)s with a Floating IP."
    )


class ResourceNotFound(NotFound):
    """A URL that names no collection or action (404)."""

    neutron_type = "HTTPNotFound"
    message = "The resource could not be found: %(detail)s."


# ---- 409 ---------------------------------------------------------------------------------


class Conflict(NeutronError):
    """The change contradicts the stored configuration (409)."""

    status = 409
    message = "%(detail)s"


class IpAddressInUse(Conflict):
    """A fixed IP already held on the network (409)."""

    message = (
        "Unable to complete operation for network %(net_id)s. The IP address %(ip)s is in use."
    )


class MacAddressInUse(Conflict):
    """A MAC already used on the network (409)."""

    message = (
        "Unable to complete operation for network %(net_id)s. The mac address %(mac)s is in use."
    )


class IpAddressGenerationFailure(Conflict):
    """Every address of the subnet's pools is taken (409)."""

    message = "No more IP addresses available on network %(net_id)s."


class NetworkInUse(Conflict):
    """Deleting a network that still has ports or floating IPs (409)."""

    message = (
        "Unable to complete operation on network %(id)s. "
        "There are one or more ports still in use on the network: %(users)s."
    )


class SubnetInUse(Conflict):
    """Deleting a subnet whose addresses are still held (409)."""

    message = (
        "Unable to complete operation on subnet %(id)s: "
        "one or more ports have an IP allocation from this subnet: %(users)s."
    )


class PortInUse(Conflict):
    """A port already used by a device (409)."""

    message = (
        "Unable to complete operation on port %(id)s for network %(net_id)s. "
        "Port already has an attached device %(device_id)s."
    )


class L3PortInUse(Conflict):
    """Deleting a router's port through the port API (409)."""

    message = (
        "Port %(id)s cannot be deleted directly via the port API: "
        "has device owner %(device_owner)s."
    )


class RouterInUse(Conflict):
    """Deleting a router that still has interfaces (409)."""

    message = "Router %(id)s %(reason)s."


class RouterInterfaceInUseByFloatingIP(Conflict):
    """Removing an interface floating IPs still reach ports through (409)."""

    message = (
        "Router interface for subnet %(subnet_id)s on router %(router_id)s cannot be "
        "deleted, as it is required by one or more floating IPs."
    )


class RouterExternalGatewayInUseByFloatingIp(Conflict):
    """Removing or moving a gateway floating IPs still use (409)."""

    message = (
        "Gateway cannot be updated for router %(router_id)s, since a gateway to external "
        "network %(net_id)s is required by one or more floating IPs."
    )


class FloatingIPPortAlreadyAssociated(Conflict):
    """A fixed IP that already has a floating IP on that router (409)."""

    message = (
        "Cannot associate floating IP %(floating_ip_address)s (%(fip_id)s) with port "
        "%(port_id)s using fixed IP %(fixed_ip)s, as that fixed IP already has a floating "
        "IP on external network %(net_id)s."
    )


class SecurityGroupInUse(Conflict):
    """Deleting a security group ports still use (409)."""

    message = "Security Group %(id)s in use: %(users)s."


class SecurityGroupCannotRemoveDefault(Conflict):
    """A project deleting its default security group (409)."""

    message = "Insufficient rights for removing default security group."


class SecurityGroupCannotUpdateDefault(Conflict):
    """Renaming the default security group (409)."""

    message = "Updating default security group not allowed."


class SecurityGroupRuleExists(Conflict):
    """A rule identical to an existing one (409)."""

    message = "Security group rule already exists. Rule id is %(rule_id)s."


class PortSecurityPortHasSecurityGroup(Conflict):
    """Disabling port security on a port that keeps security groups (409)."""

    message = (
        "Port has security group associated. Cannot disable port security or IP address "
        "until security group is removed."
    )


# ---- 412, 503 ----------------------------------------------------------------------------


class PreconditionFailed(NeutronError):
    """`If-Match: revision_number=N` named a stale revision (412)."""

    status = 412
    message = "Constrained to revision_number %(given)s; the current one is %(current)s."


class ServiceUnavailable(NeutronError):
    """The configuration database is unreachable (503)."""

    status = 503
    message = "%(detail)s"


#: Neutron types of the native errors, by their `code` (the fallback is by status).
_NATIVE_TYPES = {
    "malformed_json": "HTTPBadRequest",
    "json_too_deep": "HTTPBadRequest",
    "unknown_parameter": "HTTPBadRequest",
    "body_too_large": "HTTPRequestEntityTooLarge",
    "invalid_value": "HTTPBadRequest",
    "unknown_field": "HTTPBadRequest",
    "bad_request": "HTTPBadRequest",
    "missing_reference": "HTTPBadRequest",
    "unsupported_media_type": "HTTPUnsupportedMediaType",
    "method_not_allowed": "HTTPMethodNotAllowed",
    "in_use": "InUse",
    "conflict": "Conflict",
    "unauthenticated": "NotAuthenticated",
    "forbidden": "PolicyNotAuthorized",
    "not_found": "HTTPNotFound",
    "precondition_failed": "PreconditionFailed",
    "database_unavailable": "ServiceUnavailable",
    "outcome_unknown": "ServiceUnavailable",
    "storage_full": "ServiceUnavailable",
}


class _Translated(NeutronError):
    """A native error shown the Neutron way: same status and message."""

    message = "%(detail)s"

    def __init__(self, source: errors.LoomApiError) -> None:
        super().__init__(field=source.field, detail=source.text)
        self.source = source

    @property
    def type_name(self) -> str:
        """The Neutron type nearest to the native error's code."""
        return _NATIVE_TYPES.get(self.source.code, "HTTPBadRequest")


def to_neutron(exc: errors.LoomApiError) -> NeutronError:
    """Return `exc` as a Neutron error (itself if it already is one).

    A native error keeps its message (a field error's message names the attribute at fault,
    as Neutron's "Invalid input for <attr>" does); `render` keeps its status.
    """
    if isinstance(exc, NeutronError):
        return exc
    return _Translated(exc)
