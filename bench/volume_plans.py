"""The plans of `bench/volume.py`: every statement the service sends in a turn, a claim and a sweep
is recorded (a `before_cursor_execute` listener on every engine of this process) and explained
again, `EXPLAIN (ANALYZE, BUFFERS)`, in a transaction that is rolled back.

The reads the HTTP API makes for an operator (the inbox page, the events replay, the audit
search) run in the server process, out of reach of the listener: they are written here as the
service writes them (sursis/infra/db/repositories), with the parameters of the measured requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

BIG_TABLES = frozenset(
    {"conversations", "messages", "runs", "pending_calls", "events", "audit_log", "outbox", "tool_calls"}
)
"""The tables that hold millions of rows at a year of traffic: a sequential scan of one is a finding."""


@dataclass
class Captured:
    label: str
    statement: str
    parameters: Any


@dataclass
class StatementRecorder:
    """Statements this process sends while `recording(label)` is open, each once per label."""

    captured: list[Captured] = field(default_factory=list)
    _label: str | None = None

    def _listen(
        self, _conn: Any, _cursor: Any, statement: str, parameters: Any, _ctx: Any, many: bool
    ) -> None:
        if self._label is None or statement.lstrip().upper().startswith(
            ("BEGIN", "COMMIT", "ROLLBACK", "SELECT 1")
        ):
            return
        if any(c.label == self._label and c.statement == statement for c in self.captured):
            return
        if many and parameters:
            parameters = parameters[0]
        self.captured.append(Captured(self._label, statement, parameters))

    @contextmanager
    def recording(self, label: str) -> Iterator[None]:
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._listen)
        self._label = label
        try:
            yield
        finally:
            self._label = None
            sa.event.remove(sa.engine.Engine, "before_cursor_execute", self._listen)


def _removed(plan: dict[str, Any]) -> int:
    own = plan.get("Rows Removed by Filter", 0) + plan.get("Rows Removed by Index Recheck", 0)
    return int(own * plan.get("Actual Loops", 1)) + sum(_removed(child) for child in plan.get("Plans", []))


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    relation = plan.get("Relation Name")
    if relation is not None:
        yield plan["Node Type"], relation
    for child in plan.get("Plans", []):
        yield from _scans(child)


@dataclass
class Explained:
    label: str
    statement: str
    text: str
    execution_ms: float | None
    seq_scans: list[str]
    rows_removed: int | None = None
    """Rows its scans read and then dropped by a filter (ANALYZE only): what an index did not rule out."""


async def explain(
    engine: AsyncEngine, label: str, statement: str, parameters: Any = (), *, generic: bool = False
) -> Explained:
    """The statement's plan with ANALYZE and BUFFERS (rolled back); without ANALYZE if running it
    again fails (an insert of a row that exists now). `generic`: the plan PostgreSQL makes once
    for any parameters (a prepared statement's after its fifth execution, if it is not dearer than
    the plans made for each), not the one made for these."""
    params = tuple(parameters) if isinstance(parameters, (list, tuple)) else parameters
    for analyze in (True, False):
        options = "ANALYZE, BUFFERS, " if analyze else ""
        async with engine.connect() as conn:
            transaction = await conn.begin()
            try:
                if generic:
                    await conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
                raw = await conn.exec_driver_sql(f"EXPLAIN ({options}FORMAT JSON) {statement}", params)
                plan = raw.scalar_one()
                text = await conn.exec_driver_sql(f"EXPLAIN ({options}FORMAT TEXT) {statement}", params)
                lines = [row[0] for row in text]
            except sa.exc.DBAPIError:
                if not analyze:
                    raise
                continue
            finally:
                await transaction.rollback()
        document = (json.loads(plan) if isinstance(plan, str) else plan)[0]
        seq = sorted(
            {rel for node, rel in _scans(document["Plan"]) if node == "Seq Scan" and rel in BIG_TABLES}
        )
        removed = _removed(document["Plan"]) if analyze else None
        return Explained(label, statement, "\n".join(lines), document.get("Execution Time"), seq, removed)
    raise AssertionError("unreachable")


def operator_reads(
    workspace: str, deep: tuple[str, str] | None, conversation_id: str
) -> list[tuple[str, str]]:
    """The operator's reads as the repositories write them, with literal parameters."""
    inbox = (
        "SELECT * FROM pending_calls WHERE workspace = '{ws}' AND status = 'awaiting' {after}"
        "ORDER BY created_at DESC, correlation_id DESC LIMIT 51"
    )
    after = ""
    if deep is not None:
        after = f"AND (created_at, correlation_id) < ('{deep[0]}'::timestamptz, '{deep[1]}'::uuid) "
    return [
        (f"inbox first page ({workspace})", inbox.format(ws=workspace, after="")),
        (f"inbox deep page ({workspace})", inbox.format(ws=workspace, after=after)),
        (
            "events replay",
            f"SELECT * FROM events WHERE conversation_id = '{conversation_id}' AND id > 0 "
            "ORDER BY id LIMIT 100",
        ),
        (
            f"audit search, newest first ({workspace})",
            f"SELECT * FROM audit_log WHERE workspace = '{workspace}' ORDER BY id DESC LIMIT 100",
        ),
        (
            "outbox due scan",
            "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = now() + interval '30 seconds', "
            "updated_at = now() WHERE id IN (SELECT id FROM outbox WHERE status = 'pending' "
            "AND topic LIKE 'webhook:%' AND (next_attempt_at IS NULL OR next_attempt_at <= now()) "
            "ORDER BY id LIMIT 20 FOR UPDATE SKIP LOCKED) AND status = 'pending' "
            "RETURNING id, workspace, topic, payload, attempts, source_event_id",
        ),
    ]
