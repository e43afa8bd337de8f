"""Pending calls in SQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.approvals.approval_votes import new_route_state
from sursis.domain.approvals.decision_seal import (
    SEAL,
    ask_facts,
    decision_facts,
    needs_decision_seal,
    unmet_route,
)
from sursis.domain.encryption import Cipher
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import LeaseAhead, SeenDecision
from sursis.domain.records import PendingCall, ToolCallRecord
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.tools import Category, Executor, PendingKind
from sursis.infra.db import approver_tables as ap
from sursis.infra.db import tables as t
from sursis.infra.db.approver_tables import route_row
from sursis.infra.db.held import held, hold, holds
from sursis.infra.db.repositories.base import HeldSqlRepository, rowcount
from sursis.infra.db.repositories.decision_statements import (
    OUTCOMES_AHEAD_KEY,
    SEEN_FOR_DECISION,
    WITH_OUTCOMES,
    covered,
    decide_and_lease_statement,
    decided_row,
    hold_decision,
    seen_decision,
)
from sursis.infra.db.repositories.run_statements import (
    resolve_one_awaiting_statement,
)
from sursis.infra.db.repositories.runs import keep_leased
from sursis.infra.db.repositories.tool_calls import SqlToolCallRepository, tool_call_from_row
from sursis.infra.db.rows import row_values
from sursis.infra.db.sealing import PENDING_CALLS, OpenedRow
from sursis.infra.encryption.decision_seal import DecisionSealer, sealer_of


def _pending_from_row(row: Any, cipher: Cipher) -> PendingCall:
    m = PENDING_CALLS.open(cipher, row)
    ask_seal = m.pop("ask_seal", None)
    m["executor"] = Executor(m["executor"])
    m["kind"] = PendingKind(m["kind"])
    m["status"] = PendingStatus(m["status"])
    m["category"] = Category(m["category"]) if m["category"] else None
    m["policy"] = PolicyDecision.from_json(m["policy"]) if m["policy"] else None
    call = PendingCall(**m)
    sealer = sealer_of(cipher)
    if sealer.enabled and needs_decision_seal(call):
        call.seal_problem = _seal_problem(sealer, call, ask_seal)
    return call


def _seal_problem(sealer: DecisionSealer, call: PendingCall, ask_seal: str | None) -> str | None:
    """Why an approved call may not run: its ask or decision seal does not check, or the sealed
    votes do not meet the sealed route (`domain/approvals/decision_seal.py`)."""
    problem = sealer.problem(ask_facts(call), ask_seal, "ask")
    if problem is not None:
        return f"{problem}: the route or arguments it was asked with are not the stored ones"
    record = call.resolution or {}
    facts = decision_facts(call, call.status, call.resolved_by, record)
    problem = sealer.problem(facts, record.get(SEAL), "decision")
    if problem is not None:
        return f"{problem}: the service did not decide this approval"
    return unmet_route(call)


def _sealed_resolution(
    cipher: Cipher,
    call: PendingCall,
    target: PendingStatus,
    resolved_by: str,
    resolution: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """A person's decision as stored: with the service's seal over it, where decisions are sealed."""
    sealer = sealer_of(cipher)
    if not sealer.enabled or resolution is None:
        return resolution
    return {**resolution, SEAL: sealer.seal(decision_facts(call, target, resolved_by, resolution))}


_c = t.pending_calls.c
_INSERT = t.pending_calls.insert()
_GET = sa.select(t.pending_calls).where(_c.correlation_id == sa.bindparam("correlation_id"))
# A run's calls (in one status): built once, sent on the driver on PostgreSQL (a run's view reads them).
_FOR_RUN = sa.select(t.pending_calls).where(_c.run_id == sa.bindparam("run_id")).order_by(_c.created_at)
_FOR_RUN_IN = _FOR_RUN.where(_c.status == sa.bindparam("status"))

_BY_TOOL_CALL_IDS = (
    sa.select(t.pending_calls)
    .where(
        _c.conversation_id == sa.bindparam("conversation_id"),
        _c.tool_call_id.in_(sa.bindparam("ids", expanding=True)),
    )
    .order_by(_c.created_at)
)


def _transition_statement(before_expiry: bool) -> Any:
    conditions = [
        _c.correlation_id == sa.bindparam("b_correlation_id"),
        _c.status == PendingStatus.AWAITING.value,
    ]
    if before_expiry:
        conditions.append(_c.expires_at > sa.bindparam("b_now"))
    return (
        t.pending_calls.update()
        .where(*conditions)
        .values(
            status=sa.bindparam("b_status"),
            resolved_by=sa.bindparam("b_resolved_by"),
            reason=sa.bindparam("b_reason"),
            resolution=sa.bindparam("b_resolution"),
            resolved_at=sa.bindparam("b_now"),
        )
    )


_TRANSITION = {before_expiry: _transition_statement(before_expiry) for before_expiry in (False, True)}


def _decide_statement() -> Any:
    """PostgreSQL: a person's decision and the run's re-queue in one statement. The run's row lock
    still serializes concurrent deciders (each `UPDATE` of it re-reads the row it waited for), so
    exactly one of them sees the count reach zero."""
    decided = _TRANSITION[True].returning(_c.run_id).cte("decided")
    requeued = resolve_one_awaiting_statement(sa.select(decided.c.run_id).scalar_subquery()).cte("requeued")
    return sa.select(
        sa.select(sa.func.count()).select_from(decided).scalar_subquery().label("decided"),
        sa.select(requeued.c.status).scalar_subquery().label("status"),
    )


_DECIDE = _decide_statement()


_DECIDE_AND_LEASE = decide_and_lease_statement(_TRANSITION[True])


_RESOLVE_ONE_AWAITING = resolve_one_awaiting_statement(sa.bindparam("b_run_id"))


def _side(mapping: Any, prefix: str, table: sa.Table) -> OpenedRow:
    """One table's columns of a joined row, under their own names."""
    return OpenedRow({c.name: mapping[prefix + c.name] for c in table.c})


