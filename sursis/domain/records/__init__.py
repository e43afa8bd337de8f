"""Plain records the ports exchange, and the value objects of the tool contract."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from sursis.domain.approvers import ApprovalView
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.records._principal import Principal
from sursis.domain.reviewer import Review
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.tools import Category, Executor, PendingKind


@dataclass(frozen=True, slots=True)
class ToolCallMetadata:
    """Emitted once per tool call by the one wrapper around every tool."""

    tool_name: str
    agent_name: str
    latency_ms: float
    ok: bool
    error_class: str | None
    trace_id: str | None
    started_at: datetime
    ended_at: datetime
    category: Category | None = None
    """The tool's declared category; None for a call recorded before categories were."""


@dataclass(slots=True)
class Conversation:
    id: uuid.UUID
    workspace: str
    agent: str
    status: str
    active_run_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    created_by: str | None = None
    """The principal (API key id) that created it; `None` for conversations created before owners
    were recorded, which are nobody's own."""
    forked_from_id: uuid.UUID | None = None
    """The conversation this one is a fork of (`domain/conversations/fork.py`); None for one
    started afresh."""
    forked_from_seq: int | None = None
    """The seq of the original's user message the fork was made at."""

    @classmethod
    def open(
        cls,
        workspace: str,
        agent: str,
        created_by: str,
        now: datetime,
        conversation_id: uuid.UUID | None = None,
    ) -> Conversation:
        """A new conversation with `agent`, with no run yet (`conversation_id`: one derived from an
        outside thread's id, so that thread finds it again)."""
        return cls(
            id=conversation_id or uuid.uuid4(),
            workspace=workspace,
            agent=agent,
            status="open",
            active_run_id=None,
            created_at=now,
            updated_at=now,
            created_by=created_by,
        )


@dataclass(slots=True)
class RunError:
    code: str
    message: str


@dataclass(slots=True)
class Usage:
    """Model usage of a run, summed over its segments.

    `cost` is an estimate in USD from the model's published prices; None when no request of
    the run could be priced (unknown model, offline model), so "unknown" differs from zero.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    cost: Decimal | None = None

    def add(self, other: Usage) -> Usage:
        cost = self.cost if other.cost is None else (self.cost or Decimal(0)) + other.cost
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            tool_calls=self.tool_calls + other.tool_calls,
            cost=cost,
        )

    def to_json(self) -> dict[str, Any]:
        """The one JSON form: stored on the run, carried by events and logs. The cost is a decimal
        string, an estimate summed without float drift (the HTTP API shows it as a number)."""
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tool_calls": self.tool_calls,
            "cost": None if self.cost is None else str(self.cost),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Usage:
        cost = value.get("cost")
        return cls(
            requests=value.get("requests", 0),
            input_tokens=value.get("input_tokens", 0),
            output_tokens=value.get("output_tokens", 0),
            tool_calls=value.get("tool_calls", 0),
            cost=None if cost is None else Decimal(cost),
        )


class JsonText(str):
    """A run's output that is a JSON document (an agent's structured output), not an answer's text:
    stored as text all the same, and marked so (`Run.output_json`) that it is shown as JSON."""

    __slots__ = ()


@dataclass(slots=True)
class Run:
    id: uuid.UUID
    conversation_id: uuid.UUID
    workspace: str
    agent: str
    status: RunStatus
    input: str
    output: str | None
    error: RunError | None
    segment: int
    awaiting_count: int
    usage: Usage
    cancel_requested: bool
    lease_owner: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    trace_context: dict[str, str] | None = None
    """W3C trace context (`traceparent`, `tracestate`) the next segment continues."""
    claims: int = 0
    """Segments started since the run last reached a persistence point (counted by the claim)."""
    channel: str = "web"
    """Where its input came from (`web`, `slack`, `email`, `system`); its messages carry it too."""
    started_by: str | None = None
    """The principal (API key id) that posted its message; None when none did (a domain event)."""
    started_role: str | None = None
    """That principal's role when it posted."""
    output_json: bool = False
    """Whether `output` is a JSON document (`JsonText`) rather than the text of the answer."""
    stream: bool = True
    """Whether its segments ask the model for streamed responses and publish the text as
    `message.delta` events while it arrives; otherwise each response is asked for whole and its text
    is one delta, stored with the response. By default only `web` runs stream: nobody watches a
    Slack, email or platform event's run token by token (docs/events.md)."""

    def output_value(self) -> Any:
        """The output as the API shows it: the structured output as JSON (an object, an array…), or
        the answer's text (runs stored before outputs were marked keep theirs as text)."""
        if self.output is not None and self.output_json:
            return json.loads(self.output)
        return self.output

    @classmethod
    def queued(
        cls,
        conversation_id: uuid.UUID,
        workspace: str,
        agent: str,
        content: str,
        now: datetime,
        channel: str = "web",
        started_by: str | None = None,
        started_role: str | None = None,
        stream: bool | None = None,
    ) -> Run:
        """A new run of one user message, waiting in the queue for a worker; `stream` None: only
        a `web` run streams."""
        return cls(
            id=uuid.uuid4(),
            conversation_id=conversation_id,
            workspace=workspace,
            agent=agent,
            status=RunStatus.QUEUED,
            input=content,
            output=None,
            error=None,
            segment=0,
            awaiting_count=0,
            usage=Usage(),
            cancel_requested=False,
            lease_owner=None,
            lease_expires_at=None,
            created_at=now,
            updated_at=now,
            finished_at=None,
            channel=channel,
            started_by=started_by,
            started_role=started_role,
            stream=channel == "web" if stream is None else stream,
        )


