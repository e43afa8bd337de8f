"""A workspace's policy rules: their shape, how each decides when its condition holds, the checks a
rule list passes before it is stored, and a stored version of the list."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sursis.domain.errors import ValidationFailed
from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision, PolicyEffect
from sursis.domain.reviewer import MAX_HISTORY, MAX_QUESTION_CHARS, ReviewerActs

RULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
MAX_RULES = 200
MAX_CONDITION_CHARS = 4000

SCHEMA_CHANGED = "schema_changed"
SCHEMA_UNPINNED = "schema_unpinned"
CONDITION_ERROR = "condition_error"
ABOVE_CEILING = "above_ceiling"
UNREACHABLE_QUORUM = "unreachable_quorum"
"""The `type` of a rule's error whose route has a quorum above one and no approver group."""
POLICY_UNAVAILABLE = "policy_unavailable"
AUTHORIZATION_PREFIX = "authorization:"
LADDER_PREFIX = "ladder:"
CEILING_PREFIX = "ceiling:"


class InvalidPolicy(ValidationFailed):
    """A policy document that cannot be stored: bad shape, or a condition Cedar refuses."""

    code = "invalid_policy"


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One rule. `when`: a Cedar expression over the call (empty: always). `tools`: the tools it
    is about (empty: every tool). `pins`: the schema digest of each MCP tool the rule was written
    against; an allow or notify holds only while the tool's digest is the pinned one."""

    id: str
    effect: PolicyEffect
    when: str = ""
    tools: tuple[str, ...] = ()
    reason: str | None = None
    route: ApprovalRoute | None = None
    pins: Mapping[str, str] = field(default_factory=dict)
    allow_self_approval: bool = False
    """The key that caused a call may decide it (audited as a self-approval). Off by default."""
    allow_preapproval: bool | None = None
    """Whether a stored pre-approval may lift this rule's ask. None: yes for a rule whose route is
    "any operator, once", no for a rule that names groups or a quorum above one."""

    def applies_to(self, tool: str) -> bool:
        return not self.tools or tool in self.tools

    @property
    def preapproval_allowed(self) -> bool:
        if self.allow_preapproval is not None:
            return self.allow_preapproval
        return self.route is None or not self.route.restricted

    def decision(self, version: int | None, **changes: Any) -> PolicyDecision:
        """What this rule decides when its condition holds."""
        asks = self.effect in (PolicyEffect.ASK, PolicyEffect.NOTIFY)
        fields: dict[str, Any] = {
            "policy_version": version,
            "rule": self.id,
            "reason": self.reason,
            "route": (self.route or ApprovalRoute()) if asks else None,
            "allow_self_approval": self.allow_self_approval,
            "allow_preapproval": self.preapproval_allowed,
        }
        return PolicyDecision(self.effect, **{**fields, **changes})

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "effect": self.effect.value,
            "when": self.when,
            "tools": list(self.tools),
            "reason": self.reason,
            "route": self.route.to_json() if self.route is not None else None,
            "pins": dict(self.pins),
            "allow_self_approval": self.allow_self_approval,
            "allow_preapproval": self.allow_preapproval,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicyRule:
        route = data.get("route")
        return cls(
            id=str(data["id"]),
            effect=PolicyEffect(data["effect"]),
            when=str(data.get("when") or ""),
            tools=tuple(data.get("tools") or ()),
            reason=data.get("reason"),
            route=ApprovalRoute.from_json(route) if route is not None else None,
            pins=dict(data.get("pins") or {}),
            allow_self_approval=bool(data.get("allow_self_approval", False)),
            allow_preapproval=data.get("allow_preapproval"),
        )


