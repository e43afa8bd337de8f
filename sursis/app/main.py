"""`create_app(settings)`: the Litestar application, wired from one Settings object."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import sqlalchemy as sa
from litestar import Litestar, Request, Response, Router, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.exceptions import HTTPException, SerializationException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ExceptionHandlersMap
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sursis.app import openapi_contract, problems
from sursis.app.auth import SECURITY_SCHEME, provide_principal, v1_middleware
from sursis.app.container import Container
from sursis.app.http_methods import answer_options
from sursis.app.logging import quiet_unless_configured
from sursis.app.observability import bind_path_ids, http_telemetry, metrics
from sursis.app.oidc import PeopleSignIn, StoredPersonSessions
from sursis.app.oidc_provider import IdentityProvider, OidcConfig
from sursis.app.openapi_contract import SLACK_SIGNATURE_SCHEME
from sursis.app.routes.channels_slack import slack_router
from sursis.app.routes.inbox import inbox_router
from sursis.app.routes.provide import services
from sursis.app.routes.signin import sign_in_router
from sursis.app.routes.v1 import route_handlers
from sursis.app.schemas import refuse_nul_characters
from sursis.app.service import Service
from sursis.app.settings import Settings
from sursis.app.wiring.telemetry import TelemetryParts, wire_telemetry
from sursis.domain.errors import ServiceError
from sursis.infra.agents.declarations import DeclaredToolCatalog
from sursis.infra.db.encryption_state import EncryptionState
from sursis.infra.db.engine import is_sqlite
from sursis.infra.db.migrations import upgrade_async
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.telemetry import Telemetry


class ApiRequest(Request[Any, Any, Any]):
    """A request whose JSON body, however deeply nested or badly encoded, fails as bad input and never
    as a crash; a body declared as anything but JSON is refused with 415."""

    async def json(self) -> Any:
        media_type, _ = self.content_type
        if media_type and media_type != "application/json" and not media_type.endswith("+json"):
            raise HTTPException(
                status_code=415,
                detail=f"the body must be application/json, not {media_type[:100]}",
            )
        try:
            value = await super().json()
        except RecursionError:
            raise SerializationException("JSON is nested too deeply") from None
        except UnicodeDecodeError:
            raise SerializationException("the body is not valid UTF-8") from None
        return refuse_nul_characters(value)


async def before_request(request: Request[Any, Any, Any]) -> Response[None] | None:
    await bind_path_ids(request)
    return answer_options(request)


def print_mcp_banner(catalog: DeclaredToolCatalog) -> None:
    """One start-up line per MCP server that cannot be reached, once the servers were tried."""
    for line in catalog.unavailable_servers():
        print(f"mcp: unavailable {line} (only its tools fail; see /readyz)", flush=True)


@get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@get("/readyz", tags=["health"], dependencies=services("uow", "encryption", "catalog"))
async def readyz(
    uow: NamedDependency[SqlUnitOfWorkFactory],
    encryption: NamedDependency[EncryptionState | None],
    catalog: NamedDependency[DeclaredToolCatalog],
) -> dict[str, Any]:
    """The database answers; whether stored content is encrypted, and under which key id (an id
    names a key, it is no secret: every stored value carries it). Where a served agent has MCP
    servers, `mcp`: `degraded` while one of them cannot be reached (named in `mcp_unavailable`,
    `agent/server: why`); the process stays ready, as only that server's tools fail."""
    async with uow() as work:
        await work.session.execute(sa.text("SELECT 1"))
    on = encryption is not None and encryption.on
    ready: dict[str, Any] = {
        "status": "ready",
        "encryption": "on" if on else "off",
        "active_key_id": encryption.active_key_id if encryption is not None else None,
    }
    if catalog.serves_mcp():
        unavailable = catalog.unavailable_servers()
        ready.update(mcp="degraded" if unavailable else "ok", mcp_unavailable=unavailable)
    return ready


