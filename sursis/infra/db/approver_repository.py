"""Approver groups, votes, route states and delegations in SQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from sursis.domain.approvals.decision_seal import vote_facts
from sursis.domain.approvers import (
    ApprovalDelegation,
    ApproverGroup,
    RouteState,
    RouteStep,
    Vote,
)
from sursis.domain.states import PendingStatus
from sursis.infra.db import approver_tables as ap
from sursis.infra.db import tables as t
from sursis.infra.db.approver_tables import route_row
from sursis.infra.db.held import flush_held
from sursis.infra.db.repositories.base import SqlRepository, rowcount
from sursis.infra.db.sealing import VOTES
from sursis.infra.encryption.decision_seal import sealer_of

_g, _m, _r, _v, _d = (
    ap.approver_groups.c,
    ap.approver_group_members.c,
    ap.pending_routes.c,
    ap.pending_votes.c,
    ap.approval_delegations.c,
)


_DELEGATION_COLUMNS = tuple(c.name for c in ap.approval_delegations.c)


def _route(row: Any) -> RouteState:
    m = row._mapping
    return RouteState(
        correlation_id=m["correlation_id"],
        workspace=m["workspace"],
        approvals=m["approvals"],
        escalation_level=m["escalation_level"],
        reminded_at=m["reminded_at"],
        due_at=m["due_at"],
        reassigned_to=tuple(m["reassigned_to"] or ()),
        created_at=m["created_at"],
        reminders_sent=m["reminders_sent"],
    )


def _delegation(row: Any) -> ApprovalDelegation:
    m = row._mapping
    return ApprovalDelegation(**{k: m[k] for k in _DELEGATION_COLUMNS})


class SqlApproverRepository(SqlRepository):
    async def _execute(self, statement: Any, params: Any = None) -> Any:
        await flush_held(self._session)
        return await self._session.execute(statement, params)

    # Groups

    async def add_group(self, group: ApproverGroup) -> bool:
        statement = (
            self._insert(ap.approver_groups)
            .values(
                id=group.id,
                workspace=group.workspace,
                name=group.name,
                description=group.description,
                created_by=group.created_by,
                created_at=group.created_at,
            )
            .on_conflict_do_nothing(index_elements=["workspace", "name"])
        )
        return rowcount(await self._execute(statement)) == 1

    async def get_group(self, workspace: str, name: str) -> ApproverGroup | None:
        found = await self._groups(sa.and_(_g.workspace == workspace, _g.name == name))
        return found[0] if found else None

    async def groups(self, workspace: str | None) -> list[ApproverGroup]:
        return await self._groups(_g.workspace == workspace if workspace is not None else sa.true())

    async def _groups(self, where: Any) -> list[ApproverGroup]:
        rows = (
            await self._execute(sa.select(ap.approver_groups).where(where).order_by(_g.workspace, _g.name))
        ).all()
        if not rows:
            return []
        ids = [r.id for r in rows]
        members: dict[uuid.UUID, list[str]] = {i: [] for i in ids}
        for group_id, key_id in await self._execute(
            sa.select(_m.group_id, _m.key_id).where(_m.group_id.in_(ids)).order_by(_m.added_at, _m.key_id)
        ):
            members[group_id].append(key_id)
        return [
            ApproverGroup(
                id=r.id,
                workspace=r.workspace,
                name=r.name,
                description=r.description,
                created_by=r.created_by,
                created_at=r.created_at,
                members=tuple(members[r.id]),
            )
            for r in rows
        ]

    async def delete_group(self, group_id: uuid.UUID) -> bool:
        await self._execute(ap.approver_group_members.delete().where(_m.group_id == group_id))
        return rowcount(await self._execute(ap.approver_groups.delete().where(_g.id == group_id))) == 1

    async def add_member(self, group_id: uuid.UUID, key_id: str, by: str, now: datetime) -> bool:
        statement = (
            self._insert(ap.approver_group_members)
            .values(group_id=group_id, key_id=key_id, added_by=by, added_at=now)
            .on_conflict_do_nothing(index_elements=["group_id", "key_id"])
        )
        return rowcount(await self._execute(statement)) == 1

    async def remove_member(self, group_id: uuid.UUID, key_id: str) -> bool:
        statement = ap.approver_group_members.delete().where(_m.group_id == group_id, _m.key_id == key_id)
        return rowcount(await self._execute(statement)) == 1

    async def members(self, workspace: str, names: Sequence[str]) -> set[str]:
        if not names:
            return set()
        query = (
            sa.select(_m.key_id)
            .join(ap.approver_groups, _g.id == _m.group_id)
            .where(_g.workspace == workspace, _g.name.in_(list(names)))
        )
        return {key for (key,) in await self._execute(query)}

    # Routes

    async def add_route(self, state: RouteState) -> None:
        await self._execute(ap.pending_routes.insert(), route_row(state))

    async def routes(self, correlation_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, RouteState]:
        if not correlation_ids:
            return {}
        rows = await self._execute(
            sa.select(ap.pending_routes).where(_r.correlation_id.in_(list(correlation_ids)))
        )
        return {row.correlation_id: _route(row) for row in rows}

    async def lock_route(self, correlation_id: uuid.UUID, approvals: int) -> int | None:
        result = await self._execute(
            ap.pending_routes.update()
            .where(_r.correlation_id == correlation_id)
            .values(approvals=_r.approvals + approvals)
            .returning(_r.approvals)
        )
        found = result.first()
        return int(found[0]) if found is not None else None

    async def due_routes(self, now: datetime, limit: int) -> list[RouteState]:
        p = t.pending_calls.c
        query = (
            sa.select(ap.pending_routes)
            .join(t.pending_calls, p.correlation_id == _r.correlation_id)
            .where(_r.due_at <= now, p.status == t.status_literal(PendingStatus.AWAITING.value))
            .order_by(_r.due_at)
            .limit(limit)
        )
        return [_route(row) for row in await self._execute(query)]

    async def next_route_due(self) -> datetime | None:
        p = t.pending_calls.c
        query = (
            sa.select(sa.func.min(_r.due_at))
            .join(t.pending_calls, p.correlation_id == _r.correlation_id)
            .where(p.status == t.status_literal(PendingStatus.AWAITING.value))
        )
        found: datetime | None = (await self._execute(query)).scalar()
        return found

    async def advance(self, state: RouteState, step: RouteStep, now: datetime) -> bool:
        values: dict[str, Any] = {
            "escalation_level": step.level,
            "due_at": step.due_at,
            "reminders_sent": step.reminders_sent,
        }
        if step.remind:
            values["reminded_at"] = now
        result = await self._execute(
            ap.pending_routes.update()
            .where(
                _r.correlation_id == state.correlation_id,
                _r.due_at == state.due_at if state.due_at is not None else _r.due_at.is_(None),
                _r.escalation_level == state.escalation_level,
                _r.reminders_sent == state.reminders_sent,
            )
            .values(**values)
        )
        return rowcount(result) == 1

    async def reassign(self, correlation_id: uuid.UUID, to: Sequence[str]) -> bool:
        result = await self._execute(
            ap.pending_routes.update()
            .where(_r.correlation_id == correlation_id)
            .values(reassigned_to=list(to))
        )
        return rowcount(result) == 1

    # Votes

    async def add_vote(self, vote: Vote) -> bool:
        seal = sealer_of(self._cipher).seal(vote_facts(vote))
        row = VOTES.seal(
            self._cipher,
            {
                "correlation_id": vote.correlation_id,
                "voter": vote.voter,
                "cast_by": vote.cast_by,
                "decision": vote.decision,
                "reason": vote.reason,
                "at": vote.at,
                "seal": seal,
            },
        )
        # A savepoint, so a refused second vote leaves the transaction usable.
        try:
            async with self._session.begin_nested():
                await self._execute(ap.pending_votes.insert(), row)
        except sa_exc.IntegrityError:
            return False
        return True

    async def votes(self, correlation_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[Vote]]:
        if not correlation_ids:
            return {}
        rows = await self._execute(
            sa.select(ap.pending_votes)
            .where(_v.correlation_id.in_(list(correlation_ids)))
            .order_by(_v.at, _v.voter)
        )
        found: dict[uuid.UUID, list[Vote]] = {}
        sealer = sealer_of(self._cipher)
        for row in rows:
            m = VOTES.open(self._cipher, row)
            seal = m.pop("seal", None)
            vote = Vote(**m)
            if sealer.enabled and sealer.problem(vote_facts(vote), seal, "vote") is not None:
                vote = replace(vote, sealed=False)
            found.setdefault(m["correlation_id"], []).append(vote)
        return found

    # Delegations

    async def add_delegation(self, delegation: ApprovalDelegation) -> None:
        await self._execute(
            ap.approval_delegations.insert(),
            {k: getattr(delegation, k) for k in _DELEGATION_COLUMNS},
        )

    async def get_delegation(self, delegation_id: uuid.UUID) -> ApprovalDelegation | None:
        row = (await self._execute(sa.select(ap.approval_delegations).where(_d.id == delegation_id))).first()
        return _delegation(row) if row is not None else None

    async def delegations(self, *, workspace: str | None, key: str | None) -> list[ApprovalDelegation]:
        query = sa.select(ap.approval_delegations)
        if workspace is not None:
            query = query.where(_d.workspace == workspace)
        if key is not None:
            query = query.where(sa.or_(_d.delegator == key, _d.delegate == key))
        return [_delegation(row) for row in await self._execute(query.order_by(_d.created_at, _d.id))]

    async def revoke_delegation(self, delegation_id: uuid.UUID, now: datetime) -> bool:
        result = await self._execute(
            ap.approval_delegations.update()
            .where(_d.id == delegation_id, _d.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        return rowcount(result) == 1

    async def delegators(self, delegate: str, now: datetime) -> list[str]:
        query = sa.select(_d.delegator).where(
            _d.delegate == delegate, _d.revoked_at.is_(None), _d.starts_at <= now, _d.ends_at > now
        )
        return sorted({d for (d,) in await self._execute(query)})
