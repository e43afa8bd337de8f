"""The SQL statements of the run queue, built once with bound parameters: a statement costs more
Python to build than to send (see docs/performance-history.md)."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from sursis.domain.states import RunStatus
from sursis.infra.db import tables as t

_c = t.runs.c
RUNNING = RunStatus.RUNNING.value
GET = sa.select(t.runs).where(_c.id == sa.bindparam("b_run_id"))
INSERT = t.runs.insert()


def resolve_one_awaiting_statement(run_id: Any) -> Any:
    """One awaiting call of the run `run_id` (an expression) decided: the run re-queued when it was
    the last. Answers the run's new status."""
    return (
        t.runs.update()
        .where(_c.id == run_id, _c.status == RunStatus.SUSPENDED.value, _c.awaiting_count > 0)
        .values(
            awaiting_count=_c.awaiting_count - 1,
            status=sa.case((_c.awaiting_count == 1, RunStatus.QUEUED.value), else_=RunStatus.SUSPENDED.value),
            updated_at=sa.bindparam("b_now"),
        )
        .returning(_c.status)
    )


RESOLVE_ONE_AWAITING = resolve_one_awaiting_statement(sa.bindparam("b_run_id"))


def lease_on_last_awaiting_statement(run_id: Any) -> Any:
    """`resolve_one_awaiting_statement`, with the run, when its last awaiting call is decided,
    leased at once as `LEASE` leases a queued run (running for `b_owner` until `b_lease_until`,
    one more segment, one more claim) instead of re-queued. Answers the run's columns."""
    last = _c.awaiting_count == 1

    def when_last(value: Any, otherwise: Any) -> Any:
        return sa.case((last, value), else_=otherwise)

    return (
        t.runs.update()
        .where(_c.id == run_id, _c.status == RunStatus.SUSPENDED.value, _c.awaiting_count > 0)
        .values(
            awaiting_count=_c.awaiting_count - 1,
            status=when_last(RUNNING, RunStatus.SUSPENDED.value),
            lease_owner=when_last(sa.bindparam("b_owner", type_=_c.lease_owner.type), _c.lease_owner),
            lease_expires_at=when_last(
                sa.bindparam("b_lease_until", type_=_c.lease_expires_at.type), _c.lease_expires_at
            ),
            segment=when_last(_c.segment + 1, _c.segment),
            claims=when_last(_c.claims + 1, _c.claims),
            updated_at=sa.bindparam("b_now"),
        )
        .returning(*_c)
    )


_HELD = (_c.id == sa.bindparam("b_run_id"), _c.lease_owner == sa.bindparam("b_owner"), _c.status == RUNNING)
RECORD_PROGRESS = (
    t.runs.update()
    .where(*_HELD)
    .values(
        usage=sa.bindparam("b_usage"),
        lease_expires_at=sa.bindparam("b_lease_until"),
        claims=0,
        updated_at=sa.bindparam("b_now"),
    )
)


_CLAIMED: dict[str, Any] = {
    "status": RUNNING,
    "lease_owner": sa.bindparam("b_owner"),
    "lease_expires_at": sa.bindparam("b_lease_until"),
    "segment": _c.segment + 1,
    "claims": _c.claims + 1,
    "updated_at": sa.bindparam("b_now"),
}
"""What a claim or a lease sets: the run running for `b_owner` until `b_lease_until`, one more segment."""


def _claim_statement(postgres: bool) -> Any:
    queued = _c.status == t.status_literal(RunStatus.QUEUED.value)
    candidate = sa.select(_c.id).where(queued).order_by(_c.updated_at).limit(1)
    if postgres:
        candidate = candidate.with_for_update(skip_locked=True)
    return t.runs.update().where(_c.id == candidate.scalar_subquery(), queued).values(_CLAIMED).returning(*_c)


CLAIM = {postgres: _claim_statement(postgres) for postgres in (False, True)}
LEASE = (
    t.runs.update()
    .where(_c.id == sa.bindparam("b_run_id"), _c.status == RunStatus.QUEUED.value)
    .values(_CLAIMED)
    .returning(*_c)
)
LOG_COLUMNS = ("seq", "run_id", "body", "created_at", "channel")


