"""Errors by meaning, mapped to problem+json responses in this one place."""

from __future__ import annotations

from typing import Any

import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from abeyance.app.schemas import jsonable
from abeyance.domain import errors as e

log = structlog.get_logger("abeyance.http")

PROBLEM = "application/problem+json"

STATUS_BY_ERROR: list[tuple[type[e.ServiceError], int]] = [
    (e.NotFound, 404),
    (e.Stale, 409),
    (e.RunActive, 409),
    (e.ArgsChanged, 409),
    (e.Conflict, 409),
    (e.InvalidTransition, 409),
    (e.InvalidDecision, 422),
    (e.ValidationFailed, 422),
    (e.Forbidden, 403),
    (e.Unauthenticated, 401),
]

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
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(exc, error_type):
            return status
    return 400


RESERVED = frozenset({"type", "title", "status", "code", "detail"})


def problem(
    status: int, code: str, detail: str, extra: dict[str, Any] | None = None
) -> Response[dict[str, Any]]:
    """An RFC 9457 problem document with a machine-readable `code` and any extra members."""
    body: dict[str, Any] = {
        "type": f"https://abeyance.dev/problems/{code}",
        "title": code.replace("_", " "),
        "status": status,
        "code": code,
        "detail": detail,
    }
    extra = extra or {}
    body.update({k: v for k, v in extra.items() if k not in RESERVED})
    headers = {"Retry-After": str(extra["retry_after"])} if "retry_after" in extra else {}
    return Response(content=body, status_code=status, media_type=PROBLEM, headers=headers)


def service_error_handler(_: Request[Any, Any, Any], exc: e.ServiceError) -> Response[dict[str, Any]]:
    return problem(status_for(exc), exc.code, exc.message, jsonable(exc.extra))


def http_error_handler(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        errors = exc.extra if isinstance(exc.extra, list) else []
        return problem(422, "validation_failed", "the request is not valid", {"errors": errors})
    extra: dict[str, Any] = {}
    if status == 429 and exc.headers and "retry-after" in {k.lower() for k in exc.headers}:
        extra["retry_after"] = next(v for k, v in exc.headers.items() if k.lower() == "retry-after")
    return problem(status, CODE_BY_STATUS.get(status, "http_error"), str(exc.detail), extra)


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.exception("http.unhandled_error", path=request.url.path)
    return problem(500, "internal_error", "an unexpected error happened; it was logged")
