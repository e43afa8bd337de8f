"""The policy point as an agent outside meets it: the same rules, ladder, defaults and pre-approvals
as a hosted call, over the facts the agent filed (its tool is not in the catalog: a `mutate` tool,
asked by default)."""

from __future__ import annotations

import uuid

import structlog
from pydantic_core import to_jsonable_python

from sursis.domain.approvals.approval_request_records import Filing
from sursis.domain.clock import Clock
from sursis.domain.policy.authorizations import UnsealedPreApproval
from sursis.domain.policy.policies import (
    CallFacts,
    default_decision,
    lifts,
    own_pre_approvals_count,
    pre_approved,
)
from sursis.domain.policy.policy_sampling import SampleDraw, sample
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.records import Principal
from sursis.domain.tools import Category, ToolSpec
from sursis.infra.agents.policy import StoredPreApprovalPolicy
from sursis.infra.agents.run_deps import PreApprovalPolicy
from sursis.infra.policy.point import StoredPolicyPoint

log = structlog.get_logger("sursis.policy")

CHANNEL = "external"
"""The channel a condition sees for a filed request (`context.channel`)."""


class ExternalPolicyPoint:
    """Decides filed requests with the service's policy point (`point`); a point that is not the stored
    one (a test's, an embedder's) applies the defaults and its pre-approvals."""

    def __init__(self, point: PreApprovalPolicy, clock: Clock) -> None:
        self._point = point
        self._clock = clock

    async def decide_external(self, workspace: str, filing: Filing, requester: Principal) -> PolicyDecision:
        spec = ToolSpec(filing.tool_name, category=Category.MUTATE)
        now = self._clock()
        arguments = to_jsonable_python(filing.args)
        facts = CallFacts(
            workspace=workspace,
            agent=filing.agent,
            tool=filing.tool_name,
            category=Category.MUTATE,
            arguments=arguments if isinstance(arguments, dict) else {},
            at=now,
            requester_key=requester.id,
            requester_role=requester.role.value,
            channel=CHANNEL,
        )
        point = self._point
        if isinstance(point, StoredPolicyPoint):
            decision = await point.decide_facts(spec, facts)
        else:
            decision = default_decision(spec)
        # A sampled rung asks every filed request: an agent outside could file again, with a new
        # key, until a draw let it through (a hosted call that is drawn suspends its run instead).
        decision = sample(decision, None, SampleDraw(workspace, spec.name, uuid.UUID(int=0), ""))
        if not lifts(decision):
            return decision
        try:
            if isinstance(point, StoredPreApprovalPolicy):
                own = own_pre_approvals_count(decision, requester.role.value)
                covering = await point.covering_authorization(
                    workspace, spec.name, filing.args, now, None if own else requester.id
                )
            else:
                covering = await point.covering_authorization(workspace, spec.name, filing.args, now)
        except UnsealedPreApproval as forged:
            # A pre-approval the service did not seal settles nothing: people decide the request.
            log.error(
                "pre_approval.unsealed", authorization_id=forged.authorization_id, problem=forged.problem
            )
            return decision
        return pre_approved(decision, covering) if covering is not None else decision
