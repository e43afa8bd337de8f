"""The audit trail and its keyset cursor."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from abeyance.app.schemas.validation import MAX_ROW_ID, jsonable
from abeyance.domain.errors import ValidationFailed
from abeyance.domain.records import (
    AuditEntry,
)


class AuditEntryOut(BaseModel):
    id: int
    at: datetime
    actor: str
    actor_name: str | None = Field(description="The name of the API key that acted; null for other actors")
    action: str
    workspace: str
    conversation_id: uuid.UUID | None
    run_id: uuid.UUID | None
    correlation_id: uuid.UUID | None
    trace_id: str | None
    details: dict[str, Any]


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_cursor: str | None


def audit_out(entry: AuditEntry) -> AuditEntryOut:
    assert entry.id is not None
    assert entry.at is not None
    return AuditEntryOut(
        id=entry.id,
        at=entry.at,
        actor=entry.actor,
        actor_name=entry.actor_name,
        action=entry.action,
        workspace=entry.workspace,
        conversation_id=entry.conversation_id,
        run_id=entry.run_id,
        correlation_id=entry.correlation_id,
        trace_id=entry.trace_id,
        details=jsonable(entry.details),
    )


def encode_audit_cursor(entry: AuditEntry) -> str:
    return base64.urlsafe_b64encode(f"audit|{entry.id}".encode()).decode()


def decode_audit_cursor(cursor: str) -> int:
    try:
        prefix, value = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        if prefix != "audit":
            raise ValueError(prefix)
        after_id = int(value)
        if not 0 <= after_id <= MAX_ROW_ID:
            raise ValueError("out of range")
        return after_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            "cursor is not valid", extra={"errors": [{"loc": ["query", "cursor"], "msg": "invalid cursor"}]}
        ) from exc
