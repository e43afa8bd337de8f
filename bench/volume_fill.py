# ruff: noqa: E501 -- the fill's SQL statements read better with their long lines unwrapped
"""The fill of `bench/volume.py`: a year of a busy service's rows, written by PostgreSQL itself.

Every row is made by an `INSERT … SELECT … FROM generate_series(…)` (multi-row inserts that never
leave the server), into the schema the migrations made: the fill's input is that schema, not the
service's code. Ids are derived from the row number (`uid(kind, i)`: a kind in the first 4 hex
digits, the number in the next 12), so a child row computes its parent's id and workspace
without a join; the workspace of conversation i is a hash of i mapped to a log-uniform rank,
which is Zipf's law with exponent 1: `ws-0000` has about 8% of the traffic, `ws-2000` 0.006%.

Shape at scale 1 (every count is multiplied by the scale, except the 5,000 workspaces):
1,000,000 conversations; 10 messages, 5 events and 5 audit rows each; 2 completed runs and 1
resolved pending call each; 1 in 20 conversations also has a suspended run with an awaiting call
(50,000), of which 1 in 50 is made overdue (1,000) right before the sweeper is measured (a
sweeper in the servers of the earlier measurements would otherwise expire them first); 500,000 delivered outbox rows and 5,000 due.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

WORKSPACES = 5000
LARGE_WORKSPACE = "ws-0000"
SMALL_WORKSPACE = "ws-2000"
FILL_ACTOR = "bench-fill"


def uid(kind: int, i: str) -> str:
    """SQL for the fill's id of row `i` (an SQL expression) of a kind."""
    return f"(lpad(to_hex({kind}), 4, '0') || lpad(to_hex({i}), 12, '0') || '4000800000000000')::uuid"


def workspace_of(i: str) -> str:
    """SQL for the workspace of conversation `i`: rank floor(5001^u) - 1 for u uniform in [0, 1)."""
    u = f"((hashint8(({i})::bigint)::bigint + 2147483648)::float8 / 4294967296.0)"
    return f"'ws-' || lpad((floor(exp({u} * ln({WORKSPACES + 1}))) - 1)::int::text, 4, '0')"


# Kinds of ids.
CONVERSATION, RUN, SUSPENDED_RUN, RESOLVED_CALL, AWAITING_CALL = 1, 2, 3, 4, 5
AWAITING_EVERY = 20
"""One conversation in 20 has a suspended run with an awaiting call."""
OVERDUE_EVERY = 50
"""One awaiting call in 50 is overdue."""


@dataclass(frozen=True)
class Shape:
    conversations: int
    outbox_delivered: int
    outbox_due: int

    @classmethod
    def at(cls, scale: float) -> Shape:
        return cls(
            conversations=max(2000, round(1_000_000 * scale)),
            outbox_delivered=max(100, round(500_000 * scale)),
            outbox_due=max(10, round(5_000 * scale)),
        )


