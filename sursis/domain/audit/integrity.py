"""Integrity findings: what the service refused because stored data no longer agrees with a decision.

A finding is an audit row (so it is chained and signed like every other row) written where the
refusal happens; `sursis audit verify` and `GET /v1/audit/verify` list each workspace's findings
beside the verdict on its chain.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sursis.domain.records import AuditEntry

ARGS_MISMATCH = "integrity.args_mismatch"
"""A call about to run on an approval had arguments other than the ones its deciders approved: it
was not run (details: `tool_call_id`, `tool_name`, `expected_args_hash`, `actual_args_hash`,
`reason`)."""
OUTCOME_MISMATCH = "integrity.outcome_mismatch"
"""A stored outcome about to be replayed for an approved call was recorded for other arguments."""
DECISION_UNSEALED = "integrity.decision_unsealed"
"""An approved call's decision was not the service's: its ask or decision seal did not check (a
status flipped by SQL, a seal copied from another call), or its sealed votes did not meet its
sealed route (a vote row inserted by SQL does not count); or the pre-approval that would lift a
call (or the recorded lift of a redispatched one) was not sealed by the service (details then name
its `authorization_id`). It was not run (details as for `ARGS_MISMATCH`, `reason` saying which
check failed)."""
FINDING_ACTIONS: tuple[str, ...] = (ARGS_MISMATCH, OUTCOME_MISMATCH, DECISION_UNSEALED)
"""The audit actions that are integrity findings."""
MAX_LISTED = 100
"""How many findings per workspace a verification lists (newest first)."""


@dataclass(frozen=True, slots=True)
class IntegrityFinding:
    """One finding as a verification names it."""

    action: str
    row_id: int | None
    at: datetime | None
    correlation_id: uuid.UUID | None
    detail: str

    @classmethod
    def of(cls, entry: AuditEntry) -> IntegrityFinding:
        d = entry.details
        if entry.action == DECISION_UNSEALED:
            lifted = f", pre-approval {d['authorization_id']}" if d.get("authorization_id") else ""
            detail = (
                f"{d.get('tool_name', '?')} (tool call {d.get('tool_call_id', '?')}{lifted}): "
                f"not run: {d.get('reason', 'the decision is not sealed by the service')}"
            )
            return cls(entry.action, entry.id, entry.at, entry.correlation_id, detail)
        detail = (
            f"{d.get('tool_name', '?')} (tool call {d.get('tool_call_id', '?')}): "
            f"approved args_hash {d.get('expected_args_hash', '?')}, "
            f"found {d.get('actual_args_hash', '?')}; {d.get('reason', 'not run')}"
        )
        return cls(entry.action, entry.id, entry.at, entry.correlation_id, detail)
