"""Retention: an idle conversation is purged with every row that belongs to it, in every table of
the schema (a new table fails here until it is classified); legal holds and workspaces without a
policy keep everything; plan counts what run deletes; a purged conversation answers 404
`conversation_purged`; the audit log is cut at an anchor and still verifies."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.clock import utcnow
from sursis.domain.errors import Forbidden, NotFound
from sursis.domain.records import AuditQuery, Principal
from sursis.domain.retention.retention import ConversationPurged, RetentionPolicy, RetentionService
from sursis.domain.states import Decision, PendingStatus
from sursis.infra.db import channel_tables as ch
from sursis.infra.db import customer_tables as cu
from sursis.infra.db import tables as t
from sursis.infra.db import world_tables as w
from tests.conftest import call, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
OPERATOR = Principal(id="operator:alice", role=Role.OPERATOR, workspace="default")
GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "replayed")

OWNED = "deleted with the conversation"
UNLINKED = "kept, its reference to the conversation set to NULL"
TABLES: dict[str, str] = {
    "conversations": OWNED,
    "messages": OWNED,
    "runs": OWNED,
    "pending_calls": OWNED,
    "pending_votes": "deleted with its pending calls (rows name the call: tests/routing/test_purge.py)",
    "pending_routes": "deleted with its pending calls (rows name the call: tests/routing/test_purge.py)",
    "pending_reviews": "deleted with its pending calls (rows name the call: tests/routing/test_purge.py)",
    "approval_requests": "deleted with its pending call (rows name the call: tests/routing/test_purge.py)",
    "tool_calls": OWNED,
    "events": OWNED,
    "outbox": OWNED + " (its deliveries)",
    "dead_letters": OWNED + " (its failed deliveries)",
    "channel_bindings": OWNED + " (its own bindings; workspace bindings stay)",
    "slack_posts": OWNED,
    "email_digests": OWNED + " (of its own bindings)",
    "digest_items": OWNED,
    "delegations": OWNED,
    "world_sessions": OWNED,
    "memories": OWNED + " (interaction and session tiers); persistent ones " + UNLINKED,
    "platform_events": UNLINKED + " (the event stays, for deduplication)",
    "world_rules": UNLINKED + " (a rule belongs to its world)",
    "audit_log": "kept: its own, longer period (retention cuts the chain)",
    "purged_conversations": "kept: the tombstone that answers 404 conversation_purged",
    "audit_chain_heads": "workspace-level",
    "audit_checkpoints": "workspace-level",
    "encryption_keys": "database-level (key check values: no content)",
    "retention_policies": "workspace-level",
    "legal_holds": "workspace-level (a hold keeps its conversation: it is never purged)",
    "api_keys": "workspace-level",
    "oidc_provisioning_rules": "service-level (which provider groups sign in as which role)",
    "person_sessions": "service-level (a session ends at its expiry, deleted then)",
    "person_sign_ins": "service-level (a sign-in in progress: ten minutes at most)",
    "approver_groups": "workspace-level",
    "approver_group_members": "workspace-level",
    "approval_delegations": "workspace-level",
    "authorizations": "workspace-level",
    "policies": "workspace-level (every version, for the decisions that name it)",
    "autonomy_ladder": "workspace-level",
    "mcp_tool_pins": "service-level (what MCP servers said about their tools: no conversation content)",
    "webhooks": "workspace-level",
    "failure_clusters": "workspace-level",
    "slack_users": "workspace-level",
    "slack_events": "event ids only (deduplication)",
    "scans": "workspace-level",
    "framework_configs": "workspace-level",
    "rubrics": "workspace-level",
    "onboarding": "workspace-level",
    "workspace_errors": "workspace-level",
    "worlds": "workspace-level",
    "world_decisions": "world-level",
    "world_flags": "world-level",
}
KEPT = {"audit_log", "purged_conversations"}


def later(days: float) -> Any:
    return lambda: utcnow() + timedelta(days=days)


async def converse(container: Container, workspace: str = "default") -> tuple[uuid.UUID, uuid.UUID]:
    """A conversation with a gated call approved and run: rows in the core tables."""
    conversation = await container.conversations.create_conversation(ADMIN, "ops", workspace)
    run = await container.conversations.post_message(ADMIN, conversation.id, GATED)
    assert await container.worker.run_once()
    async with container.uow() as uow:
        [pending] = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
    await container.pending_calls.resolve_pending(ADMIN, pending.correlation_id, Resolution(Decision.APPROVE))
    while await container.worker.run_once():
        pass
    return conversation.id, run.id


async def own_the_rest(
    container: Container, conversation_id: uuid.UUID, run_id: uuid.UUID, workspace: str
) -> None:
    """One row in each other table that can belong to a conversation (directly or through another row)."""
    now, world_id, binding, digest = utcnow(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    ref = str(conversation_id)
    async with container.uow.engine.begin() as conn:
        outbox_id = (
            await conn.execute(
                t.outbox.insert()
                .values(
                    workspace=workspace,
                    topic="webhook.run.completed",
                    payload={"event": {"conversation_id": ref}},
                    status="dead",
                    attempts=3,
                    created_at=now,
                    updated_at=now,
                    conversation_id=conversation_id,
                )
                .returning(t.outbox.c.id)
            )
        ).scalar_one()
        statements: list[tuple[sa.Table, dict[str, Any]]] = [
            (
                t.dead_letters,
                {
                    "id": f"wh_{outbox_id}",
                    "workspace": workspace,
                    "outbox_id": outbox_id,
                    "topic": "webhook.run.completed",
                    "payload": {"event": {"conversation_id": ref}},
                    "error": "boom",
                    "attempts": 3,
                    "status": "dead",
                    "replay_count": 0,
                    "failed_at": now,
                },
            ),
            (
                ch.channel_bindings,
                {
                    "id": binding,
                    "workspace": workspace,
                    "conversation_id": conversation_id,
                    "kind": "slack",
                    "slack_team_id": "T1",
                    "slack_channel_id": "C1",
                    "slack_thread_ts": f"{uuid.uuid4().int % 10**9}.1",
                    "created_by": "test",
                    "created_at": now,
                },
            ),
            (
                ch.slack_posts,
                {
                    "delivery_id": outbox_id,
                    "binding_id": binding,
                    "channel_id": "C1",
                    "ts": "1.2",
                    "posted_at": now,
                },
            ),
            (
                ch.email_digests,
                {
                    "id": digest,
                    "binding_id": binding,
                    "window_end": now,
                    "status": "sent",
                    "attempts": 1,
                    "created_at": now,
                },
            ),
            (
                ch.digest_items,
                {
                    "binding_id": binding,
                    "conversation_id": conversation_id,
                    "kind": "pending",
                    "summary": "s",
                    "data": {"conversation_id": ref},
                    "created_at": now,
                    "digest_id": digest,
                },
            ),
            (
                cu.delegations,
                {
                    "conversation_id": conversation_id,
                    "tool_call_id": "call_1",
                    "run_id": run_id,
                    "specialist": "troubleshooter",
                    "status": "done",
                    "messages": "[]",
                    "created_at": now,
                    "updated_at": now,
                },
            ),
            (
                w.worlds,
                {
                    "id": world_id,
                    "workspace": workspace,
                    "domain": f"d{world_id.hex}",
                    "title": "w",
                    "created_by": "t",
                    "created_at": now,
                },
            ),
            (
                w.world_sessions,
                {
                    "conversation_id": conversation_id,
                    "world_id": world_id,
                    "mode": "operator",
                    "created_by": "t",
                    "created_at": now,
                },
            ),
            (
                cu.platform_events,
                {
                    "workspace": workspace,
                    "id": f"ev_{uuid.uuid4().hex}",
                    "type": "scan.completed",
                    "data": {},
                    "received_at": now,
                    "received_by": "t",
                    "conversation_id": conversation_id,
                },
            ),
            (
                w.world_rules,
                {
                    "id": uuid.uuid4(),
                    "version": 1,
                    "world_id": world_id,
                    "state": "enshrined",
                    "text": "rule",
                    "tests": [],
                    "citations": [],
                    "evidence": [],
                    "request_conversation_id": conversation_id,
                    "request_tool_call_id": "call_2",
                    "created_at": now,
                    "updated_at": now,
                },
            ),
        ]
        for tier in ("interaction", "session", "persistent"):
            memory = {
                "id": uuid.uuid4(),
                "workspace": workspace,
                "world_id": world_id,
                "agent": "world",
                "tier": tier,
                "kind": "note",
                "text": f"{tier} note",
                "conversation_id": conversation_id,
                "run_id": run_id,
                "created_at": now,
            }
            statements.append((w.memories, memory))
        for table, values in statements:
            await conn.execute(table.insert().values(**values))


async def table_names(container: Container) -> set[str]:
    async with container.uow.engine.connect() as conn:
        names = await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names())
    return set(names) - {"alembic_version"}


async def mentions(container: Container, ids: list[uuid.UUID]) -> dict[str, int]:
    """Rows of each table whose any column (JSON documents included) names one of `ids`."""
    tokens = [str(i) for i in ids] + [i.hex for i in ids]
    found: dict[str, int] = {}
    async with container.uow.engine.connect() as conn:
        for name in sorted(await table_names(container)):
            rows = (await conn.execute(sa.text(f"SELECT * FROM {name}"))).all()
            hits = sum(1 for row in rows if any(token in str(tuple(row)) for token in tokens))
            if hits:
                found[name] = hits
    return found


async def test_every_table_of_the_schema_is_classified(container: Container) -> None:
    assert await table_names(container) == set(TABLES), "a new table: say what retention does with its rows"


async def test_a_purge_leaves_nothing_of_the_conversation_in_any_table(container: Container) -> None:
    idle, idle_run = await converse(container)
    await own_the_rest(container, idle, idle_run, "default")
    held, held_run = await converse(container)
    await own_the_rest(container, held, held_run, "default")
    elsewhere, _ = await converse(container, "other")
    retention = RetentionService(container.uow, later(3), batch=1)
    await retention.set_policy(ADMIN, RetentionPolicy("default", conversation_days=2))
    await retention.add_hold(ADMIN, "default", held, "litigation 42")
    async with container.uow.engine.connect() as conn:
        bindings = ch.channel_bindings.c
        query = sa.select(bindings.id).where(bindings.conversation_id == idle)
        owned = [idle, idle_run, *(await conn.execute(query)).scalars()]
    before = await mentions(container, owned)
    assert set(before) == {name for name, why in TABLES.items() if why.startswith((OWNED, UNLINKED))} | {
        "audit_log"
    }

    [plan] = await retention.plan(ADMIN, "default")
    assert plan.conversations == 1 and plan.rows["messages"] > 0 and plan.rows["conversations"] == 1
    [report] = await retention.run(ADMIN, "default")
    assert report.conversations == 1 and report.rows == plan.rows  # plan counted exactly what run deleted

    after = await mentions(container, owned)
    assert set(after) == KEPT, after  # only the audit log and the tombstone still name it
    async with container.uow.engine.connect() as conn:
        for table in (w.memories, cu.platform_events, w.world_rules):  # unlinked rows outlive it
            assert (await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one() >= 2
    assert set(await mentions(container, [held])) >= {"conversations", "messages", "outbox", "memories"}
    assert "conversations" in await mentions(container, [elsewhere])

    with pytest.raises(ConversationPurged) as purged:
        await container.conversations.get_conversation(ADMIN, idle)
    assert purged.value.code == "conversation_purged"
    with pytest.raises(ConversationPurged):
        await container.events.events_after(ADMIN, idle, 0, 10)
    outsider = Principal(id="operator:eve", role=Role.OPERATOR, workspace="other")
    with pytest.raises(NotFound) as hidden:  # another workspace is not told it existed
        await container.conversations.get_conversation(outsider, idle)
    assert hidden.value.code == "not_found"
    page = await container.audit.list_audit(
        ADMIN, AuditQuery(conversation_id=idle, actions=("retention.conversation_purged",))
    )
    assert [row.actor for row in page.items] == ["admin:test"]


async def test_defaults_keep_everything_and_a_workspace_hold_stops_both_purges(container: Container) -> None:
    conversation, _ = await converse(container)
    retention = RetentionService(container.uow, later(10_000))
    assert await retention.run(ADMIN) == []  # no policy anywhere: nothing is purged
    assert (await retention.get_policy(ADMIN, "default")).conversation_days is None
    await retention.set_policy(ADMIN, RetentionPolicy("default", conversation_days=1, audit_days=2))
    hold = await retention.add_hold(ADMIN, "default", None, "regulator request")
    await container.audit_chain.seal_all()
    [report] = await retention.run(ADMIN, "default")
    assert (report.conversations, report.audit_rows, report.held) == (0, 0, True)
    await retention.release_hold(ADMIN, hold.id)
    [report] = await retention.run(ADMIN, "default")
    assert report.conversations == 1 and report.audit_rows > 0
    with pytest.raises(ConversationPurged):
        await container.conversations.get_conversation(ADMIN, conversation)
    reports = await container.audit_chain.verify("default")
    assert reports[0].ok and reports[0].anchor_seq == report.audit_rows
    with pytest.raises(Forbidden):
        await retention.set_policy(OPERATOR, RetentionPolicy("default"))


async def test_the_sweeper_purges_one_bounded_batch_per_tick(container: Container) -> None:
    for _ in range(3):
        await converse(container)
    retention = RetentionService(container.uow, later(5), batch=2)
    await retention.set_policy(ADMIN, RetentionPolicy("default", conversation_days=1))
    assert await retention.sweep() == 2
    assert await retention.sweep() == 1
    assert await retention.sweep() == 0


async def test_a_conversation_hold_stops_the_audit_cut_at_its_first_row(container: Container) -> None:
    purged, _ = await converse(container)
    held, _ = await converse(container)
    retention = RetentionService(container.uow, later(3))
    await retention.set_policy(ADMIN, RetentionPolicy("default", conversation_days=1, audit_days=2))
    await retention.add_hold(ADMIN, "default", held, "case 9")
    [plan] = await retention.plan(ADMIN, "default")
    assert plan.conversations == 1
    [report] = await retention.run(ADMIN, "default")
    assert report.held and report.audit_rows > 0
    audit = container.audit
    assert not (
        await audit.list_audit(ADMIN, AuditQuery(conversation_id=purged, actions=("run.queued",)))
    ).items
    kept = await audit.list_audit(ADMIN, AuditQuery(conversation_id=held, limit=500))
    first_kept = min(row.id or 0 for row in kept.items)
    everything = await audit.list_audit(ADMIN, AuditQuery(limit=500))
    assert all(row.conversation_id != purged or (row.id or 0) > first_kept for row in everything.items)
    [chain] = await container.audit_chain.verify("default")
    assert chain.ok and chain.anchor_seq == report.audit_rows
