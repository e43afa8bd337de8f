"""Approver groups, delegations, reassignment and the votes of a routed pending call."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import Field, StringConstraints

from sursis.app.schemas.validation import FromRecord, Strict, UtcDatetime, WorkspaceName
from sursis.domain.approvers import ApprovalView, ApproverGroup

GroupName = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
KeyId = Annotated[str, StringConstraints(min_length=36, max_length=36, pattern=r"^[0-9a-fA-F-]{36}$")]
Target = Annotated[
    str,
    StringConstraints(
        min_length=5, max_length=140, pattern=r"^(group:[A-Za-z0-9_.-]{1,100}|key:[0-9a-fA-F-]{36})$"
    ),
]


class GroupIn(Strict):
    workspace: WorkspaceName
    name: GroupName
    description: str | None = Field(default=None, max_length=500)
    members: list[KeyId] = Field(default_factory=list, max_length=200, description="API key ids")


class MemberIn(Strict):
    key_id: KeyId


class GroupOut(FromRecord):
    id: uuid.UUID
    workspace: str
    name: str
    description: str | None
    members: list[str]
    created_by: str
    created_at: datetime

    @classmethod
    def of(cls, group: ApproverGroup) -> GroupOut:
        return cls.model_validate(group)


class DelegationIn(Strict):
    delegate: KeyId = Field(description="The key that votes for the delegator")
    ends_at: UtcDatetime
    starts_at: UtcDatetime | None = Field(default=None, description="Now when left out")
    delegator: KeyId | None = Field(
        default=None, description="Admins only: another approver's key; yours by default"
    )


class DelegationOut(FromRecord):
    id: uuid.UUID
    workspace: str | None
    delegator: str
    delegate: str
    starts_at: datetime
    ends_at: datetime
    created_by: str
    created_at: datetime
    revoked_at: datetime | None


class ReassignIn(Strict):
    to: list[Target] = Field(min_length=1, max_length=20, description="`group:NAME` or `key:KEY_ID`")


class VoteOut(FromRecord):
    approver: str = Field(description="The approver the vote counts for")
    approver_name: str | None = None
    cast_by: str = Field(description="The key that pressed: a delegate when it differs from `approver`")
    cast_by_name: str | None = None
    on_behalf_of: str | None = Field(default=None, description="Set when a delegate voted: for X by Y")
    decision: str
    reason: str | None
    at: datetime


def approval_fields(view: ApprovalView | None) -> dict[str, object]:
    """The pending call's routing members: votes, quorum, still needed, approvers, escalation level
    and whether the caller may decide it. Null for a call any operator decides."""
    if view is None:
        return {}
    names = dict(view.names)
    return {
        "votes": [
            VoteOut(
                approver=v.voter,
                approver_name=names.get(v.voter),
                cast_by=v.cast_by,
                cast_by_name=names.get(v.cast_by),
                on_behalf_of=v.on_behalf_of,
                decision=v.decision,
                reason=v.reason,
                at=v.at,
            )
            for v in view.votes
        ],
        "quorum": view.quorum,
        "still_needed": view.still_needed,
        "approvers": list(view.approvers),
        "escalation_level": view.escalation_level,
        "can_decide": view.can_decide,
    }
