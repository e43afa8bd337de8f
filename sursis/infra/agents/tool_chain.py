"""The shape of the tool path: one call, and the links it passes in order.

Every tool call of an agent passes one chain of small links, each wrapping the next the way
pydantic-ai's wrapper toolsets do (a link holds `next` and calls it at most once): the policy gate
(`policy_gate.PolicyGate`), the suspension of a call that waits for someone
(`suspension.Suspension`), its dispatch (`dispatched.Dispatched`: a stored outcome replayed, or the
dispatch marked), its execution (`tool_execution.Execution`), the record of its outcome
(`call_outcomes.OutcomeRecord`) and its telemetry (`call_telemetry.CallTelemetry`).
`observed.tool_path` assembles the chain; `observed.ObservedTools` hands it each call. A link
returns the call's outcome in the `{"ok": ...}` convention; the entry turns it into what the model
is told.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart

from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.records import ToolCallMetadata
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.effects import CallTiming
from sursis.infra.agents.run_deps import RunDeps

POLICY = "policy"
"""Deferral metadata: the policy decision that asks for the call (`PolicyDecision.to_json()`); the
pending call keeps it."""
REDISPATCH = "redispatch"
"""Deferral metadata of a call dispatched again after its segment died (`resumed.deferred_results`)."""
EDITED_ARGS = "edited_args"
"""Deferral metadata of an approved call: the arguments an operator edited."""


@dataclass(slots=True)
class ToolCall:
    """One call as the chain handles it: what it is, then what the links found out about it."""

    ctx: RunContext[RunDeps]
    deps: RunDeps
    spec: ToolSpec
    call: ToolCallPart
    args: dict[str, Any]
    metadata: Mapping[str, Any]
    handler: WrapToolExecuteHandler
    """What runs the call: the tool, or a denial in its place (`policy_gate.denied`)."""
    decision: PolicyDecision | None = None
    """The policy decision the call runs on (recorded with its outcome)."""
    asks: PolicyDecision | None = None
    """The decision that asks a person for the call: it suspends."""
    denied: bool = False
    timing: CallTiming | None = None
    payload: dict[str, Any] | None = None
    """The outcome, in the `{"ok": ...}` convention, once the call ran."""
    error_code: str | None = None
    emitted: ToolCallMetadata | None = None
    """The call's `ToolCallMetadata`, once its outcome is recorded."""

    @property
    def redispatched(self) -> bool:
        """Dispatched again after its segment died: nobody approved it (`redispatch`)."""
        return bool(self.metadata.get(REDISPATCH))


class ToolLink(ABC):
    """One link of the tool path: what it adds around the call."""

    __slots__ = ()

    @abstractmethod
    async def __call__(self, call: ToolCall) -> Any:
        """The call's outcome (`{"ok": ...}`), or the control flow that replaces one."""


class WrapperLink(ToolLink):
    """A link that wraps the next one and calls it at most once (`WrapperToolset`'s shape)."""

    __slots__ = ("next",)

    def __init__(self, next: ToolLink) -> None:
        self.next = next
