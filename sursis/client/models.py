"""What the client returns: the service's JSON answers as typed, read-only models.

Unknown members are ignored, so a newer service does not break an older client.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

SETTLED = frozenset({"suspended", "completed", "failed", "cancelled"})


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ForkedFrom(Model):
    """Where a fork was made: the original conversation and the seq of its user message."""

    conversation_id: uuid.UUID
    seq: int


class Fork(Model):
    """One fork of a conversation, as the original lists it."""

    id: uuid.UUID
    at: int
    created_by: str | None = None
    created_at: datetime


class Conversation(Model):
    id: uuid.UUID
    workspace: str
    agent: str
    status: str
    active_run_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    created_by: str | None = None
    forked_from: ForkedFrom | None = None


class Message(Model):
    seq: int
    run_id: uuid.UUID | None
    created_at: datetime
    message: dict[str, Any]


class Vote(Model):
    """One approver's vote on a call routed to approver groups (`cast_by` a delegate when it differs)."""

    approver: str
    approver_name: str | None = None
    cast_by: str
    cast_by_name: str | None = None
    on_behalf_of: str | None = None
    decision: str
    reason: str | None = None
    at: datetime


class Review(Model):
    """A reviewer model's verdict on a call: `yes` (risky), `no`, `unsure`, or why there is none
    (`error`, `timeout`, `over_budget`, ...; `queued`/`reviewing` while it thinks), its short
    reason, what it did (`approved`, `voted`, `stale`, `left_to_people`) and when it decided."""

    model: str
    question: str
    verdict: str
    reason: str | None = None
    effect: str | None = None
    policy_version: int | None = None
    rule: str | None = None
    decided_at: datetime | None = None


class PendingCall(Model):
    correlation_id: uuid.UUID
    conversation_id: uuid.UUID
    run_id: uuid.UUID
    tool_call_id: str
    tool_name: str
    agent: str
    executor: str
    kind: str
    category: str | None = None
    args_summary: dict[str, Any]
    args_hash: str
    effect_description: str
    status: str
    created_at: datetime
    expires_at: datetime
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    reason: str | None = None
    args: dict[str, Any] | None = None
    validated_args: dict[str, Any] | None = None
    """The arguments the tool will receive, when they differ from the model's `args`."""
    edited_args: dict[str, Any] | None = None
    result: Any = None
    on_behalf_of: str | None = None
    votes: list[Vote] | None = None
    quorum: int | None = None
    still_needed: int | None = None
    approvers: list[str] | None = None
    escalation_level: int | None = None
    can_decide: bool | None = None
    review: Review | None = None
    """The route's reviewer model's verdict; None when the route names no reviewer."""


class Usage(Model):
    requests: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    estimated_cost_usd: float | None = None


class Run(Model):
    id: uuid.UUID
    conversation_id: uuid.UUID
    status: str
    output: Any = None
    """The agent's output as JSON: its answer's text, or its structured output (a dict, a list…)."""
    error: dict[str, str] | None
    pending: list[PendingCall]
    usage: Usage
    created_at: datetime
    finished_at: datetime | None

    @property
    def settled(self) -> bool:
        """Suspended, completed, failed or cancelled: what `wait` waits for."""
        return self.status in SETTLED


class Resolved(PendingCall):
    """A decided call; with `wait`, its run once it settled (None without `wait`, or when the
    service could not read the run after committing the decision)."""

    run: Run | None = None


class ConversationDetail(Conversation):
    messages: list[Message]
    active_run: Run | None
    forks: list[Fork] = []


class Forked(Model):
    """A new fork and the run of its user message at the fork point."""

    conversation: Conversation
    run: Run


class PendingPage(Model):
    items: list[PendingCall]
    next_cursor: str | None


class Event(Model):
    """One event of a conversation's stream (the SSE `data`); `id` is what `Last-Event-ID` resumes after."""

    id: int
    type: str
    workspace: str
    conversation_id: uuid.UUID
    created_at: datetime
    data: dict[str, Any]


class ApproverGroup(Model):
    id: uuid.UUID
    workspace: str
    name: str
    description: str | None = None
    members: list[str]
    created_by: str
    created_at: datetime


class ProvisioningRule(Model):
    """Members of the identity provider's `group` sign in as `role` of `workspace`."""

    group: str
    role: str
    workspace: str | None = None
    source: str
    """`settings` (SURSIS_OIDC_GROUPS, read-only) or `stored` (written over the API)."""
    updated_by: str | None = None
    updated_at: datetime | None = None


class Delegation(Model):
    id: uuid.UUID
    workspace: str | None = None
    delegator: str
    delegate: str
    starts_at: datetime
    ends_at: datetime
    created_by: str
    created_at: datetime
    revoked_at: datetime | None = None
