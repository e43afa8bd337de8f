"""Deferred calls of nested agents: a tool that runs another agent (a supervisor's delegation)
suspends with that agent's deferred calls, and the run parks on those, not on the tool itself.

The tool raises `defer_nested(...)`; the runner asks `deferred_targets` which calls to turn into
pending calls. Each carries the agent that declared the tool and the path from the
conversation's agent down to it (`customer/framework-advisor`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.tools import DeferredToolRequests

from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.tools import PendingKind
from sursis.infra.agents.observed import POLICY, REVIEW

NESTED = "nested"


@dataclass(frozen=True, slots=True)
class DeferredTarget:
    """One call a run suspends on: the call itself, or a call of a nested agent."""

    agent: str
    agent_path: str | None
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    kind: PendingKind
    policy: PolicyDecision | None = None
    """The policy decision that asked for the call (an approval), from the deferral's metadata."""
    validated_args: dict[str, Any] | None = None
    """The arguments the tool will receive (pydantic-ai's `DeferredToolRequests.validated_args`, 2.68
    and later) when they differ from the model's."""

    def shown_args(self) -> dict[str, Any]:
        """What the deciders are told the call does: the arguments that will run, with what the tool
        asks them to check."""
        if self.validated_args is None:
            return self.args
        return {**self.validated_args, **{k: v for k, v in self.args.items() if k == REVIEW}}

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "agent_path": self.agent_path,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "args": self.args,
            "kind": self.kind.value,
            "policy": self.policy.to_json() if self.policy is not None else None,
            "validated_args": self.validated_args,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeferredTarget:
        return cls(
            agent=data["agent"],
            agent_path=data.get("agent_path"),
            tool_call_id=data["tool_call_id"],
            tool_name=data["tool_name"],
            args=dict(data["args"]),
            kind=PendingKind(data["kind"]),
            policy=PolicyDecision.from_json(data["policy"]) if data.get("policy") else None,
            validated_args=dict(data["validated_args"]) if data.get("validated_args") else None,
        )


def requested_targets(
    agent: str, agent_path: str | None, output: DeferredToolRequests
) -> list[DeferredTarget]:
    """The calls an agent run's `DeferredToolRequests` asks for, nested ones expanded."""
    targets: list[DeferredTarget] = []
    validated_by_call: dict[str, Any] = getattr(output, "validated_args", None) or {}  # pydantic-ai 2.68+
    for part, default_kind in [(p, PendingKind.APPROVAL) for p in output.approvals] + [
        (p, PendingKind.ELICITATION) for p in output.calls
    ]:
        metadata = output.metadata.get(part.tool_call_id, {})
        nested = metadata.get(NESTED)
        if nested is not None:
            targets += [DeferredTarget.from_json(n) for n in nested]
            continue
        kind = _kind(metadata.get("kind"), default_kind)
        args = part.args_as_dict()
        validated = validated_by_call.get(part.tool_call_id)
        validated = dict(validated) if isinstance(validated, dict) and validated != args else None
        if isinstance(metadata.get(REVIEW), dict):
            # What the tool asks the person deciding to check, shown with the call's arguments.
            args = {**args, REVIEW: metadata[REVIEW]}
        policy = metadata.get(POLICY)
        decision = PolicyDecision.from_json(policy) if isinstance(policy, dict) else None
        targets.append(
            DeferredTarget(
                agent, agent_path, part.tool_call_id, part.tool_name, args, kind, decision, validated
            )
        )
    return targets


def _kind(value: Any, default: PendingKind) -> PendingKind:
    """The pending kind a deferral's metadata names; an agent's own `kind` key of another meaning
    is not ours to read."""
    try:
        return PendingKind(value) if value is not None else default
    except ValueError:
        return default


def deferred_targets(agent: str, output: DeferredToolRequests) -> list[DeferredTarget]:
    """What a run of the conversation's agent suspends on."""
    return requested_targets(agent, None, output)


def defer_nested(targets: Sequence[DeferredTarget]) -> CallDeferred:
    """The exception a tool raises to suspend the run on a nested agent's calls."""
    return CallDeferred(metadata={NESTED: [t.to_json() for t in targets]})
