"""The stored pre-approval policy: the workspace's `authorizations` rows, read through the unit of work."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic_core import to_jsonable_python

from sursis.domain.policy.authorization_cache import AuthorizationCache
from sursis.domain.policy.authorizations import sealed_covering
from sursis.domain.policy.policies import own_pre_approvals_count
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.run_deps import PreApprovalPolicy, RunDeps


class StoredPreApprovalPolicy(PreApprovalPolicy):
    """Covered when an active authorization of the workspace matches the call.

    Raises on a broken rule or a database error; the tool wrapper then gates the call (fail closed).
    With a `cache`, the rules of (workspace, tool) read in the last few seconds are not read again.
    """

    def __init__(self, uow: UnitOfWorkFactory, cache: AuthorizationCache | None = None) -> None:
        self._uow = uow
        self._cache = cache

    async def covering_for(
        self, deps: RunDeps, spec: ToolSpec, args: Mapping[str, Any], decision: PolicyDecision
    ) -> str | None:
        """Leaves out the pre-approvals the call's requester created (`not_by_requester`)."""
        info = deps.run_info
        requester = info.key_id if info is not None else None
        if info is not None and own_pre_approvals_count(decision, info.role):
            requester = None
        return await self.covering_authorization(deps.workspace, spec.name, args, deps.clock(), requester)

    async def covering_authorization(
        self,
        workspace: str,
        tool_name: str,
        args: Mapping[str, Any],
        now: datetime,
        requester: str | None = None,
    ) -> str | None:
        """The covering pre-approval's id; one created by `requester` (the key that caused the
        call) never covers its call. Raises `UnsealedPreApproval` when the covering one's seal does
        not check (where decisions are sealed)."""
        rules = self._cache.get(workspace, tool_name) if self._cache is not None else None
        if rules is None:
            ticket = self._cache.ticket() if self._cache is not None else 0
            async with self._uow.reader() as uow:
                rules = tuple(await uow.authorizations.candidates(workspace, tool_name, now))
            if self._cache is not None:
                self._cache.put(workspace, tool_name, rules, ticket)
        if requester is not None:
            rules = tuple(rule for rule in rules if rule.created_by != requester)
        if not rules:
            return None
        covering = sealed_covering(rules, tool_name, to_jsonable_python(dict(args)), now)
        return str(covering.id) if covering else None
