"""What every tool call of a segment can reach (`RunDeps`), and the pre-approval policy it asks."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog
from opentelemetry import trace
from pydantic_ai import RunContext

from sursis.domain.clock import Clock
from sursis.domain.policy.authorizations import UnsealedPreApproval
from sursis.domain.policy.policies import default_decision, lifts, pre_approved
from sursis.domain.policy.policy_sampling import CallSampler, SampleDraw, sample
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records import AuditEntry, ToolCallRecord
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.agent_deps import DepsFactory, RunInfo

log = structlog.get_logger("sursis.tools")


class PreApprovalPolicy:
    """The policy point every tool call passes (`decide`), and the pre-approvals it reads.

    This base applies the defaults (a gated spec asks any operator, an MCP tool that is not `read`
    asks, the rest runs) and lifts an ask that a pre-approval covers; the stored policy point
    (`sursis.infra.policy.point`) reads the workspace's rules and ladder first.
    `covering_authorization` returns the covering authorization's id; raising means "cannot
    tell": the call is asked.
    """

    sampler: CallSampler | None = None
    """Draws the calls a `sampled` rung sends to people (None: every such call is asked)."""

    def drawn(
        self, deps: RunDeps, spec: ToolSpec, tool_call_id: str, decision: PolicyDecision
    ) -> PolicyDecision:
        """`decision` once the call is drawn: 1 in N of a `sampled` rung's calls is asked instead."""
        draw = SampleDraw(deps.workspace, spec.name, deps.conversation_id, tool_call_id)
        return sample(decision, self.sampler, draw)

    async def covering_authorization(
        self, workspace: str, tool_name: str, args: Mapping[str, Any], now: datetime
    ) -> str | None:
        return None

    async def covering_for(
        self, deps: RunDeps, spec: ToolSpec, args: Mapping[str, Any], decision: PolicyDecision
    ) -> str | None:
        """The pre-approval covering this call of this run, which `decision` asked (the stored
        policy also leaves out those the call's own requester created)."""
        return await self.covering_authorization(deps.workspace, spec.name, args, deps.clock())

    async def decide(self, deps: RunDeps, spec: ToolSpec, args: Mapping[str, Any]) -> PolicyDecision:
        """The decision for one call. Raising means "cannot tell": the wrapper asks (fail closed)."""
        return await self.with_pre_approval(deps, spec, args, default_decision(spec))

    async def with_pre_approval(
        self, deps: RunDeps, spec: ToolSpec, args: Mapping[str, Any], decision: PolicyDecision
    ) -> PolicyDecision:
        """An ask a stored pre-approval covers runs instead, where the rule that asked allows
        pre-approvals. Not for MCP tools: a pre-approval pins no schema digest, so only a policy rule
        may let one run."""
        if not lifts(decision) or spec.server is not None:
            return decision
        try:
            authorization = await self.covering_for(deps, spec, args, decision)
        except UnsealedPreApproval:
            raise  # not "cannot tell": a forged pre-approval fails the run (`policy_gate.decide`)
        except Exception:
            # Fail closed: a pre-approval that cannot be evaluated leaves the call asked.
            log.exception("pre_approval.unavailable", tool_name=spec.name)
            return decision
        return pre_approved(decision, authorization) if authorization is not None else decision


ProgressSink = Callable[[str, str, Any], Awaitable[None]]
"""`(tool_name, tool_call_id, progress)`: where a streaming tool's progress reports go."""
BeforeEffect = Callable[[], Awaitable[None]]
"""Stores what the segment has not stored yet, before a tool acts (see `RunDeps.before_effect`)."""


@dataclass(slots=True)
class RunDeps:
    """What every tool call of one segment can reach."""

    conversation_id: uuid.UUID
    run_id: uuid.UUID
    workspace: str
    agent_name: str
    uow: UnitOfWorkFactory
    clock: Clock
    policy: PreApprovalPolicy
    progress: ProgressSink | None = None
    agents: Mapping[str, Any] = field(default_factory=dict)
    """The service's pydantic-ai agents by name, for a tool that runs another agent (delegation)."""
    agent_deps: Mapping[str, DepsFactory] = field(default_factory=dict)
    """The deps factories of the agents that have one, by name: an agent another agent runs gets
    its own deps, as it would in a run of its own."""
    run_info: RunInfo | None = None
    """What a deps factory is told of the run (None outside a worker's segment)."""
    tracer: trace.Tracer | None = None
    """The service's tracer, for spans a tool opens itself."""
    announced: set[str] | None = None
    """When given, a tool's successful result is published as `tool.result` in the transaction that
    records the outcome, and its call id added here, so the segment does not publish it again."""
    before_effect: BeforeEffect | None = None
    """Called before a tool runs or a pre-approval is recorded: the segment stores the model
    responses it holds back (a tool's effect must find its call in the log), so a segment whose
    calls all wait for a person stores its response once, with the suspension."""
    outcomes: dict[str, ToolCallRecord | None] | None = None
    """Stored outcomes the segment read with the log, by tool call id (None: known to have none),
    for the calls its log left unanswered; each is used once instead of a look-up of its own."""

    def audit_entry(self, action: str, actor: str, details: dict[str, Any]) -> AuditEntry:
        """An audit row about this segment's run."""
        return AuditEntry(
            action=action,
            actor=actor,
            workspace=self.workspace,
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            details=details,
        )


current_run_deps: ContextVar[RunDeps | None] = ContextVar("sursis_run_deps", default=None)
"""The segment's `RunDeps` when the agent's tools get deps of their own (an adopted agent's)."""


def run_deps(ctx: RunContext[Any]) -> RunDeps:
    """The service's context of the call: `ctx.deps` for the service's own agents, otherwise the
    segment's `RunDeps` set beside the agent's own deps. The one way the tool wrapper reaches it."""
    deps = ctx.deps
    if isinstance(deps, RunDeps):
        return deps
    current = current_run_deps.get()
    if current is None:
        raise RuntimeError("no sursis run context: the tool runs outside a segment")
    return current
