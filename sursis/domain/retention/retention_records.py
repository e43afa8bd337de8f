"""Retention's records: a workspace's policy, legal holds, and the errors they raise."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.identity.keys import WORKSPACE

MAX_DAYS = 36_500


def check_workspace(name: str) -> None:
    """`ValidationFailed` unless `name` is a workspace name as every path takes it: checked here,
    in the domain, so no entry point (a route's path parameter, the command line, embedded code)
    can store a policy or a hold under a name no other path accepts."""
    if not WORKSPACE.match(name):
        raise ValidationFailed(
            "a workspace is 1-100 characters of letters, digits, '_', '.' or '-'",
            extra={"field": "workspace"},
        )


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long a workspace keeps things; `None` keeps forever."""

    workspace: str
    conversation_days: int | None = None
    audit_days: int | None = None
    updated_by: str = ""
    updated_at: datetime | None = None

    def check(self) -> None:
        """`ValidationFailed` unless the periods are in range and the audit log outlives what it
        describes (it may be kept forever, but not purged while conversations are kept)."""
        check_workspace(self.workspace)
        for name, days in (("conversation_days", self.conversation_days), ("audit_days", self.audit_days)):
            if days is not None and (
                isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS
            ):
                raise ValidationFailed(f"{name} must be between 1 and {MAX_DAYS}", extra={"field": name})
        if self.audit_days is not None and (
            self.conversation_days is None or self.audit_days < self.conversation_days
        ):
            raise AuditPeriodTooShort(
                "audit_days must be at least conversation_days (the audit log outlives what it describes)"
            )


class AuditPeriodTooShort(ValidationFailed):
    code = "audit_period_too_short"


class ConversationPurged(NotFound):
    """The conversation existed and was purged by retention."""

    code = "conversation_purged"


@dataclass(frozen=True, slots=True)
class LegalHold:
    """Stops every purge of a conversation, or (with no conversation) of a whole workspace."""

    id: uuid.UUID
    workspace: str
    conversation_id: uuid.UUID | None
    reason: str
    created_by: str
    created_at: datetime
