"""AG-UI 1.0 for hosted agents: one conversation turn as an AG-UI run, its pending calls as interrupts.

An AG-UI front end (CopilotKit, `@ag-ui/client`) posts a `RunAgentInput`; its `threadId` names a
conversation of the agent (derived from the caller's workspace, the agent and the thread, so the
same thread finds it again), its last user message is the turn's message, and the run's events are
translated as they are committed. A run that stops on pending calls ends in `RUN_FINISHED` with an
interrupt outcome, one interrupt per call (its id is the correlation id); the next input answers
them with `resume`, decided through `PendingCallService.resolve_pending`, the same compare-and-set
as `POST /v1/pending/{id}/resolve`, so a front end adds no second path to an effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError
from pydantic.alias_generators import to_camel

from sursis.domain.access import Permission
from sursis.domain.approvals.pending_calls import EXPIRY_ACTOR, PendingCallService, Resolution
from sursis.domain.approvers import AlreadyVoted
from sursis.domain.conversations.conversations import ConversationService
from sursis.domain.errors import Error, NotFound, ServiceError, Stale, ValidationFailed
from sursis.domain.events.events import EventService
from sursis.domain.records import PendingCall, Principal
from sursis.domain.records.event_records import StoredEvent
from sursis.domain.runs.runs import RunService, RunView
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.domain.tools import PendingKind
from sursis.infra.notifier import LocalRunNotifier

THREADS = uuid.UUID("5d1c4a52-0e4f-4f0c-9a43-6a2f3c1e7b90")
"""The namespace of the conversation ids derived from AG-UI thread ids."""
BATCH = 500


class ResumePayload(BaseModel):
    """What a resume entry carries for an approval interrupt: the shape pydantic-ai's own AG-UI
    adapter advertises, so a front end written for it answers Sursis unchanged. `approved` is
    strict: `"true"` or `1` is no approval."""

    model_config = ConfigDict(alias_generator=to_camel, extra="ignore")

    approved: StrictBool
    edited_args: dict[str, Any] | None = None
    reason: str | None = None


RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "true approves the call, false denies it"},
        "editedArgs": {"type": "object", "description": "approve with these arguments instead"},
        "reason": {"type": "string", "description": "why (shown to the model on a denial)"},
    },
    "required": ["approved"],
}


class RunRefused(Error):
    """The input breaks an AG-UI rule or loses a race: the run ends in `RUN_ERROR` with `code`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def thread_conversation_id(principal: Principal, agent: str, thread_id: str) -> uuid.UUID:
    """The conversation of a thread: a thread id that is the id of a conversation is that
    conversation; any other string is mapped into the caller's workspace, so two workspaces using
    the same thread id never meet."""
    with contextlib.suppress(ValueError):
        return uuid.UUID(thread_id)
    return uuid.uuid5(THREADS, f"{principal.workspace or 'default'}\x00{agent}\x00{thread_id}")


