"""HTTP observability: the request span (Litestar's OpenTelemetry integration), a request id and
one canonical log line per request, the ids of the request's objects bound for every log line,
and the Prometheus `/metrics` endpoint."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from litestar import Request, Response, get
from litestar.di import NamedDependency
from litestar.enums import ScopeType
from litestar.middleware.base import DefineMiddleware
from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryInstrumentationMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace
from opentelemetry.semconv.attributes.http_attributes import HTTP_ROUTE

from sursis.app.routes.provide import service
from sursis.infra.telemetry import Telemetry

log = structlog.get_logger("sursis.http")

REQUEST_ID_HEADER = "x-request-id"
_ACCEPTED_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
PATH_IDS = ("conversation_id", "run_id", "correlation_id")


class CanonicalRequestLog:
    """ASGI app around the router: one `http.request` line per request, with its request id.

    It runs inside the request's server span, so the line (and every line logged while the
    request is handled) carries that span's trace id. The request id is taken from an incoming
    `X-Request-ID` when it looks sane, otherwise made up, and is echoed in the response.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        status = 500
        started = time.perf_counter()

        async def send_with_request_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ()), (REQUEST_ID_HEADER.encode(), request_id.encode())]
                message = {**message, "headers": headers}
            await send(message)

        # The handler binds more ids (see `bind_path_ids`); restore the caller's context afterwards.
        saved = structlog.contextvars.get_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        trace.get_current_span().set_attribute("sursis.request_id", request_id)
        try:
            await self.app(scope, receive, send_with_request_id)
        finally:
            duration_ms = round((time.perf_counter() - started) * 1000, 3)
            (log.error if status >= 500 else log.info)(
                "http.request",
                method=scope.get("method"),
                path=scope.get("path"),
                route=scope.get("path_template"),
                status=status,
                duration_ms=duration_ms,
            )
            structlog.contextvars.clear_contextvars()
            structlog.contextvars.bind_contextvars(**saved)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name.decode("latin-1").lower() == REQUEST_ID_HEADER:
            candidate = value.decode("latin-1")
            if _ACCEPTED_REQUEST_ID.match(candidate):
                return candidate
    return uuid.uuid4().hex


class TracedRequests(OpenTelemetryInstrumentationMiddleware):
    """Litestar's OpenTelemetry middleware, with the canonical request log inside its span."""

    def __init__(self, app: ASGIApp, config: OpenTelemetryConfig) -> None:
        super().__init__(app=CanonicalRequestLog(app), config=config)


def http_telemetry(telemetry: Telemetry) -> DefineMiddleware:
    """The request span for every HTTP request (Litestar turns this middleware into its
    OpenTelemetry plugin, placed outermost). `OTEL_PYTHON_EXCLUDED_URLS` (or
    `OTEL_PYTHON_SURSIS_EXCLUDED_URLS`) lists paths not to trace, e.g. `healthz,readyz,metrics`;
    they are still logged."""
    config = OpenTelemetryConfig(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        middleware_class=TracedRequests,
        exclude_urls_env_key="SURSIS",
        exclude_spans=["receive", "send"],
    )
    return config.middleware


async def bind_path_ids(request: Request[Any, Any, Any]) -> None:
    """Once the route is known: every log line of a request about a conversation, run or pending
    call carries its id, and the request span is named after the route, not the raw path."""
    span = trace.get_current_span()
    template = request.scope.get("path_template")
    if template:
        span.update_name(f"{request.method} {template}")
        span.set_attribute(HTTP_ROUTE, template)
    ids = {name: str(request.path_params[name]) for name in PATH_IDS if name in request.path_params}
    if ids:
        structlog.contextvars.bind_contextvars(**ids)
        span.set_attributes({f"sursis.{k}": v for k, v in ids.items()})


@get(
    "/metrics",
    tags=["health"],
    include_in_schema=False,
    dependencies={"refresh_backlog": service("refresh_backlog"), "telemetry": service("telemetry")},
)
async def metrics(
    request: Request[Any, Any, Any],
    refresh_backlog: NamedDependency[Callable[[], Awaitable[None]]],
    telemetry: NamedDependency[Telemetry],
) -> Response[bytes]:
    """The service's metrics in the Prometheus text format (OpenMetrics when the scraper asks)."""
    await refresh_backlog()
    body, content_type = telemetry.prometheus_exposition(request.headers.get("accept"))
    # Litestar appends the charset itself.
    return Response(body, media_type=content_type.replace("; charset=utf-8", ""))
