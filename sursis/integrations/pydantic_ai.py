"""pydantic-ai in a team's own process, governed by Sursis: the handler of `HandleDeferredToolCalls`.

    agent = Agent(model, capabilities=sursis_capabilities(url, key, agent="billing-bot"))

Each deferred call that needs approval is filed with `POST /v1/approvals` (the same policy point,
inbox and resolve as a hosted call), waited for with `GET /v1/approvals/{id}?wait=`, and, once
approved, consumed with the digest of the arguments about to run: an approval runs its call once,
even when the process dies and a new one files the same call again (its idempotency key is the
conversation label and the model's tool call id). A denial reaches the model as `ToolDenied` with
the deciders' reason; `answered_by` names the deciders. The outcome (ran, failed) is reported after
the tool returned or raised, which closes the request's audit trail.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.capabilities.abstract import ValidatedToolArgs, WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDefinition, ToolDenied
from pydantic_core import to_jsonable_python

from sursis.integrations.approvals_http import ApprovalsClient

__all__ = ["SursisApprovals", "SursisOutcomes", "sursis_capabilities"]


@dataclass
class SursisApprovals:
    """The `HandleDeferredToolCalls` handler: files each approval the run defers and answers it
    from Sursis's decision. `conversation` labels the requests (and keys them with the tool call id:
    a restarted process that files the same call gets the same request)."""

    url: str
    key: str
    agent: str
    conversation: str
    expires_in: timedelta = timedelta(hours=1)
    poll_seconds: float = 30.0
    transport: httpx.AsyncBaseTransport | None = None
    consumed: dict[str, str] = field(default_factory=dict)
    """Correlation ids of the approvals this process consumed, by tool call id (for the outcome)."""
    answered_by: dict[str, str] = field(default_factory=dict)
    """Who decided each call this handler answered (what it gave the run as `answered_by`)."""
    client: ApprovalsClient = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.client = ApprovalsClient(
            self.url,
            self.key,
            self.agent,
            expires_in=self.expires_in,
            poll_seconds=self.poll_seconds,
            transport=self.transport,
        )

    async def __call__(
        self, ctx: RunContext[Any], requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        if not requests.approvals:
            return None  # external calls (`CallDeferred`) are not approvals: left to the next handler
        validated: dict[str, Any] = getattr(requests, "validated_args", {}) or {}
        approvals: dict[str, bool | ToolDenied] = {}
        answered_by: dict[str, str] = {}
        async with self.client.http() as http:
            for call in requests.approvals:
                args = to_jsonable_python(validated.get(call.tool_call_id, call.args_as_dict()))
                verdict = await self.client.decide(
                    http,
                    call.tool_name,
                    args,
                    idempotency_key=f"{self.conversation}:{call.tool_call_id}",
                    conversation=self.conversation,
                )
                if verdict.approved:
                    self.consumed[call.tool_call_id] = verdict.correlation_id
                    approvals[call.tool_call_id] = True
                else:
                    approvals[call.tool_call_id] = ToolDenied(verdict.message)
                if verdict.deciders:
                    answered_by[call.tool_call_id] = ", ".join(verdict.deciders)
        self.answered_by.update(answered_by)
        if "answered_by" not in inspect.signature(requests.build_results).parameters:
            return requests.build_results(approvals=approvals)  # pydantic-ai before `answered_by`
        return requests.build_results(approvals=approvals, answered_by=answered_by)

    async def report(self, tool_call_id: str, outcome: str, detail: str | None = None) -> None:
        """Close the request of a call this process consumed: `ran`, `failed` or `not_run`."""
        cid = self.consumed.pop(tool_call_id, None)
        if cid is not None:
            await self.client.report(cid, outcome, detail)


@dataclass
class SursisOutcomes(AbstractCapability[Any]):
    """Reports what became of each call Sursis approved: `ran` when the tool returned, `failed`
    (with the error's class) when it raised."""

    approvals: SursisApprovals

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        if call.tool_call_id not in self.approvals.consumed:
            return await handler(args)
        try:
            result = await handler(args)
        except Exception as exc:
            await self.approvals.report(call.tool_call_id, "failed", type(exc).__name__)
            raise
        await self.approvals.report(call.tool_call_id, "ran")
        return result


def sursis_capabilities(
    url: str,
    key: str,
    *,
    agent: str,
    conversation: str,
    expires_in: timedelta = timedelta(hours=1),
    transport: httpx.AsyncBaseTransport | None = None,
) -> Sequence[AbstractCapability[Any]]:
    """The capabilities that make Sursis decide an agent's approvals: the deferred-call handler and
    the outcome reports."""
    approvals = SursisApprovals(url, key, agent, conversation, expires_in=expires_in, transport=transport)
    return [HandleDeferredToolCalls(handler=approvals), SursisOutcomes(approvals)]
