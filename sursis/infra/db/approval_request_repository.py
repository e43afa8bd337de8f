"""Approval requests in SQL: a claim that takes the idempotency key or finds it taken, and the
conditional writes of a consume and an outcome."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.approvals.approval_request_records import ApprovalRequest, Outcome
from sursis.domain.states import PendingStatus
from sursis.infra.db.approval_request_tables import approval_requests
from sursis.infra.db.repositories.base import HeldSqlRepository, rowcount
from sursis.infra.db.tables import pending_calls

_c = approval_requests.c
_GET = sa.select(approval_requests).where(_c.correlation_id == sa.bindparam("b_id"))
_BY_KEY = sa.select(approval_requests).where(
    _c.workspace == sa.bindparam("b_workspace"), _c.idempotency_key == sa.bindparam("b_key")
)
CONSUME_SQL = (
    approval_requests.update()
    .where(
        _c.correlation_id == sa.bindparam("b_id"),
        _c.consumed_at.is_(None),
        _c.digest == sa.bindparam("b_digest"),
        _c.expires_at > sa.bindparam("b_now"),
    )
    .values(consumed_at=sa.bindparam("b_now"), consumed_by=sa.bindparam("b_by"))
)
REPORT_SQL = (
    approval_requests.update()
    .where(_c.correlation_id == sa.bindparam("b_id"), _c.consumed_at.is_not(None), _c.outcome.is_(None))
    .values(outcome=sa.bindparam("b_outcome"), reported_at=sa.bindparam("b_now"))
)


def _request(row: Any) -> ApprovalRequest:
    m = dict(row._mapping)
    m["outcome"] = Outcome(m["outcome"]) if m["outcome"] else None
    return ApprovalRequest(**m)


class SqlApprovalRequestRepository(HeldSqlRepository):
    async def claim(self, request: ApprovalRequest) -> bool:
        values = {name: getattr(request, name) for name in ApprovalRequest.__dataclass_fields__}
        values["outcome"] = None
        statement = self._insert(approval_requests).values(values)
        if request.idempotency_key is None:
            await self._execute(statement)
            return True
        # Concurrent filings under one key: the second waits for the first's commit, then inserts nothing.
        result = await self._execute(
            statement.on_conflict_do_nothing(index_elements=["workspace", "idempotency_key"])
        )
        return rowcount(result) == 1

    async def get(self, correlation_id: uuid.UUID) -> ApprovalRequest | None:
        row = (await self._execute(_GET, {"b_id": correlation_id})).first()
        return _request(row) if row is not None else None

    async def by_key(self, workspace: str, idempotency_key: str) -> ApprovalRequest | None:
        row = (await self._execute(_BY_KEY, {"b_workspace": workspace, "b_key": idempotency_key})).first()
        return _request(row) if row is not None else None

    async def consume(self, correlation_id: uuid.UUID, digest: str, by: str, now: datetime) -> bool:
        params = {"b_id": correlation_id, "b_digest": digest, "b_by": by, "b_now": now}
        return rowcount(await self._execute(CONSUME_SQL, params)) == 1

    async def abandoned(self, workspace: str | None, now: datetime, limit: int) -> list[uuid.UUID]:
        p = pending_calls.c
        query = (
            sa.select(_c.correlation_id)
            .join(pending_calls, p.correlation_id == _c.correlation_id)
            .where(_c.expires_at <= now, _c.outcome.is_(None), p.status == PendingStatus.APPROVED.value)
            .order_by(_c.expires_at.desc(), _c.correlation_id.desc())
            .limit(limit)
        )
        if workspace is not None:
            query = query.where(_c.workspace == workspace)
        return list((await self._execute(query)).scalars())

    async def report(self, correlation_id: uuid.UUID, outcome: Outcome, now: datetime) -> bool:
        params = {"b_id": correlation_id, "b_outcome": outcome.value, "b_now": now}
        return rowcount(await self._execute(REPORT_SQL, params)) == 1
