"""The `sampled` rung: 1 call in N that the rung would let run goes to people instead.

Which calls is decided by a keyed hash (`CallSampler`, in infra: HMAC under a key derived from the
service's keyring) over the call's workspace, tool, conversation and tool call id, never over its
arguments: the agent, which does not hold the key, can neither predict which of its calls will be
sampled nor steer the pick by what it asks (a different argument is the same draw). The same call
draws the same way every time (a redispatched call, a simulation of a recorded one), and a
different key draws differently.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision, PolicyEffect

SAMPLED = "sampled"
"""The flag of a decision whose call was sampled (it is asked; a pre-approval never lifts it)."""
SAMPLED_ACTION = "policy.sampled"
"""The audit action of a sampled call, written with the pending call it became."""
MIN_ONE_IN = 2
MAX_ONE_IN = 1_000_000


@dataclass(frozen=True, slots=True)
class SampleDraw:
    """What a call's pick is computed over: nothing the model chooses but the call id it was given."""

    workspace: str
    tool: str
    conversation_id: uuid.UUID
    tool_call_id: str

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "tool": self.tool,
            "conversation_id": str(self.conversation_id),
            "tool_call_id": self.tool_call_id,
        }


class CallSampler(Protocol):
    """Picks 1 call in `one_in` by a keyed hash of its draw (the key: the service's, never the agent's)."""

    def picks(self, draw: SampleDraw, one_in: int) -> bool: ...


def one_in_error(one_in: int | None, sampled: bool) -> str | None:
    """What is wrong with a rung's N (None: nothing): a `sampled` rung needs one, 2 to 1,000,000;
    any other rung takes none."""
    if not sampled:
        return None if one_in is None else "only a sampled rung takes one_in"
    if one_in is None:
        return "a sampled rung needs one_in: 1 call in N goes to people"
    if not MIN_ONE_IN <= one_in <= MAX_ONE_IN:
        return f"one_in is {MIN_ONE_IN} to {MAX_ONE_IN:,}"
    return None


def sample(decision: PolicyDecision, sampler: CallSampler | None, draw: SampleDraw) -> PolicyDecision:
    """The decision once the call has been drawn: unchanged unless it is a sampled rung's and the
    draw picks it, then an ask routed as the rung's ask would be (any operator, once), flagged
    `sampled`. No sampler (no key to draw with): every such call is asked (fail closed)."""
    one_in = decision.sample_one_in
    if one_in is None or decision.effect not in (PolicyEffect.ALLOW, PolicyEffect.NOTIFY):
        return decision
    if sampler is not None and not sampler.picks(draw, one_in):
        return decision
    return PolicyDecision(
        PolicyEffect.ASK,
        policy_version=decision.policy_version,
        rule=decision.rule,
        reason=f"sampled for review: 1 call in {one_in} goes to people",
        route=ApprovalRoute(),
        flags=(*decision.flags, SAMPLED),
        sample_one_in=one_in,
    )


def was_sampled(decision: PolicyDecision) -> bool:
    return SAMPLED in decision.flags
