"""The audit trail and its keyset cursor."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from sursis.app.schemas.validation import MAX_ROW_ID, FromRecord, jsonable
from sursis.domain.errors import ValidationFailed
from sursis.domain.paging import Page
from sursis.domain.records import AuditEntry


class AuditEntryOut(FromRecord):
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
    details: Annotated[dict[str, Any], BeforeValidator(jsonable)]


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_cursor: str | None


def audit_out(entry: AuditEntry) -> AuditEntryOut:
    return AuditEntryOut.model_validate(entry)


def audit_page(page: Page[AuditEntry, int]) -> AuditPage:
    return AuditPage(
        items=[audit_out(entry) for entry in page.items],
        next_cursor=encode_audit_cursor(page.next_cursor) if page.next_cursor is not None else None,
    )


def encode_audit_cursor(after_id: int) -> str:
    return base64.urlsafe_b64encode(f"audit|{after_id}".encode()).decode()


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
