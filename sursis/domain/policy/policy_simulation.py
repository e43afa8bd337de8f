"""Replaying a period's recorded tool calls against a proposed policy: what would have changed."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sursis.domain.access import Permission
from sursis.domain.message_parts import logged_parts
from sursis.domain.policy._reviewer_simulation import MAX_REVIEWS, simulate_reviews
from sursis.domain.policy.authorizations import first_covering, not_by_requester
from sursis.domain.policy.policies import (
    CallFacts,
    PolicyRule,
    StoredPolicy,
    WorkspacePolicy,
    decide_call,
    governed,
    lifts,
    pre_approved,
)
from sursis.domain.policy.policy_ports import PolicyUnitOfWorkFactory, RecordedCall
from sursis.domain.policy.policy_sampling import CallSampler, SampleDraw, sample, was_sampled
from sursis.domain.policy.policy_service import PolicyService
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.records import Principal, StoredMessage
from sursis.domain.reviewer import ReviewerModel, ReviewerSpec, ReviewTally
from sursis.domain.tools import Category, ToolSpec

MAX_CALLS = 10_000


@dataclass(frozen=True, slots=True)
class SimulatedCall:
    call: RecordedCall
    proposed: PolicyDecision

    @property
    def changed(self) -> bool:
        return self.call.outcome != self.proposed.effect.value


@dataclass(slots=True)
class SimulationReport:
    """Counts per outcome (as it happened, as the proposed policy decides), the changes by
    `before->after`, and examples of the changed calls (newest last)."""

    workspace: str
    since: datetime
    until: datetime
    calls: int = 0
    current: Counter[str] = field(default_factory=Counter)
    proposed: Counter[str] = field(default_factory=Counter)
    changes: Counter[str] = field(default_factory=Counter)
    arguments_unknown: int = 0
    truncated: bool = False
    examples: list[SimulatedCall] = field(default_factory=list)
    reviewer: ReviewTally | None = None
    """What the proposed rules' reviewers would have done (None: no asked call names one)."""
    sampled: int = 0
    """Calls a `sampled` rung would have sent to people (drawn with the service's key; counted in
    `proposed["ask"]` too)."""
    shown: int = 20

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "calls": self.calls,
            "current": dict(self.current),
            "proposed": dict(self.proposed),
            "changed": sum(self.changes.values()),
            "changes": dict(self.changes),
            "arguments_unknown": self.arguments_unknown,
            "sampled": self.sampled,
            "truncated": self.truncated,
            "examples": [
                {
                    "conversation_id": str(e.call.conversation_id),
                    "tool_call_id": e.call.tool_call_id,
                    "tool_name": e.call.tool,
                    "agent": e.call.agent,
                    "at": e.call.at.isoformat(),
                    "before": e.call.outcome,
                    "after": e.proposed.effect.value,
                    "rule": e.proposed.rule,
                    "flags": list(e.proposed.flags),
                    "arguments_known": e.call.arguments is not None,
                }
                for e in self.examples
            ],
            "reviewer": self.reviewer.to_json(self.shown) if self.reviewer is not None else None,
        }


def logged_arguments(messages: Sequence[StoredMessage]) -> dict[tuple[uuid.UUID, str], dict[str, Any]]:
    """The arguments of every tool call in a conversation's log, by (conversation, call id): a call
    that ran without waiting keeps its arguments only there."""
    found: dict[tuple[uuid.UUID, str], dict[str, Any]] = {}
    for message, part in logged_parts(messages, ("tool-call",)):
        args = part.get("args")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if isinstance(args, dict):
            found[(message.conversation_id, str(part.get("tool_call_id")))] = args
    return found


