"""pydantic-ai's control flow out of a tool call, told apart from a crash.

A tool (or a capability's hook around it) tells the model something by raising: `ModelRetry` asks
it to try again, `ToolFailed` reports a failure, `SkipToolExecution` puts a result in place of the
call (a harness `ToolCallJudge`'s denial). By the time the error reaches the observing wrapper
pydantic-ai has often wrapped it already (`ToolRetryError`, `ToolFailedError`, or the
`UnexpectedModelBehavior` of a spent retry budget), with the retry counted. Each is recorded as
what it is and raised on unchanged, so the model reads pydantic-ai's own text and the retry budget
is pydantic-ai's; only an error outside this table is an unexpected failure.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.exceptions import (
    ModelRetry,
    SkipToolExecution,
    SkipToolValidation,
    ToolFailed,
    ToolFailedError,
    ToolRetryError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ToolReturn

from sursis.domain.errors import error_result
from sursis.infra.agents.compat import MODEL_REQUEST_CONTROL

RETRIED = "RETRY"
"""The code of a call the model was asked to retry (`ModelRetry`): a failure the model corrects."""
TOOL_FAILED = "TOOL_FAILED"
"""The code of a call the tool reported failed (`ToolFailed`)."""
SKIPPED = "SKIPPED"
"""The code of a call a hook skipped (`SkipToolExecution`), its result given in its place."""

_RAISED_ON: tuple[type[BaseException], ...] = (SkipToolValidation, *MODEL_REQUEST_CONTROL)
"""Control flow with no outcome of its own to record: pydantic-ai acts on it where it is caught."""


def recorded_outcome(exc: BaseException) -> tuple[dict[str, Any], str] | None:
    """The outcome to record (and its code) for an error pydantic-ai turns into what the model reads;
    None for any other error. The caller raises the error on after recording it."""
    if isinstance(exc, ToolRetryError):
        return error_result("ModelRetry", str(exc), RETRIED), RETRIED
    if isinstance(exc, ModelRetry):
        return error_result("ModelRetry", exc.message, RETRIED), RETRIED
    if isinstance(exc, UnexpectedModelBehavior) and isinstance(exc.__cause__, ModelRetry | ToolRetryError):
        # The retry that spent the tool's budget: pydantic-ai ends the run with it.
        return error_result("ModelRetry", _retry_text(exc.__cause__), RETRIED), RETRIED
    if isinstance(exc, ToolFailedError):
        return error_result("ToolFailed", str(exc), TOOL_FAILED), TOOL_FAILED
    if isinstance(exc, ToolFailed):
        return error_result("ToolFailed", exc.message, TOOL_FAILED), TOOL_FAILED
    if isinstance(exc, SkipToolExecution):
        payload = error_result("SkipToolExecution", skipped_text(exc.result), SKIPPED)
        return payload, SKIPPED
    return None


def raised_on(exc: BaseException) -> bool:
    """Control flow that is neither an outcome nor a crash (`SkipToolValidation`, ...)."""
    return isinstance(exc, _RAISED_ON)


def skipped_text(result: Any) -> str:
    """A skipped call's result as the model reads it (a `ToolReturn`'s return value)."""
    value = result.return_value if isinstance(result, ToolReturn) else result
    return value if isinstance(value, str) else json.dumps(value, default=str)


def replay(payload: Any) -> None:
    """A recorded outcome of this table raised again, as it was first told (a call dispatched by a
    segment that died is told its stored outcome); anything else returns."""
    if not isinstance(payload, dict) or payload.get("ok") is not False:
        return
    error = payload.get("error")
    if not isinstance(error, dict):
        return
    message = str(error.get("message"))
    match error.get("code"):
        case "RETRY":
            raise ModelRetry(message)
        case "TOOL_FAILED":
            raise ToolFailed(message)
        case "SKIPPED":
            raise SkipToolExecution(message)
        case _:
            return


def _retry_text(exc: ModelRetry | ToolRetryError) -> str:
    return exc.message if isinstance(exc, ModelRetry) else str(exc)
