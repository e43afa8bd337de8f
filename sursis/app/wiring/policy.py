"""Who decides: the policy point every tool call passes, the policy services, pre-approvals and
approver groups, wired from the settings and the agents' tool catalog."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from sursis.app.context_settings import PolicySettings
from sursis.app.wiring import INNER
from sursis.app.wiring.agents import AgentParts
from sursis.app.wiring.reviewer import reviewer_loop
from sursis.app.wiring.storage import StorageParts
from sursis.domain.approvals.approver_admin import ApproverService
from sursis.domain.clock import utcnow
from sursis.domain.notified_cache import Invalidations
from sursis.domain.policy.authorization_cache import AuthorizationCache
from sursis.domain.policy.authorizations import PreApprovalService
from sursis.domain.policy.policy_cache import AllInvalidations, PolicyCache
from sursis.domain.policy.policy_service import PolicyService
from sursis.domain.policy.policy_simulation import PolicySimulation
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.declarations import DeclaredToolCatalog
from sursis.infra.agents.models import BuiltModels
from sursis.infra.agents.run_deps import PreApprovalPolicy
from sursis.infra.db.engine import is_sqlite
from sursis.infra.encryption.call_sampler import KeyedCallSampler
from sursis.infra.policy.cedar import CedarPolicies, ToolShape
from sursis.infra.policy.point import StoredPolicyPoint
from sursis.infra.policy.reviewer import PydanticAiReviewer, ReviewerLoop


@dataclass(frozen=True, slots=True)
class PolicyCaches:
    """The pre-approvals' and the policies' caches (None: read every time), and what hears of
    changes for both (the same notification)."""

    rules: AuthorizationCache | None
    states: PolicyCache | None

    @classmethod
    def build(cls, settings: PolicySettings, policy: PreApprovalPolicy | None = None) -> PolicyCaches:
        """None when `policy` replaces the stored point, or caching is off (`policy_cache_seconds`)."""
        if settings.policy_cache_seconds <= 0 or policy is not None:
            return cls(None, None)
        sqlite = is_sqlite(settings.database_url)
        return cls(
            AuthorizationCache(settings.policy_cache_seconds, live=sqlite),
            PolicyCache(settings.policy_cache_seconds, live=sqlite),
        )

    def invalidations(self) -> Invalidations | None:
        targets: list[Invalidations] = [c for c in (self.rules, self.states) if c is not None]
        return AllInvalidations(targets) if targets else None


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyParts:
    policies: PolicyService
    policy_simulation: PolicySimulation
    authorizations: PreApprovalService
    approvers: ApproverService
    reviewer: ReviewerLoop
    """Asks route reviewers about queued calls (a loop of the worker; `run_once` in tests)."""
    point: PreApprovalPolicy = field(metadata=INNER)
    """What the runner asks before each tool call."""


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


def model_problem(models: BuiltModels) -> Callable[[str], str | None]:
    """Why a reviewer model named in a rule cannot be built here (its provider's library missing, a
    name pydantic-ai does not know); a model that can is built once, as a review would build it."""

    def problem(name: str) -> str | None:
        from pydantic_ai.exceptions import UserError

        from sursis.infra.agents.models import missing_provider_package

        missing = missing_provider_package(name)
        if missing is not None:
            return missing
        try:
            models.named(name)
        except (UserError, ValueError, ImportError) as exc:
            return " ".join(str(exc).split())[:300]
        return None

    return problem


def wire_policy(
    settings: PolicySettings,
    storage: StorageParts,
    agents: AgentParts,
    caches: PolicyCaches,
    policy: PreApprovalPolicy | None,
) -> PolicyParts:
    """`policy`, when given (tests, embedders), replaces the stored point: it decides every call."""
    uow, catalog = storage.uow, agents.catalog
    cedar = CedarPolicies(
        ToolShape(d.spec.name, d.tool.function_schema.json_schema) for d in catalog.declared_tools()
    )
    specs = CatalogSpecs(catalog)
    service = PolicyService(
        uow, cedar, specs, changes=caches.invalidations(), model_problem=model_problem(agents.models)
    )
    review_model = PydanticAiReviewer(agents.models.named)
    sampler = KeyedCallSampler.of(uow.cipher)
    return PolicyParts(
        policies=service,
        policy_simulation=PolicySimulation(uow, service, specs, reviewer=review_model, sampler=sampler),
        authorizations=PreApprovalService(uow, catalog, changes=caches.rules),
        approvers=ApproverService(uow, clock=utcnow),
        reviewer=reviewer_loop(settings, storage, review_model, utcnow),
        point=policy
        or StoredPolicyPoint(uow, cedar, rules=caches.rules, cache=caches.states, sampler=sampler),
    )
