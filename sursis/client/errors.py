"""The service's problem+json answers as exceptions, one class per `code` a caller acts on."""

from __future__ import annotations

from typing import Any


class SursisError(Exception):
    """An error answer of the service: its HTTP `status`, problem `code`, `detail` and the whole
    problem document (`problem`, which holds extra members such as `errors` or `resolved_by`)."""

    def __init__(self, status: int, code: str, detail: str, problem: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.problem = problem or {}


class AuthenticationError(SursisError):
    """`unauthenticated`: no key, an unknown key or a revoked one."""


class ForbiddenError(SursisError):
    """`forbidden`: the key's role may not do this."""


class NotFoundError(SursisError):
    """`not_found` (also what another workspace's resources look like)."""


class StaleError(SursisError):
    """`stale`: the pending call was decided already; `problem` says by whom and when."""


class ConflictError(SursisError):
    """`conflict` and its kinds."""


class RunActiveError(ConflictError):
    """`run_active`: the conversation has a run that has not ended."""


class ArgsChangedError(ConflictError):
    """`args_changed`: the call's arguments are not the ones `args_hash` was computed over."""


class InvalidRequestError(SursisError):
    """`validation_failed`, `invalid_decision` and other bad input; `errors` locates the fields."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        found = self.problem.get("errors", [])
        return found if isinstance(found, list) else []


class RateLimitedError(SursisError):
    """`rate_limited`: `retry_after` seconds until the key's window resets."""

    @property
    def retry_after(self) -> float | None:
        try:
            return float(self.problem["retry_after"])
        except (KeyError, TypeError, ValueError):
            return None


class UnavailableError(SursisError):
    """`database_unavailable` / `unavailable`: try again later."""


ERRORS_BY_CODE: dict[str, type[SursisError]] = {
    "unauthenticated": AuthenticationError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "stale": StaleError,
    "conflict": ConflictError,
    "run_active": RunActiveError,
    "args_changed": ArgsChangedError,
    "validation_failed": InvalidRequestError,
    "invalid_decision": InvalidRequestError,
    "bad_request": InvalidRequestError,
    "body_too_large": InvalidRequestError,
    "rate_limited": RateLimitedError,
    "database_unavailable": UnavailableError,
    "unavailable": UnavailableError,
}


def error_from(status: int, body: Any, text: str) -> SursisError:
    """The exception for one error answer; a body that is not a problem document keeps its text."""
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        code = body["code"]
        detail = body.get("detail")
        return ERRORS_BY_CODE.get(code, SursisError)(
            status, code, detail if isinstance(detail, str) else code, body
        )
    return SursisError(status, "http_error", text[:500] or f"HTTP {status}")
