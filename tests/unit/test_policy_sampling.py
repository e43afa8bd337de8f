"""The `sampled` rung: which calls are drawn (a keyed hash the agent cannot predict or steer), how
a rung and its ceiling combine, and how a drawn call is asked. No database."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ToolCallPart

from sursis.domain.policy._policy_facts import CallFacts
from sursis.domain.policy.policies import (
    LadderEntry,
    LadderLevel,
    StoredPolicy,
    WorkspacePolicy,
    decide_call,
    lifts,
)
from sursis.domain.policy.policy_sampling import SAMPLED, SampleDraw, one_in_error, sample, was_sampled
from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision, PolicyEffect
from sursis.domain.tools import Category, ToolSpec
from sursis.infra.agents.policy_gate import decide
from sursis.infra.agents.run_deps import PreApprovalPolicy, RunDeps
from sursis.infra.encryption.call_sampler import KeyedCallSampler
from sursis.infra.encryption.keyring import load_keyring
from sursis.infra.policy.cedar import CedarPolicies, ToolShape

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
REFUND = ToolSpec("refund", category=Category.MUTATE)
CONVERSATION = uuid.UUID(int=7)
KEY_A = KeyedCallSampler(key=b"a" * 32)
KEY_B = KeyedCallSampler(key=b"b" * 32)
CEDAR = CedarPolicies([ToolShape("refund", {"properties": {"amount": {"type": "integer"}}})])


def draw(i: int, *, tool: str = "refund", workspace: str = "w") -> SampleDraw:
    return SampleDraw(workspace, tool, CONVERSATION, f"call_{i}")


def picked(sampler: KeyedCallSampler, one_in: int, count: int = 400) -> list[int]:
    return [i for i in range(count) if sampler.picks(draw(i), one_in)]


def test_the_draw_is_deterministic_given_the_key() -> None:
    first = picked(KEY_A, 5)
    assert first == picked(KeyedCallSampler(key=b"a" * 32), 5)
    assert first  # some calls are drawn, and not all of them
    assert len(first) < 400


def test_a_different_key_draws_different_calls() -> None:
    assert picked(KEY_A, 5) != picked(KEY_B, 5)
    # Every input of the draw counts: another tool, workspace or conversation draws anew.
    assert [i for i in range(400) if KEY_A.picks(draw(i, tool="deploy"), 5)] != picked(KEY_A, 5)
    assert [i for i in range(400) if KEY_A.picks(draw(i, workspace="v"), 5)] != picked(KEY_A, 5)


def test_the_key_is_derived_from_the_keyring_and_follows_its_active_key() -> None:
    one = f"k1:{base64.b64encode(b'1' * 32).decode()}"
    two = f"k2:{base64.b64encode(b'2' * 32).decode()}"
    assert picked(KeyedCallSampler(load_keyring(one, None)), 4) == picked(
        KeyedCallSampler(load_keyring(one, None)), 4
    )
    assert picked(KeyedCallSampler(load_keyring(one, None)), 4) != picked(
        KeyedCallSampler(load_keyring(f"{two},{one}", None)), 4
    )
    # Not the keyring's key itself: a sampler keyed with the raw data key draws differently.
    assert picked(KeyedCallSampler(load_keyring(one, None)), 4) != picked(KeyedCallSampler(key=b"1" * 32), 4)
    assert KeyedCallSampler(load_keyring(one, None)).keyed
    # No keyring: a random key of this process (unknown to the agent, not shared with others).
    assert not KeyedCallSampler(load_keyring(None, None)).keyed
    assert picked(KeyedCallSampler(load_keyring(None, None)), 4) != picked(
        KeyedCallSampler(load_keyring(None, None)), 4
    )


def test_the_rate_over_many_calls_is_close_to_one_in_n() -> None:
    for one_in in (2, 10, 50):
        drawn = sum(KEY_A.picks(draw(i), one_in) for i in range(20_000))
        expected = 20_000 / one_in
        # Well within four standard deviations of a binomial draw.
        assert abs(drawn - expected) < 4 * (expected * (1 - 1 / one_in)) ** 0.5, (one_in, drawn)


def test_one_in_bounds() -> None:
    assert one_in_error(None, sampled=True) is not None
    assert one_in_error(1, sampled=True) is not None
    assert one_in_error(0, sampled=True) is not None
    assert one_in_error(1_000_001, sampled=True) is not None
    assert one_in_error(2, sampled=True) is None
    assert one_in_error(None, sampled=False) is None
    assert one_in_error(5, sampled=False) is not None


def ladder(entry: LadderEntry) -> PolicyDecision:
    workspace = WorkspacePolicy("w", StoredPolicy("w", 1, (), "admin", NOW), {"refund": entry})
    facts = CallFacts("w", "shop", "refund", Category.MUTATE, {"amount": 500}, NOW)
    return decide_call(REFUND, facts, workspace, CEDAR.evaluate(workspace, facts))


def test_a_sampled_rung_allows_and_names_its_rate() -> None:
    decision = ladder(LadderEntry("w", "refund", LadderLevel.AUTO, LadderLevel.SAMPLED, one_in=20))
    assert (decision.effect, decision.rule, decision.sample_one_in) == (
        PolicyEffect.ALLOW,
        "ladder:refund",
        20,
    )
    assert PolicyDecision.from_json(decision.to_json()) == decision
    # Under a `notify` ceiling the calls not drawn are notified.
    notified = ladder(LadderEntry("w", "refund", LadderLevel.NOTIFY, LadderLevel.SAMPLED, one_in=20))
    assert (notified.effect, notified.sample_one_in) == (PolicyEffect.NOTIFY, 20)
    # A `sampled` ceiling samples what a user's level lets run, at the smaller N of the two.
    smaller = ladder(
        LadderEntry("w", "refund", LadderLevel.SAMPLED, LadderLevel.SAMPLED, one_in=1000, ceiling_one_in=10)
    )
    assert smaller.sample_one_in == 10
    under = ladder(
        LadderEntry(
            "w",
            "refund",
            LadderLevel.SAMPLED,
            LadderLevel.ASK_ABOVE,
            "context.arguments.amount > 1000",
            ceiling_one_in=10,
        )
    )
    assert (under.effect, under.sample_one_in) == (PolicyEffect.ALLOW, 10)
    # What is asked anyway is asked, not sampled; other rungs do not sample.
    asked = ladder(
        LadderEntry(
            "w",
            "refund",
            LadderLevel.SAMPLED,
            LadderLevel.ASK_ABOVE,
            "context.arguments.amount > 100",
            ceiling_one_in=10,
        )
    )
    assert (asked.effect, asked.sample_one_in) == (PolicyEffect.ASK, None)
    assert ladder(LadderEntry("w", "refund", LadderLevel.AUTO, LadderLevel.AUTO)).sample_one_in is None
    assert LadderLevel.ASK_ABOVE.rank < LadderLevel.SAMPLED.rank < LadderLevel.NOTIFY.rank


def test_a_drawn_call_is_asked_as_the_rungs_ask_would_be() -> None:
    allowed = PolicyDecision(PolicyEffect.ALLOW, 3, "ladder:refund", sample_one_in=2)
    drawn = next(i for i in range(50) if KEY_A.picks(draw(i), 2))
    spared = next(i for i in range(50) if not KEY_A.picks(draw(i), 2))
    assert sample(allowed, KEY_A, draw(spared)) == allowed
    asked = sample(allowed, KEY_A, draw(drawn))
    assert (asked.effect, asked.rule, asked.policy_version, asked.route) == (
        PolicyEffect.ASK,
        "ladder:refund",
        3,
        ApprovalRoute(),
    )
    assert asked.flags == (SAMPLED,) and was_sampled(asked) and asked.sample_one_in == 2
    assert not lifts(asked)  # a pre-approval never lifts a sampled call: people see it
    # No sampler (no key to draw with): asked, never let through.
    assert sample(allowed, None, draw(spared)).effect is PolicyEffect.ASK
    # A decision that is not a sampled rung's is left alone.
    plain = PolicyDecision(PolicyEffect.ALLOW, 3, "rest")
    assert sample(plain, None, draw(drawn)) == plain


class Sampling(PreApprovalPolicy):
    """A point whose every decision is a sampled rung's, drawn with a fixed key."""

    sampler = KEY_A

    async def decide(self, deps: RunDeps, spec: ToolSpec, args: Mapping[str, Any]) -> PolicyDecision:
        return PolicyDecision(PolicyEffect.ALLOW, 1, "ladder:refund", sample_one_in=3)


def deps() -> RunDeps:
    return RunDeps(
        conversation_id=CONVERSATION,
        run_id=uuid.UUID(int=1),
        workspace="w",
        agent_name="shop",
        uow=cast(Any, None),
        clock=lambda: NOW,
        policy=Sampling(),
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(args=st.dictionaries(st.text(max_size=10), JSON, max_size=5), call=st.integers(0, 30))
async def test_the_arguments_do_not_steer_the_draw(args: dict[str, Any], call: int) -> None:
    """Whatever the model puts in the arguments, a call is drawn as its id alone says."""
    part = ToolCallPart(tool_name=REFUND.name, args=args, tool_call_id=f"call_{call}")
    decision = await decide(deps(), REFUND, part, args)
    assert was_sampled(decision) == KEY_A.picks(draw(call), 3)
