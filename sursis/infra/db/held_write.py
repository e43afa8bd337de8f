"""The statement that writes a PostgreSQL transaction's held rows and its events (`held`), and, when
the transaction has a guard or is that statement alone, the gate every write of it depends on."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa

from sursis.domain.notifications.delivery import DELIVERED_EVENT_TYPES
from sursis.domain.records.channel_records import BindingKind

NOTIFY_CHANNEL = "sursis_events"
PENDING_CHANNEL = "sursis_pending"

_EVENTS_WRITE = """
    events_held AS (
        SELECT * FROM jsonb_to_recordset({events}) AS e(
            ord integer, conversation_id uuid, workspace varchar, type varchar, data jsonb,
            created_at timestamptz, lock_key bigint, pending_workspace text, run_channel text, run_id text)
    ),
    locked AS MATERIALIZED (
        SELECT count(*) AS n FROM (
            SELECT pg_advisory_xact_lock(k.lock_key)
            FROM (SELECT DISTINCT lock_key FROM events_held ORDER BY lock_key) k
        ) l
    ),
    notified AS MATERIALIZED (
        SELECT count(*) AS n FROM (
            SELECT pg_notify(:events_channel, h.conversation_id::text),
                   CASE WHEN h.pending_workspace IS NOT NULL
                        THEN pg_notify(:pending_channel, h.pending_workspace) END,
                   CASE WHEN h.run_channel IS NOT NULL THEN pg_notify(h.run_channel, h.run_id) END
            FROM events_held h
        ) n
    ),
    written AS (
        INSERT INTO events (conversation_id, workspace, type, data, created_at)
        SELECT h.conversation_id, h.workspace, h.type, h.data, h.created_at
        FROM events_held h, locked, notified
        ORDER BY h.ord
        RETURNING id, workspace, conversation_id, type
    )
    SELECT w.id, w.type IN ({delivered}) AND ({may_deliver}) AS deliver
    FROM written w
    ORDER BY w.id
"""
_DELIVERED = ", ".join(f"'{name}'" for name in sorted(DELIVERED_EVENT_TYPES))
_MAY_DELIVER_SQL = """
        EXISTS (SELECT 1 FROM webhooks k WHERE k.workspace = {e}.workspace)
        OR EXISTS (
            SELECT 1 FROM channel_bindings b
            WHERE b.workspace = {e}.workspace AND b.kind IN ({kinds})
              AND (b.conversation_id = {e}.conversation_id OR b.conversation_id IS NULL)
        )""".replace("{kinds}", ", ".join(f"'{kind.value}'" for kind in BindingKind))
_QUIET = """quiet AS MATERIALIZED (
        SELECT NOT EXISTS (
            SELECT 1 FROM jsonb_to_recordset(CAST(:events AS JSONB)) AS e(
                type varchar, workspace varchar, conversation_id uuid)
            WHERE e.type IN ({delivered}) AND ({may_deliver})
        ) AS ok
    )""".format(delivered=_DELIVERED, may_deliver=_MAY_DELIVER_SQL.format(e="e"))
"""A transaction sent as one statement (no `BEGIN`) writes nothing when one of its events may be
delivered: the deliveries are written by later statements of the same transaction (`deliver`), so
that statement is sent again in a transaction."""
_GATED = "CASE WHEN EXISTS (SELECT 1 FROM go) THEN CAST(:{param} AS JSONB) ELSE CAST('[]' AS JSONB) END"


@functools.cache
def held_write(
    inserts: tuple[str, ...],
    with_events: bool,
    guard: str | None = None,
    guard_types: tuple[tuple[str, Any], ...] = (),
    alone: bool = False,
) -> Any:
    """A transaction's held rows (`held`: `inserts`, one CTE a table) and its events, written by
    one statement on PostgreSQL: one round trip at commit instead of one per table.

    Events are inserted in the order held (ids are drawn after the sort, so they increase in that
    order). Their conversation locks are taken first, in key order, and their notifications
    queued, before any event id is drawn: `locked` is read by the insert's join, so every lock is
    held when the first row is produced. The statement answers each event's id and whether a
    webhook or a channel binding may hear of it (the look-up of `event_repositories._MAY_DELIVER`),
    so a transaction whose events nothing delivers reads no more. Without events it writes the held rows alone
    (a data-modifying CTE runs whether or not the query reads it).

    With a `guard` (`held.Guard`, the CTE `guard`), and when the statement is the whole transaction
    (`alone`, sent without `BEGIN`) with events that may have to be delivered (`_QUIET`), every
    other CTE reads its rows from `go`: one row if the statement is to write, none if not. Each
    held document is then the empty array unless `go` has its row, and the events' locks,
    notifications and inserts are read from that document, so a statement that is not to write
    takes no lock, sends no notification and writes nothing: it answers no row.
    """
    gates: list[str] = []
    if alone and with_events:
        gates.append(_QUIET)
    if guard is not None:
        gates.append(guard.replace("WHERE ", "WHERE (SELECT ok FROM quiet) AND ", 1) if gates else guard)
        gates.append("go AS MATERIALIZED (SELECT 1 FROM guard)")
    elif gates:
        gates.append("go AS MATERIALIZED (SELECT 1 FROM quiet WHERE ok)")
    gated = bool(gates)

    def document(param: str) -> str:
        return _GATED.format(param=param) if gated else f"CAST(:{param} AS JSONB)"

    params = [f"held_{i}" for i in range(len(inserts))]
    ctes = [*gates]
    for param, cte in zip(params, inserts, strict=True):
        ctes.append(cte.replace(f"CAST(:{param} AS JSONB)", document(param)))
    binds = [sa.bindparam(param, type_=sa.Text()) for param in params]
    binds += [sa.bindparam(name, type_=type_) for name, type_ in guard_types]
    if with_events:
        events = _EVENTS_WRITE.format(
            events=document("events"), delivered=_DELIVERED, may_deliver=_MAY_DELIVER_SQL.format(e="w")
        )
        text = "WITH " + ",\n".join([*ctes, events])
        return sa.text(text).bindparams(
            sa.bindparam("events", type_=sa.Text()),
            sa.bindparam("events_channel", NOTIFY_CHANNEL, type_=sa.Text()),
            sa.bindparam("pending_channel", PENDING_CHANNEL, type_=sa.Text()),
            *binds,
        )
    answer = "SELECT 1 FROM go" if gated else "SELECT 1"
    return sa.text("WITH " + ",\n".join(ctes) + "\n" + answer).bindparams(*binds)
