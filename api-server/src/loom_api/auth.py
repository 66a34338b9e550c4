"""Bearer-token authentication: one admin token and per-tenant tokens, set by the operator."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from loom_api import errors
from loom_api.service.crud import ADMIN, Caller


@dataclass(frozen=True)
class Tokens:
    """The tokens the API accepts: `admin`, and `tenants` mapping token -> tenant."""

    admin: str
    tenants: Mapping[str, str] = field(default_factory=dict)

    def caller(self, token: str | None) -> Caller:
        """Return who `token` belongs to.

        Raises:
            errors.Unauthenticated: no token, or one that is not configured.
        """
        if not token:
            raise errors.Unauthenticated()
        if hmac.compare_digest(token.encode(), self.admin.encode()):
            return ADMIN
        for known, tenant in self.tenants.items():
            if hmac.compare_digest(token.encode(), known.encode()):
                return Caller(tenant=tenant)
        raise errors.Unauthenticated()


def bearer(authorization: str | None, x_auth_token: str | None) -> str | None:
    """Return the token of a request: `Authorization: Bearer T`, else `X-Auth-Token: T`."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        raise errors.Unauthenticated()
    return x_auth_token or None
