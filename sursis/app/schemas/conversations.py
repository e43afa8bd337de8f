"""Conversations, their messages and their tool calls."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from sursis.app.schemas.policies import PolicyDecisionOut
from sursis.app.schemas.runs import RunOut, run_out
from sursis.app.schemas.validation import FromRecord, Strict, WorkspaceName
from sursis.domain.access import Permission
from sursis.domain.conversations.conversations import ConversationDetail
from sursis.domain.records import (
    Conversation,
    Principal,
    StoredMessage,
    ToolCallRecord,
)
from sursis.domain.sanitize import sanitize
from sursis.domain.tools import Category


class CreateConversation(Strict):
    agent: str = Field(min_length=1, max_length=100)
    workspace: WorkspaceName | None = None


class PostMessage(Strict):
    content: str = Field(min_length=1)
    stream: bool = Field(
        default=True,
        description="Whether the model's text is published as `message.delta` events while it arrives. "
        "`false`: the model is asked for each response whole and its text is one delta, stored with "
        "the response; for a client that reads only the outcome (`?wait=`, `GET /v1/runs/{id}`), it "
        "saves a streamed request's overhead and the deltas' writes.",
    )


class ForkedFromOut(BaseModel):
    """Where a fork was made: the original conversation and the seq of its user message."""

    conversation_id: uuid.UUID
    seq: int


class ForkOut(BaseModel):
    """One fork of a conversation, as the original lists it."""

    id: uuid.UUID
    at: int = Field(description="The seq of the original's user message the fork was made at")
    created_by: str | None
    created_at: datetime


class ConversationOut(FromRecord):
    id: uuid.UUID
    workspace: str
    agent: str
    status: str
    active_run_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    created_by: str | None = Field(
        description="The id of the API key that created it (`GET /v1/me` tells a key its own): "
        "a user key answers the elicitation and client-execution calls of its own conversations "
        "only. Null for conversations created before owners were recorded."
    )
    forked_from: ForkedFromOut | None = Field(
        default=None, description="For a fork: the conversation and the message it was forked at"
    )


class MessageOut(BaseModel):
    seq: int
    run_id: uuid.UUID | None
    created_at: datetime
    channel: str | None = Field(
        description="Where the run that wrote it came from: `web`, `slack`, `email` or `system` "
        "(a platform event); null for messages written before channels were recorded."
    )
    message: dict[str, Any]


class ConversationDetailOut(ConversationOut):
    messages: list[MessageOut]
    active_run: RunOut | None
    forks: list[ForkOut] = Field(default_factory=list, description="The forks made of it, oldest first")


class ToolCallOut(BaseModel):
    tool_call_id: str
    tool_name: str
    agent_name: str
    ok: bool
    error_class: str | None
    error_code: str | None
    latency_ms: float
    trace_id: str | None
    started_at: datetime
    ended_at: datetime
    result: Any
    category: Category | None = Field(
        default=None,
        description="the tool's declared category; null for calls recorded before categories were",
    )
    policy: PolicyDecisionOut | None = Field(
        default=None, description="the policy decision the call ran under; null for older calls"
    )


def conversation_out(c: Conversation) -> ConversationOut:
    forked_from = (
        None
        if c.forked_from_id is None
        else ForkedFromOut(conversation_id=c.forked_from_id, seq=c.forked_from_seq or 0)
    )
    return ConversationOut.model_validate(c).model_copy(update={"forked_from": forked_from})


def fork_out(c: Conversation) -> ForkOut:
    return ForkOut(id=c.id, at=c.forked_from_seq or 0, created_by=c.created_by, created_at=c.created_at)


def conversation_detail_out(detail: ConversationDetail, principal: Principal) -> ConversationDetailOut:
    return ConversationDetailOut(
        **conversation_out(detail.conversation).model_dump(),
        messages=[message_out(m, principal) for m in detail.messages],
        active_run=run_out(detail.active_run, principal) if detail.active_run else None,
        forks=[fork_out(f) for f in detail.forks],
    )


def tool_call_out(r: ToolCallRecord) -> ToolCallOut:
    """The record with its metadata flattened: the API shows one object per call."""
    return ToolCallOut(
        **dataclasses.asdict(r.metadata),
        tool_call_id=r.tool_call_id,
        error_code=r.error_code,
        result=r.result,
        policy=PolicyDecisionOut.model_validate(r.policy) if r.policy is not None else None,
    )


def message_out(m: StoredMessage, principal: Principal) -> MessageOut:
    """One logged message; for callers who may not approve, tool-call arguments are sanitized as in
    `args_summary` (the full arguments are for operators)."""
    message = json.loads(m.body)
    if not principal.may(Permission.APPROVE):
        for part in message.get("parts", []):
            if part.get("part_kind") == "tool-call":
                part["args"] = sanitize(_as_object(part.get("args")))
    return MessageOut(seq=m.seq, run_id=m.run_id, created_at=m.created_at, channel=m.channel, message=message)


def _as_object(args: Any) -> Any:
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args