class SqlPendingCallRepository(HeldSqlRepository):
    async def add(self, call: PendingCall) -> None:
        policy = call.policy.to_json() if call.policy is not None else None
        ask_seal = sealer_of(self._cipher).seal(ask_facts(call))
        row = PENDING_CALLS.seal(
            self._cipher, row_values(call, t.pending_calls, policy=policy, ask_seal=ask_seal)
        )
        route = new_route_state(call)
        if holds(self._session):
            hold(self._session, t.pending_calls, [row])  # written at commit, with the events
            if route is not None:
                hold(self._session, ap.pending_routes, [route_row(route)])
        else:
            await self._session.execute(_INSERT, row)
            if route is not None:
                await self._session.execute(ap.pending_routes.insert(), route_row(route))

    async def get(self, correlation_id: uuid.UUID) -> PendingCall | None:
        rows = await self._rows(_GET, {"correlation_id": correlation_id})
        return _pending_from_row(rows[0], self._cipher) if rows else None

    async def search(
        self,
        *,
        workspace: str | None,
        status: PendingStatus | None,
        kind: PendingKind | None,
        tool_name: str | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[PendingCall]:
        c = t.pending_calls.c
        query = sa.select(t.pending_calls)
        if workspace is not None:
            query = query.where(c.workspace == workspace)
        if status is not None:
            query = query.where(c.status == status.value)
        if kind is not None:
            query = query.where(c.kind == kind.value)
        if tool_name is not None:
            query = query.where(c.tool_name == tool_name)
        if after is not None:
            # A row comparison, which an index on (..., created_at, correlation_id) seeks to: a deep
            # page costs what the first one does.
            created, cid = after
            query = query.where(
                sa.tuple_(c.created_at, c.correlation_id)
                < sa.tuple_(sa.literal(created, t.UtcDateTime()), sa.literal(cid, sa.Uuid()))
            )
        query = query.order_by(c.created_at.desc(), c.correlation_id.desc()).limit(limit)
        return [_pending_from_row(row, self._cipher) for row in await self._execute(query)]

    async def for_run(self, run_id: uuid.UUID, status: PendingStatus | None = None) -> list[PendingCall]:
        if status is None:
            rows = await self._rows(_FOR_RUN, {"run_id": run_id})
        else:
            rows = await self._rows(_FOR_RUN_IN, {"run_id": run_id, "status": status.value})
        return [_pending_from_row(row, self._cipher) for row in rows]

    async def by_tool_call_ids(self, conversation_id: uuid.UUID, ids: Sequence[str]) -> list[PendingCall]:
        if not ids:
            return []
        rows = await self._execute(_BY_TOOL_CALL_IDS, {"conversation_id": conversation_id, "ids": list(ids)})
        return [_pending_from_row(row, self._cipher) for row in rows]

    async def with_outcomes(
        self, conversation_id: uuid.UUID, ids: Sequence[str]
    ) -> tuple[list[PendingCall], dict[str, ToolCallRecord]]:
        if not ids:
            return [], {}
        if not self._postgres:
            found = await self.by_tool_call_ids(conversation_id, ids)
            return found, await SqlToolCallRepository(self._session).for_ids(conversation_id, ids)
        ahead = self._session.info.pop(OUTCOMES_AHEAD_KEY, None)
        wanted = set(ids)
        # Nothing written since the read but what the decision writes (its own writes held with it).
        fresh = not held(self._session) or (ahead is not None and ahead[4])
        if ahead is not None and ahead[0] == conversation_id and wanted <= ahead[1] and fresh:
            # Read by the decision's statement; nothing written since but what it decided.
            rows = [r for r in ahead[2] if r._mapping["p_tool_call_id"] in wanted]
            return self._with_outcomes(rows, lambda m: OpenedRow(decided_row(m, ahead[3])))
        rows = await self._rows(WITH_OUTCOMES, {"conversation_id": conversation_id, "ids": list(ids)})
        return self._with_outcomes(rows, lambda m: _side(m, "p_", t.pending_calls))

    def _with_outcomes(
        self, rows: Sequence[Any], pending_side: Callable[[Any], OpenedRow]
    ) -> tuple[list[PendingCall], dict[str, ToolCallRecord]]:
        calls: dict[uuid.UUID, PendingCall] = {}
        outcomes: dict[str, ToolCallRecord] = {}
        for row in rows:
            m = row._mapping
            if m["p_correlation_id"] is not None and m["p_correlation_id"] not in calls:
                call = _pending_from_row(pending_side(m), self._cipher)
                calls[call.correlation_id] = call
            if m["t_id"] is not None and m["t_tool_call_id"] not in outcomes:
                outcomes[m["t_tool_call_id"]] = tool_call_from_row(_side(m, "t_", t.tool_calls), self._cipher)
        return list(calls.values()), outcomes

    async def transition(
        self,
        correlation_id: uuid.UUID,
        target: PendingStatus,
        now: datetime,
        *,
        resolved_by: str,
        reason: str | None,
        resolution: dict[str, Any] | None,
        before_expiry: bool = False,
    ) -> bool:
        row = {"correlation_id": correlation_id}
        result = await self._execute(
            _TRANSITION[before_expiry],
            {
                "b_correlation_id": correlation_id,
                "b_status": target.value,
                "b_resolved_by": resolved_by,
                "b_reason": PENDING_CALLS.seal_value(self._cipher, "reason", reason, row),
                "b_resolution": PENDING_CALLS.seal_value(self._cipher, "resolution", resolution, row),
                "b_now": now,
            },
        )
        return rowcount(result) == 1

    async def decide(
        self,
        call: PendingCall,
        target: PendingStatus,
        now: datetime,
        *,
        resolved_by: str,
        reason: str | None,
        resolution: dict[str, Any] | None,
        lease: LeaseAhead | None = None,
        seen: SeenDecision | None = None,
    ) -> bool | None:
        row = {"correlation_id": call.correlation_id}
        resolution = _sealed_resolution(self._cipher, call, target, resolved_by, resolution)
        params = {
            "b_correlation_id": call.correlation_id,
            "b_status": target.value,
            "b_resolved_by": resolved_by,
            "b_reason": PENDING_CALLS.seal_value(self._cipher, "reason", reason, row),
            "b_resolution": PENDING_CALLS.seal_value(self._cipher, "resolution", resolution, row),
            "b_now": now,
        }
        if (
            self._postgres
            and lease is not None
            and seen is not None
            and hold_decision(self._session, self._cipher, seen, lease, params)
        ):
            return True
        if self._postgres and lease is not None:
            params |= {"b_owner": lease.owner, "b_lease_until": lease.until, "b_log_after": lease.log_after}
            rows = await self._rows(_DECIDE_AND_LEASE, params)
            first = rows[0]._mapping
            if first["decided"] == 0:
                return None
            if first["status"] != RunStatus.RUNNING.value:
                return False
            calls = [r for r in rows if r._mapping["p_correlation_id"] is not None]
            logged = [r for r in rows if r._mapping["p_correlation_id"] is None]
            keep_leased(self._session, logged, self._cipher)
            if first["seen_awaiting"] == 1:  # the calls it read are current (`decide_and_lease_statement`)
                self._session.info[OUTCOMES_AHEAD_KEY] = (
                    call.conversation_id,
                    covered(calls),
                    calls,
                    params,
                    False,
                )
            return True
        if self._postgres:
            [(decided, status)] = await self._rows(_DECIDE, params)
            return None if decided == 0 else status == RunStatus.QUEUED.value
        if rowcount(await self._execute(_TRANSITION[True], params)) != 1:
            return None
        found = (await self._execute(_RESOLVE_ONE_AWAITING, {"b_run_id": call.run_id, "b_now": now})).first()
        return found is not None and found[0] == RunStatus.QUEUED.value

    async def seen_for_decision(
        self, correlation_id: uuid.UUID, log_from: Mapping[uuid.UUID, int]
    ) -> SeenDecision | None:
        if not self._postgres:
            return None
        params = {
            "b_correlation_id": correlation_id,
            "b_log_from": json.dumps({str(k): v for k, v in log_from.items()}),
        }
        rows = await self._rows(SEEN_FOR_DECISION, params)
        if not rows:
            return None
        call = _pending_from_row(_side(rows[0]._mapping, "c_", t.pending_calls), self._cipher)
        return seen_decision(call, rows, self._cipher)

    async def overdue(self, now: datetime, limit: int) -> list[PendingCall]:
        c = t.pending_calls.c
        rows = await self._execute(
            sa.select(t.pending_calls)
            .where(c.status == t.status_literal(PendingStatus.AWAITING.value), c.expires_at <= now)
            .order_by(c.expires_at)
            .limit(limit)
        )
        return [_pending_from_row(row, self._cipher) for row in rows]

    async def next_expiry(self) -> datetime | None:
        c = t.pending_calls.c
        query = sa.select(sa.func.min(c.expires_at)).where(
            c.status == t.status_literal(PendingStatus.AWAITING.value)
        )
        found: datetime | None = (await self._execute(query)).scalar()
        return found

    async def count_awaiting(self) -> dict[PendingKind, int]:
        c = t.pending_calls.c
        rows = await self._execute(
            sa.select(c.kind, sa.func.count())
            .where(c.status == t.status_literal(PendingStatus.AWAITING.value))
            .group_by(c.kind)
        )
        return {PendingKind(kind): int(count) for kind, count in rows}

    async def extend_client_calls(
        self, conversation_id: uuid.UUID, until: datetime, *, created_after: datetime
    ) -> int:
        c = t.pending_calls.c
        result = await self._execute(
            t.pending_calls.update()
            .where(
                c.conversation_id == conversation_id,
                c.kind == PendingKind.CLIENT_EXEC.value,
                c.status == PendingStatus.AWAITING.value,
                c.expires_at < until,
                c.created_at >= created_after,
            )
            .values(expires_at=until)
        )
        return rowcount(result)
