"""Approval requests filed by agents outside: the filing, the consume and outcome bodies, and the
request as its agent sees it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from sursis.app.schemas.pending import PendingCallOut, pending_out
from sursis.app.schemas.validation import JsonObject, Strict, WorkspaceName
from sursis.domain.access import Permission
from sursis.domain.approvals.approval_request_records import FiledApproval
from sursis.domain.records import Principal

LABEL_PATTERN = r"^[A-Za-z0-9_.:/-]+$"
DIGEST_PATTERN = r"^[0-9a-f]{64}$"


class FileApproval(Strict):
    """A call an agent outside wants to make, filed for a decision."""

    tool_name: str = Field(min_length=1, max_length=200, pattern=LABEL_PATTERN)
    args: JsonObject = Field(default_factory=dict)
    agent: str = Field(min_length=1, max_length=100, pattern=LABEL_PATTERN, description="The agent's label")
    conversation: str | None = Field(
        default=None, min_length=1, max_length=200, description="The agent's own label of its conversation"
    )
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=LABEL_PATTERN,
        description="Filing again under the same key (in the workspace) returns the same request",
    )
    expires_in_seconds: int = Field(
        default=3600,
        ge=1,
        le=7 * 24 * 3600,
        description="Until when the request may be decided and its approval consumed",
    )
    digest: str | None = Field(
        default=None,
        pattern=DIGEST_PATTERN,
        description='sha256 (hex) of the canonical JSON `{"tool": tool_name, "args": args}`; '
        "checked when given, and the digest a consume must present",
    )
    description: str | None = Field(default=None, min_length=1, max_length=2000)
    workspace: WorkspaceName | None = None


class ConsumeApproval(Strict):
    digest: str = Field(pattern=DIGEST_PATTERN, description="The digest of the action about to run")


class ReportOutcome(Strict):
    outcome: Literal["ran", "failed", "not_run"]
    detail: str | None = Field(default=None, max_length=4000)


class ApprovalRequestOut(BaseModel):
    correlation_id: uuid.UUID
    state: str = Field(
        description="awaiting, approved, denied, revision_requested, expired, cancelled, consumed, "
        "ran, failed, not_run, or abandoned (approved, then neither consumed nor reported in time)"
    )
    workspace: str
    digest: str
    idempotency_key: str | None
    conversation: str | None
    created_at: datetime
    expires_at: datetime
    consumed_at: datetime | None
    outcome: str | None
    reported_at: datetime | None
    approved_args: JsonObject | None = Field(
        default=None,
        description="The arguments to run, once approved (as filed, or as edited); shown to the key "
        "that filed the request and to approvers",
    )
    answered_by: list[str] = Field(description="The keys (or policy rule, pre-approval) that decided")
    pending: PendingCallOut


def approval_out(found: FiledApproval, principal: Principal, now: datetime) -> ApprovalRequestOut:
    request, call = found.request, found.call
    deciders = [v.cast_by for v in call.approval.votes] if call.approval is not None else []
    if call.resolved_by and call.resolved_by not in deciders:
        deciders.append(call.resolved_by)
    state = found.state(now)
    # The full arguments, like a pending call's: for the key that filed them and for approvers.
    privileged = principal.id == request.filed_by or principal.may(Permission.APPROVE)
    return ApprovalRequestOut(
        correlation_id=request.correlation_id,
        state=state,
        workspace=request.workspace,
        digest=request.digest,
        idempotency_key=request.idempotency_key,
        conversation=request.conversation,
        created_at=request.created_at,
        expires_at=request.expires_at,
        consumed_at=request.consumed_at,
        outcome=request.outcome.value if request.outcome else None,
        reported_at=request.reported_at,
        approved_args=found.approved_args() if call.status.value == "approved" and privileged else None,
        answered_by=deciders if call.resolved_by else [],
        pending=pending_out(call, principal),
    )
