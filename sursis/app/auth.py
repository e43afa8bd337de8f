"""Who is calling: `Authorization: Bearer <key>` on every `/v1` route, resolved to a `Principal`.

Authentication happens here, once, in a middleware on the router that holds the `/v1`
controllers; what a principal may do is decided in the domain (`sursis.domain.access`).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import structlog
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import TooManyRequestsException
from litestar.handlers import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult, DefineMiddleware
from litestar.middleware.rate_limit import RateLimitConfig
from litestar.types import ASGIApp, Guard
from opentelemetry import trace

from sursis.app.oidc import CSRF_HEADER, SESSION_COOKIE, CsrfRefused, PeopleSignIn
from sursis.domain.access import Permission
from sursis.domain.errors import Unauthenticated
from sursis.domain.identity.keys import KEY_PREFIX, hash_key
from sursis.domain.records import Principal

SECURITY_SCHEME = "ApiKey"
MISSING = "send an API key: `Authorization: Bearer <key>`"


def bearer_token(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer <key>` header, or None."""
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class FailedAttempts:
    """Authentication attempts per client address, in fixed one-minute windows in this process's memory.

    Every attempt with a key that has not authenticated recently counts against its address before
    the key is looked up, and is given back when the key turns out valid: a flood of made-up keys
    from one address gets 429 after `limit` of them and costs no more lookups until the window ends.
    Keys that did authenticate recently pass (and are looked up as always), so a flood from a shared
    address does not lock out the keys already in use there.
    """

    def __init__(
        self,
        limit: int,
        *,
        window_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_tracked: int = 10_000,
    ) -> None:
        self._limit = limit
        self._window = window_seconds
        self._clock = clock
        self._max_tracked = max_tracked
        self._windows: dict[str, tuple[float, int]] = {}
        self._verified: OrderedDict[str, None] = OrderedDict()

    def is_verified(self, key_hash: str) -> bool:
        return key_hash in self._verified

    def take(self, address: str) -> int | None:
        """Count one attempt from `address`; the seconds to wait instead when its window is used up."""
        now = self._clock()
        ends, count = self._windows.get(address, (0.0, 0))
        if ends <= now:
            self._prune(now)
            ends, count = now + self._window, 0
        if count >= self._limit:
            return max(1, math.ceil(ends - now))
        self._windows[address] = (ends, count + 1)
        return None

    def give_back(self, address: str) -> None:
        """Uncount an attempt that did not fail (the key was valid, or the lookup itself failed)."""
        ends, count = self._windows.get(address, (0.0, 0))
        if count > 0:
            self._windows[address] = (ends, count - 1)

    def remember(self, key_hash: str) -> None:
        """A key that authenticated passes an exhausted address from now on."""
        self._verified[key_hash] = None
        self._verified.move_to_end(key_hash)
        while len(self._verified) > self._max_tracked:
            self._verified.popitem(last=False)

    def forget(self, key_hash: str) -> None:
        self._verified.pop(key_hash, None)

    def _prune(self, now: float) -> None:
        if len(self._windows) < self._max_tracked:
            return
        for address in [a for a, (ends, _) in self._windows.items() if ends <= now]:
            del self._windows[address]
        while len(self._windows) >= self._max_tracked:
            del self._windows[next(iter(self._windows))]