def check_rules(rules: Sequence[PolicyRule]) -> None:
    """The shape of a rule list, before Cedar reads the conditions: raises `InvalidPolicy`."""
    errors: list[dict[str, Any]] = []
    unreachable: list[dict[str, Any]] = []
    if len(rules) > MAX_RULES:
        errors.append({"loc": ["rules"], "msg": f"at most {MAX_RULES} rules"})
    seen: set[str] = set()
    for i, rule in enumerate(rules):
        if not RULE_ID.match(rule.id):
            errors.append({"loc": ["rules", str(i), "id"], "msg": "1-64 letters, digits, '_', '.', '-'"})
        elif rule.id in seen:
            errors.append({"loc": ["rules", str(i), "id"], "msg": f"duplicate rule id {rule.id!r}"})
        seen.add(rule.id)
        if len(rule.when) > MAX_CONDITION_CHARS or "\x00" in rule.when:
            errors.append({"loc": ["rules", str(i), "when"], "msg": "too long or contains a NUL character"})
        for tool in (*rule.tools, *rule.pins):
            if not TOOL_NAME.match(tool):
                errors.append({"loc": ["rules", str(i), "tools"], "msg": f"not a tool name: {tool[:50]!r}"})
        if rule.route is not None and rule.effect not in (PolicyEffect.ASK, PolicyEffect.NOTIFY):
            errors.append(
                {"loc": ["rules", str(i), "route"], "msg": "only an ask or notify rule has a route"}
            )
        if rule.route is not None and not 1 <= rule.route.quorum <= 20:
            errors.append({"loc": ["rules", str(i), "route", "quorum"], "msg": "quorum is 1 to 20"})
        elif rule.route is not None and rule.route.quorum > 1 and not rule.route.groups:
            unreachable.append(
                {
                    "loc": ["rules", str(i), "route", "quorum"],
                    "msg": "a quorum above one needs approver groups to reach it; name the groups",
                    "type": UNREACHABLE_QUORUM,
                }
            )
        errors.extend(reminder_errors(i, rule.route))
        errors.extend(reviewer_errors(i, rule.effect, rule.route))
    if errors or unreachable:
        message = "a route's quorum cannot be reached" if not errors else "the policy is not valid"
        raise InvalidPolicy(message, extra={"errors": errors + unreachable})


@dataclass(frozen=True, slots=True)
class StoredPolicy:
    """One version of a workspace's policy (versions count from 1; each PUT makes the next)."""

    workspace: str
    version: int
    rules: tuple[PolicyRule, ...]
    created_by: str
    created_at: datetime
    comment: str | None = None


MAX_REMINDERS = 10


def reminder_errors(index: int, route: ApprovalRoute | None) -> list[dict[str, Any]]:
    """What is wrong with a route's reminders: fractions of the deadline, each strictly between 0
    and 1, in increasing order without repeats, at most `MAX_REMINDERS`."""
    if route is None or not route.reminders:
        return []
    loc = ["rules", str(index), "route", "reminders"]
    fractions = route.reminders
    if len(fractions) > MAX_REMINDERS:
        return [{"loc": loc, "msg": f"at most {MAX_REMINDERS} reminders"}]
    if not all(0 < f < 1 for f in fractions):
        return [
            {"loc": loc, "msg": "each reminder is a fraction of the deadline, more than 0 and less than 1"}
        ]
    if any(b <= a for a, b in itertools.pairwise(fractions)):
        return [{"loc": loc, "msg": "reminders are in increasing order, each once"}]
    return []


def reviewer_errors(index: int, effect: PolicyEffect, route: ApprovalRoute | None) -> list[dict[str, Any]]:
    """What is wrong with a rule's reviewer (checked with the rule list before it is stored)."""
    reviewer = route.reviewer if route is not None else None
    if route is None or reviewer is None:
        return []
    loc = ["rules", str(index), "route", "reviewer"]
    errors: list[dict[str, Any]] = []
    if effect.value != "ask":
        errors.append({"loc": loc, "msg": "only an ask rule has a reviewer (a notify rule runs anyway)"})
    if not reviewer.model.strip() or len(reviewer.model) > 200:
        errors.append({"loc": [*loc, "model"], "msg": "a model name of 1-200 characters"})
    if not reviewer.question.strip() or len(reviewer.question) > MAX_QUESTION_CHARS:
        errors.append({"loc": [*loc, "question"], "msg": f"a question of 1-{MAX_QUESTION_CHARS} characters"})
    if not 0 <= reviewer.history <= MAX_HISTORY:
        errors.append({"loc": [*loc, "history"], "msg": f"0 to {MAX_HISTORY} messages"})
    if not 0 < reviewer.timeout_seconds <= 300:
        errors.append({"loc": [*loc, "timeout_seconds"], "msg": "more than 0, at most 300 seconds"})
    if reviewer.acts is ReviewerActs.VOTE and not route.groups:
        errors.append(
            {"loc": [*loc, "acts"], "msg": "a reviewer votes only on a route that names approver groups"}
        )
    elif reviewer.acts is ReviewerActs.VOTE and route.quorum < 2:
        errors.append(
            {
                "loc": [*loc, "acts"],
                "msg": "on a route of quorum 1 the reviewer's vote approves alone: "
                'say "acts": "approve" if that is meant, or raise the quorum',
            }
        )
    return errors
