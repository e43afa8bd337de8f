"""Who is calling: `Authorization: Bearer <key>` on every `/v1` route, resolved to a `Principal`.

Authentication happens here, once, in a middleware on the router that holds the `/v1`
controllers; what a principal may do is decided in the domain (`abeyance.domain.access`).
"""

from __future__ import annotations

from typing import Any

import structlog
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult, DefineMiddleware
from litestar.middleware.rate_limit import RateLimitConfig
from opentelemetry import trace

from abeyance.domain.errors import Unauthenticated
from abeyance.domain.keys import hash_key
from abeyance.domain.records import Principal

SECURITY_SCHEME = "ApiKey"
MISSING = "send an API key: `Authorization: Bearer <key>`"


def bearer_token(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer <key>` header, or None."""
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class ApiKeyAuthentication(AbstractAuthenticationMiddleware):
    """Resolves the bearer key to a `Principal` (`request.user`); 401 problem otherwise."""

    async def authenticate_request(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> AuthenticationResult:
        token = bearer_token(connection.headers.get("authorization"))
        if token is None:
            raise Unauthenticated(MISSING)
        principal: Principal = await connection.app.state.container.keys.authenticate(token)
        # Every log line of the request (and its span) says which key made it.
        structlog.contextvars.bind_contextvars(principal_id=principal.id)
        trace.get_current_span().set_attribute("abeyance.principal_id", principal.id)
        return AuthenticationResult(user=principal, auth=None)


def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    user = request.scope.get("user")
    if not isinstance(user, Principal):
        raise Unauthenticated(MISSING)
    return user


def rate_limit_key(request: Request[Any, Any, Any]) -> str:
    """Limits count per API key (by its hash, before any database lookup); per address without one."""
    token = bearer_token(request.headers.get("authorization"))
    if token is not None:
        return "key:" + hash_key(token)
    return "addr:" + (request.client.host if request.client else "unknown")


def v1_middleware(rate_limit_per_minute: int) -> list[DefineMiddleware]:
    """Outermost first: the rate limit answers 429 before the key costs a database lookup."""
    middleware = [DefineMiddleware(ApiKeyAuthentication)]
    if rate_limit_per_minute > 0:
        limit = RateLimitConfig(
            rate_limit=("minute", rate_limit_per_minute), identifier_for_request=rate_limit_key
        )
        middleware.insert(0, limit.middleware)
    return middleware
