"""A workspace's policy: an ordered list of rules, each a condition (Cedar) and what it decides.

The policy point (`decide_call`) reads, in this order: the rules (the first whose condition holds
decides), then the workspace's autonomy ladder for the tool, then the default for the tool
(a gated spec asks any operator, an MCP tool that is not `read` asks, everything else runs). When
the outcome so far is `ask`, a stored pre-approval covering the call turns it into `allow`. An
allow or notify for an MCP tool holds only for the schema digest it was written against; otherwise
the call is asked with the flag `schema_changed` (or `schema_unpinned`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from sursis.domain.errors import Forbidden, ValidationFailed
from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision, PolicyEffect
from sursis.domain.tools import Category, Executor, ToolSpec

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


class AboveCeiling(Forbidden):
    """A ladder move beyond the ceiling the workspace's admin set for the tool."""

    code = "above_ceiling"


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


class LadderLevel(StrEnum):
    """The autonomy ladder, from least to most autonomous."""

    ASK = "ask"
    ASK_ABOVE = "ask_above"
    NOTIFY = "notify"
    AUTO = "auto"

    @property
    def rank(self) -> int:
        return list(LadderLevel).index(self)


@dataclass(frozen=True, slots=True)
class LadderEntry:
    """Where a tool stands on a workspace's ladder. `ceiling`: the highest level the admin allows
    a user to move it to; for an `ask_above` ceiling, `ceiling_condition` is the admin's own
    condition. `level` None: the tool's default. `condition` (for `ask_above`): a Cedar
    expression; the call is asked when it holds and runs otherwise. `pin`: the MCP tool's schema
    digest when the level was set.

    A rung never decides more loosely than its ceiling would: a call gets the stricter of what the
    level says and what the ceiling says (so under an `ask_above` ceiling the call is asked when the
    admin's condition or the user's holds: a user can only add asks)."""

    workspace: str
    tool: str
    ceiling: LadderLevel = LadderLevel.ASK
    level: LadderLevel | None = None
    condition: str = ""
    pin: str | None = None
    previous_level: LadderLevel | None = None
    previous_condition: str = ""
    updated_by: str | None = None
    updated_at: datetime | None = None
    ceiling_condition: str = ""


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


def governed(spec: ToolSpec) -> bool:
    """Whether the policy point decides about calls of this tool: only a server or client tool
    can be made to wait (a person's answer or a provider's tool cannot be gated)."""
    return spec.executor in (Executor.SERVER, Executor.CLIENT)


def default_decision(spec: ToolSpec) -> PolicyDecision:
    """No rule and no ladder: a gated spec asks any operator; an MCP tool asks unless it reads."""
    if spec.gated or (spec.server is not None and spec.category is not Category.READ):
        return PolicyDecision(PolicyEffect.ASK, route=ApprovalRoute(), reason="the tool's default")
    return PolicyDecision(PolicyEffect.ALLOW)


def decide_call(
    spec: ToolSpec, facts: CallFacts, state: WorkspacePolicy | None, matches: Matches
) -> PolicyDecision:
    """The decision before pre-approvals: rules in order, then the ladder, then the default."""
    version = state.policy.version if state and state.policy else None
    rules = state.policy.rules if state is not None and state.policy is not None else ()
    return _from(0, rules, spec, facts, state, matches, version)


def _from(
    start: int,
    rules: Sequence[PolicyRule],
    spec: ToolSpec,
    facts: CallFacts,
    state: WorkspacePolicy | None,
    matches: Matches,
    version: int | None,
) -> PolicyDecision:
    for index in range(start, len(rules)):
        rule = rules[index]
        if not rule.applies_to(facts.tool):
            continue
        if rule.id in matches.errored:
            rest = _from(index + 1, rules, spec, facts, state, matches, version)
            return _fail_closed(rule, rest, version)
        if rule.id in matches.held:
            return pinned(rule.decision(version), spec, rule.pins.get(facts.tool))
    entry = state.ladder.get(facts.tool) if state is not None else None
    if entry is not None and entry.level is not None:
        return pinned(_ladder_decision(entry, matches, version), spec, entry.pin)
    default = default_decision(spec)
    return PolicyDecision(default.effect, policy_version=version, reason=default.reason, route=default.route)


