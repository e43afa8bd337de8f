"""Errors by meaning, under one base.

Every error the project raises derives from `Error`, whose `code` names the reason for a machine
(a log field, a problem response, a tool message, a `RUN_ERROR`). Two families live here:

* tool errors (`ToolError` and its four subclasses) are raised by tools and reach the model as a
  tool message, never as a crashed run;
* service errors (`NotFound`, `Stale`, ...) are raised by the service layer; each class carries its
  problem `code` and HTTP `status` (a subclass inherits its parent's status unless it names its
  own), and `sursis.app.problems` turns any of them into a problem response by reading the two.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Error(Exception):
    """The base of every error the project raises; `code` is its machine-readable reason."""

    code: str = "error"


class ToolError(Error):
    """Base of the tool error taxonomy. `code` is a machine-readable reason for the model."""

    code: str = "TOOL_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_result(self) -> dict[str, Any]:
        """The `{"ok": false, ...}` tool message the model sees."""
        return error_result(type(self).__name__, self.message, self.code)


class ToolUserError(ToolError):
    """Bad input from the model or the user; safe to show."""

    code = "INVALID_INPUT"


class ToolPolicyError(ToolError):
    """Policy, scope or approval refused the call (denied, expired, cancelled)."""

    code = "POLICY_DENIED"


class ToolTransientError(ToolError):
    """An infrastructure blip; the same call may succeed later."""

    code = "TRANSIENT"


class ToolTerminalError(ToolError):
    """An invariant is broken; retrying will not help."""

    code = "TERMINAL"


TOOL_ERROR_CLASSES: tuple[type[ToolError], ...] = (
    ToolUserError,
    ToolPolicyError,
    ToolTransientError,
    ToolTerminalError,
)


def ok_result(result: Any) -> dict[str, Any]:
    """The success half of the tool result convention."""
    return {"ok": True, "result": result}


def error_result(error_class: str, message: str, code: str) -> dict[str, Any]:
    """The failure half of the tool result convention."""
    return {"ok": False, "error": {"class": error_class, "code": code, "message": message}}


def unexpected_error_result() -> dict[str, Any]:
    """What the model sees for an exception outside the taxonomy: sanitized, no trace."""
    return ToolTerminalError(
        "The tool failed unexpectedly; the details are in the service logs.", code="UNEXPECTED"
    ).to_result()


class ServiceError(Error):
    """Base of errors raised by the service layer; `code` and `status` make the problem response."""

    code: str = "error"
    status: ClassVar[int] = 400

    def __init__(self, message: str, *, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}


class NotFound(ServiceError):
    code = "not_found"
    status = 404


class Stale(ServiceError):
    """The object already left the state the caller expected: someone else won the race."""

    code = "stale"
    status = 409


class Conflict(ServiceError):
    code = "conflict"
    status = 409


class RunActive(Conflict):
    """The conversation already has a run that has not settled."""

    code = "run_active"


class ArgsChanged(Conflict):
    code = "args_changed"


class InvalidTransition(ServiceError):
    code = "invalid_transition"
    status = 409


class ValidationFailed(ServiceError):
    code = "validation_failed"
    status = 422


class InvalidDecision(ValidationFailed):
    code = "invalid_decision"


class Forbidden(ServiceError):
    code = "forbidden"
    status = 403


class Unauthenticated(ServiceError):
    code = "unauthenticated"
    status = 401


class BadSignature(Unauthenticated):
    """A signed request (Slack's) whose signature is missing, wrong or too old."""

    code = "bad_signature"


class ToolDeclarationError(Error):
    """A tool was declared with an illegal combination; raised at start-up, not at call time."""

    code = "tool_declaration"