def _statements(shape: Shape) -> list[tuple[str, str]]:
    n = shape.conversations
    year = "interval '365 days'"
    at = f"(now() - {year} + {year} * (i::float8 / {n}))"
    body = '\'{"kind":"request","parts":[{"part_kind":"user-prompt","content":"\' || repeat(\'lorem ipsum \', 14) || i || \'"}]}\''
    ws = workspace_of("i")
    suspended = f"i % {AWAITING_EVERY} = 0"
    return [
        (
            "conversations",
            f"""INSERT INTO conversations (id, workspace, agent, status, active_run_id, created_at, updated_at, created_by)
            SELECT {uid(CONVERSATION, "i")}, {ws}, 'ops', 'open',
                   CASE WHEN {suspended} THEN {uid(SUSPENDED_RUN, "i")} END, {at}, {at}, '{FILL_ACTOR}'
            FROM generate_series(0, {n - 1}) AS i""",
        ),
        (
            "runs",
            f"""INSERT INTO runs (id, conversation_id, workspace, agent, status, input, output, error, segment,
                   awaiting_count, usage, cancel_requested, claims, lease_owner, lease_expires_at, trace_context,
                   created_at, updated_at, finished_at, channel)
            SELECT {uid(RUN, "i * 2 + j")}, {uid(CONVERSATION, "i")}, {ws}, 'ops', 'completed', 'please help',
                   'done', NULL, 2, 0,
                   '{{"requests": 2, "input_tokens": 120, "output_tokens": 30, "tool_calls": 1, "cost": null}}',
                   false, 0, NULL, NULL, NULL, {at} + j * interval '1 minute', {at} + j * interval '1 minute',
                   {at} + j * interval '1 minute' + interval '2 seconds', 'web'
            FROM generate_series(0, {n - 1}) AS i, generate_series(0, 1) AS j""",
        ),
        (
            "runs (suspended)",
            f"""INSERT INTO runs (id, conversation_id, workspace, agent, status, input, output, error, segment,
                   awaiting_count, usage, cancel_requested, claims, lease_owner, lease_expires_at, trace_context,
                   created_at, updated_at, finished_at, channel)
            SELECT {uid(SUSPENDED_RUN, "i")}, {uid(CONVERSATION, "i")}, {ws}, 'ops', 'suspended', 'please help',
                   NULL, NULL, 1, 1,
                   '{{"requests": 1, "input_tokens": 60, "output_tokens": 15, "tool_calls": 0, "cost": null}}',
                   false, 0, NULL, NULL, NULL, now() - interval '2 days' + interval '1 second' * (i % 86400),
                   now() - interval '2 days' + interval '1 second' * (i % 86400), NULL, 'web'
            FROM generate_series(0, {n - 1}, {AWAITING_EVERY}) AS i""",
        ),
        (
            "pending_calls (resolved)",
            f"""INSERT INTO pending_calls (correlation_id, conversation_id, run_id, workspace, segment, tool_call_id,
                   tool_name, agent, executor, kind, args, args_summary, args_hash, effect_description, status,
                   resolution, reason, resolved_by, created_at, expires_at, resolved_at, agent_path)
            SELECT {uid(RESOLVED_CALL, "i")}, {uid(CONVERSATION, "i")}, {uid(RUN, "i * 2 + 1")}, {ws}, 1,
                   'call_' || i, 'replay_dlq_event', 'ops', 'server', 'approval',
                   '{{"event_id": "evt_1001", "reason": "fill"}}', '{{"event_id": "evt_1001", "reason": "fill"}}',
                   md5(i::text) || md5(i::text), 'Replay DLQ event evt_1001',
                   (ARRAY['approved', 'approved', 'approved', 'denied', 'expired'])[1 + i % 5],
                   '{{"decision": "approve"}}', NULL, 'operator', {at}, {at} + interval '1 day',
                   {at} + interval '1 minute', NULL
            FROM generate_series(0, {n - 1}) AS i""",
        ),
        (
            "pending_calls (awaiting)",
            f"""INSERT INTO pending_calls (correlation_id, conversation_id, run_id, workspace, segment, tool_call_id,
                   tool_name, agent, executor, kind, args, args_summary, args_hash, effect_description, status,
                   resolution, reason, resolved_by, created_at, expires_at, resolved_at, agent_path)
            SELECT {uid(AWAITING_CALL, "i")}, {uid(CONVERSATION, "i")}, {uid(SUSPENDED_RUN, "i")}, {ws}, 1,
                   'call_a_' || i, 'replay_dlq_event', 'ops', 'server', 'approval',
                   '{{"event_id": "evt_1001", "reason": "fill"}}', '{{"event_id": "evt_1001", "reason": "fill"}}',
                   md5(i::text) || md5(i::text), 'Replay DLQ event evt_1001', 'awaiting', NULL, NULL, NULL,
                   now() - interval '2 days' + interval '1 second' * (i % 86400),
                   now() + interval '30 days', NULL, NULL
            FROM generate_series(0, {n - 1}, {AWAITING_EVERY}) AS i""",
        ),
        (
            "messages",
            f"""INSERT INTO messages (conversation_id, seq, run_id, body, created_at, channel)
            SELECT {uid(CONVERSATION, "i")}, s, {uid(RUN, "i * 2 + (s - 1) / 5")}, {body},
                   {at} + s * interval '10 seconds', NULL
            FROM generate_series(0, {n - 1}) AS i, generate_series(1, 10) AS s""",
        ),
        (
            "events",
            f"""INSERT INTO events (conversation_id, workspace, type, data, created_at)
            SELECT {uid(CONVERSATION, "i")}, {ws},
                   (ARRAY['run.status', 'pending.created', 'pending.resolved', 'run.status', 'run.completed'])[1 + k],
                   jsonb_build_object('run_id', {uid(RUN, "i * 2 + 1")}::text, 'status', 'completed'),
                   {at} + k * interval '10 seconds'
            FROM generate_series(0, {n - 1}) AS i, generate_series(0, 4) AS k""",
        ),
        (
            "audit_log",
            f"""INSERT INTO audit_log (at, actor, action, workspace, conversation_id, run_id, correlation_id, details, trace_id)
            SELECT {at} + k * interval '10 seconds', 'operator',
                   (ARRAY['run.segment', 'pending.created', 'pending.approved', 'run.resumed', 'run.completed'])[1 + k],
                   {ws}, {uid(CONVERSATION, "i")}, {uid(RUN, "i * 2 + 1")},
                   CASE WHEN k IN (1, 2) THEN {uid(RESOLVED_CALL, "i")} END,
                   '{{"tool_name": "replay_dlq_event"}}', NULL
            FROM generate_series(0, {n - 1}) AS i, generate_series(0, 4) AS k""",
        ),
        (
            "outbox",
            f"""INSERT INTO outbox (workspace, topic, payload, status, attempts, last_error, source_event_id,
                   created_at, updated_at, next_attempt_at, delivered_at)
            SELECT {ws}, 'webhook:run.completed', '{{"type": "run.completed"}}',
                   CASE WHEN i < {shape.outbox_delivered} THEN 'delivered' ELSE 'pending' END, 1, NULL, NULL,
                   {at}, {at}, CASE WHEN i < {shape.outbox_delivered} THEN NULL ELSE now() - interval '1 minute' END,
                   CASE WHEN i < {shape.outbox_delivered} THEN {at} + interval '1 second' END
            FROM generate_series(0, {shape.outbox_delivered + shape.outbox_due - 1}) AS i""",
        ),
    ]