def _fail_closed(rule: PolicyRule, rest: PolicyDecision, version: int | None) -> PolicyDecision:
    """A rule whose condition could not be evaluated might have held or not: the call gets the
    strictest of the two outcomes. An erroring `deny` denies; an erroring `ask` asks through its
    own route (unless what follows denies); an erroring allow or notify asks at least."""
    reason = "a condition of the policy could not be evaluated for this call"
    flags = tuple(dict.fromkeys((*rest.flags, CONDITION_ERROR)))
    if rule.effect is PolicyEffect.DENY or rest.effect is PolicyEffect.DENY:
        denying = rule if rule.effect is PolicyEffect.DENY else None
        return PolicyDecision(
            PolicyEffect.DENY,
            policy_version=version,
            rule=denying.id if denying is not None else rest.rule,
            reason=(denying.reason if denying is not None else rest.reason) or reason,
            flags=flags,
        )
    if rule.effect is PolicyEffect.ASK:
        return rule.decision(version, flags=(CONDITION_ERROR,), reason=rule.reason or reason)
    if rest.effect is PolicyEffect.ASK:
        return PolicyDecision(**{**_fields(rest), "rule": rule.id, "reason": reason, "flags": flags})
    return PolicyDecision(PolicyEffect.ASK, version, rule.id, reason, ApprovalRoute(), flags=flags)


def _fields(decision: PolicyDecision) -> dict[str, Any]:
    return {name: getattr(decision, name) for name in PolicyDecision.__dataclass_fields__}


def _ladder_decision(entry: LadderEntry, matches: Matches, version: int | None) -> PolicyDecision:
    """What the rung says, made no looser than what its ceiling says (the stricter of the two)."""
    assert entry.level is not None
    rule = LADDER_PREFIX + entry.tool
    level, flags = _rung_effect(entry.level, rule, matches, entry.condition)
    ceiling, ceiling_flags = _rung_effect(
        entry.ceiling, CEILING_PREFIX + entry.tool, matches, entry.ceiling_condition
    )
    reason = "the tool's autonomy level"
    if ceiling.strictness > level.strictness:
        level, flags, reason = ceiling, (*ceiling_flags, ABOVE_CEILING), "the tool's ceiling"
    if level is PolicyEffect.ALLOW:
        return PolicyDecision(PolicyEffect.ALLOW, version, rule)
    return PolicyDecision(level, version, rule, reason, ApprovalRoute(), flags=flags)


def _rung_effect(
    level: LadderLevel, rule: str, matches: Matches, condition: str
) -> tuple[PolicyEffect, tuple[str, ...]]:
    if level is LadderLevel.ASK:
        return PolicyEffect.ASK, ()
    if level is LadderLevel.ASK_ABOVE:
        if rule in matches.errored:
            return PolicyEffect.ASK, (CONDITION_ERROR,)
        # No condition (an `ask_above` ceiling stored without the admin's): every call is asked.
        held = rule in matches.held or not condition.strip()
        return (PolicyEffect.ASK if held else PolicyEffect.ALLOW), ()
    if level is LadderLevel.NOTIFY:
        return PolicyEffect.NOTIFY, ()
    return PolicyEffect.ALLOW, ()


def pinned(decision: PolicyDecision, spec: ToolSpec, pin: str | None) -> PolicyDecision:
    """An allow or notify about an MCP tool holds only for the digest it was written against."""
    if spec.server is None or decision.effect not in (PolicyEffect.ALLOW, PolicyEffect.NOTIFY):
        return decision
    if pin is not None and pin == spec.schema_digest:
        return decision
    flag = SCHEMA_UNPINNED if pin is None else SCHEMA_CHANGED
    return PolicyDecision(
        PolicyEffect.ASK,
        policy_version=decision.policy_version,
        rule=decision.rule,
        reason="the tool changed since the rule allowing it was written"
        if pin is not None
        else "the rule allowing this MCP tool pins no schema digest",
        route=ApprovalRoute(),
        flags=(flag,),
    )


def pre_approved(decision: PolicyDecision, authorization: str) -> PolicyDecision:
    """An asked call a stored pre-approval covers: it runs, naming the authorization."""
    return PolicyDecision(
        PolicyEffect.ALLOW,
        policy_version=decision.policy_version,
        rule=AUTHORIZATION_PREFIX + authorization,
        reason="a pre-approval covers the call",
    )


def lifts(decision: PolicyDecision) -> bool:
    """Whether a pre-approval may lift this decision: an unflagged ask whose rule allows it."""
    return decision.effect is PolicyEffect.ASK and not decision.flags and decision.allow_preapproval


def own_pre_approvals_count(decision: PolicyDecision, requester_role: str | None) -> bool:
    """Whether the requester's own pre-approvals may lift the ask: an admin's, where only the tool's
    default asked (it could approve that call itself); nobody else's."""
    return requester_role == "admin" and decision.rule is None and not decision.flags


def authorization_of(decision: PolicyDecision) -> str | None:
    """The pre-approval's id when one decided the call."""
    rule = decision.rule or ""
    return rule.removeprefix(AUTHORIZATION_PREFIX) if rule.startswith(AUTHORIZATION_PREFIX) else None


def unavailable(spec: ToolSpec) -> PolicyDecision:
    """The policy cannot be read or evaluated: the call is asked (fail closed)."""
    return PolicyDecision(
        PolicyEffect.ASK,
        reason="the policy could not be evaluated",
        route=ApprovalRoute(),
        flags=(POLICY_UNAVAILABLE,),
    )