def last_user_text(data: RunAgentInput) -> str | None:
    """The text of the input's last user message (its text parts joined), or None."""
    for message in reversed(data.messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            texts = [getattr(part, "text", None) for part in message.content]
            return "\n".join(t for t in texts if isinstance(t, str)) or None
    return None


def run_input(body: dict[str, Any]) -> RunAgentInput:
    """The body as AG-UI's `RunAgentInput`; a 422 problem naming each field that does not fit, in
    the shape of the service's other bodies (`{"loc": [...], "msg": ...}`)."""
    try:
        return RunAgentInput.model_validate(body)
    except ValidationError as exc:
        errors = [
            {"loc": [str(part) for part in error["loc"]] or ["body"], "msg": error["msg"]}
            for error in exc.errors(include_url=False)
        ]
        raise ValidationFailed("the request is not valid", extra={"errors": errors}) from None


def check_input(data: RunAgentInput) -> None:
    """What the body alone decides, before the stream starts (422 problem): a run needs a user
    message or resume entries."""
    if not data.resume and last_user_text(data) is None:
        raise ValidationFailed(
            "an AG-UI run needs a user message or `resume` entries",
            extra={"errors": [{"loc": ["messages"], "msg": "no user message"}]},
        )


def interrupt_of(call: PendingCall, principal: Principal) -> Interrupt:
    """A pending call as an interrupt; its full arguments (what `editedArgs` starts from) only for
    a key that may approve, as in `GET /v1/pending/{id}`."""
    approval = call.kind is PendingKind.APPROVAL
    shown = {"args": call.args} if principal.may(Permission.APPROVE) else {}
    return Interrupt(
        id=str(call.correlation_id),
        reason="tool_call" if approval else call.kind.value,
        message=f"{call.effect_description or call.tool_name}",
        tool_call_id=call.tool_call_id,
        response_schema=RESPONSE_SCHEMA,
        expires_at=call.expires_at.isoformat(),
        metadata={
            "tool_name": call.tool_name,
            "args_summary": call.args_summary,
            "args_hash": call.args_hash,
            "kind": call.kind.value,
            **shown,
        },
    )


@dataclass
class AgUiRun:
    """One AG-UI run of a hosted agent, from its input to its last event."""

    conversations: ConversationService
    pending_calls: PendingCallService
    runs: RunService
    events: EventService
    notifier: LocalRunNotifier
    poll_seconds: float
    principal: Principal
    agent: str
    data: RunAgentInput
    encoder: EventEncoder = field(default_factory=EventEncoder)
    _text_id: str | None = None

    def _sse(self, event: BaseEvent) -> str:
        return self.encoder.encode(event)

    async def stream(self) -> AsyncIterator[str]:
        """`RUN_STARTED`, the turn's events, then `RUN_FINISHED` (success or interrupt) or `RUN_ERROR`."""
        thread, run_id = self.data.thread_id, self.data.run_id
        yield self._sse(RunStartedEvent(thread_id=thread, run_id=run_id))
        try:
            conversation_id, sursis_run, cursor = await self._act()
            async for chunk in self._follow(conversation_id, sursis_run, cursor):
                yield chunk
            view = await self.runs.get_run(self.principal, sursis_run)
        except RunRefused as refused:
            yield self._sse(RunErrorEvent(message=refused.message, code=refused.code))
            return
        except ServiceError as exc:
            yield self._sse(RunErrorEvent(message=exc.message, code=exc.code))
            return
        for chunk in self._close_text():
            yield chunk
        yield self._finish(view)

    def _finish(self, view: RunView) -> str:
        thread, run_id = self.data.thread_id, self.data.run_id
        status = view.run.status
        if status is RunStatus.SUSPENDED and view.pending:
            interrupts = [interrupt_of(c, self.principal) for c in view.pending]
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
            return self._sse(RunFinishedEvent(thread_id=thread, run_id=run_id, outcome=outcome))
        if status is RunStatus.COMPLETED:
            return self._sse(
                RunFinishedEvent(
                    thread_id=thread,
                    run_id=run_id,
                    result=view.run.output,
                    outcome=RunFinishedSuccessOutcome(),
                )
            )
        error = view.run.error
        return self._sse(
            RunErrorEvent(
                message=error.message if error else f"the run ended {status.value}",
                code=error.code if error else f"run_{status.value}",
            )
        )

    async def _act(self) -> tuple[uuid.UUID, uuid.UUID, int]:
        """Post the turn's message or decide the resumed calls; the run to follow and the event id
        after which its new events start."""
        conversation_id = thread_conversation_id(self.principal, self.agent, self.data.thread_id)
        conversation = await self.conversations.open_thread(self.principal, self.agent, conversation_id)
        cursor = await self._last_event_id(conversation.id)
        active = conversation.active_run_id
        view = await self.runs.get_run(self.principal, active) if active is not None else None
        open_calls = {c.correlation_id: c for c in view.pending} if view is not None else {}
        if self.data.resume:
            run_id = await self._resume(conversation.id, self.data.resume, open_calls)
            return conversation.id, run_id, cursor
        if open_calls:
            raise RunRefused(
                "interrupts_open",
                f"the thread has {len(open_calls)} open interrupt(s): answer them with `resume` first",
            )
        text = last_user_text(self.data) or ""
        run = await self.conversations.post_message(self.principal, conversation.id, text)
        return conversation.id, run.id, cursor

    async def _resume(
        self, conversation_id: uuid.UUID, entries: list[ResumeEntry], open_calls: dict[uuid.UUID, PendingCall]
    ) -> uuid.UUID:
        """Decide each resumed call. An entry for a call decided already is a replay when the caller
        decided it the same way (nothing is decided again), `interrupt_stale` otherwise; new answers
        must cover every open interrupt."""
        decisions: list[tuple[uuid.UUID, Resolution]] = []
        run_id: uuid.UUID | None = None
        for entry in entries:
            correlation_id = _interrupt_uuid(entry.interrupt_id)
            resolution = _resolution(entry)
            call = open_calls.get(correlation_id)
            if call is None:
                call = await self._known_call(conversation_id, correlation_id)
                _check_replay(call, resolution, self.principal)
            else:
                decisions.append((correlation_id, resolution))
            run_id = call.run_id
        if decisions:
            unanswered = set(open_calls) - {c for c, _ in decisions}
            if unanswered:
                raise RunRefused(
                    "resume_incomplete",
                    "every open interrupt needs a resume entry: " + ", ".join(sorted(map(str, unanswered))),
                )
        for correlation_id, resolution in decisions:
            try:
                await self.pending_calls.resolve_pending(self.principal, correlation_id, resolution)
            except AlreadyVoted:
                continue  # a replay of this approver's counted vote: the call waits for the others
            except Stale as exc:
                raise stale_refusal(exc) from exc
        assert run_id is not None
        return run_id

    async def _known_call(self, conversation_id: uuid.UUID, correlation_id: uuid.UUID) -> PendingCall:
        try:
            call = await self.pending_calls.get_pending(self.principal, correlation_id)
        except NotFound:
            call = None
        if call is None or call.conversation_id != conversation_id:
            raise RunRefused("interrupt_unknown", f"no interrupt {correlation_id} on this thread")
        return call

    async def _last_event_id(self, conversation_id: uuid.UUID) -> int:
        cursor = 0
        while True:
            batch = await self.events.events_after(self.principal, conversation_id, cursor, BATCH)
            if not batch:
                return cursor
            cursor = batch[-1].id

    async def _follow(self, conversation_id: uuid.UUID, run_id: uuid.UUID, cursor: int) -> AsyncIterator[str]:
        """The run's events after `cursor` as AG-UI events, until the run settles. The run's status
        is read before its events: what settled it was committed with its last events."""
        wanted = str(run_id)
        while True:
            with self.notifier.watch_conversation(conversation_id) as changed:
                view = await self.runs.get_run(self.principal, run_id)
                batch = await self.events.events_after(self.principal, conversation_id, cursor, BATCH)
                for event in batch:
                    cursor = event.id
                    if event.data.get("run_id") == wanted:
                        for chunk in self._translate(event):
                            yield chunk
                if len(batch) == BATCH:
                    continue
                if view.run.status.settled:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), self.poll_seconds)

    def _translate(self, event: StoredEvent) -> list[str]:
        data = event.data
        if event.type == "message.delta" and data.get("text"):
            out = []
            if self._text_id is None:
                self._text_id = f"msg-{event.id}"
                out.append(self._sse(TextMessageStartEvent(message_id=self._text_id, role="assistant")))
            out.append(self._sse(TextMessageContentEvent(message_id=self._text_id, delta=str(data["text"]))))
            return out
        if event.type == "tool.call":
            call_id, args = str(data["tool_call_id"]), json.dumps(data.get("args") or {})
            return [
                *self._close_text(),
                self._sse(ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(data["tool_name"]))),
                self._sse(ToolCallArgsEvent(tool_call_id=call_id, delta=args)),
                self._sse(ToolCallEndEvent(tool_call_id=call_id)),
            ]
        if event.type == "tool.result":
            content = {k: v for k, v in data.items() if k not in {"run_id", "tool_call_id", "executor"}}
            return [
                *self._close_text(),
                self._sse(
                    ToolCallResultEvent(
                        message_id=f"result-{event.id}",
                        tool_call_id=str(data["tool_call_id"]),
                        content=json.dumps(content, default=str),
                        role="tool",
                    )
                ),
            ]
        return []

    def _close_text(self) -> list[str]:
        if self._text_id is None:
            return []
        ended, self._text_id = self._text_id, None
        return [self._sse(TextMessageEndEvent(message_id=ended))]