def _claim_with_log() -> Any:
    """PostgreSQL: the claim, and the claimed run's conversation log after the seq `b_log_from`
    names for that conversation (0 when it names none), in one statement: one row per message (one
    with no message when there is none), the run's columns on each."""
    claimed = _claim_statement(True).cte("claimed")
    known = sa.cast(sa.bindparam("b_log_from", type_=sa.Text()), JSONB)
    after = sa.func.coalesce(
        sa.cast(known[sa.cast(claimed.c.conversation_id, sa.Text)].astext, sa.Integer), 0
    )
    return with_log(claimed, after)


def _lease_with_log() -> Any:
    """PostgreSQL: `LEASE`, and the leased run's conversation log after the seq `b_log_after`, in
    one statement, answered as `CLAIM_WITH_LOG` answers. The log is read in the statement's
    snapshot, as the claim's is: while the run is queued, and then leased by this statement,
    nobody else appends to its conversation (only the segment holding the run's lease does)."""
    leased = LEASE.cte("leased")
    return with_log(leased, sa.bindparam("b_log_after", type_=sa.Integer()))


def with_log(claimed: Any, after: Any) -> Any:
    """The run `claimed` answers (a CTE) with its conversation's log after `after`: one row per
    message (one with no message when there is none), the run's columns on each."""
    m = t.messages.c
    joined = claimed.outerjoin(
        t.messages, sa.and_(m.conversation_id == claimed.c.conversation_id, m.seq > after)
    )
    return (
        sa.select(claimed, after.label("log_after"), *(m[name].label(f"log_{name}") for name in LOG_COLUMNS))
        .select_from(joined)
        .order_by(m.seq)
    )


CLAIM_WITH_LOG = _claim_with_log()
LEASE_WITH_LOG = _lease_with_log()


@functools.cache
def finish_statement(with_usage: bool, with_trace_context: bool, unless_cancel_requested: bool) -> Any:
    held = list(_HELD)
    if unless_cancel_requested:
        held.append(_c.cancel_requested.is_(False))
    extra: dict[str, Any] = {}
    if with_usage:
        extra["usage"] = sa.bindparam("b_usage")
    if with_trace_context:
        extra["trace_context"] = sa.bindparam("b_trace_context")
    return (
        t.runs.update()
        .where(*held)
        .values(
            status=sa.bindparam("b_status"),
            output=sa.bindparam("b_output"),
            output_json=sa.bindparam("b_output_json"),
            error=sa.bindparam("b_error"),
            awaiting_count=sa.bindparam("b_awaiting_count"),
            lease_owner=None,
            lease_expires_at=None,
            claims=0,
            updated_at=sa.bindparam("b_now"),
            finished_at=sa.bindparam("b_finished_at"),
            **extra,
        )
    )


_GUARD_SET = ("status", "output", "output_json", "error", "awaiting_count", "updated_at", "finished_at")


@functools.cache
def finish_guard(
    with_usage: bool, with_trace_context: bool, unless_cancel_requested: bool
) -> tuple[str, Any]:
    """`finish_statement` as the text of a held guard (`held.Guard`): the run's end or suspension
    conditional on the lease, answering the run's id when it holds. Its parameters are `g_`
    and the column's name (the values `finish` binds), typed as the columns."""
    names = [*_GUARD_SET]
    if with_usage:
        names.append("usage")
    if with_trace_context:
        names.append("trace_context")
    sets = ", ".join(f"{name} = :g_{name}" for name in names)
    condition = "id = :g_id AND lease_owner = :g_lease_owner AND status = '" + RUNNING + "'"
    if unless_cancel_requested:
        condition += " AND cancel_requested IS FALSE"
    sql = (
        f"UPDATE runs SET {sets}, lease_owner = NULL, lease_expires_at = NULL, claims = 0 "
        f"WHERE {condition} RETURNING id"
    )
    types = tuple((f"g_{name}", _c[name].type) for name in [*names, "id", "lease_owner"])
    return sql, types
