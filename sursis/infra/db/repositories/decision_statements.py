"""PostgreSQL: the decision that frees a suspended run's last awaiting call, the run leased to the
deciding process's worker, and what its segment starts from (its log, the calls it resumes with and
their outcomes), in one statement (`PendingCallRepository.decide(lease=)`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from sursis.domain.encryption import Cipher
from sursis.domain.ports import LeaseAhead, SeenDecision
from sursis.domain.records import PendingCall, Run
from sursis.domain.states import PendingStatus, RunStatus
from sursis.infra.db import tables as t
from sursis.infra.db.held import Guard, HeldUpdate, hold, hold_guard, may_guard
from sursis.infra.db.repositories.run_statements import LOG_COLUMNS, lease_on_last_awaiting_statement
from sursis.infra.db.repositories.runs import keep_leased, run_from_row
from sursis.infra.db.unit_connection import UnitConnection

OUTCOMES_AHEAD_KEY = "sursis.outcomes_ahead"


def decide_and_lease_statement(transition: Any) -> Any:
    """`transition` (the call's conditional update), and the run, when the decision is the last it
    awaited, leased to `b_owner` (`lease_on_last_awaiting_statement`) rather than re-queued, with
    its conversation's log after `b_log_after`. Always one row or more: each says whether the
    decision won (`decided`) and the run's new status (none when the run was not suspended); a
    leased run's log, one row a message (`log_*`); then the pending calls of the conversation whose
    tool call ids are those of the run's pending calls, each with its stored outcome (`p_*`,
    `t_*`), ordered by creation.

    Everything is read in the statement's snapshot. The log is current: the run was suspended
    until this statement, and only the segment holding its lease appends to its conversation. The
    calls are current, but for the one decided here (the caller puts in what it wrote), when the
    snapshot saw that call as the run's only awaiting one (`seen_awaiting` 1): every other call of
    the run was decided, and committed, before it, and a decided call does not change again; a
    suspended run's segment records no outcome. A decision that raced another of the same run's
    calls sees more (the other's commit may be later than the snapshot): then the calls are read
    again by a statement of their own (`with_outcomes`)."""
    p, o, r = t.pending_calls, t.tool_calls, t.runs
    decided = transition.returning(p.c.run_id).cte("decided")
    run_id = sa.select(decided.c.run_id).scalar_subquery()
    leased = lease_on_last_awaiting_statement(run_id).cte("leased")
    seen_awaiting = sa.select(r.c.awaiting_count).where(r.c.id == run_id).scalar_subquery()
    answer = sa.select(
        sa.select(sa.func.count()).select_from(decided).scalar_subquery().label("decided"),
        seen_awaiting.label("seen_awaiting"),
    ).subquery("answer")
    m = t.messages.c
    after = sa.bindparam("b_log_after", type_=sa.Integer())
    running = leased.c.status == RunStatus.RUNNING.value
    log = sa.and_(running, m.conversation_id == leased.c.conversation_id, m.seq > after)
    head = [answer.c.decided, answer.c.seen_awaiting, leased, after.label("log_after")]
    logged = [m[name].label(f"log_{name}") for name in LOG_COLUMNS]
    calls = [c.label(f"p_{c.name}") for c in p.c] + [c.label(f"t_{c.name}") for c in o.c]

    def nulls(columns: Sequence[Any]) -> list[Any]:
        return [sa.cast(sa.null(), c.type).label(c.name) for c in columns]

    mine = calls_of_run(leased)
    named = p.alias("named")
    resumed = sa.and_(
        running,
        answer.c.seen_awaiting == 1,
        named.c.conversation_id == leased.c.conversation_id,
        named.c.tool_call_id == mine.c.tool_call_id,
    )
    outcome = sa.and_(
        o.c.conversation_id == named.c.conversation_id, o.c.tool_call_id == named.c.tool_call_id
    )
    named_calls = [named.c[c.name].label(f"p_{c.name}") for c in p.c] + [c.label(f"t_{c.name}") for c in o.c]
    with_log = sa.select(*head, *logged, *nulls(calls)).select_from(
        answer.outerjoin(leased, sa.true()).outerjoin(t.messages, log)
    )
    with_calls = sa.select(*head, *nulls(logged), *named_calls).select_from(
        answer.join(leased, sa.true()).join(mine, sa.true()).join(named, resumed).outerjoin(o, outcome)
    )
    both = sa.union_all(with_log, with_calls).subquery("decision")
    return sa.select(both).order_by(both.c.log_seq, both.c.p_created_at)


def calls_of_run(run: Any) -> Any:
    """The tool call ids of `run`'s pending calls, once each, as a lateral subquery: the calls the
    run resumes with are then looked up by (conversation, call id), one index lookup each, instead
    of every call of the conversation read and filtered by them (a cost that grew with the
    conversation's length)."""
    p = t.pending_calls
    return sa.select(p.c.tool_call_id).where(p.c.run_id == run.c.id).distinct().lateral("mine")


def decided_row(mapping: Any, params: dict[str, Any]) -> dict[str, Any]:
    """A call's `p_*` columns as the statement read them, under their own names, with what the
    decision wrote when it is the call decided (`params`: the transition's)."""
    row = {c.name: mapping[f"p_{c.name}"] for c in t.pending_calls.c}
    if row["correlation_id"] == params["b_correlation_id"]:
        row |= {
            "status": params["b_status"],
            "resolved_by": params["b_resolved_by"],
            "reason": params["b_reason"],
            "resolution": params["b_resolution"],
            "resolved_at": params["b_now"],
        }
    return row


def covered(rows: Sequence[Any]) -> frozenset[str]:
    """The tool call ids whose calls and outcomes `rows` hold whole."""
    return frozenset(r._mapping["p_tool_call_id"] for r in rows if r._mapping["p_correlation_id"] is not None)


def seen_for_decision_statement() -> Any:
    """PostgreSQL, read before a decision's transaction (`PendingCallRepository.seen_for_decision`):
    the call (`c_*`), its run (under the run's own column names), and, when the run is suspended
    awaiting that call alone (`alone`), what its resumed segment starts from, as
    `decide_and_lease_statement` answers it: the conversation's log after the seq `b_log_from` names
    for it (0 when it names none; `log_*`), then the calls the run resumes with and their stored
    outcomes (`p_*`, `t_*`), ordered by creation.

    None of that changes before a decision that finds the run still so (`decision_guard`): only the
    segment holding the run's lease appends to its conversation, every other call of the run was
    decided already and a decided call does not change again, and a suspended run's segment
    records no outcome."""
    p, o, r = t.pending_calls, t.tool_calls, t.runs
    correlation_id = sa.bindparam("b_correlation_id", type_=p.c.correlation_id.type)
    call = sa.select(p).where(p.c.correlation_id == correlation_id).cte("the_call")
    run = sa.select(r).where(r.c.id == sa.select(call.c.run_id).scalar_subquery()).cte("the_run")
    known = sa.cast(sa.bindparam("b_log_from", type_=sa.Text()), JSONB)
    after = sa.func.coalesce(sa.cast(known[sa.cast(run.c.conversation_id, sa.Text)].astext, sa.Integer), 0)
    alone = sa.and_(
        run.c.status == RunStatus.SUSPENDED.value,
        run.c.awaiting_count == 1,
        call.c.status == PendingStatus.AWAITING.value,
    )
    head = [*(c.label(f"c_{c.name}") for c in call.c), *run.c, after.label("log_after"), alone.label("alone")]
    m = t.messages.c
    logged = [m[name].label(f"log_{name}") for name in LOG_COLUMNS]
    named = p.alias("named")
    mine = calls_of_run(run)
    outcome = sa.and_(
        o.c.conversation_id == named.c.conversation_id, o.c.tool_call_id == named.c.tool_call_id
    )
    named_calls = [named.c[c.name].label(f"p_{c.name}") for c in p.c] + [c.label(f"t_{c.name}") for c in o.c]
    calls = [c.label(f"p_{c.name}") for c in p.c] + [c.label(f"t_{c.name}") for c in o.c]

    def nulls(columns: Sequence[Any]) -> list[Any]:
        return [sa.cast(sa.null(), c.type).label(c.name) for c in columns]

    the_run = call.join(run, sa.true())
    log = sa.and_(alone, m.conversation_id == run.c.conversation_id, m.seq > after)
    resumed = sa.and_(
        alone, named.c.conversation_id == run.c.conversation_id, named.c.tool_call_id == mine.c.tool_call_id
    )
    with_log = sa.select(*head, *logged, *nulls(calls)).select_from(the_run.outerjoin(t.messages, log))
    with_calls = sa.select(*head, *nulls(logged), *named_calls).select_from(
        the_run.join(mine, sa.true()).join(named, resumed).outerjoin(o, outcome)
    )
    both = sa.union_all(with_log, with_calls).subquery("seen")
    return sa.select(both).order_by(both.c.log_seq, both.c.p_created_at)


_AWAITING = PendingStatus.AWAITING.value
_SUSPENDED = RunStatus.SUSPENDED.value
_RUNNING = RunStatus.RUNNING.value

DECISION_GUARD = (
    "UPDATE pending_calls SET status = :g_status, resolved_by = :g_resolved_by, reason = :g_reason, "
    "resolution = :g_resolution, resolved_at = :g_now "
    f"WHERE correlation_id = :g_correlation_id AND status = '{_AWAITING}' AND expires_at > :g_now "
    "AND EXISTS (SELECT 1 FROM runs r WHERE r.id = pending_calls.run_id "
    f"AND r.status = '{_SUSPENDED}' AND r.awaiting_count = 1 AND r.segment = :g_segment) "
    "RETURNING run_id"
)
"""A person's decision as the held guard (`held.Guard`) of a transaction that is one statement: the
call's transition (before its expiry), holding only while its run is the one read
(`seen_for_decision_statement`): suspended, awaiting this call alone, in the same segment. Then
the decision frees the run's last awaiting call, and `LEASE_AFTER_DECISION` leases the run."""

DECISION_GUARD_TYPES: tuple[tuple[str, Any], ...] = (
    *(
        (f"g_{name}", t.pending_calls.c[name].type)
        for name in ("status", "resolved_by", "reason", "resolution")
    ),
    ("g_now", t.pending_calls.c.resolved_at.type),
    ("g_correlation_id", t.pending_calls.c.correlation_id.type),
    ("g_segment", t.runs.c.segment.type),
)


def _when_last(value: str, otherwise: str) -> str:
    return f"CASE WHEN r.awaiting_count = 1 THEN {value} ELSE {otherwise} END"


LEASE_AFTER_DECISION = HeldUpdate(
    "leased",
    "UPDATE runs r SET awaiting_count = r.awaiting_count - 1, "
    f"status = {_when_last(repr(_RUNNING), 'r.status')}, "
    f"lease_owner = {_when_last('x.owner', 'r.lease_owner')}, "
    f"lease_expires_at = {_when_last('x.until', 'r.lease_expires_at')}, "
    f"segment = {_when_last('r.segment + 1', 'r.segment')}, "
    f"claims = {_when_last('r.claims + 1', 'r.claims')}, "
    "updated_at = x.at "
    "FROM jsonb_to_recordset(CAST(:{param} AS JSONB)) "
    "AS x(id uuid, owner varchar, until timestamptz, at timestamptz) "
    f"WHERE r.id = x.id AND r.status = '{_SUSPENDED}' AND r.awaiting_count > 0",
)
"""`lease_on_last_awaiting_statement`, held after `DECISION_GUARD` (written only if the guard held):
the run's awaiting count down by one and, at its last call, the run leased to `owner` until
`until`, one more segment, one more claim."""


def with_outcomes_statement() -> Any:
    """PostgreSQL: the pending calls and the stored outcomes of the ids in `ids`, one row per pair
    (columns `p_*` and `t_*`, either side empty), ordered by the calls' creation."""
    ids = (
        sa.func.unnest(sa.bindparam("ids", type_=ARRAY(sa.String())))
        .table_valued("tool_call_id")
        .render_derived(name="ids")
    )
    p, o = t.pending_calls, t.tool_calls
    conversation = sa.bindparam("conversation_id", type_=sa.Uuid())
    joined = ids.outerjoin(
        p, sa.and_(p.c.conversation_id == conversation, p.c.tool_call_id == ids.c.tool_call_id)
    ).outerjoin(o, sa.and_(o.c.conversation_id == conversation, o.c.tool_call_id == ids.c.tool_call_id))
    columns = [c.label(f"p_{c.name}") for c in p.c] + [c.label(f"t_{c.name}") for c in o.c]
    return sa.select(*columns).select_from(joined).order_by(p.c.created_at)


WITH_OUTCOMES = with_outcomes_statement()
SEEN_FOR_DECISION = seen_for_decision_statement()


@dataclass(frozen=True)
class SeenAhead:
    """`SeenDecision.ahead` on PostgreSQL: the run read (awaiting the call alone) and the rows of
    `seen_for_decision_statement` (its log, the calls it resumes with and their outcomes)."""

    run: Run
    rows: list[Any]


def seen_decision(call: PendingCall, rows: list[Any], cipher: Cipher) -> SeenDecision:
    """The call as `SEEN_FOR_DECISION` read it, with what it read ahead when the run awaited it alone."""
    if not rows[0]._mapping["alone"]:
        return SeenDecision(call)
    return SeenDecision(call, SeenAhead(run_from_row(rows[0], cipher), rows))


def hold_decision(
    session: UnitConnection, cipher: Cipher, seen: SeenDecision, lease: LeaseAhead, params: dict[str, Any]
) -> bool:
    """The decision (`params`: the transition's) and the run's lease held to the commit as the
    transaction's one statement (`DECISION_GUARD`, `LEASE_AFTER_DECISION`), when the reader saw the
    run awaiting this call alone and nothing was sent yet; what the resumed segment starts from kept
    for this transaction's reads of it (`runs.lease`, the log, the calls and their outcomes)."""
    if not isinstance(seen.ahead, SeenAhead) or not may_guard(session):
        return False
    run, rows = seen.ahead.run, seen.ahead.rows
    now = params["b_now"]
    guard = {f"g_{name[2:]}": value for name, value in params.items()} | {"g_segment": run.segment}
    hold_guard(session, Guard(DECISION_GUARD, guard, DECISION_GUARD_TYPES))
    hold(
        session, LEASE_AFTER_DECISION, [{"id": run.id, "owner": lease.owner, "until": lease.until, "at": now}]
    )
    calls = [r for r in rows if r._mapping["p_correlation_id"] is not None]
    logged = [r for r in rows if r._mapping["p_correlation_id"] is None]
    keep_leased(session, logged, cipher, leased_to=(lease.owner, lease.until, now))
    session.info[OUTCOMES_AHEAD_KEY] = (run.conversation_id, covered(calls), calls, params, True)
    return True
