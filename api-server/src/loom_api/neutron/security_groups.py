"""Security groups and their rules: `Security_Profile` rows and their `Security_Rule` rows.

A security group IS a security profile (same id); a rule IS a `Security_Rule` row (its id is
the row's uuid), listed in the profile's `rules`. Rule checks are the native ones
(`service.profiles.rule_columns`). As in Neutron, every new group gets two egress rules
(IPv4 and IPv6, anything), and every project gets a group named `default` the first time it
uses the API (creates a network, port or group, or lists its groups): the egress rules plus
ingress from the group itself. The default group is flagged `neutron:default=true`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from loom_api import errors as native_errors
from loom_api.neutron import errors
from loom_api.neutron.common import (
    Address,
    Body,
    Context,
    Description,
    Name,
    NeutronResource,
    Query,
    Tags,
    bump,
    check_owner_unchanged,
    ext,
    flag,
    given,
    lookup,
    merged_ids,
    native_insert,
    owner,
    require,
    tenant_api,
)
from loom_api.service import crud
from loom_api.service.profiles import SecurityProfiles, SecurityRuleBody, rule_columns
from loom_api.service.types import Uuid
from loom_api.store import ReadView, Store, WriteView

DEFAULT_NAME = "default"
_PROFILES = SecurityProfiles()


class _RuleModel(crud.Resource):
    """The native rule model, to validate a Neutron rule with the native messages."""

    kind = "security group rule"
    table = "Security_Rule"
    model = SecurityRuleBody


_RULES = _RuleModel()

Port = Annotated[int, Field(strict=True, ge=0, le=65535)]


class SecurityGroupBody(Body):
    """A security group (create and update)."""

    name: Name | None = None
    description: Description | None = None
    stateful: bool | None = None
    tags: Tags | None = None


class RuleBody(Body):
    """A security group rule (create)."""

    security_group_id: Uuid | None = None
    direction: Literal["ingress", "egress"] | None = None
    ethertype: Literal["IPv4", "IPv6"] = "IPv4"
    protocol: Annotated[str, StringConstraints(max_length=16)] | int | None = None
    port_range_min: Port | None = None
    port_range_max: Port | None = None
    remote_ip_prefix: Address | None = None
    remote_group_id: Uuid | None = None
    description: Description | None = None


class RuleUpdateBody(Body):
    """A rule's only changeable attribute."""

    description: Description | None = None


def _egress(ethertype: str) -> dict[str, Any]:
    return {"direction": "egress", "ethertype": ethertype}


def _insert_rule(view: WriteView, columns: dict[str, Any], description: str = "") -> Any:
    return view.insert(
        "Security_Rule", **columns, external_ids=merged_ids(None, description=description or None)
    )


def _plain_rule(ethertype: str, direction: str) -> dict[str, Any]:
    return {
        "direction": direction,
        "ethertype": ethertype,
        "protocol": [],
        "port_range_min": [],
        "port_range_max": [],
        "remote_prefix": [],
        "remote_profile": [],
    }


def _new_group(view: WriteView, tenant: str, name: str, description: str, *, default: bool) -> Any:
    """Insert a group with Neutron's egress rules (and, for `default`, ingress from itself)."""
    group = native_insert(
        view,
        _PROFILES,
        {"tenant": tenant, "name": name, "description": description, "rules": []},
    )
    group.external_ids = merged_ids(None, default=True if default else None)
    rules = [_insert_rule(view, _plain_rule(e, "egress")) for e in ("IPv4", "IPv6")]
    if default:
        for ethertype in ("IPv4", "IPv6"):
            rule = _insert_rule(view, _plain_rule(ethertype, "ingress"))
            rule.remote_profile = [group]
            rules.append(rule)
    group.rules = rules
    return group


def default_group(view: ReadView, tenant: str) -> Any | None:
    """Return `tenant`'s default security group, or None."""
    for row in view.rows("Security_Profile"):
        if row.tenant == tenant and flag(row, "default"):
            return row
    return None


def ensure_default_group(view: WriteView, tenant: str) -> Any:
    """Return `tenant`'s default security group, creating it (in this transaction) if missing."""
    return default_group(view, tenant) or _new_group(
        view, tenant, DEFAULT_NAME, "Default security group", default=True
    )


def group_of_rule(view: ReadView, rule: Any) -> Any | None:
    """Return the security group whose `rules` hold `rule`."""
    for group in view.rows("Security_Profile"):
        if rule in group.rules:
            return group
    return None