class PolicySimulation:
    """Replays the recorded calls of a period: each is decided by the proposed rules (with the
    workspace's ladder and the pre-approvals active now) and compared with what happened. The
    arguments come from the pending call, else from the conversation's log; a call found in
    neither (its messages purged) is replayed without them and counted in `arguments_unknown`."""

    def __init__(
        self,
        uow: PolicyUnitOfWorkFactory,
        policies: PolicyService,
        tools: Mapping[str, ToolSpec],
        *,
        reviewer: ReviewerModel | None = None,
        sampler: CallSampler | None = None,
    ) -> None:
        self._uow = uow
        self._policies = policies
        self._tools = tools
        self._reviewer = reviewer
        self._sampler = sampler
        """Draws a `sampled` rung's calls as the policy point would (None: each would be asked)."""

    async def simulate(
        self,
        principal: Principal,
        workspace: str | None,
        rules: Sequence[PolicyRule],
        since: datetime,
        until: datetime,
        examples: int = 20,
        reviewer_model: str | None = None,
        max_reviews: int = 50,
    ) -> SimulationReport:
        """`reviewer_model`: the model every reviewer rule is simulated with (None: each rule's own);
        `max_reviews`: how many asks at most are put to a reviewer model (the newest)."""
        ws = PolicyService.workspace_of(principal, workspace)
        principal.require(Permission.MANAGE_POLICIES)
        checked = self._policies.check(rules)
        report = SimulationReport(ws, since, until, shown=examples)
        asked: list[tuple[RecordedCall, ReviewerSpec, str | None]] = []
        async with self._uow.reader() as uow:
            history = await uow.policies.history(ws, since, until, MAX_CALLS + 1)
            ladder = await uow.policies.ladder(ws)
            state = WorkspacePolicy(ws, StoredPolicy(ws, 0, checked, principal.id, until), ladder)
            covering = {}
            for tool in {c.tool for c in history}:
                covering[tool] = tuple(await uow.authorizations.candidates(ws, tool, until))
            requesters = {}
            # Pre-approvals never cover their own requester's calls: who that was is read too.
            if state.needs_requester or any(covering.values()):
                for call in history:
                    if call.run_id not in requesters:
                        requesters[call.run_id] = await uow.policies.requester(
                            call.conversation_id, call.run_id
                        )
            history = history[: MAX_CALLS + 1]
            logged: dict[tuple[uuid.UUID, str], dict[str, Any]] = {}
            for conversation_id in {c.conversation_id for c in history if c.arguments is None}:
                logged.update(logged_arguments(await uow.messages.read(conversation_id)))
        report.truncated = len(history) > MAX_CALLS
        history = [
            replace(c, arguments=logged.get((c.conversation_id, c.tool_call_id)))
            if c.arguments is None
            else c
            for c in history[:MAX_CALLS]
        ]
        specs = [self._spec(c) for c in history]
        facts = [self._facts(ws, c, s, requesters.get(c.run_id)) for c, s in zip(history, specs, strict=True)]
        matches = self._policies.engine.evaluate_batch(state, facts)
        for call, spec, fact, match in zip(history, specs, facts, matches, strict=True):
            if not governed(spec):
                continue
            decision = decide_call(spec, fact, state, match)
            if lifts(decision) and spec.server is None:
                candidates = not_by_requester(
                    covering.get(call.tool, ()), fact.requester_key, fact.requester_role, decision
                )
                rule = first_covering(candidates, call.tool, fact.arguments, fact.at)
                if rule is not None:
                    decision = pre_approved(decision, str(rule.id))
            draw = SampleDraw(ws, call.tool, call.conversation_id, call.tool_call_id)
            decision = sample(decision, self._sampler, draw)
            report.sampled += was_sampled(decision)
            reviewer = decision.route.reviewer if decision.route is not None else None
            if decision.effect is PolicyEffect.ASK and reviewer is not None:
                asked.append((call, reviewer, decision.rule))
            simulated = SimulatedCall(call, decision)
            report.calls += 1
            report.current[call.outcome] += 1
            report.proposed[decision.effect.value] += 1
            report.arguments_unknown += call.arguments is None
            if simulated.changed:
                report.changes[f"{call.outcome}->{decision.effect.value}"] += 1
                report.examples.append(simulated)
        report.examples = report.examples[-examples:] if examples else []
        if asked:
            report.reviewer = await simulate_reviews(
                self._reviewer, asked, override=reviewer_model, limit=min(max_reviews, MAX_REVIEWS)
            )
        return report

    def _spec(self, call: RecordedCall) -> ToolSpec:
        known = self._tools.get(call.tool)
        if known is not None:
            return known
        return ToolSpec(name=call.tool, category=call.category or Category.MUTATE)

    @staticmethod
    def _facts(
        ws: str, call: RecordedCall, spec: ToolSpec, requester: tuple[str, str, str] | None
    ) -> CallFacts:
        key, role, channel = requester or ("", "", "")
        return CallFacts(
            workspace=ws,
            agent=call.agent,
            tool=call.tool,
            category=spec.category,
            arguments=call.arguments or {},
            at=call.at,
            server=spec.server,
            schema_digest=spec.schema_digest,
            requester_key=key,
            requester_role=role,
            channel=channel,
        )
