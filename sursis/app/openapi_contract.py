"""Every error an operation can answer, documented in the OpenAPI document as problem+json.

Litestar documents each operation's success and a generic 400 the service never sends. The
answers an operation can give follow from its shape, the same way the service produces them:
a key is checked (401, 403, 429) and the database can be unreachable (503) on every `/v1`
route; a path id can be unknown (404); parameters and bodies are validated (422); a body can be
too large (413) or not JSON (415); a change can conflict with stored state (409). The `code`
values come from the one table that maps errors to statuses (`sursis.app.problems`), so a new
error or a new route is documented without a list to keep in step.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Litestar, Request, Router
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    Reference,
    RequestBody,
    Schema,
)
from litestar.openapi.spec.enums import OpenAPIType
from litestar.routes import HTTPRoute
from pydantic import BaseModel

from sursis.app.problems import CODE_BY_STATUS, PROBLEM
from sursis.domain.errors import ServiceError
from sursis.infra.agents.declarations import DeclaredToolCatalog

PROBLEM_COMPONENT = "Problem"
REQUEST_MODEL = "sursis.request_model"
"""A handler's `opt` key: `module:Name` of the pydantic model the handler validates its body with
itself (a body read as a JSON object, so the model's module loads at first use, not at start-up)."""
SLACK_SIGNATURE_SCHEME = "SlackSignature"
"""The security scheme of the routes Slack calls: its request signature, not an API key."""
DESCRIPTIONS = {
    401: "No key, or a key that is unknown or revoked (Slack's routes: a bad or stale signature)",
    403: "The key's role may not do this",
    404: "No such object in the key's workspace",
    409: "The change conflicts with the stored state",
    413: "The body is larger than the limit",
    415: "The body is not application/json",
    422: "A parameter or the body is not valid",
    429: "Too many requests with this key; retry after `Retry-After` seconds",
    503: "The database is not reachable; try again shortly",
}
EXTRA_CODES = {503: ("database_unavailable",)}


def codes_for(status: int) -> list[str]:
    """Every `code` a problem with this status can carry: the mapped errors' and those of their
    subclasses (declared anywhere, e.g. `world_exists`), each under the status it maps to."""
    codes = {error.code for error in _error_types() if _status_of(error) == status}
    codes.update(EXTRA_CODES.get(status, ()))
    if status in CODE_BY_STATUS:
        codes.add(CODE_BY_STATUS[status])
    return sorted(codes)


def _error_types() -> list[type[ServiceError]]:
    """Every error class under one that names its own status (the base's 400 is for errors no
    request raises: start-up and command-line refusals)."""
    found: list[type[ServiceError]] = []
    level = [error for error in ServiceError.__subclasses__() if "status" in vars(error)]
    while level:
        error = level.pop()
        if error not in found:
            found.append(error)
            level.extend(error.__subclasses__())
    return found


def _status_of(error: type[ServiceError]) -> int:
    """The status `problems.status_for` gives an error of this type."""
    return error.status


def problem_schema() -> Schema:
    return Schema(
        type=OpenAPIType.OBJECT,
        description="An RFC 9457 problem document; `code` says what happened, for programs.",
        required=["type", "title", "status", "code", "detail"],
        properties={
            "type": Schema(type=OpenAPIType.STRING),
            "title": Schema(type=OpenAPIType.STRING),
            "status": Schema(type=OpenAPIType.INTEGER),
            "code": Schema(type=OpenAPIType.STRING),
            "detail": Schema(type=OpenAPIType.STRING),
            "errors": Schema(
                type=OpenAPIType.ARRAY,
                description="Field errors of a 422: where (`loc`) and what (`msg`)",
                items=Schema(
                    type=OpenAPIType.OBJECT,
                    required=["loc", "msg"],
                    properties={
                        "loc": Schema(type=OpenAPIType.ARRAY, items=Schema(type=OpenAPIType.STRING)),
                        "msg": Schema(type=OpenAPIType.STRING),
                    },
                ),
            ),
        },
    )


OBJECT_QUERY_PARAMETERS = {"version"}
"""Query parameters that name a stored object (`GET /v1/policies?version=N`): it can be unknown (404)."""


def statuses_of(method: str, operation: Operation) -> list[int]:
    """The error statuses an operation of this shape can answer."""
    locations = {getattr(p, "param_in", None) for p in operation.parameters or []}
    statuses: set[int] = set()
    if operation.security and all(SLACK_SIGNATURE_SCHEME in s for s in operation.security):
        # Signed by Slack: a bad signature (401), a body that is not what Slack sends (422).
        statuses.update((401, 413, 422, 503))
    elif operation.security:
        statuses.update((401, 403, 429, 503))
        if method in ("post", "put", "patch", "delete"):
            statuses.add(409)
    names = {
        getattr(p, "name", None)
        for p in operation.parameters or []
        if getattr(p, "param_in", None) == "query"
    }
    if "path" in locations or names & OBJECT_QUERY_PARAMETERS:
        statuses.add(404)
    if locations or operation.request_body is not None:
        statuses.add(422)
    if operation.request_body is not None:
        statuses.update((413, 415))
    return sorted(statuses)


def status_problem_schema(status: int) -> Schema:
    """The problem of one status: `Problem` with the `code` values that status can carry."""
    return Schema(
        all_of=[
            Reference(ref=f"#/components/schemas/{PROBLEM_COMPONENT}"),
            Schema(
                type=OpenAPIType.OBJECT,
                properties={"code": Schema(type=OpenAPIType.STRING, enum=codes_for(status))},
            ),
        ]
    )


def problem_response(status: int) -> OpenAPIResponse:
    """A response referring to the status's own component (`Problem404`), so a generated client
    has one type per status rather than one per operation and status."""
    return OpenAPIResponse(
        description=f"{DESCRIPTIONS.get(status, 'Error')} (`code`: {', '.join(codes_for(status))})",
        content={
            PROBLEM: OpenAPIMediaType(
                schema=Reference(ref=f"#/components/schemas/{PROBLEM_COMPONENT}{status}")
            )
        },
    )


def document_problems(document: OpenAPI) -> None:
    """Replace the generic 400s with the problem responses each operation can give."""
    components = document.components
    schemas = dict(components.schemas or {})
    schemas[PROBLEM_COMPONENT] = problem_schema()
    components.schemas = schemas
    for path_item in (document.paths or {}).values():
        for method in ("get", "post", "put", "patch", "delete"):
            operation = getattr(path_item, method, None)
            if not isinstance(operation, Operation):
                continue
            responses = dict(operation.responses or {})
            responses.pop("400", None)
            for status in statuses_of(method, operation):
                responses.setdefault(str(status), problem_response(status))
                schemas.setdefault(f"{PROBLEM_COMPONENT}{status}", status_problem_schema(status))
            operation.responses = responses
    components.schemas = schemas


def install(app: Litestar, catalog: DeclaredToolCatalog) -> None:
    """Document the problems, the request models, and the agents and gated tools of this
    deployment's catalog in the app's document (Litestar builds it here if it has not yet)."""
    document = app.openapi_schema
    document_problems(document)
    document_request_models(app, document)
    document_catalog(document, catalog)


def schema_router(path: str, first: Callable[[Request[Any, Any, Any]], Awaitable[Any]]) -> Router:
    """The router Litestar mounts its schema routes on (`/schema`, `/schema/openapi.json`, the
    Swagger page). Before the first of them answers, the document is built and documented
    (`install`): built at its first request rather than at start-up, so a process that never serves
    it does not hold it (about 4 MiB). `first` is the app's own before-request hook, which a
    router's hook would otherwise replace."""
    documented: list[bool] = []

    async def document_once(request: Request[Any, Any, Any]) -> Any:
        if not documented:
            install(request.app, request.app.state.container.catalog)
            documented.append(True)
        return await first(request)

    return Router(path, route_handlers=[], include_in_schema=False, before_request=document_once)


def declared_model(handler: HTTPRouteHandler) -> type[BaseModel] | None:
    """The model named in the handler's `opt` under `REQUEST_MODEL`, imported now."""
    reference = handler.opt.get(REQUEST_MODEL)
    if not isinstance(reference, str):
        return None
    module, _, name = reference.partition(":")
    model = getattr(importlib.import_module(module), name)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def request_models(app: Litestar) -> list[type[BaseModel]]:
    """The pydantic models of every handler's `data` (request body), declared or named in `opt`."""
    found: dict[str, type[BaseModel]] = {}
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            field = handler.parsed_fn_signature.parameters.get("data")
            model = field.annotation if field is not None else None
            if isinstance(model, type) and issubclass(model, BaseModel):
                found[model.__name__] = model
            elif (named := declared_model(handler)) is not None:
                found[named.__name__] = named
    return list(found.values())


def document_request_models(app: Litestar, document: OpenAPI) -> None:
    """Request bodies documented by the JSON schema pydantic validates them with: one place for the
    check and the document (`additionalProperties: false`, patterns, lengths, enums). A body a
    handler validates itself (`REQUEST_MODEL`) refers to its model's schema too."""
    schemas: dict[str, Any] = dict(document.components.schemas or {})
    for model in request_models(app):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode="validation")
        for name, definition in schema.pop("$defs", {}).items():
            schemas[name] = definition
        schemas[model.__name__] = schema
    document.components.schemas = schemas
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or document.paths is None:
            continue
        for handler in route.route_handlers:
            if (named := declared_model(handler)) is None:
                continue
            item = document.paths.get(route.path_format)
            for method in handler.http_methods:
                operation = getattr(item, method.lower(), None)
                body = operation.request_body if isinstance(operation, Operation) else None
                if isinstance(body, RequestBody):
                    for media in body.content.values():
                        media.schema = Reference(ref=f"#/components/schemas/{named.__name__}")


def document_catalog(document: OpenAPI, catalog: DeclaredToolCatalog) -> None:
    """`agent` and a pre-approval's `tool_name` as enums of what is configured: the service checks
    both against the same catalog (`unknown agent`, `no agent declares a gated tool`)."""
    schemas: dict[str, Any] = dict(document.components.schemas or {})
    for model, field, names in (
        ("CreateConversation", "agent", catalog.agent_names()),
        ("CreateAuthorization", "tool_name", catalog.gated_tool_names()),
    ):
        schema = schemas.get(model)
        if isinstance(schema, dict) and field in schema.get("properties", {}):
            schema["properties"][field]["enum"] = names