def rule_api(rule: Any, group: Any) -> dict[str, Any]:
    """Return the Neutron representation of `rule`, a rule of `group`."""
    remote = rule.remote_profile[0] if rule.remote_profile else None
    prefix = rule.remote_prefix[0] if rule.remote_prefix else None
    return {
        "id": str(rule.uuid),
        "security_group_id": str(group.uuid),
        "direction": rule.direction,
        "ethertype": rule.ethertype,
        "protocol": rule.protocol[0] if rule.protocol else None,
        "port_range_min": rule.port_range_min[0] if rule.port_range_min else None,
        "port_range_max": rule.port_range_max[0] if rule.port_range_max else None,
        "remote_ip_prefix": prefix,
        "normalized_cidr": prefix,
        "remote_group_id": str(remote.uuid) if remote is not None else None,
        "remote_address_group_id": None,
        "description": ext(rule, "description"),
        "belongs_to_default_sg": flag(group, "default"),
        "revision_number": int(group.revision),
        **tenant_api(group.tenant),
    }


def _rule_key(rule: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(rule[k]) for k in ("direction", "ethertype", "protocol", "remote_ip_prefix"))


class SecurityGroups(NeutronResource):
    """`/v2.0/security-groups`."""

    collection = "security_groups"
    member = "security_group"
    table = "Security_Profile"
    create_model = SecurityGroupBody
    update_model = SecurityGroupBody
    not_found = errors.SecurityGroupNotFound

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the group with its rules."""
        rules = sorted((rule_api(r, row) for r in row.rules), key=_rule_key)
        return {
            "id": str(row.uuid),
            "name": row.name,
            "description": row.description,
            "stateful": row.stateful,
            "shared": False,
            "security_group_rules": rules,
            "tags": sorted(row.tags),
            "revision_number": row.revision,
            **tenant_api(row.tenant),
        }

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Create a group with the two egress rules (and the project's default group first)."""
        tenant = owner(ctx, body)
        ensure_default_group(view, tenant)
        if body.name == DEFAULT_NAME:
            raise errors.Conflict(field="name", detail="Default security group already exists.")
        group = _new_group(view, tenant, body.name or "", body.description or "", default=False)
        view.update(group, stateful=body.stateful is not False, tags=list(body.tags or []))
        return group

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Rename, describe, retag; the default group keeps its name."""
        check_owner_unchanged(body, row)
        if flag(row, "default") and given(body, "name") and body.name != DEFAULT_NAME:
            raise errors.SecurityGroupCannotUpdateDefault()
        if not flag(row, "default") and body.name == DEFAULT_NAME:
            raise errors.Conflict(field="name", detail="Default security group already exists.")
        changes: dict[str, Any] = {}
        for name in ("name", "description", "stateful"):
            if given(body, name) and getattr(body, name) is not None:
                changes[name] = getattr(body, name)
        if given(body, "tags"):
            changes["tags"] = list(body.tags or [])
        bump(view, row, **changes)

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Delete the group and other groups' rules naming it; refuse while ports use it."""
        if flag(row, "default") and not ctx.is_admin:
            raise errors.SecurityGroupCannotRemoveDefault()
        ports = [p for p in view.rows("Logical_Switch_Port") if row in p.security_profiles]
        if ports:
            raise errors.SecurityGroupInUse(
                id=str(row.uuid), users=", ".join(crud.describe("port", ports))
            )
        for other in view.rows(self.table):
            if other.uuid == row.uuid:
                continue
            kept = [r for r in other.rules if row not in r.remote_profile]
            if len(kept) != len(other.rules):
                bump(view, other, rules=kept)
        view.delete(row)

    def prepare(self, store: Store, ctx: Context, query: Query) -> None:
        """Create the default group of the project the list is for (as Neutron does)."""
        tenant = ctx.tenant
        if tenant is None:
            named = set(query.get("project_id", [])) | set(query.get("tenant_id", []))
            tenant = next(iter(named)) if len(named) == 1 else None
        if tenant is None or store.read(lambda view: default_group(view, tenant) is not None):
            return
        store.write(lambda view: ensure_default_group(view, tenant))


