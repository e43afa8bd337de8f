"""The policy point and the policy services, wired from the settings and the tool catalog."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sursis.app.settings import Settings
from sursis.domain.authorization_cache import AuthorizationCache
from sursis.domain.notified_cache import Invalidations
from sursis.domain.policy_cache import AllInvalidations, PolicyCache
from sursis.domain.policy_service import PolicyService
from sursis.domain.policy_simulation import PolicySimulation
from sursis.domain.reviewer import ReviewerModel
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.declarations import DeclaredToolCatalog
from sursis.infra.agents.run_deps import PreApprovalPolicy
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.policy.cedar import CedarPolicies, ToolShape
from sursis.infra.policy.point import StoredPolicyPoint


@dataclass(frozen=True, slots=True)
class PolicyCaches:
    """The pre-approvals' and the policies' caches (None: read every time), and what hears of
    changes for both (the same notification)."""

    rules: AuthorizationCache | None
    states: PolicyCache | None

    @classmethod
    def build(cls, settings: Settings, *, sqlite: bool, policy: PreApprovalPolicy | None) -> PolicyCaches:
        if settings.policy_cache_seconds <= 0 or policy is not None:
            return cls(None, None)
        return cls(
            AuthorizationCache(settings.policy_cache_seconds, live=sqlite),
            PolicyCache(settings.policy_cache_seconds, live=sqlite),
        )

    def invalidations(self) -> Invalidations | None:
        targets: list[Invalidations] = [c for c in (self.rules, self.states) if c is not None]
        return AllInvalidations(targets) if targets else None


@dataclass(frozen=True, slots=True)
class PolicyParts:
    point: PreApprovalPolicy
    service: PolicyService
    simulation: PolicySimulation


class CatalogSpecs(Mapping[str, ToolSpec]):
    """The specs the policy knows, read from the catalog each time: the agents' function tools and
    the MCP servers' tools listed so far (their digests change when a server changes a tool)."""

    def __init__(self, catalog: DeclaredToolCatalog) -> None:
        self._catalog = catalog

    def _specs(self) -> dict[str, ToolSpec]:
        specs: dict[str, ToolSpec] = {}
        for declared in self._catalog.declared_tools():
            specs.setdefault(declared.spec.name, declared.spec)
        for spec in self._catalog.discovered_specs():
            specs.setdefault(spec.name, spec)
        return specs

    def __getitem__(self, name: str) -> ToolSpec:
        return self._specs()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs())

    def __len__(self) -> int:
        return len(self._specs())


def policy_parts(
    uow: SqlUnitOfWorkFactory,
    catalog: DeclaredToolCatalog,
    caches: PolicyCaches,
    policy: PreApprovalPolicy | None,
    reviewer: ReviewerModel | None = None,
) -> PolicyParts:
    """`policy`, when given (tests, embedders), replaces the stored point: it decides every call."""
    cedar = CedarPolicies(
        ToolShape(d.spec.name, d.tool.function_schema.json_schema) for d in catalog.declared_tools()
    )
    specs = CatalogSpecs(catalog)
    service = PolicyService(uow, cedar, specs, changes=caches.invalidations())
    point = policy or StoredPolicyPoint(uow, cedar, rules=caches.rules, cache=caches.states)
    return PolicyParts(point, service, PolicySimulation(uow, service, specs, reviewer=reviewer))
