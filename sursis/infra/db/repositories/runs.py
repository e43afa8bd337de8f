"""Runs in SQL: queueing, claims and leases, progress, the end."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.encryption import Cipher
from sursis.domain.records import (
    JsonText,
    Run,
    RunError,
    Usage,
)
from sursis.domain.states import RunStatus
from sursis.infra.db import tables as t
from sursis.infra.db.held import Guard, hold, hold_guard, holds, may_guard, read_ahead
from sursis.infra.db.repositories.base import HeldSqlRepository, rowcount
from sursis.infra.db.repositories.run_statements import (
    CLAIM,
    CLAIM_WITH_LOG,
    GET,
    INSERT,
    LEASE,
    LEASE_WITH_LOG,
    LOG_COLUMNS,
    RECORD_PROGRESS,
    RESOLVE_ONE_AWAITING,
    RUNNING,
    finish_guard,
    finish_statement,
)
from sursis.infra.db.rows import record_from_row, row_values
from sursis.infra.db.sealing import RUNS
from sursis.infra.db.unit_connection import UnitConnection
from sursis.infra.telemetry import current_trace_context

LEASED_KEY = "sursis.leased_ahead"


def keep_leased(
    session: UnitConnection,
    rows: list[Any],
    cipher: Cipher,
    *,
    leased_to: tuple[str, datetime, datetime] | None = None,
) -> None:
    """The run another statement of the transaction leased (`with_log`'s rows: the decision's,
    `PendingCallRepository.decide`), kept for the transaction's `lease` of it, and its log for the
    next read of it. `leased_to` (owner, until, now): the rows are the run as read before a lease
    that its commit writes (a decision held to its commit); it is kept as that lease leaves it."""
    run = _with_read_ahead(session, rows, cipher)
    if leased_to is not None:
        owner, until, now = leased_to
        run = dataclasses.replace(
            run,
            status=RunStatus.RUNNING,
            awaiting_count=run.awaiting_count - 1,
            lease_owner=owner,
            lease_expires_at=until,
            segment=run.segment + 1,
            claims=run.claims + 1,
            updated_at=now,
        )
    session.info[LEASED_KEY] = run


def run_from_row(row: Any, cipher: Cipher) -> Run:
    """A run from a row holding its columns under their own names (and maybe others)."""
    return _run_from_row(row, cipher)


def _with_read_ahead(session: UnitConnection, rows: list[Any], cipher: Cipher) -> Run:
    run = _run_from_row(rows[0], cipher)
    log = [
        {
            "conversation_id": run.conversation_id,
            **{name: row._mapping[f"log_{name}"] for name in LOG_COLUMNS},
        }
        for row in rows
        if row._mapping["log_seq"] is not None
    ]
    read_ahead(session, run.conversation_id, int(rows[0]._mapping["log_after"]), log)
    return run


def _run_from_row(row: Any, cipher: Cipher) -> Run:
    opened = RUNS.open_row(cipher, row)
    m = opened._mapping
    return record_from_row(
        Run,
        opened,
        status=RunStatus(m["status"]),
        error=RunError(**m["error"]) if m["error"] else None,
        usage=Usage.from_json(m["usage"]),
    )


def _held(run_id: uuid.UUID, owner: str) -> tuple[Any, ...]:
    """The run `run_id` while `owner` holds its lease."""
    return (t.runs.c.id == run_id, t.runs.c.lease_owner == owner, t.runs.c.status == RunStatus.RUNNING.value)


class SqlRunRepository(HeldSqlRepository):
    async def add(self, run: Run) -> None:
        """Insert a run (held to the commit on PostgreSQL); without a trace context of its own it
        keeps the current one (the request's)."""
        row = RUNS.seal(
            self._cipher,
            row_values(
                run,
                t.runs,
                error=dataclasses.asdict(run.error) if run.error else None,
                usage=run.usage.to_json(),
                trace_context=run.trace_context or current_trace_context(),
            ),
        )
        if holds(self._session):
            hold(self._session, t.runs, [row])  # written at commit, with the events
        else:
            await self._session.execute(INSERT, row)

    async def get(self, run_id: uuid.UUID) -> Run | None:
        rows = await self._rows(GET, {"b_run_id": run_id})
        return _run_from_row(rows[0], self._cipher) if rows else None

    async def transition(
        self,
        run_id: uuid.UUID,
        expected: Sequence[RunStatus],
        target: RunStatus,
        now: datetime,
        **fields: Any,
    ) -> bool:
        result = await self._execute(
            t.runs.update()
            .where(t.runs.c.id == run_id, t.runs.c.status.in_([s.value for s in expected]))
            .values(status=target.value, updated_at=now, **RUNS.seal(self._cipher, fields, {"id": run_id}))
        )
        return rowcount(result) == 1

    async def keep_deps_state(self, run_id: uuid.UUID, state: Any) -> None:
        await self._execute(
            t.runs.update()
            .where(t.runs.c.id == run_id)
            .values(**RUNS.seal(self._cipher, {"deps_state": state}, {"id": run_id}))
        )

    async def deps_state(self, run_id: uuid.UUID) -> Any:
        rows = await self._rows(sa.select(t.runs.c.id, t.runs.c.deps_state).where(t.runs.c.id == run_id), {})
        return RUNS.open(self._cipher, rows[0])["deps_state"] if rows else None

    async def resolve_one_awaiting(self, run_id: uuid.UUID, now: datetime) -> bool:
        # One statement: the row lock (PostgreSQL) or the database lock (SQLite) serializes
        # concurrent resolvers, so exactly one of them sees the count reach zero.
        result = await self._execute(RESOLVE_ONE_AWAITING, {"b_run_id": run_id, "b_now": now})
        row = result.first()
        return row is not None and row[0] == RunStatus.QUEUED.value

    async def claim_next(
        self,
        owner: str,
        now: datetime,
        lease_until: datetime,
        *,
        log_from: Mapping[uuid.UUID, int] | None = None,
    ) -> Run | None:
        params: dict[str, Any] = {"b_owner": owner, "b_lease_until": lease_until, "b_now": now}
        if log_from is None or not self._postgres:
            claimed = await self._rows(CLAIM[self._postgres], params)
            return _run_from_row(claimed[0], self._cipher) if claimed else None
        params["b_log_from"] = json.dumps({str(k): v for k, v in log_from.items()})
        return self._read_ahead(await self._rows(CLAIM_WITH_LOG, params))

    async def lease(
        self,
        run_id: uuid.UUID,
        owner: str,
        now: datetime,
        lease_until: datetime,
        *,
        log_after: int | None = None,
    ) -> Run | None:
        ahead: Run | None = self._session.info.pop(LEASED_KEY, None)
        if ahead is not None and ahead.id == run_id and ahead.lease_owner == owner:
            return ahead  # leased by the statement that re-queued it
        params: dict[str, Any] = {
            "b_run_id": run_id,
            "b_owner": owner,
            "b_lease_until": lease_until,
            "b_now": now,
        }
        if log_after is None or not self._postgres:
            rows = await self._rows(LEASE, params)
            return _run_from_row(rows[0], self._cipher) if rows else None
        params["b_log_after"] = log_after
        return self._read_ahead(await self._rows(LEASE_WITH_LOG, params))

    def _read_ahead(self, rows: list[Any]) -> Run | None:
        """The run of a statement that answers it with its conversation's log (`CLAIM_WITH_LOG`,
        `LEASE_WITH_LOG`); the log kept for the transaction's next read of it."""
        return _with_read_ahead(self._session, rows, self._cipher) if rows else None

    async def renew_lease(self, run_id: uuid.UUID, owner: str, lease_until: datetime) -> bool:
        result = await self._execute(
            t.runs.update().where(*_held(run_id, owner)).values(lease_expires_at=lease_until)
        )
        return rowcount(result) == 1

    async def requeue_expired_leases(self, now: datetime) -> list[uuid.UUID]:
        result = await self._execute(
            t.runs.update()
            .where(t.runs.c.status == t.status_literal(RUNNING), t.runs.c.lease_expires_at < now)
            .values(status=RunStatus.QUEUED.value, lease_owner=None, lease_expires_at=None, updated_at=now)
            .returning(t.runs.c.id)
        )
        return [row[0] for row in result]

    async def next_lease_expiry(self) -> datetime | None:
        query = sa.select(sa.func.min(t.runs.c.lease_expires_at)).where(
            t.runs.c.status == t.status_literal(RUNNING)
        )
        found: datetime | None = (await self._execute(query)).scalar()
        return found

    async def record_progress(
        self, run_id: uuid.UUID, owner: str, usage: Usage, now: datetime, lease_until: datetime
    ) -> bool:
        result = await self._execute(
            RECORD_PROGRESS,
            {
                "b_run_id": run_id,
                "b_owner": owner,
                "b_usage": usage.to_json(),
                "b_lease_until": lease_until,
                "b_now": now,
            },
        )
        return rowcount(result) == 1

    async def release(self, run_id: uuid.UUID, owner: str, now: datetime) -> bool:
        """Give a running run back to the queue (graceful shutdown)."""
        result = await self._execute(
            t.runs.update()
            .where(*_held(run_id, owner))
            .values(status=RunStatus.QUEUED.value, lease_owner=None, lease_expires_at=None, updated_at=now)
        )
        return rowcount(result) == 1

    async def release_all(self, owner: str, now: datetime, keep: Sequence[uuid.UUID] = ()) -> int:
        held = [t.runs.c.lease_owner == owner, t.runs.c.status == RunStatus.RUNNING.value]
        if keep:
            held.append(t.runs.c.id.not_in(list(keep)))
        result = await self._execute(
            t.runs.update()
            .where(*held)
            .values(status=RunStatus.QUEUED.value, lease_owner=None, lease_expires_at=None, updated_at=now)
        )
        return rowcount(result)

    async def cancel_requested(self, run_id: uuid.UUID) -> bool:
        # FOR UPDATE (PostgreSQL; SQLite's write lock already covers it): a cancel cannot commit
        # between this read and the run state this transaction writes next.
        return bool(
            await self._scalar(
                sa.select(t.runs.c.cancel_requested).where(t.runs.c.id == run_id).with_for_update()
            )
        )

    async def count_by_status(self) -> dict[RunStatus, int]:
        c = t.runs.c
        active = [RunStatus.QUEUED.value, RunStatus.RUNNING.value, RunStatus.SUSPENDED.value]
        rows = await self._execute(
            sa.select(c.status, sa.func.count())
            .where(c.status.in_([t.status_literal(s) for s in active]))
            .group_by(c.status)
        )
        return {RunStatus(status): int(count) for status, count in rows}

    async def finish(
        self,
        run_id: uuid.UUID,
        owner: str,
        status: RunStatus,
        now: datetime,
        *,
        usage: Usage | None = None,
        output: str | None = None,
        error: RunError | None = None,
        awaiting_count: int = 0,
        trace_context: dict[str, str] | None = None,
        unless_cancel_requested: bool = False,
    ) -> bool:
        params: dict[str, Any] = {
            "b_run_id": run_id,
            "b_owner": owner,
            "b_status": status.value,
            "b_output": RUNS.seal_value(self._cipher, "output", output, {"id": run_id}),
            "b_output_json": isinstance(output, JsonText),
            "b_error": RUNS.seal_value(
                self._cipher,
                "error",
                {"code": error.code, "message": error.message} if error else None,
                {"id": run_id},
            ),
            "b_awaiting_count": awaiting_count,
            "b_now": now,
            "b_finished_at": now if status.finished else None,
        }
        if usage is not None:
            params["b_usage"] = usage.to_json()
        if trace_context is not None:
            params["b_trace_context"] = trace_context
        shape = (usage is not None, trace_context is not None, unless_cancel_requested)
        if may_guard(self._session):
            # The transaction's first statement: held as the guard of the statement that writes
            # the rest at commit, which raises `GuardFailed` if the lease was lost (`held`).
            sql, types = finish_guard(*shape)
            names = {"b_run_id": "g_id", "b_owner": "g_lease_owner", "b_now": "g_updated_at"}
            guarded = {names.get(key, "g_" + key.removeprefix("b_")): value for key, value in params.items()}
            hold_guard(self._session, Guard(sql, guarded, types))
            return True
        return rowcount(await self._execute(finish_statement(*shape), params)) == 1
