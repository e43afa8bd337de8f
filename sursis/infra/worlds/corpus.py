"""The World Agent's side of the rule corpus: drafts, the readiness gate, enshrinement requests.

The agent never updates an enshrined rule: editing one makes a new `candidate` version, and the
only way into `enshrined` is `enshrine`, which runs only after an operator approved the gated
`request_enshrinement` call, as one conditional write.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import sqlalchemy as sa

from sursis.domain.access import Role
from sursis.domain.clock import Clock
from sursis.domain.errors import ToolPolicyError, ToolUserError
from sursis.domain.worlds.rules import (
    GateResult,
    Rule,
    RuleState,
    World,
    WorldMode,
    readiness_hash,
)
from sursis.infra.db.tables import audit_log
from sursis.infra.db.uow import SqlUnitOfWork, SqlUnitOfWorkFactory
from sursis.infra.worlds.repository import SqlWorldRepository
from sursis.infra.worlds.sandbox import SandboxLimits, run_in_sandbox
from sursis.infra.worlds.service import reconcile_requests

CACHE_ENTRIES = 10_000
V = TypeVar("V")


class BoundedCache(Generic[V]):
    """Facts that never change once written (a session's world and mode, who queued a run),
    remembered for the most recent `size` keys so a long-lived worker does not grow without end."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[uuid.UUID, V] = OrderedDict()

    def get(self, key: uuid.UUID) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: uuid.UUID, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


def parse_id(value: str, what: str = "rule_id") -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ToolUserError(f"{what} {value!r} is not a UUID") from None


def rule_view(rule: Rule, *, full: bool = True) -> dict[str, Any]:
    """A rule as the model (or a person) reads it."""
    view: dict[str, Any] = {
        "rule_id": str(rule.id),
        "version": rule.version,
        "state": rule.state.value,
        "text": rule.text,
        "reason": rule.reason,
    }
    if full:
        view.update(
            predicate=rule.predicate,
            applies_when=rule.applies_when,
            tests=[dataclasses.asdict(t) for t in rule.tests],
            gate=None
            if rule.gate is None
            else {
                "passed": rule.gate.passed,
                "cases": rule.gate.cases,
                "current": rule.gate.code_hash == readiness_hash(rule),
            },
            citations=[dataclasses.asdict(c) for c in rule.citations],
            evidence=rule.evidence,
        )
    return view


class RuleCorpus:
    def __init__(self, uow: SqlUnitOfWorkFactory, clock: Clock, limits: SandboxLimits | None = None) -> None:
        self._uow = uow
        self._clock = clock
        self._limits = limits or SandboxLimits()
        self._sessions: BoundedCache[tuple[World, WorldMode]] = BoundedCache(CACHE_ENTRIES)
        self._demoted: BoundedCache[bool] = BoundedCache(CACHE_ENTRIES)

    async def session(self, conversation_id: uuid.UUID) -> tuple[World, WorldMode] | None:
        """The world and mode a conversation was opened with (immutable, so cached)."""
        cached = self._sessions.get(conversation_id)
        if cached is not None:
            return cached
        async with self._uow() as uow:
            repo = SqlWorldRepository(uow.session)
            found = await repo.session(conversation_id)
            world = await repo.get_world(found[0]) if found else None
        if found is None or world is None:
            return None
        self._sessions.put(conversation_id, (world, found[1]))
        return world, found[1]

    async def mode_of_run(self, mode: WorldMode, run_id: uuid.UUID) -> WorldMode:
        """An operator session's run queued by a `user` key runs in customer mode: a customer who
        can see the conversation does not get the operator's tools by posting into it."""
        if mode is WorldMode.CUSTOMER:
            return mode
        demoted = self._demoted.get(run_id)
        if demoted is None:
            async with self._uow() as uow:
                actor = await uow.session.scalar(
                    sa.select(audit_log.c.actor).where(
                        audit_log.c.run_id == run_id, audit_log.c.action == "run.queued"
                    )
                )
                key = None
                if actor is not None:
                    try:
                        key = await uow.api_keys.get(uuid.UUID(actor))
                    except ValueError:
                        key = None
            demoted = key is not None and key.role is Role.USER

            self._demoted.put(run_id, demoted)
        return WorldMode.CUSTOMER if demoted else mode

    async def _reconciled(self, uow: SqlUnitOfWork, world_id: uuid.UUID) -> SqlWorldRepository:
        """The worlds' repository in `uow`, the world's enshrinement requests settled first."""
        repo = SqlWorldRepository(uow.session)
        await reconcile_requests(uow, repo, world_id, self._clock)
        return repo

    async def list_rules(self, world_id: uuid.UUID, state: RuleState | None) -> list[Rule]:
        async with self._uow() as uow:
            repo = await self._reconciled(uow, world_id)
            rules = await repo.list_rules(world_id, state)
            await uow.commit()
        return rules

    async def latest(self, world_id: uuid.UUID, rule_id: str) -> Rule:
        """The newest version of a rule, whatever its state (what an operator works on)."""
        return await self._rule(world_id, rule_id, in_force=False)

    async def in_force(self, world_id: uuid.UUID, rule_id: str) -> Rule:
        """The enshrined version of a rule: all a customer may see of it."""
        return await self._rule(world_id, rule_id, in_force=True)

    async def _rule(self, world_id: uuid.UUID, rule_id: str, *, in_force: bool) -> Rule:
        async with self._uow() as uow:
            repo = await self._reconciled(uow, world_id)
            read = repo.rule_in_force if in_force else repo.latest_rule
            rule = await read(world_id, parse_id(rule_id))
            await uow.commit()
        if rule is None:
            raise ToolUserError(f"no rule {rule_id!r} in this world")
        return rule

    async def _draft(
        self, uow: SqlUnitOfWork, world_id: uuid.UUID, rule_id: str
    ) -> tuple[SqlWorldRepository, Rule]:
        """The newest version of a rule, to change in `uow` (see `_reconciled`)."""
        repo = await self._reconciled(uow, world_id)
        return repo, await _latest_rule(repo, world_id, rule_id)

    async def propose(
        self, uow: SqlUnitOfWork, world_id: uuid.UUID, text: str, evidence: dict[str, Any]
    ) -> Rule:
        now = self._clock()
        rule = Rule(
            id=uuid.uuid4(),
            version=1,
            world_id=world_id,
            state=RuleState.CANDIDATE,
            text=text,
            created_at=now,
            updated_at=now,
            evidence=evidence,
        )
        await SqlWorldRepository(uow.session).add_rule(rule)
        return rule

    async def edit_draft(self, world_id: uuid.UUID, rule_id: str, change: Callable[[Rule], None]) -> Rule:
        """Apply `change` to the rule's candidate; an enshrined rule gets a new candidate version."""
        async with self._uow() as uow:
            repo, rule = await self._draft(uow, world_id, rule_id)
            now = self._clock()
            match rule.state:
                case RuleState.CANDIDATE:
                    change(rule)
                    rule.gate = (
                        None if rule.gate and rule.gate.code_hash != readiness_hash(rule) else rule.gate
                    )
                    if not await repo.update_draft(rule, now):
                        raise ToolPolicyError(
                            "the rule changed state meanwhile; read it again", code="RULE_STALE"
                        )
                case RuleState.ENSHRINED:
                    rule = dataclasses.replace(
                        rule,
                        version=rule.version + 1,
                        state=RuleState.CANDIDATE,
                        gate=None,
                        reason=None,
                        created_at=now,
                        updated_at=now,
                        enshrined_at=None,
                        request_conversation_id=None,
                        request_tool_call_id=None,
                    )
                    change(rule)
                    await repo.add_rule(rule)
                case RuleState.ENSHRINED_PENDING:
                    raise ToolPolicyError(
                        "the rule awaits an operator's enshrinement decision; it cannot change now",
                        code="RULE_AWAITING_DECISION",
                    )
                case RuleState.REJECTED | RuleState.SUPERSEDED:
                    raise ToolPolicyError(
                        f"the rule is {rule.state.value}; propose a new candidate", code="RULE_CLOSED"
                    )
            await uow.commit()
        return rule

    async def run_gate(self, world_id: uuid.UUID, rule_id: str) -> Rule:
        rule = await self.latest(world_id, rule_id)
        if rule.state is not RuleState.CANDIDATE:
            raise ToolPolicyError(
                f"the gate runs on candidates; this rule is {rule.state.value}", code="RULE_NOT_CANDIDATE"
            )
        if rule.predicate is None or not rule.tests:
            raise ToolPolicyError("the gate needs a predicate and inline tests first", code="GATE_NOT_READY")
        cases = [{"context": t.context, "expected": t.expected} for t in rule.tests]
        outcome = await run_in_sandbox(rule.predicate, "predicate", cases, self._limits)
        results = outcome.cases if outcome.error is None else [{"passed": False, "error": outcome.error}]
        code_hash = readiness_hash(rule)
        rule.gate = GateResult(
            passed=outcome.passed, cases=results, code_hash=code_hash, ran_at=self._clock()
        )
        async with self._uow() as uow:
            if not await SqlWorldRepository(uow.session).update_draft(rule, self._clock()):
                raise ToolPolicyError("the rule changed state meanwhile; read it again", code="RULE_STALE")
            await uow.commit()
        return rule

    async def request(
        self, world_id: uuid.UUID, rule_id: str, conversation_id: uuid.UUID, tool_call_id: str
    ) -> Rule:
        """Check the gates and mark the rule `enshrined_pending` for this call (idempotent per call)."""
        async with self._uow() as uow:
            repo, rule = await self._draft(uow, world_id, rule_id)
            mine = (
                rule.request_conversation_id == conversation_id and rule.request_tool_call_id == tool_call_id
            )
            if rule.state is RuleState.ENSHRINED_PENDING and mine:
                return rule
            if rule.state is not RuleState.CANDIDATE:
                raise ToolPolicyError(
                    f"only a candidate can be put forward; this rule is {rule.state.value}",
                    code="RULE_NOT_CANDIDATE",
                )
            problem = rule.readiness_problem(readiness_hash(rule))
            if problem is not None:
                raise ToolPolicyError(problem, code="NOT_READY_FOR_ENSHRINEMENT")
            moved = await repo.transition(
                rule.id,
                rule.version,
                RuleState.CANDIDATE,
                RuleState.ENSHRINED_PENDING,
                self._clock(),
                reason=None,
                request_conversation_id=conversation_id,
                request_tool_call_id=tool_call_id,
            )
            if not moved:
                raise ToolPolicyError("the rule changed state meanwhile; read it again", code="RULE_STALE")
            await uow.commit()
        rule.state = RuleState.ENSHRINED_PENDING
        return rule

    async def enshrine(
        self,
        uow: SqlUnitOfWork,
        world_id: uuid.UUID,
        rule_id: str,
        conversation_id: uuid.UUID,
        tool_call_id: str,
    ) -> Rule:
        """The approved request's effect: `enshrined_pending` → `enshrined`, older versions superseded.

        Runs inside the caller's transaction (with the call's idempotency record), so it happens once.
        """
        repo = SqlWorldRepository(uow.session)
        rule = await repo.latest_rule(world_id, parse_id(rule_id))
        if (
            rule is None
            or rule.state is not RuleState.ENSHRINED_PENDING
            or rule.request_conversation_id != conversation_id
            or rule.request_tool_call_id != tool_call_id
        ):
            raise ToolPolicyError("this enshrinement request is no longer open", code="REQUEST_CLOSED")
        now = self._clock()
        for older in await repo.rule_versions(world_id, rule.id):
            if older.state is RuleState.ENSHRINED:
                await repo.transition(older.id, older.version, RuleState.ENSHRINED, RuleState.SUPERSEDED, now)
        if not await repo.transition(
            rule.id, rule.version, RuleState.ENSHRINED_PENDING, RuleState.ENSHRINED, now, enshrined_at=now
        ):
            raise ToolPolicyError("this enshrinement request is no longer open", code="REQUEST_CLOSED")
        rule.state = RuleState.ENSHRINED
        rule.enshrined_at = now
        return rule


async def _latest_rule(repo: SqlWorldRepository, world_id: uuid.UUID, rule_id: str) -> Rule:
    """The newest version of the rule, or `ToolUserError` when the world has no such rule."""
    rule = await repo.latest_rule(world_id, parse_id(rule_id))
    if rule is None:
        raise ToolUserError(f"no rule {rule_id!r} in this world")
    return rule
