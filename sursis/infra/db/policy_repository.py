"""Workspace policies, the autonomy ladder and the recorded calls a simulation replays, in SQL."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from sursis.domain.policy.policies import LadderEntry, LadderLevel, PolicyRule, StoredPolicy
from sursis.domain.policy.policy_ports import RecordedCall
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.tools import Category, PendingKind
from sursis.infra.db import policy_tables as p
from sursis.infra.db import tables as t
from sursis.infra.db.access_repositories import AUTHORIZATION_CHANNEL
from sursis.infra.db.repositories.base import SqlRepository
from sursis.infra.db.sealing import PENDING_CALLS


def _policy(row: Any) -> StoredPolicy:
    m = row._mapping
    return StoredPolicy(
        workspace=m["workspace"],
        version=m["version"],
        rules=tuple(PolicyRule.from_json(r) for r in m["rules"]),
        created_by=m["created_by"],
        created_at=m["created_at"],
        comment=m["comment"],
    )


def _rung(row: Any) -> LadderEntry:
    m = row._mapping
    return LadderEntry(
        workspace=m["workspace"],
        tool=m["tool"],
        ceiling=LadderLevel(m["ceiling"]),
        ceiling_condition=m["ceiling_condition"] or "",
        level=LadderLevel(m["level"]) if m["level"] else None,
        condition=m["condition"] or "",
        pin=m["pin"],
        previous_level=LadderLevel(m["previous_level"]) if m["previous_level"] else None,
        previous_condition=m["previous_condition"] or "",
        updated_by=m["updated_by"],
        updated_at=m["updated_at"],
        one_in=m["one_in"],
        ceiling_one_in=m["ceiling_one_in"],
        previous_one_in=m["previous_one_in"],
    )


class SqlPolicyRepository(SqlRepository):
    async def current(self, workspace: str) -> StoredPolicy | None:
        c = p.policies.c
        row = (
            await self._session.execute(
                sa.select(p.policies).where(c.workspace == workspace).order_by(c.version.desc()).limit(1)
            )
        ).first()
        return _policy(row) if row else None

    async def version(self, workspace: str, version: int) -> StoredPolicy | None:
        c = p.policies.c
        row = (
            await self._session.execute(
                sa.select(p.policies).where(c.workspace == workspace, c.version == version)
            )
        ).first()
        return _policy(row) if row else None

    async def add(self, policy: StoredPolicy) -> bool:
        try:
            await self._session.execute(
                p.policies.insert().values(
                    workspace=policy.workspace,
                    version=policy.version,
                    rules=[r.to_json() for r in policy.rules],
                    comment=policy.comment,
                    created_by=policy.created_by,
                    created_at=policy.created_at,
                )
            )
        except IntegrityError:
            # Another PUT took this version; the transaction is spoiled, the caller rolls back.
            return False
        await self._notify(policy.workspace)
        return True

    async def ladder(self, workspace: str) -> dict[str, LadderEntry]:
        c = p.autonomy_ladder.c
        rows = await self._session.execute(
            sa.select(p.autonomy_ladder).where(c.workspace == workspace).order_by(c.tool)
        )
        return {entry.tool: entry for entry in map(_rung, rows)}

    async def rung(self, workspace: str, tool: str, *, lock: bool = False) -> LadderEntry | None:
        c = p.autonomy_ladder.c
        query = sa.select(p.autonomy_ladder).where(c.workspace == workspace, c.tool == tool)
        if lock and self._postgres:
            query = query.with_for_update()
        row = (await self._session.execute(query)).first()
        return _rung(row) if row else None

    async def put_rung(self, entry: LadderEntry, *, ceiling: bool = True) -> None:
        ceiling_values = {
            "ceiling": entry.ceiling.value,
            "ceiling_condition": entry.ceiling_condition,
            "ceiling_one_in": entry.ceiling_one_in,
        }
        values = {
            "level": entry.level.value if entry.level else None,
            "condition": entry.condition,
            "pin": entry.pin,
            "previous_level": entry.previous_level.value if entry.previous_level else None,
            "previous_condition": entry.previous_condition,
            "one_in": entry.one_in,
            "previous_one_in": entry.previous_one_in,
            "updated_by": entry.updated_by,
            "updated_at": entry.updated_at,
        }
        insert = self._insert(p.autonomy_ladder).values(
            workspace=entry.workspace, tool=entry.tool, **ceiling_values, **values
        )
        # A move that sets no ceiling never writes one: an admin's change in between stays.
        changed = {**ceiling_values, **values} if ceiling else values
        await self._session.execute(
            insert.on_conflict_do_update(index_elements=["workspace", "tool"], set_=changed)
        )
        await self._notify(entry.workspace)

    async def history(
        self, workspace: str, since: datetime, until: datetime, limit: int
    ) -> list[RecordedCall]:
        pc = t.pending_calls.c
        pending_rows = await self._session.execute(
            sa.select(t.pending_calls)
            .where(
                pc.workspace == workspace,
                pc.kind == PendingKind.APPROVAL.value,
                pc.created_at >= since,
                pc.created_at < until,
            )
            .order_by(pc.created_at)
            .limit(limit)
        )
        asked: dict[tuple[uuid.UUID, str], RecordedCall] = {}
        for row in pending_rows:
            m = PENDING_CALLS.open(self._cipher, row)
            decision = PolicyDecision.from_json(m["policy"]) if m["policy"] else None
            asked[(m["conversation_id"], m["tool_call_id"])] = RecordedCall(
                conversation_id=m["conversation_id"],
                run_id=m["run_id"],
                tool_call_id=m["tool_call_id"],
                agent=m["agent"],
                tool=m["tool_name"],
                category=Category(m["category"]) if m["category"] else None,
                at=m["created_at"],
                arguments=m["args"] if isinstance(m["args"], dict) else None,
                outcome=PolicyEffect.ASK.value,
                decision=decision,
            )
        tc = t.tool_calls.c
        rows = await self._session.execute(
            sa.select(
                tc.conversation_id,
                tc.run_id,
                tc.tool_call_id,
                tc.agent_name,
                tc.tool_name,
                tc.category,
                tc.started_at,
                tc.policy,
                tc.error_code,
            )
            .join(t.runs, t.runs.c.id == tc.run_id)
            .where(t.runs.c.workspace == workspace, tc.started_at >= since, tc.started_at < until)
            .order_by(tc.started_at)
            .limit(limit)
        )
        ran: list[RecordedCall] = []
        for row in rows:
            r = row._mapping
            key = (r["conversation_id"], r["tool_call_id"])
            if key in asked:
                continue
            decision = PolicyDecision.from_json(r["policy"]) if r["policy"] else None
            ran.append(
                RecordedCall(
                    conversation_id=r["conversation_id"],
                    run_id=r["run_id"],
                    tool_call_id=r["tool_call_id"],
                    agent=r["agent_name"],
                    tool=r["tool_name"],
                    category=Category(r["category"]) if r["category"] else None,
                    at=r["started_at"],
                    arguments=None,
                    outcome=decision.effect.value if decision else PolicyEffect.ALLOW.value,
                    decision=decision,
                )
            )
        calls = sorted([*asked.values(), *ran], key=lambda c: c.at)
        return calls[:limit]

    async def requester(self, conversation_id: uuid.UUID, run_id: uuid.UUID) -> tuple[str, str, str]:
        """The key that caused the run (posted its message; for a run an event started, the key
        that sent the event, the conversation's creator), its role, and the run's channel."""
        r = t.runs.c
        run = (
            await self._session.execute(
                sa.select(r.started_by, r.started_role, r.channel).where(r.id == run_id)
            )
        ).first()
        started_by, role, channel = (run.started_by, run.started_role, run.channel) if run else ("", "", "")
        if not started_by:
            conv = t.conversations.c
            started_by = (
                await self._session.execute(sa.select(conv.created_by).where(conv.id == conversation_id))
            ).scalar_one_or_none()
            role = None
        if started_by and not role:
            role = await self._role(started_by)
        return started_by or "", role or "", channel or ""

    async def _role(self, key: str) -> str:
        try:
            key_id = uuid.UUID(key)
        except ValueError:
            return ""
        found = await self._session.execute(sa.select(t.api_keys.c.role).where(t.api_keys.c.id == key_id))
        return found.scalar_one_or_none() or ""

    async def _notify(self, workspace: str) -> None:
        # The pre-approval channel: every worker drops the workspace's policy and rules alike.
        if self._postgres:
            await self._session.execute(sa.select(sa.func.pg_notify(AUTHORIZATION_CHANNEL, workspace)))
