"""What a policy decision costs, measured on a service's own policy point (`bench/policy.py`).

`store_policy` stores a workspace policy given as the JSON `PUT /v1/policies` takes; then
`time_policy_decisions` decides one call `count` times with the workspace's policy parsed once and
cached, as a worker does, and returns the seconds each took: the Cedar evaluation alone, the whole
point, and `cedarpy.is_authorized_batch` per request.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import cedarpy

from sursis.app.schemas.policies import ApprovalPolicyIn
from sursis.app.service import Service
from sursis.domain.access import Role
from sursis.domain.clock import utcnow
from sursis.domain.policy.authorization_cache import AuthorizationCache
from sursis.domain.policy.policy_cache import PolicyCache
from sursis.domain.records import Principal
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.policy.cedar import CedarPolicies, ToolShape
from sursis.infra.policy.point import StoredPolicyPoint

_ADMIN = Principal(id="policy-timing", role=Role.ADMIN, workspace=None)


@dataclass
class PolicyTimings:
    """Seconds per decision; `decision` is the effect and rule of the timed call."""

    evaluation: list[float] = field(default_factory=list)
    whole_point: list[float] = field(default_factory=list)
    batch_per_request: list[float] = field(default_factory=list)
    decision: tuple[str, str | None] = ("", None)


async def store_policy(service: Service, policy: dict[str, Any], workspace: str = "default") -> int:
    """Store `policy` (`{"rules": [...]}`, as `PUT /v1/policies` takes it); returns its version."""
    parsed = ApprovalPolicyIn.model_validate(policy)
    rules = [rule.to_rule() for rule in parsed.rules]
    stored = await service.container.policies.put(_ADMIN, workspace, rules, parsed.comment)
    return stored.version


async def time_policy_decisions(
    service: Service, *, agent: str, tool: str, args: dict[str, Any], count: int, workspace: str = "default"
) -> PolicyTimings:
    """Decide the call `count` times against the workspace's stored policy (caches warm)."""
    container = service.container
    catalog = container.catalog
    cedar = CedarPolicies(
        ToolShape(d.spec.name, d.tool.function_schema.json_schema) for d in catalog.declared_tools()
    )
    uow = container.uow
    assert isinstance(uow, SqlUnitOfWorkFactory)
    point = StoredPolicyPoint(
        uow, cedar, rules=AuthorizationCache(3600, live=True), cache=PolicyCache(3600, live=True)
    )
    spec = catalog.spec(agent, tool)
    if spec is None:
        raise ValueError(f"agent {agent!r} has no tool {tool!r}")
    deps = RunDeps(
        conversation_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        workspace=workspace,
        agent_name=agent,
        uow=uow,
        clock=utcnow,
        policy=point,
    )
    first = await point.decide(deps, spec, args)
    timings = PolicyTimings(decision=(first.effect.value, first.rule))
    state = await point.workspace_policy(workspace)
    facts = await point.facts(deps, spec, args, state)
    for _ in range(count):
        t0 = time.perf_counter()
        cedar.evaluate(state, facts)
        t1 = time.perf_counter()
        await point.decide(deps, spec, args)
        t2 = time.perf_counter()
        timings.evaluation.append(t1 - t0)
        timings.whole_point.append(t2 - t1)
    compiled = cedar.compiled(workspace, state.conditions())
    requests = [cedar.request(facts)] * 100
    for _ in range(max(1, count // 100)):
        t0 = time.perf_counter()
        cedarpy.is_authorized_batch(requests, compiled.policies, [])
        timings.batch_per_request.append((time.perf_counter() - t0) / len(requests))
    return timings
