"""Bearer-token authentication: one admin token and per-tenant tokens, set by the operator.

The daemon takes the tokens from a file or the environment, so none need appear on its
command line (where `ps` shows it): `admin_token` picks the one source of the admin token,
`parse_tenant_tokens` reads `TENANT=TOKEN` lines.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
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


#: The environment variable the daemon reads the admin token from.
ADMIN_TOKEN_ENV = "LOOM_ADMIN_TOKEN"


class TokenSourceError(ValueError):
    """The tokens cannot be taken from what the operator gave (the message says why)."""


def admin_token(
    *, flag: str | None, file_text: str | None, file_name: str | None, env: Mapping[str, str]
) -> str:
    """Return the admin token from exactly one of its sources.

    Args:
        flag: the value of `--admin-token`, or None.
        file_text: the contents of the `--admin-token-file`, or None without one.
        file_name: that file's name (for messages).
        env: the environment (`LOOM_ADMIN_TOKEN`; unset or empty means not given).

    Returns:
        The token (a file's surrounding whitespace and final newline stripped).

    Raises:
        TokenSourceError: no source, more than one, or an empty token.
    """
    given: list[tuple[str, str]] = []
    if flag is not None:
        given.append(("--admin-token", flag))
    if file_text is not None:
        given.append((f"--admin-token-file {file_name}", file_text.strip()))
    if env.get(ADMIN_TOKEN_ENV):
        given.append((ADMIN_TOKEN_ENV, env[ADMIN_TOKEN_ENV]))
    if not given:
        raise TokenSourceError(
            f"no admin token: give --admin-token-file PATH (or set {ADMIN_TOKEN_ENV})"
        )
    if len(given) > 1:
        names = " and ".join(name for name, _ in given)
        raise TokenSourceError(f"the admin token is given more than once ({names}): give one")
    name, token = given[0]
    if not token:
        raise TokenSourceError(f"the admin token from {name} is empty")
    return token


def parse_tenant_tokens(text: str, source: str) -> list[tuple[str, str]]:
    """Return the (tenant, token) pairs of a tenant tokens file.

    One `TENANT=TOKEN` per line; blank lines and lines starting with `#` are skipped;
    spaces around the tenant and the token are stripped.

    Raises:
        TokenSourceError: a line of another shape, naming `source` and the line number.
    """
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        tenant, sep, token = line.partition("=")
        if not sep or not tenant.strip() or not token.strip():
            raise TokenSourceError(f"{source}:{number}: expected TENANT=TOKEN")
        pairs.append((tenant.strip(), token.strip()))
    return pairs


def tokens_of(admin: str, tenant_pairs: Sequence[tuple[str, str]]) -> Tokens:
    """Return the `Tokens` of an admin token and (tenant, token) pairs.

    Raises:
        TokenSourceError: a tenant token equal to the admin token, or one token given to
            two tenants.
    """
    tenants: dict[str, str] = {}
    for tenant, token in tenant_pairs:
        if token == admin:
            raise TokenSourceError(f"tenant {tenant}'s token is the admin token")
        if tenants.get(token, tenant) != tenant:
            raise TokenSourceError(f"tenants {tenants[token]} and {tenant} share a token")
        tenants[token] = tenant
    return Tokens(admin=admin, tenants=tenants)
