"""A workspace's policy: an ordered list of rules, each a condition (Cedar) and what it decides.

The policy point (`decide_call`) reads, in this order: the rules (the first whose condition holds
decides), then the workspace's autonomy ladder for the tool, then the default for the tool
(a gated spec asks any operator, an MCP tool that is not `read` asks, everything else runs). When
the outcome so far is `ask`, a stored pre-approval covering the call turns it into `allow`. An
allow or notify for an MCP tool holds only for the schema digest it was written against; otherwise
the call is asked with the flag `schema_changed` (or `schema_unpinned`).

The rules, the ladder and the facts a condition reads live in `_policy_rules`, `_policy_ladder` and
`policy_facts`; their names are exported here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sursis.domain.policy._policy_facts import (
    Approver,
    CallFacts,
    ConditionEvaluator,
    Matches,
    WorkspacePolicy,
)
from sursis.domain.policy._policy_ladder import AboveCeiling, LadderEntry, LadderLevel
from sursis.domain.policy._policy_rules import (
    ABOVE_CEILING,
    AUTHORIZATION_PREFIX,
    CEILING_PREFIX,
    CONDITION_ERROR,
    LADDER_PREFIX,
    MAX_CONDITION_CHARS,
    MAX_RULES,
    POLICY_UNAVAILABLE,
    RULE_ID,
    SCHEMA_CHANGED,
    SCHEMA_UNPINNED,
    TOOL_NAME,
    UNREACHABLE_QUORUM,
    InvalidPolicy,
    PolicyRule,
    StoredPolicy,
    check_rules,
)
from sursis.domain.policy.policy_sampling import MIN_ONE_IN
from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision, PolicyEffect
from sursis.domain.tools import Category, Executor, ToolSpec

__all__ = [
    "ABOVE_CEILING",
    "AUTHORIZATION_PREFIX",
    "CEILING_PREFIX",
    "CONDITION_ERROR",
    "LADDER_PREFIX",
    "MAX_CONDITION_CHARS",
    "MAX_RULES",
    "POLICY_UNAVAILABLE",
    "RULE_ID",
    "SCHEMA_CHANGED",
    "SCHEMA_UNPINNED",
    "TOOL_NAME",
    "UNREACHABLE_QUORUM",
    "AboveCeiling",
    "Approver",
    "CallFacts",
    "ConditionEvaluator",
    "InvalidPolicy",
    "LadderEntry",
    "LadderLevel",
    "Matches",
    "PolicyRule",
    "StoredPolicy",
    "WorkspacePolicy",
    "authorization_of",
    "check_rules",
    "decide_call",
    "default_decision",
    "governed",
    "lifts",
    "own_pre_approvals_count",
    "pinned",
    "pre_approved",
    "unavailable",
]


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
    """What the rung says, made no looser than what its ceiling says (the stricter of the two; a
    `sampled` level or ceiling samples whatever of the two would run, at the smaller N)."""
    assert entry.level is not None
    rule = LADDER_PREFIX + entry.tool
    level, flags = _rung_effect(entry.level, rule, matches, entry.condition)
    ceiling, ceiling_flags = _rung_effect(
        entry.ceiling, CEILING_PREFIX + entry.tool, matches, entry.ceiling_condition
    )
    reason = "the tool's autonomy level"
    if ceiling.strictness > level.strictness:
        level, flags, reason = ceiling, (*ceiling_flags, ABOVE_CEILING), "the tool's ceiling"
    rates = [
        n
        for at, n in ((entry.level, entry.one_in), (entry.ceiling, entry.ceiling_one_in))
        if at is LadderLevel.SAMPLED and n is not None
    ]
    if LadderLevel.SAMPLED in (entry.level, entry.ceiling) and not rates:
        rates = [MIN_ONE_IN]  # a sampled rung stored without its N: sampled as often as allowed
    one_in = min(rates) if rates and level in (PolicyEffect.ALLOW, PolicyEffect.NOTIFY) else None
    if level is PolicyEffect.ALLOW:
        return PolicyDecision(PolicyEffect.ALLOW, version, rule, sample_one_in=one_in)
    route = ApprovalRoute() if level is not PolicyEffect.DENY else None
    return PolicyDecision(level, version, rule, reason, route, flags=flags, sample_one_in=one_in)


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
    # `sampled` runs as `auto` does until the call is drawn (`policy_sampling.sample`).
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
