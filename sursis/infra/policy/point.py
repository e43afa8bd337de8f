"""The stored policy point: the workspace's rules and ladder (cached), evaluated in Cedar, then the
stored pre-approvals."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from sursis.domain.policy.authorization_cache import AuthorizationCache
from sursis.domain.policy.policies import CallFacts, WorkspacePolicy, decide_call, default_decision
from sursis.domain.policy.policy_cache import PolicyCache
from sursis.domain.policy.policy_ports import PolicyUnitOfWorkFactory
from sursis.domain.policy.policy_sampling import CallSampler
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.policy import StoredPreApprovalPolicy
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.policy.cedar import CedarPolicies


async def load_workspace_policy(uow: PolicyUnitOfWorkFactory, workspace: str) -> WorkspacePolicy:
    async with uow.reader() as tx:
        return WorkspacePolicy(
            workspace, await tx.policies.current(workspace), await tx.policies.ladder(workspace)
        )


class StoredPolicyPoint(StoredPreApprovalPolicy):
    """Decides each call from the workspace's current policy and ladder (read through `cache`),
    then the stored pre-approvals (read through `rules`). Raises when the policy cannot be read or
    evaluated: the wrapper then asks (fail closed)."""

    def __init__(
        self,
        uow: PolicyUnitOfWorkFactory,
        cedar: CedarPolicies,
        *,
        rules: AuthorizationCache | None = None,
        cache: PolicyCache | None = None,
        max_requesters: int = 1024,
        sampler: CallSampler | None = None,
    ) -> None:
        super().__init__(uow, rules)
        self.sampler = sampler
        self._policies = uow
        self._cedar = cedar
        self._states = cache
        self._requesters: OrderedDict[uuid.UUID, tuple[str, str, str]] = OrderedDict()
        self._max_requesters = max_requesters

    async def decide(self, deps: RunDeps, spec: ToolSpec, args: Mapping[str, Any]) -> PolicyDecision:
        state = await self.workspace_policy(deps.workspace)
        if state.empty:
            decision = default_decision(spec)
        else:
            facts = await self.facts(deps, spec, args, state)
            decision = decide_call(spec, facts, state, self._cedar.evaluate(state, facts))
        return await self.with_pre_approval(deps, spec, args, decision)

    async def decide_facts(self, spec: ToolSpec, facts: CallFacts) -> PolicyDecision:
        """The decision before pre-approvals for a call whose facts are known (an agent outside
        files its own: `sursis.infra.policy.external`)."""
        state = await self.workspace_policy(facts.workspace)
        if state.empty:
            return default_decision(spec)
        return decide_call(spec, facts, state, self._cedar.evaluate(state, facts))

    async def workspace_policy(self, workspace: str) -> WorkspacePolicy:
        state = self._states.get(workspace) if self._states is not None else None
        if state is None:
            ticket = self._states.ticket() if self._states is not None else 0
            state = await load_workspace_policy(self._policies, workspace)
            if self._states is not None:
                self._states.put(workspace, state, ticket)
        return state

    async def facts(
        self, deps: RunDeps, spec: ToolSpec, args: Mapping[str, Any], state: WorkspacePolicy
    ) -> CallFacts:
        """What the conditions see of this call."""
        key, role, channel = await self._requester(deps) if state.needs_requester else ("", "", "")
        arguments = to_jsonable_python(dict(args))
        return CallFacts(
            workspace=deps.workspace,
            agent=deps.agent_name,
            tool=spec.name,
            category=spec.category,
            arguments=arguments if isinstance(arguments, dict) else {},
            at=deps.clock(),
            server=spec.server,
            schema_digest=spec.schema_digest,
            requester_key=key,
            requester_role=role,
            channel=channel,
        )

    async def _requester(self, deps: RunDeps) -> tuple[str, str, str]:
        """Who started the conversation, and the run's channel: read once per run."""
        known = self._requesters.get(deps.run_id)
        if known is not None:
            return known
        async with self._policies.reader() as tx:
            known = await tx.policies.requester(deps.conversation_id, deps.run_id)
        self._requesters[deps.run_id] = known
        while len(self._requesters) > self._max_requesters:
            self._requesters.popitem(last=False)
        return known
