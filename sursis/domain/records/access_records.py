"""Records of who may act: API keys and pre-approvals."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sursis.domain.access import Role
from sursis.domain.records import Principal


@dataclass(slots=True)
class ApiKey:
    """A stored API key: only its hash and a short prefix (to recognise it in listings) are kept."""

    id: uuid.UUID
    name: str
    prefix: str
    key_hash: str
    role: Role
    workspace: str | None
    created_at: datetime
    revoked_at: datetime | None = None
    expires_at: datetime | None = None
    """Refused from this moment on, like a revoked key (None: until revoked)."""
    person: str | None = None
    """The person (`oidc:<subject>`) an admin linked the key to: it approves as that person."""

    def is_valid(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def principal(self) -> Principal:
        return Principal(
            id=str(self.id), role=self.role, workspace=self.workspace, name=self.name, person=self.person
        )


@dataclass(slots=True)
class Authorization:
    """A workspace's pre-approval of a gated tool, optionally only for matching argument values.

    `args_match` is kept as stored (`Any`): a rule that is not a JSON object cannot be evaluated,
    and the policy then gates the call (fail closed).
    """

    id: uuid.UUID
    workspace: str
    tool_name: str
    args_match: Any
    reason: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    seal: str | None = None
    """The service's seal of what the pre-approval grants (`domain/approvals/decision_seal.py`), written with
    it where decisions are sealed; None where they are not."""
    seal_problem: str | None = None
    """Why its seal does not check, for a pre-approval read where decisions are sealed; None when it
    checks (not a column: worked out by the repository that reads the row, which holds the key)."""

    def active(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)