def create_app(
    settings: Settings,
    *,
    service: Service | None = None,
    container: Container | None = None,
    telemetry: Telemetry | None = None,
) -> Litestar:
    """The app over a `Service`: the given one (or one over the given container), or one built from
    the settings in the lifespan. Telemetry (tracer and meter providers) is the service's, the given
    one, or built from the settings here; whoever builds it shuts it down.

    Like `Service.open`, an app whose host has not configured structlog logs through the standard
    `logging` module instead of structlog's default (tracebacks with their locals, on stdout)."""
    quiet_unless_configured()
    if service is None and container is not None:
        service = Service(container)
    # The service's telemetry, or the given one, stays its owner's to shut down.
    observed = wire_telemetry(
        settings.telemetry, service.container.telemetry if service is not None else telemetry
    )
    # Every /v1 controller sits behind the key middleware; health, metrics, the schema and the inbox
    # page (which holds no data: its script calls /v1 with the operator's key) stay open.
    v1 = Router(
        path="/",
        route_handlers=route_handlers(),
        middleware=v1_middleware(settings.rate_limit_per_minute, settings.events_rate_limit_per_minute),
        security=[{SECURITY_SCHEME: []}],
    )
    handlers: list[Any] = [healthz, readyz, metrics, v1, slack_router(), inbox_router()]
    oidc = OidcConfig.from_settings(settings)
    if oidc is not None:
        handlers.append(sign_in_router())
    return Litestar(
        route_handlers=handlers,
        state=State({"people": None}),
        lifespan=[serving(settings, service, observed, oidc)],
        middleware=[http_telemetry(observed.telemetry)],
        before_request=before_request,
        dependencies={"principal": Provide(provide_principal, sync_to_thread=False)},
        exception_handlers=exception_handlers(),
        openapi_config=openapi_config(),
        request_max_body_size=settings.max_body_bytes,
        request_class=ApiRequest,
        logging_config=None,
        debug=False,
    )


def serving(
    settings: Settings, service: Service | None, observed: TelemetryParts, oidc: OidcConfig | None
) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the service (the given one, or one built here from the settings through
    the composition root) started before the first request and closed after the last; people's
    sign-in (when `oidc` is configured) over the service's storage and provisioning rules."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        if settings.migrate_on_start and is_sqlite(settings.database_url):
            await upgrade_async(settings.database_url)
        built = service or Service.from_settings(settings, telemetry=observed.telemetry)
        app.state.service = built
        app.state.container = built.container
        if oidc is not None:
            sessions = StoredPersonSessions(built.container.uow)
            rules = built.container.provisioning.rules
            app.state.people = PeopleSignIn(IdentityProvider(oidc), sessions, rules)
        try:
            await built.start(run_worker=settings.run_worker)
        except BaseException:
            await built.close()  # refused at start (a keyring this database may not be used with)
            raise
        built.container.listen_for_key_changes()
        # The MCP servers' tools, for the catalog and decisions; the banner names those unavailable.
        built.container.catalog.discover_soon(report=print_mcp_banner)
        try:
            yield
        finally:
            await built.close()
            if observed.owns_telemetry:
                observed.telemetry.shutdown()

    return lifespan


def exception_handlers() -> ExceptionHandlersMap:
    """Errors by meaning, mapped to problem responses once (`sursis.app.problems`)."""
    return {
        ServiceError: problems.service_error_handler,
        HTTPException: problems.http_error_handler,
        DBAPIError: problems.database_error_handler,
        PoolTimeout: problems.database_error_handler,
        OSError: problems.database_error_handler,
        Exception: problems.internal_error_handler,
    }


def openapi_config() -> OpenAPIConfig:
    """The schema at /schema, with the two ways a request proves who sent it."""
    return OpenAPIConfig(
        title="Sursis",
        version="0.1.0",
        description="Agents whose tool calls wait, durably, for a human.",
        path="/schema",
        openapi_router=openapi_contract.schema_router("/schema", before_request),
        render_plugins=[SwaggerRenderPlugin()],
        components=Components(
            security_schemes={
                SECURITY_SCHEME: SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="An API key made by `sursis keys create`",
                ),
                SLACK_SIGNATURE_SCHEME: SecurityScheme(
                    type="apiKey",
                    name="X-Slack-Signature",
                    security_scheme_in="header",
                    description="Slack's request signature (with `X-Slack-Request-Timestamp`); "
                    "see docs/channels.md",
                ),
            }
        ),
    )