def _interrupt_uuid(interrupt_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(interrupt_id)
    except ValueError:
        raise RunRefused("interrupt_unknown", f"no interrupt {interrupt_id!r} on this thread") from None


def _resolution(entry: ResumeEntry) -> Resolution:
    """The decision a resume entry carries: `cancelled` denies; `resolved` carries the payload."""
    if entry.status == "cancelled":
        return Resolution(decision=Decision.DENY, reason="cancelled in the front end")
    try:
        payload = ResumePayload.model_validate(entry.payload)
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) or "payload" for e in exc.errors(include_url=False))
        raise RunRefused(
            "resume_payload_invalid",
            f"the payload for interrupt {entry.interrupt_id} does not match its responseSchema ({fields})",
        ) from None
    if payload.approved:
        return Resolution(decision=Decision.APPROVE, args=payload.edited_args)
    return Resolution(decision=Decision.DENY, reason=payload.reason or None)


_DECIDED = {Decision.APPROVE: PendingStatus.APPROVED, Decision.DENY: PendingStatus.DENIED}


def stale_refusal(exc: Stale) -> RunRefused:
    """A decision that found its call no longer awaiting: `interrupt_expired` when the call's
    deadline decided it (expired, or resolved by the expiry actor: this decision found it past
    `expires_at`, or the sweeper got there first), as `_check_replay` tells it; `interrupt_stale` else."""
    extra = exc.extra
    status, decider = extra.get("pending_status"), extra.get("resolved_by")
    expired = status == PendingStatus.EXPIRED.value or decider == EXPIRY_ACTOR
    return RunRefused("interrupt_expired" if expired else "interrupt_stale", exc.message)


def _check_replay(call: PendingCall, resolution: Resolution, principal: Principal) -> None:
    """A resume for a call no longer open: the same answer from the same key again is a replay
    (nothing happens twice); anything else is stale, an expired call `interrupt_expired`."""
    if call.status is PendingStatus.AWAITING:
        return
    if call.status is PendingStatus.EXPIRED or call.resolved_by == EXPIRY_ACTOR:
        raise RunRefused("interrupt_expired", f"interrupt {call.correlation_id} expired before a decision")
    if call.resolved_by == principal.id and _DECIDED.get(resolution.decision) is call.status:
        return
    raise RunRefused("interrupt_stale", f"interrupt {call.correlation_id} is already {call.status.value}")