async def fill(
    conn: AsyncConnection, shape: Shape, report: Callable[[str], Awaitable[None] | None]
) -> dict[str, float]:
    """Insert the rows, then VACUUM ANALYZE (a year-old database has been vacuumed and analysed).
    The seconds each step took."""
    took: dict[str, float] = {}
    await conn.exec_driver_sql("SET synchronous_commit = off")
    await conn.exec_driver_sql("SET maintenance_work_mem = '256MB'")
    for name, sql in _statements(shape):
        started = time.perf_counter()
        await conn.exec_driver_sql(sql)
        took[name] = round(time.perf_counter() - started, 1)
        outcome = report(f"  filled {name} in {took[name]} s")
        if outcome is not None:
            await outcome
    return took


async def vacuum_analyze(conn: AsyncConnection) -> float:
    started = time.perf_counter()
    for table in ("conversations", "runs", "pending_calls", "messages", "events", "audit_log", "outbox"):
        await conn.exec_driver_sql(f"VACUUM (ANALYZE) {table}")
    return round(time.perf_counter() - started, 1)


_FILL_AWAITING = (
    f"""correlation_id >= {uid(AWAITING_CALL, "0")} AND correlation_id < {uid(AWAITING_CALL + 1, "0")}"""
)
MAKE_OVERDUE = f"""UPDATE pending_calls SET expires_at = now() - interval '1 hour'
    WHERE {_FILL_AWAITING} AND status = 'awaiting'
    AND (substr(tool_call_id, 8)::bigint / {AWAITING_EVERY}) % {OVERDUE_EVERY} = 0"""


async def fill_overdue_only(conn: AsyncConnection, overdue: int) -> None:
    """Into an empty database, the sweeper's work alone: `overdue` suspended runs whose one call is
    overdue (with the conversations around them), the same work the full database's sweep does."""
    wanted = {"conversations", "runs (suspended)", "pending_calls (awaiting)"}
    for name, sql in _statements(
        Shape(conversations=overdue * AWAITING_EVERY, outbox_delivered=0, outbox_due=0)
    ):
        if name in wanted:
            await conn.exec_driver_sql(sql)
    await conn.exec_driver_sql(
        f"UPDATE pending_calls SET expires_at = now() - interval '1 hour' WHERE {_FILL_AWAITING}"
    )


RESTORE = [
    # What a measuring run changed in the filled rows, put back: the sweeper expired the overdue
    # calls and re-queued their runs; the turns and claims added conversations of their own.
    f"""UPDATE pending_calls SET status = 'awaiting', resolution = NULL, reason = NULL, resolved_by = NULL,
        resolved_at = NULL, expires_at = now() + interval '30 days'
        WHERE {_FILL_AWAITING} AND (status <> 'awaiting' OR expires_at < now() + interval '1 day')""",
    f"""UPDATE runs SET status = 'suspended', awaiting_count = 1, lease_owner = NULL, lease_expires_at = NULL,
        finished_at = NULL WHERE id >= {uid(SUSPENDED_RUN, "0")} AND id < {uid(SUSPENDED_RUN + 1, "0")}
        AND status <> 'suspended'""",
    """UPDATE outbox SET status = 'pending', next_attempt_at = now() - interval '1 minute', delivered_at = NULL
        WHERE delivered_at IS NULL AND status <> 'pending'""",
]


async def restore(conn: AsyncConnection) -> None:
    for sql in RESTORE:
        await conn.exec_driver_sql(sql)


async def sizes(conn: AsyncConnection) -> dict[str, int]:
    """Rows (planner estimates) and bytes on disk of the filled tables, and the database's size."""
    rows = await conn.execute(
        sa.text(
            "SELECT relname, reltuples::bigint, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relname IN ('conversations', 'runs', 'pending_calls', 'messages', 'events', "
            "'audit_log', 'outbox') AND relkind = 'r'"
        )
    )
    found = {f"{name}_rows": int(count) for name, count, _ in rows}
    database = await conn.scalar(sa.text("SELECT pg_database_size(current_database())"))
    found["database_bytes"] = int(database or 0)
    return found