@dataclass(slots=True)
class PendingCall:
    correlation_id: uuid.UUID
    conversation_id: uuid.UUID
    run_id: uuid.UUID
    workspace: str
    segment: int
    tool_call_id: str
    tool_name: str
    agent: str
    executor: Executor
    kind: PendingKind
    args: dict[str, Any]
    args_summary: dict[str, Any]
    args_hash: str
    effect_description: str
    status: PendingStatus
    created_at: datetime
    expires_at: datetime
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    reason: str | None = None
    resolution: dict[str, Any] | None = None
    agent_path: str | None = None
    """Which agent asked, from the conversation's agent down (`customer/framework-advisor`);
    `None` when the conversation's own agent asked."""
    category: Category | None = None
    """The tool's declared category (`read`, `suggest`, `mutate`); None for rows written before
    categories were recorded."""
    policy: PolicyDecision | None = None
    """The policy decision that made the call wait (whom it asks, the rule and the policy version);
    None for a call no policy asked about (an elicitation, a client execution, older rows)."""
    requested_by: str | None = None
    """The key that caused the call (posted the message its run answers, or sent the event that
    started it); None for older rows, whose requester is the conversation's owner."""
    validated_args: dict[str, Any] | None = None
    """The arguments the tool will receive, as pydantic-ai validated them (coerced, defaults filled,
    rewritten by validation hooks; pydantic-ai 2.68 and later), when they differ from `args` (the
    model's); `args_hash` binds both (`sanitize.pending_args_hash`)."""
    approval: ApprovalView | None = None
    """For a call routed to approver groups, as read for a person: votes, quorum, still needed,
    who may decide now (not a column: attached by the use case that reads the call)."""
    review: Review | None = None
    """The verdict of the reviewer model its route names (not a column: attached when read)."""
    seal_problem: str | None = None
    """Why the call's sealed ask or decision does not check, for an approved call read where
    decisions are sealed (`domain/approvals/decision_seal.py`); None when it checks (not a column: worked out
    by the repository that reads the row, which holds the key)."""


@dataclass(slots=True)
class StoredMessage:
    """One pydantic-ai message as JSON, at its place in the append-only log."""

    conversation_id: uuid.UUID
    seq: int
    run_id: uuid.UUID | None
    body: str
    created_at: datetime
    channel: str | None = None
    """The channel of the run that wrote it (`web`, `slack`, `email`, `system`); None: before
    channels were recorded."""


@dataclass(slots=True)
class ToolCallRecord:
    conversation_id: uuid.UUID
    run_id: uuid.UUID
    tool_call_id: str
    metadata: ToolCallMetadata
    result: Any = None
    error_code: str | None = None
    policy: PolicyDecision | None = None
    """The policy decision the call ran under (allow, notify, or the ask an approval answered);
    None for rows written before decisions were recorded."""
    args_hash: str | None = None
    """For a call that ran on an approval: the hash of the arguments it ran with (`args_hash` of
    `sanitize`); None for other calls and rows written before it was recorded."""


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Filters of the audit log (`actions`: any of them); rows come in id order, or newest first,
    and `after_id` is the keyset cursor: the id of the last row of the previous page."""

    conversation_id: uuid.UUID | None = None
    correlation_id: uuid.UUID | None = None
    actions: tuple[str, ...] = ()
    since: datetime | None = None
    after_id: int | None = None
    limit: int = 50
    newest_first: bool = False


@dataclass(slots=True)
class AuditEntry:
    action: str
    actor: str
    workspace: str
    conversation_id: uuid.UUID | None = None
    run_id: uuid.UUID | None = None
    correlation_id: uuid.UUID | None = None
    details: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    at: datetime | None = None
    trace_id: str | None = None
    actor_name: str | None = None
    """When reading: the name of the API key that acted (not stored with the row)."""

    @classmethod
    def of_run(cls, action: str, actor: str, run: Run, details: dict[str, Any] | None = None) -> AuditEntry:
        """A row about a run."""
        return cls(
            action=action,
            actor=actor,
            workspace=run.workspace,
            conversation_id=run.conversation_id,
            run_id=run.id,
            details=details or {},
        )

    @classmethod
    def of_call(cls, action: str, actor: str, call: PendingCall, details: dict[str, Any]) -> AuditEntry:
        """A row about a pending call: it names the tool and the model's call id."""
        return cls(
            action=action,
            actor=actor,
            workspace=call.workspace,
            conversation_id=call.conversation_id,
            run_id=call.run_id,
            correlation_id=call.correlation_id,
            details={"tool_name": call.tool_name, "tool_call_id": call.tool_call_id, **details},
        )


__all__ = [
    "AuditEntry",
    "AuditQuery",
    "Conversation",
    "JsonText",
    "PendingCall",
    "Principal",
    "Run",
    "RunError",
    "StoredMessage",
    "ToolCallMetadata",
    "ToolCallRecord",
    "Usage",
]