class SecurityGroupRules(NeutronResource):
    """`/v2.0/security-group-rules`."""

    collection = "security_group_rules"
    member = "security_group_rule"
    table = "Security_Rule"
    create_model = RuleBody
    update_model = RuleUpdateBody
    not_found = errors.SecurityGroupRuleNotFound

    def visible(self, ctx: Context, view: ReadView, row: Any) -> bool:
        """A rule is visible with its group."""
        group = group_of_rule(view, row)
        return group is not None and (ctx.is_admin or group.tenant == ctx.tenant)

    def rows(self, view: ReadView) -> Iterable[Any]:
        """The rules of every group (a rule outside any group is being deleted)."""
        for group in view.rows("Security_Profile"):
            yield from group.rules

    def represent(self, view: ReadView, ctx: Context) -> list[dict[str, Any]]:
        """Return every visible rule, walking the groups once."""
        return [
            rule_api(rule, group)
            for group in view.rows("Security_Profile")
            if ctx.is_admin or group.tenant == ctx.tenant
            for rule in group.rules
        ]

    def revision(self, row: Any) -> int:
        """Rules have no revision of their own (If-Match compares 0)."""
        return 0

    def project(self, view: ReadView, row: Any) -> str:
        """A rule belongs to its group's project."""
        group = group_of_rule(view, row)
        return str(group.tenant) if group is not None else ""

    def to_api(self, view: ReadView, row: Any) -> dict[str, Any]:
        """Return the rule."""
        group = group_of_rule(view, row)
        if group is None:  # only while its group is being deleted
            raise errors.SecurityGroupRuleNotFound(id=str(row.uuid))
        return rule_api(row, group)

    def create(self, view: WriteView, ctx: Context, body: Any) -> Any:
        """Validate the rule (natively), refuse a duplicate, add it to its group."""
        require(body, "security_group_id", "direction")
        group = lookup(view, SECURITY_GROUPS, ctx, body.security_group_id)
        owner(ctx, body, default=group.tenant)
        protocol = body.protocol
        if isinstance(protocol, int):
            protocol = str(protocol)
        if protocol is not None and protocol.lower() in ("any", ""):
            protocol = None
        prefix = body.remote_ip_prefix
        if prefix is not None:
            try:
                if "%" in prefix:
                    raise ValueError(prefix)
                prefix = str(ipaddress.ip_network(prefix, strict=False))
            except ValueError:
                raise errors.BadRequest(
                    field="remote_ip_prefix",
                    detail=f"Invalid input for remote_ip_prefix. Reason: '{prefix}' is not a "
                    "valid IP prefix.",
                ) from None
        native = crud.validate(
            _RULES,
            {
                "direction": body.direction,
                "ethertype": body.ethertype,
                "protocol": protocol,
                "port_range_min": body.port_range_min,
                "port_range_max": body.port_range_max,
                "remote_prefix": prefix,
                "remote_profile_id": body.remote_group_id,
            },
        )
        try:
            columns = rule_columns(view, crud.ADMIN, native, "security_group_rule", group.tenant)
        except native_errors.MissingReference:
            raise errors.SecurityGroupNotFound(id=body.remote_group_id) from None
        for existing in group.rules:
            if all(getattr(existing, k) == v for k, v in columns.items()):
                raise errors.SecurityGroupRuleExists(rule_id=str(existing.uuid))
        rule = _insert_rule(view, columns, body.description or "")
        bump(view, group, rules=[*group.rules, rule])
        return rule

    def update(self, view: WriteView, ctx: Context, row: Any, body: Any) -> None:
        """Change the rule's description (its only changeable attribute)."""
        if given(body, "description"):
            view.update(row, external_ids=merged_ids(row, description=body.description or None))
        group = group_of_rule(view, row)
        if group is not None:
            bump(view, group)

    def delete(self, view: WriteView, ctx: Context, row: Any) -> None:
        """Remove the rule from its group (the row goes with it)."""
        group = group_of_rule(view, row)
        if group is not None:
            bump(view, group, rules=[r for r in group.rules if r.uuid != row.uuid])


def security_group_rows(view: ReadView, ctx: Context, ids: list[str], tenant: str) -> list[Any]:
    """Resolve a port's `security_groups`: each must be a group of the port's project.

    Raises:
        errors.SecurityGroupNotFound: an unknown group, or one of another project.
    """
    rows = []
    for ident in dict.fromkeys(ids):
        row = lookup(view, SECURITY_GROUPS, ctx, ident)
        if row.tenant != tenant:
            raise errors.SecurityGroupNotFound(id=ident)
        rows.append(row)
    return rows


SECURITY_GROUPS = SecurityGroups()
SECURITY_GROUP_RULES = SecurityGroupRules()
