"""The policy point's decision as data (rules, ladder, defaults, digests), and Cedar's part of it,
without a database."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from sursis.domain.policy.policies import (
    Approver,
    CallFacts,
    InvalidPolicy,
    LadderEntry,
    LadderLevel,
    Matches,
    PolicyRule,
    StoredPolicy,
    WorkspacePolicy,
    authorization_of,
    check_rules,
    decide_call,
    default_decision,
    governed,
    pre_approved,
)
from sursis.domain.policy_decisions import ApprovalRoute, PolicyEffect
from sursis.domain.tools import Category, Executor, ToolSpec
from sursis.infra.policy.cedar import CedarPolicies, ToolShape

NOW = datetime(2026, 11, 27, 9, 30, tzinfo=UTC)
REFUND = ToolSpec("refund", category=Category.MUTATE)
LOOKUP = ToolSpec("lookup")
MCP_READ = ToolSpec("search", server="files", schema_digest="d")
MCP_DRAFT = ToolSpec("draft", category=Category.SUGGEST, server="files", schema_digest="d1")
CEDAR = CedarPolicies(
    [
        ToolShape(
            "refund",
            {
                "properties": {
                    "amount": {"type": "integer"},
                    "price": {"type": "number"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "meta": {"type": "object"},
                },
                "required": ["amount", "price", "tags"],
            },
        ),
        ToolShape("lookup", {"properties": {"id": {"type": "string"}}, "required": ["id"]}),
    ]
)


def facts(spec: ToolSpec, **arguments: object) -> CallFacts:
    return CallFacts("w", "shop", spec.name, spec.category, arguments, NOW, spec.server, spec.schema_digest)


def state(*rules: PolicyRule, ladder: dict[str, LadderEntry] | None = None) -> WorkspacePolicy:
    policy = StoredPolicy("w", 3, rules, "admin", NOW) if rules else None
    return WorkspacePolicy("w", policy, ladder or {})


def decide(
    spec: ToolSpec, workspace: WorkspacePolicy, **arguments: object
) -> tuple[str, str | None, tuple[str, ...]]:
    call = facts(spec, **arguments)
    decision = decide_call(spec, call, workspace, CEDAR.evaluate(workspace, call))
    return decision.effect.value, decision.rule, decision.flags


def test_defaults_ask_for_gated_and_unread_mcp_tools_only() -> None:
    assert default_decision(REFUND).effect is PolicyEffect.ASK
    assert default_decision(REFUND).route == ApprovalRoute()
    assert default_decision(LOOKUP).effect is PolicyEffect.ALLOW
    assert default_decision(MCP_READ).effect is PolicyEffect.ALLOW
    assert default_decision(MCP_DRAFT).effect is PolicyEffect.ASK
    assert not governed(ToolSpec("ask_person", executor=Executor.HUMAN))
    assert decide(REFUND, state(), amount=1, price=1.0, tags=[]) == ("ask", None, ())


def test_the_first_rule_that_holds_decides_in_order() -> None:
    workspace = state(
        PolicyRule("huge", PolicyEffect.DENY, "context.arguments.amount > 10000", ("refund",)),
        PolicyRule("big", PolicyEffect.ASK, "context.arguments.amount > 500", ("refund",)),
        PolicyRule("rest", PolicyEffect.ALLOW, "", ("refund",)),
    )
    assert decide(REFUND, workspace, amount=20000, price=1.0, tags=[]) == ("deny", "huge", ())
    assert decide(REFUND, workspace, amount=900, price=1.0, tags=[]) == ("ask", "big", ())
    assert decide(REFUND, workspace, amount=5, price=1.0, tags=[]) == ("allow", "rest", ())
    # A rule about another tool says nothing about this one.
    assert decide(LOOKUP, workspace, id="x") == ("allow", None, ())


def test_arguments_are_typed_for_cedar() -> None:
    workspace = state(
        PolicyRule(
            "price", PolicyEffect.ASK, 'context.arguments.price.greaterThan(decimal("9.5"))', ("refund",)
        ),
        PolicyRule("tag", PolicyEffect.DENY, 'context.arguments.tags.contains("vip")', ("refund",)),
        PolicyRule(
            "note",
            PolicyEffect.NOTIFY,
            'context.arguments has note && context.arguments.note == "n"',
            ("refund",),
        ),
    )
    CEDAR.validate(workspace.conditions())
    assert decide(REFUND, workspace, amount=1, price=9.75, tags=[])[:2] == ("ask", "price")
    assert decide(REFUND, workspace, amount=1, price=1, tags=["vip"])[:2] == ("deny", "tag")
    assert decide(REFUND, workspace, amount=1, price=1, tags=[], note="n")[:2] == ("notify", "note")
    assert decide(REFUND, workspace, amount=1, price=1, tags=[], note=None)[:2] == ("ask", None)
    with pytest.raises(InvalidPolicy):  # objects are not readable by conditions
        CEDAR.validate([PolicyRule("m", PolicyEffect.ASK, "context.arguments.meta == 1", ("refund",))])


def test_a_value_of_the_wrong_type_is_left_out_and_an_evaluation_error_asks() -> None:
    workspace = state(PolicyRule("big", PolicyEffect.ALLOW, "context.arguments.amount > 5", ("refund",)))
    # A string where the schema says integer is not given to Cedar: the attribute is missing, the
    # condition cannot be evaluated, and the call is asked rather than allowed.
    assert decide(REFUND, workspace, amount="9", price=1, tags=[]) == ("ask", "big", ("condition_error",))


def test_the_ladder_applies_when_no_rule_matched() -> None:
    entry = LadderEntry(
        "w", "refund", LadderLevel.AUTO, LadderLevel.ASK_ABOVE, "context.arguments.amount > 100"
    )
    workspace = state(
        PolicyRule("never", PolicyEffect.DENY, "context.arguments.amount > 10000", ("refund",)),
        ladder={"refund": entry},
    )
    assert decide(REFUND, workspace, amount=50, price=1, tags=[]) == ("allow", "ladder:refund", ())
    assert decide(REFUND, workspace, amount=500, price=1, tags=[]) == ("ask", "ladder:refund", ())
    assert decide(REFUND, workspace, amount=50000, price=1, tags=[]) == ("deny", "never", ())
    for level, effect in (
        (LadderLevel.ASK, "ask"),
        (LadderLevel.NOTIFY, "notify"),
        (LadderLevel.AUTO, "allow"),
    ):
        moved = state(ladder={"refund": LadderEntry("w", "refund", LadderLevel.AUTO, level)})
        assert decide(REFUND, moved, amount=1, price=1, tags=[]) == (effect, "ladder:refund", ())


def test_an_mcp_tool_is_allowed_only_for_the_digest_a_rule_pinned() -> None:
    allow = PolicyRule("drafts", PolicyEffect.ALLOW, "", ("draft",), pins={"draft": "d1"})
    assert decide(MCP_DRAFT, state(allow)) == ("allow", "drafts", ())
    changed = ToolSpec("draft", category=Category.SUGGEST, server="files", schema_digest="d2")
    assert decide(changed, state(allow)) == ("ask", "drafts", ("schema_changed",))
    unpinned = PolicyRule("drafts", PolicyEffect.ALLOW, "", ("draft",))
    assert decide(MCP_DRAFT, state(unpinned)) == ("ask", "drafts", ("schema_unpinned",))
    # A deny needs no pin.
    assert decide(changed, state(PolicyRule("no", PolicyEffect.DENY, "", ("draft",))))[0] == "deny"


def test_a_pre_approval_lifts_an_ask_and_is_named() -> None:
    lifted = pre_approved(default_decision(REFUND), "1234")
    assert (lifted.effect, lifted.rule, authorization_of(lifted)) == (
        PolicyEffect.ALLOW,
        "authorization:1234",
        "1234",
    )
    assert authorization_of(default_decision(REFUND)) is None


def test_rule_shapes_are_checked_before_cedar() -> None:
    bad = [
        [PolicyRule("a", PolicyEffect.ALLOW), PolicyRule("a", PolicyEffect.DENY)],
        [PolicyRule("bad id", PolicyEffect.ALLOW)],
        [PolicyRule("a", PolicyEffect.DENY, route=ApprovalRoute())],
        [PolicyRule("a", PolicyEffect.ASK, route=ApprovalRoute(quorum=0))],
        [PolicyRule("a", PolicyEffect.ASK, tools=('refund"]',))],
    ]
    for rules in bad:
        with pytest.raises(InvalidPolicy):
            check_rules(rules)
    check_rules([PolicyRule("a", PolicyEffect.ASK, route=ApprovalRoute(groups=("x",), quorum=2))])


def test_a_condition_may_read_the_approver_where_one_decides() -> None:
    rule = PolicyRule(
        "finance", PolicyEffect.ALLOW, 'context has approver && context.approver.groups.contains("finance")'
    )
    CEDAR.validate([rule])
    with pytest.raises(InvalidPolicy):  # optional: `has` first
        CEDAR.validate([PolicyRule("x", PolicyEffect.ALLOW, 'context.approver.role == "admin"')])
    workspace = state(rule)
    before = facts(LOOKUP, id="1")
    assert CEDAR.evaluate(workspace, before).held == frozenset()
    deciding = dataclasses.replace(before, approver=Approver("k1", "operator", frozenset({"finance"})))
    assert CEDAR.evaluate(workspace, deciding).held == {"finance"}


def test_conditions_that_need_the_requester_are_known() -> None:
    assert not state(PolicyRule("a", PolicyEffect.ALLOW, "context.time.hour < 6")).needs_requester
    assert state(PolicyRule("a", PolicyEffect.ALLOW, 'context.requester.role == "user"')).needs_requester
    assert Matches() == Matches(frozenset(), frozenset())