def client_address(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    return connection.client.host if connection.client else "unknown"


class ApiKeyAuthentication(AbstractAuthenticationMiddleware):
    """Resolves the bearer key to a `Principal` (`request.user`); 401 problem otherwise, and 429 when
    the caller's address has used up its attempts (`FailedAttempts`)."""

    def __init__(self, app: ASGIApp, attempts: FailedAttempts | None = None) -> None:
        super().__init__(app)
        self._attempts = attempts

    async def authenticate_request(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> AuthenticationResult:
        token = bearer_token(connection.headers.get("authorization"))
        people = connection.app.state.get("people")
        if token is None and people is not None and SESSION_COOKIE in connection.cookies:
            principal = await person(connection, people)
        elif token is not None and people is not None and not token.startswith(KEY_PREFIX):
            principal = await people.bearer(token)
        elif self._attempts is None:
            principal = await self._lookup(connection, token)
        else:
            principal = await self._lookup_counted(connection, token, self._attempts)
        # Every log line of the request (and its span) says which key made it.
        structlog.contextvars.bind_contextvars(principal_id=principal.id)
        trace.get_current_span().set_attribute("sursis.principal_id", principal.id)
        return AuthenticationResult(user=principal, auth=None)

    @staticmethod
    async def _lookup(connection: ASGIConnection[Any, Any, Any, Any], token: str | None) -> Principal:
        if token is None:
            raise Unauthenticated(MISSING)
        principal: Principal = await connection.app.state.container.keys.authenticate(token)
        return principal

    async def _lookup_counted(
        self, connection: ASGIConnection[Any, Any, Any, Any], token: str | None, attempts: FailedAttempts
    ) -> Principal:
        key_hash = hash_key(token) if token is not None else None
        if key_hash is not None and attempts.is_verified(key_hash):
            try:
                return await self._lookup(connection, token)
            except Unauthenticated:
                attempts.forget(key_hash)
                raise
        address = client_address(connection)
        if (wait := attempts.take(address)) is not None:
            raise TooManyRequestsException(
                "too many failed authentication attempts from this address",
                headers={"Retry-After": str(wait)},
            )
        try:
            principal = await self._lookup(connection, token)
        except Unauthenticated:
            raise  # a failed attempt: it stays counted
        except BaseException:
            attempts.give_back(address)  # the lookup failed (the database is down), not the key
            raise
        attempts.give_back(address)
        if key_hash is not None:
            attempts.remember(key_hash)
        return principal


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


async def person(connection: ASGIConnection[Any, Any, Any, Any], people: PeopleSignIn) -> Principal:
    """The principal of a signed-in person's session cookie; a change (any method but GET, HEAD,
    OPTIONS) must also carry the session's CSRF token, which another site cannot read."""
    session = await people.session(connection.cookies.get(SESSION_COOKIE))
    method = connection.scope.get("method", "GET")
    if method not in SAFE_METHODS and connection.headers.get(CSRF_HEADER) != session.csrf_token:
        raise CsrfRefused("send the session's CSRF token in X-CSRF-Token")
    return session.principal


def provide_principal(request: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    user = request.scope.get("user")
    if not isinstance(user, Principal):
        raise Unauthenticated(MISSING)
    return user


def requires(permission: Permission) -> Guard:
    """A guard asking the role table before the body is read: a caller who may not act at all gets
    403 whatever it sent, not 422 about a body it may not send. The service asks again itself.

    A coroutine on purpose: Litestar runs a plain function guard in its thread pool, a thread hop
    on every request for a look-up in a table."""

    async def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        provide_principal(connection).require(permission)

    return guard


def rate_limit_key(request: Request[Any, Any, Any]) -> str:
    """Requests count per verified key (by its id); the authentication middleware, which runs first,
    limits attempts without a valid key per address."""
    user = request.scope.get("user")
    if isinstance(user, Principal):
        return "key:" + user.id
    return "addr:" + client_address(request)


INGEST = "platform_ingest"
"""Route option (`opt={INGEST: True}`) of the routes a platform posts bursts to (`POST /v1/events`):
they are counted by their own limit, not the per-key limit of the other requests."""


def ingest_rate_limit_key(request: Request[Any, Any, Any]) -> str:
    return "ingest:" + rate_limit_key(request)


async def is_ingest(request: Request[Any, Any, Any]) -> bool:
    return bool(request.route_handler.opt.get(INGEST))


def v1_middleware(rate_limit_per_minute: int, ingest_per_minute: int = 0) -> list[DefineMiddleware]:
    """Outermost first: authentication (which limits attempts per address before any key lookup),
    then the per-key rate limit of ordinary requests, then the per-key limit of ingestion routes."""
    attempts = FailedAttempts(rate_limit_per_minute) if rate_limit_per_minute > 0 else None
    middleware = [DefineMiddleware(ApiKeyAuthentication, attempts=attempts)]
    if rate_limit_per_minute > 0:
        limit = RateLimitConfig(
            rate_limit=("minute", rate_limit_per_minute),
            identifier_for_request=rate_limit_key,
            exclude_opt_key=INGEST,
        )
        middleware.append(limit.middleware)
    if ingest_per_minute > 0:
        ingest = RateLimitConfig(
            rate_limit=("minute", ingest_per_minute),
            identifier_for_request=ingest_rate_limit_key,
            check_throttle_handler=is_ingest,
        )
        middleware.append(ingest.middleware)
    return middleware
