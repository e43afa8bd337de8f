"""What the policy point reads: a workspace's policy and ladder, the facts of one call a condition
may read, and which conditions held for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sursis.domain.policy._policy_ladder import LadderEntry, LadderLevel
from sursis.domain.policy._policy_rules import CEILING_PREFIX, LADDER_PREFIX, PolicyRule, StoredPolicy
from sursis.domain.policy_decisions import PolicyEffect
from sursis.domain.tools import Category


@dataclass(frozen=True, slots=True)
class WorkspacePolicy:
    """What the policy point needs of one workspace: its current policy and its ladder."""

    workspace: str
    policy: StoredPolicy | None
    ladder: Mapping[str, LadderEntry]

    @property
    def empty(self) -> bool:
        return self.policy is None and not any(e.level is not None for e in self.ladder.values())

    def conditions(self) -> tuple[PolicyRule, ...]:
        """The rules and each `ask_above` ladder condition, as one list for the evaluator (ladder
        entries as rules `ladder:<tool>` about their tool)."""
        ladder = tuple(
            PolicyRule(id=LADDER_PREFIX + e.tool, effect=PolicyEffect.ASK, when=e.condition, tools=(e.tool,))
            for e in self.ladder.values()
            if e.level is LadderLevel.ASK_ABOVE
        )
        ceilings = tuple(
            PolicyRule(
                id=CEILING_PREFIX + e.tool, effect=PolicyEffect.ASK, when=e.ceiling_condition, tools=(e.tool,)
            )
            for e in self.ladder.values()
            if e.level is not None and e.ceiling is LadderLevel.ASK_ABOVE and e.ceiling_condition.strip()
        )
        return (self.policy.rules if self.policy else ()) + ladder + ceilings

    @property
    def needs_requester(self) -> bool:
        """Whether a condition may read who started the conversation or its channel (loading them
        costs a read, so a policy that never mentions them does not pay it)."""
        return any("requester" in r.when or "channel" in r.when for r in self.conditions())


@dataclass(frozen=True, slots=True)
class Approver:
    """The person deciding, where one is: what a condition may read as `context.approver`."""

    key: str
    role: str
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What a condition may read about one call."""

    workspace: str
    agent: str
    tool: str
    category: Category
    arguments: Mapping[str, Any]
    at: datetime
    server: str | None = None
    schema_digest: str | None = None
    requester_key: str = ""
    requester_role: str = ""
    channel: str = ""
    approver: Approver | None = None
    """Absent before the call runs; set when a condition is evaluated for a person deciding."""


@dataclass(frozen=True, slots=True)
class Matches:
    """Which conditions held for a call, and which could not be evaluated (by rule id)."""

    held: frozenset[str] = frozenset()
    errored: frozenset[str] = frozenset()


class ConditionEvaluator(Protocol):
    """Evaluates a workspace's conditions for a call (Cedar, in infra)."""

    def evaluate(self, state: WorkspacePolicy, facts: CallFacts) -> Matches: ...
