"""Retention policies, legal holds, purge reports and the audit chain's verdicts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BeforeValidator, Field

from sursis.app.schemas.validation import FromRecord, Strict, WorkspaceName
from sursis.domain.audit.audit_chain import ChainReport
from sursis.domain.retention.retention import MAX_DAYS, RetentionReport


def _whole_number(value: object) -> object:
    # A field-level `strict=True` is not enough: the app validates bodies with `strict=False`,
    # which overrides it, and `"30"` or `30.0` would become 30.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("a whole number of days, as a JSON number (not a string, not a fraction)")
    return value


Days = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=MAX_DAYS)]
"""A whole number of days: `"30"` (a string), `30.0` or `true` is refused, as on the command line."""


class PolicyIn(Strict):
    """A period left out (or null) keeps forever. `audit_days`, when set, must be at least
    `conversation_days`."""

    conversation_days: Days | None = Field(default=None, description="Purge conversations idle this long")
    audit_days: Days | None = Field(default=None, description="Purge audit rows older than this")


class PolicyOut(FromRecord):
    workspace: str
    conversation_days: int | None
    audit_days: int | None
    updated_by: str
    updated_at: datetime | None


class HoldIn(Strict):
    workspace: WorkspaceName
    conversation_id: uuid.UUID | None = Field(default=None, description="Omit to hold the whole workspace")
    reason: str = Field(min_length=1, max_length=2000)


class HoldOut(FromRecord):
    id: uuid.UUID
    workspace: str
    conversation_id: uuid.UUID | None
    reason: str
    created_by: str
    created_at: datetime


class ReportOut(FromRecord):
    workspace: str
    conversations: int
    rows: dict[str, int] = Field(description="Rows per table (deleted, or unlinked where the table says so)")
    audit_rows: int
    held: bool = Field(description="A legal hold kept audit rows that were otherwise due")

    @classmethod
    def of(cls, report: RetentionReport) -> ReportOut:
        rows = {table: count for table, count in sorted(report.rows.items()) if count}
        return cls(
            workspace=report.workspace,
            conversations=report.conversations,
            rows=rows,
            audit_rows=report.audit_rows,
            held=report.held,
        )


class BreachOut(FromRecord):
    breach: str
    seq: int
    row_id: int | None
    detail: str


class IntegrityOut(FromRecord):
    action: str = Field(description="The finding's audit action, e.g. `integrity.args_mismatch`")
    row_id: int | None
    at: datetime | None
    correlation_id: uuid.UUID | None
    detail: str


class ChainOut(FromRecord):
    workspace: str
    ok: bool
    checked: int
    head_seq: int
    head_hash: str
    anchor_seq: int
    unsealed: int
    finding: BreachOut | None
    findings: list[IntegrityOut] = Field(
        default_factory=list,
        description="Integrity findings in the workspace's audit log, newest first (any makes `ok` false)",
    )

    @classmethod
    def of(cls, report: ChainReport) -> ChainOut:
        f = report.finding
        finding = (
            None
            if f is None
            else BreachOut(breach=f.breach.value, seq=f.seq, row_id=f.row_id, detail=f.detail)
        )
        return cls(
            workspace=report.workspace,
            ok=report.ok,
            checked=report.checked,
            head_seq=report.head_seq,
            head_hash=report.head_hash,
            anchor_seq=report.anchor_seq,
            unsealed=report.unsealed,
            finding=finding,
            findings=[IntegrityOut.model_validate(found) for found in report.integrity],
        )
