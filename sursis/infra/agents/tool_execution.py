"""The fourth link of the tool path: the call runs, and whatever it does becomes its outcome.

The tool's return value is stored in JSON form (`tool_results.stored_result`); a `ToolError` is the
outcome in the `{"ok": false, ...}` convention, an unexpected error a sanitized `ToolTerminalError`
(the trace only in the logs). pydantic-ai's control flow (`ModelRetry`, `ToolFailed`, a harness
judge's `SkipToolExecution`) is recorded and raised on as it came (`tool_control_flow`); a deferral
the tool raised is marked with its kind; an approval asked and a refused replay propagate. The
outcome is recorded by the next links before the call returns.
"""

from __future__ import annotations

from typing import Any

import structlog
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
from pydantic_ai.messages import ToolCallPart

from sursis.domain.errors import ToolError, unexpected_error_result
from sursis.domain.tools import Executor, PendingKind, ToolSpec
from sursis.infra.agents import tool_control_flow
from sursis.infra.agents.approved_args import ApprovedArgsMismatch
from sursis.infra.agents.compat import call_deferred, deferred_kind
from sursis.infra.agents.effects import AlreadyApplied, call_timing
from sursis.infra.agents.tool_chain import EDITED_ARGS, ToolCall, WrapperLink
from sursis.infra.agents.tool_results import EDITED_NOTE, stored_result
from sursis.infra.faults import crash_point

log = structlog.get_logger("sursis.tools")


class Execution(WrapperLink):
    """The call run, its outcome classified, then the next link (which records it)."""

    __slots__ = ()

    async def __call__(self, call: ToolCall) -> Any:
        spec = call.spec
        token = call_timing.set(call.timing)
        told: Exception | None = None
        try:
            payload = stored_result(await call.handler(call.args))
            error_code = None if payload["ok"] else payload["error"]["code"]
            crash_point(f"tool_effect_committed:{spec.name}")
        except AlreadyApplied as exc:
            return exc.payload
        except Exception as exc:
            outcome = tool_control_flow.recorded_outcome(exc)
            if outcome is None:
                payload, error_code = _failure(exc, spec, call.call)
            else:
                # Told to the model by pydantic-ai, in its own words: recorded, then raised on.
                (payload, error_code), told = outcome, exc
        finally:
            call_timing.reset(token)
        if told is None and call.metadata.get(EDITED_ARGS) is not None:
            payload[EDITED_NOTE] = call.metadata[EDITED_ARGS]
        call.payload, call.error_code = payload, error_code
        await self.next(call)
        if told is not None:
            raise told
        return payload


def _failure(exc: Exception, spec: ToolSpec, call: ToolCallPart) -> tuple[dict[str, Any], str | None]:
    """What an error of a tool is (called in its `except` block): a deferral is marked with its
    kind; an approval asked, pydantic-ai's other control flow and a refused replay propagate;
    any other error is the outcome, in the `{"ok": ...}` convention, with its code."""
    if isinstance(exc, CallDeferred):
        raise _deferred_with_kind(exc, spec) from None
    if isinstance(exc, ApprovalRequired | ApprovedArgsMismatch):
        raise  # the error being handled, as it was raised
    if tool_control_flow.raised_on(exc):
        raise  # the error being handled, as it was raised
    if isinstance(exc, ToolError):
        return exc.to_result(), exc.code
    log.exception("tool.unexpected_error", tool_name=spec.name, tool_call_id=call.tool_call_id)
    return unexpected_error_result(), "UNEXPECTED"


def _deferred_with_kind(exc: CallDeferred, spec: ToolSpec) -> CallDeferred:
    """A deferral the tool raised itself, marked with the kind of pending call it becomes: a client
    execution for a `client` tool, otherwise a person's answer."""
    metadata = dict(exc.metadata or {})
    if "kind" in metadata:
        return exc
    kind = PendingKind.CLIENT_EXEC if spec.executor is Executor.CLIENT else PendingKind.ELICITATION
    return call_deferred({**metadata, "kind": kind.value}, deferred_kind(exc))
