"""Errors by meaning, mapped to problem+json responses in this one place."""

from __future__ import annotations

from typing import Any

import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from sqlalchemy.exc import DBAPIError

from sursis.app.schemas import jsonable
from sursis.domain import errors as e
from sursis.infra.db.errors import DatabaseFailure, database_failure

log = structlog.get_logger("sursis.http")

PROBLEM = "application/problem+json"

CODE_BY_STATUS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "validation_failed",
    429: "rate_limited",
    503: "unavailable",
}


def status_for(exc: e.ServiceError) -> int:
    """The HTTP status of a service error: its class says (`ServiceError.status`)."""
    return exc.status


RESERVED = frozenset({"type", "title", "status", "code", "detail"})

RETRY_UNAVAILABLE_SECONDS = 2
"""What a 503 asks the client to wait: a restart or a failover of the database takes seconds."""


def problem(
    status: int,
    code: str,
    detail: str,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, Any]]:
    """An RFC 9457 problem document with a machine-readable `code` and any extra members."""
    body: dict[str, Any] = {
        "type": f"https://sursis.dev/problems/{code}",
        "title": code.replace("_", " "),
        "status": status,
        "code": code,
        "detail": detail,
    }
    extra = extra or {}
    body.update({k: v for k, v in extra.items() if k not in RESERVED})
    headers = dict(headers or {})
    if "retry_after" in extra:
        headers["Retry-After"] = str(extra["retry_after"])
    elif status == 503:
        # Every 503 says when to come back (RFC 9110 §10.2.3).
        headers.setdefault("Retry-After", str(RETRY_UNAVAILABLE_SECONDS))
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="sursis"'
    return Response(content=body, status_code=status, media_type=PROBLEM, headers=headers)


def service_error_handler(_: Request[Any, Any, Any], exc: e.ServiceError) -> Response[dict[str, Any]]:
    return problem(status_for(exc), exc.code, exc.message, jsonable(exc.extra))


def http_error_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        errors = field_errors(exc.extra, _wire_names(request))
        return problem(422, "validation_failed", "the request is not valid", {"errors": errors})
    if status == 400 and isinstance(exc.__cause__, SerializationException):
        detail = str(exc.__cause__)
        return problem(
            422,
            "validation_failed",
            "the body is not valid JSON",
            {"errors": [{"loc": ["body"], "msg": detail}]},
        )
    extra: dict[str, Any] = {}
    headers: dict[str, str] = {}
    if status == 429:
        extra["retry_after"] = _retry_after(exc.headers or {})
    if status == 405:
        # RFC 9110: a 405 lists the methods the path does allow.
        allow = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow")
        if allow:
            headers["Allow"] = allow
    return problem(status, CODE_BY_STATUS.get(status, "http_error"), str(exc.detail), extra, headers)


def _wire_names(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The names parameters have on the wire where they differ from the handler's (`Last-Event-ID`
    for `last_event_id`, `state` for `rule_state`)."""
    try:
        parameters = request.route_handler.parsed_fn_signature.parameters
    except (AttributeError, KeyError):
        return {}
    names: dict[str, str] = {}
    for name, parameter in parameters.items():
        kwarg = parameter.kwarg_definition
        wire = getattr(kwarg, "header", None) or getattr(kwarg, "query", None) or getattr(kwarg, "name", None)
        if isinstance(wire, str) and wire != name:
            names[name] = wire
    return names


def field_errors(extra: Any, wire_names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Litestar's validation errors in the service's own shape: `{"loc": [...], "msg": ...}`.

    Body fields are located by their path (`["args", "event_id"]`), like the service's own
    errors; query, path and header parameters by source and the name sent (`["query", "limit"]`,
    `["header", "Last-Event-ID"]`).
    """
    wire_names = wire_names or {}
    errors: list[dict[str, Any]] = []
    for item in extra if isinstance(extra, list) else []:
        if not isinstance(item, dict):
            continue
        key, source = item.get("key"), item.get("source")
        message = str(item.get("message", "invalid"))
        if source in ("query", "path", "header", "cookie"):
            loc = [source, wire_names.get(str(key), str(key))]
        elif key in (None, "data"):
            loc, message = ["body"], ("a JSON object is required" if key == "data" else message)
        else:
            loc = str(key).split(".")
        errors.append({"loc": loc, "msg": message})
    return errors


def _retry_after(headers: dict[str, str]) -> int:
    """Seconds until the rate-limit window resets (Litestar sends it as `RateLimit-Reset`)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in ("retry-after", "ratelimit-reset"):
        if lowered.get(name, "").strip().isdigit():
            return max(1, int(lowered[name]))
    return 60


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.exception("http.unhandled_error", path=request.url.path)
    return problem(500, "internal_error", "an unexpected error happened; it was logged")


def database_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """503 only when the database is unreachable; a refused statement is the request's problem (409,
    422) or a bug (500)."""
    failure = database_failure(exc)
    if failure is DatabaseFailure.UNREACHABLE:
        log.warning("database.unavailable", error=str(exc)[:200], path=request.url.path)
        return problem(
            503,
            "database_unavailable",
            "the database is not reachable or has no free connection; try again shortly",
            {"retry_after": RETRY_UNAVAILABLE_SECONDS},
        )
    cause = type(exc.orig).__name__ if isinstance(exc, DBAPIError) else type(exc).__name__
    if failure is DatabaseFailure.CONFLICT:
        log.warning("database.conflict", error_class=cause, path=request.url.path)
        return problem(409, "conflict", "the change conflicts with stored data; reload and try again")
    if failure is DatabaseFailure.DATA:
        log.warning("database.data_refused", error_class=cause, path=request.url.path)
        return problem(
            422,
            "validation_failed",
            "a value in the request cannot be stored",
            {"errors": [{"loc": ["request"], "msg": "a value is out of range or not representable"}]},
        )
    return internal_error_handler(request, exc)
