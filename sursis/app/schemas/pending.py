"""Pending calls: their shape, their resolution and their keyset cursor."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from sursis.app.schemas.approvers import VoteOut, approval_fields
from sursis.app.schemas.policies import PolicyDecisionOut
from sursis.app.schemas.reviewer import ReviewOut
from sursis.app.schemas.validation import FromRecord, JsonObject, JsonValue, Strict, as_utc
from sursis.domain.access import Permission
from sursis.domain.approvals.pending_calls import PendingCursor
from sursis.domain.errors import ValidationFailed
from sursis.domain.paging import Page
from sursis.domain.records import PendingCall, Principal
from sursis.domain.tools import Category


class ResolveBody(Strict):
    decision: Literal["approve", "deny", "revise", "answer"]
    reason: str | None = Field(default=None, max_length=4000)
    args: JsonObject | None = None
    result: JsonValue = None
    args_hash: str | None = Field(default=None, min_length=64, max_length=64)


class PendingCallOut(FromRecord):
    correlation_id: uuid.UUID
    conversation_id: uuid.UUID
    run_id: uuid.UUID
    tool_call_id: str
    tool_name: str
    agent: str
    agent_path: str | None = None
    executor: str
    kind: str
    category: Category | None = Field(
        default=None,
        description=(
            "the tool's declared category (`mutate` calls change something); "
            "null for calls made before categories were recorded"
        ),
    )
    args_summary: dict[str, Any]
    args_hash: str
    effect_description: str
    status: str
    created_at: datetime
    expires_at: datetime
    resolved_at: datetime | None
    resolved_by: str | None
    reason: str | None
    requested_by: str | None = Field(
        default=None,
        description="The key that caused the call (posted the message, sent the event); it never "
        "decides its own call unless the rule allows self-approval. Null for older calls",
    )
    args: dict[str, Any] | None = Field(
        default=None, description="The arguments as the model sent them (null for a key that cannot approve)"
    )
    validated_args: dict[str, Any] | None = Field(
        default=None,
        description="The arguments the tool will receive, as pydantic-ai validated them (coerced, defaults "
        "filled, rewritten by validation hooks), when they differ from `args`; `args_summary` and "
        "`effect_description` describe them, and `args_hash` binds both. Null when they are `args`, on "
        "pydantic-ai before 2.68, and for a key that cannot approve",
    )
    edited_args: dict[str, Any] | None = None
    result: Any = None
    policy: PolicyDecisionOut | None = Field(
        default=None,
        description="the policy decision that made the call wait; null for other kinds and older calls",
    )
    on_behalf_of: str | None = Field(
        default=None,
        description="A delegate decided: the approver it decided for (`resolved_by` is the delegate)",
    )
    votes: list[VoteOut] | None = Field(
        default=None,
        description="The votes of a call routed to approver groups; null when any operator decides",
    )
    quorum: int | None = Field(default=None, description="Distinct approvers needed to approve")
    still_needed: int | None = Field(default=None, description="Approvals still needed")
    approvers: list[str] | None = Field(
        default=None, description="Who may vote now: `group:NAME` and `key:KEY_ID` (escalations add groups)"
    )
    escalation_level: int | None = Field(default=None, description="Escalations reached so far")
    can_decide: bool | None = Field(default=None, description="Whether the caller's key may vote on it now")
    review: ReviewOut | None = Field(
        default=None, description="The route's reviewer model's verdict; null when the route names none"
    )


class PendingPage(BaseModel):
    items: list[PendingCallOut]
    next_cursor: str | None


def pending_out(p: PendingCall, principal: Principal) -> PendingCallOut:
    """The record's fields, but the full (and edited) arguments only for those who may approve;
    everyone sees the sanitized summary, and the answer given."""
    privileged = principal.may(Permission.APPROVE)
    resolution = p.resolution or {}
    return PendingCallOut.model_validate(p).model_copy(
        update={
            "args": p.args if privileged else None,
            "validated_args": p.validated_args if privileged else None,
            "edited_args": resolution.get("args") if privileged else None,
            "result": resolution.get("result"),
            "on_behalf_of": resolution.get("on_behalf_of"),
            **approval_fields(p.approval),
        }
    )


def pending_page(page: Page[PendingCall, PendingCursor], principal: Principal) -> PendingPage:
    return PendingPage(
        items=[pending_out(p, principal) for p in page.items],
        next_cursor=encode_cursor(page.next_cursor) if page.next_cursor is not None else None,
    )


def encode_cursor(cursor: PendingCursor) -> str:
    created_at, correlation_id = cursor
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{correlation_id}".encode()).decode()


def decode_cursor(cursor: str) -> PendingCursor:
    try:
        created, cid = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        at = datetime.fromisoformat(created)
        if at.tzinfo is None:
            raise ValueError("naive time")
        return as_utc(at), uuid.UUID(cid)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            "cursor is not valid", extra={"errors": [{"loc": ["query", "cursor"], "msg": "invalid cursor"}]}
        ) from exc
