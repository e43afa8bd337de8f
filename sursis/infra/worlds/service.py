"""The worlds use cases behind the HTTP API: worlds, decisions and flags, rules, agent sessions.

Who may do what: an admin creates worlds; operators and admins record decisions and open
operator-mode sessions; any key of the world's workspace reads the world and its rules, flags a
decision, and a `user` key opens a customer-mode session. Another workspace's world is `NotFound`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sursis.domain.access import Permission, Role
from sursis.domain.clock import Clock
from sursis.domain.errors import Conflict, Forbidden, NotFound
from sursis.domain.records import AuditEntry, Conversation, Principal
from sursis.domain.states import PendingStatus
from sursis.domain.worlds.rules import Decision, Flag, FlagKind, Rule, RuleState, World, WorldMode
from sursis.infra.db.uow import SqlUnitOfWork, SqlUnitOfWorkFactory
from sursis.infra.worlds.repository import SqlWorldRepository

WORLD_AGENT = "world"
T = TypeVar("T")
_UNDONE = {
    PendingStatus.DENIED: "denied",
    PendingStatus.EXPIRED: "the approval expired",
    PendingStatus.CANCELLED: "the request was cancelled",
    PendingStatus.REVISION_REQUESTED: "the operator asked for a revision",
}


class WorldExists(Conflict):
    code = "world_exists"


class IdempotencyConflict(Conflict):
    """The client-supplied id was used before with a different body."""

    code = "idempotency_conflict"


@dataclass(frozen=True, slots=True)
class Recorded(Generic[T]):
    """A write answered by an idempotent endpoint: the stored object, and whether this call made it."""

    value: T
    created: bool


async def reconcile_requests(
    uow: SqlUnitOfWork, repo: SqlWorldRepository, world_id: uuid.UUID, clock: Clock
) -> None:
    """Turn an enshrinement request whose pending call was denied (or expired, cancelled, revised)
    back into a candidate, with the reason. Approval is applied by the gated tool itself."""
    for rule in await repo.pending_requests(world_id):
        if rule.request_conversation_id is None or rule.request_tool_call_id is None:
            continue
        rows = await uow.pending.by_tool_call_ids(rule.request_conversation_id, [rule.request_tool_call_id])
        latest = max(rows, key=lambda r: r.created_at, default=None)
        if latest is None or latest.status not in _UNDONE:
            continue
        reason = f"enshrinement {_UNDONE[latest.status]}: {latest.reason or 'no reason given'}"
        await repo.transition(
            rule.id,
            rule.version,
            RuleState.ENSHRINED_PENDING,
            RuleState.CANDIDATE,
            clock(),
            reason=reason,
            request_conversation_id=None,
            request_tool_call_id=None,
        )


class WorldService:
    def __init__(self, uow: SqlUnitOfWorkFactory, clock: Clock) -> None:
        self._uow = uow
        self._clock = clock

    async def create_world(
        self, principal: Principal, domain: str, title: str, workspace: str | None
    ) -> World:
        ws = workspace or principal.workspace or "default"
        if not principal.can_see(ws):
            raise NotFound("workspace not found")
        if not principal.is_admin:
            raise Forbidden("only an admin creates worlds", extra={"required": "admin"})
        world = World(
            id=uuid.uuid4(),
            workspace=ws,
            domain=domain,
            title=title,
            created_by=principal.id,
            created_at=self._clock(),
        )
        async with self._uow() as uow:
            if not await SqlWorldRepository(uow.session).add_world(world):
                raise WorldExists(f"workspace {ws!r} already has a world for domain {domain!r}")
            await uow.audit.append(
                AuditEntry(
                    action="world.created",
                    actor=principal.id,
                    workspace=ws,
                    details={"world_id": str(world.id), "domain": domain},
                ),
                world.created_at,
            )
            await uow.commit()
        return world

    async def list_worlds(self, principal: Principal) -> list[World]:
        principal.require(Permission.CONVERSE)
        async with self._uow() as uow:
            workspace = None if principal.may(Permission.ALL_WORKSPACES) else principal.workspace
            if workspace is None and not principal.may(Permission.ALL_WORKSPACES):
                return []
            return await SqlWorldRepository(uow.session).list_worlds(workspace)

    async def _visible(self, repo: SqlWorldRepository, principal: Principal, world_id: uuid.UUID) -> World:
        """The world if the key may read its workspace's conversations and rules (a `system` key may not)."""
        principal.require(Permission.CONVERSE)
        world = await repo.get_world(world_id)
        if world is None or not principal.can_see(world.workspace):
            raise NotFound("world not found")
        return world

    async def get_world(self, principal: Principal, world_id: uuid.UUID) -> World:
        async with self._uow() as uow:
            return await self._visible(SqlWorldRepository(uow.session), principal, world_id)

    async def record_decision(
        self,
        principal: Principal,
        world_id: uuid.UUID,
        decision_id: str,
        rule_ids: list[str],
        context: dict[str, Any],
        outcome: str,
    ) -> Recorded[Decision]:
        async with self._uow() as uow:
            repo = SqlWorldRepository(uow.session)
            world = await self._visible(repo, principal, world_id)
            if principal.role is Role.USER:
                raise Forbidden(
                    "recording decisions needs an operator or admin key", extra={"required": "operator"}
                )
            existing = await repo.get_decision(world.id, decision_id)
            if existing is not None:
                if (existing.rule_ids, existing.context, existing.outcome) != (rule_ids, context, outcome):
                    raise IdempotencyConflict(f"decision {decision_id!r} was recorded with a different body")
                return Recorded(existing, False)
            decision = Decision(decision_id, world.id, rule_ids, context, outcome, self._clock())
            await repo.add_decision(decision)
            await uow.commit()
        return Recorded(decision, True)

    async def flag_decision(
        self,
        principal: Principal,
        world_id: uuid.UUID,
        decision_id: str,
        flag_id: str,
        kind: FlagKind,
        reason: str,
    ) -> Recorded[Flag]:
        async with self._uow() as uow:
            repo = SqlWorldRepository(uow.session)
            world = await self._visible(repo, principal, world_id)
            if await repo.get_decision(world.id, decision_id) is None:
                raise NotFound("decision not found")
            existing = await repo.get_flag(world.id, flag_id)
            if existing is not None:
                if (existing.decision_id, existing.kind, existing.reason) != (decision_id, kind, reason):
                    raise IdempotencyConflict(f"flag {flag_id!r} was recorded with a different body")
                return Recorded(existing, False)
            flag = Flag(flag_id, world.id, decision_id, kind, reason, self._clock())
            await repo.add_flag(flag)
            await uow.commit()
        return Recorded(flag, True)

    async def list_rules(
        self, principal: Principal, world_id: uuid.UUID, state: RuleState | None
    ) -> list[Rule]:
        async with self._uow() as uow:
            repo = SqlWorldRepository(uow.session)
            world = await self._visible(repo, principal, world_id)
            await reconcile_requests(uow, repo, world.id, self._clock)
            rules = await repo.list_rules(world.id, state)
            await uow.commit()
        return [r for r in rules if _may_see(principal, r)]

    async def get_rule(self, principal: Principal, world_id: uuid.UUID, rule_id: uuid.UUID) -> list[Rule]:
        """Every version of the rule, oldest first."""
        async with self._uow() as uow:
            repo = SqlWorldRepository(uow.session)
            world = await self._visible(repo, principal, world_id)
            await reconcile_requests(uow, repo, world.id, self._clock)
            versions = [r for r in await repo.rule_versions(world.id, rule_id) if _may_see(principal, r)]
            await uow.commit()
        if not versions:
            raise NotFound("rule not found")
        return versions

    async def open_session(self, principal: Principal, world_id: uuid.UUID) -> tuple[Conversation, WorldMode]:
        """A World Agent conversation; its mode comes from the key: `user` → customer, else operator."""
        principal.require(Permission.CONVERSE)
        mode = WorldMode.CUSTOMER if principal.role is Role.USER else WorldMode.OPERATOR
        now = self._clock()
        async with self._uow() as uow:
            repo = SqlWorldRepository(uow.session)
            world = await self._visible(repo, principal, world_id)
            conversation = Conversation.open(world.workspace, WORLD_AGENT, principal.id, now)
            await uow.conversations.add(conversation)
            await repo.add_session(conversation.id, world.id, mode, principal.id, now)
            await uow.audit.append(
                AuditEntry(
                    action="world.session_opened",
                    actor=principal.id,
                    workspace=world.workspace,
                    conversation_id=conversation.id,
                    details={"world_id": str(world.id), "mode": mode.value},
                ),
                now,
            )
            await uow.commit()
        return conversation, mode


def _may_see(principal: Principal, rule: Rule) -> bool:
    """A customer (`user` key) sees only versions in force; drafts, requests and denials are
    the operators' business."""
    return principal.role is not Role.USER or rule.state is RuleState.ENSHRINED
