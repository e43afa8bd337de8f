"""Pre-approvals: a workspace's standing approval of a gated tool, optionally for matching arguments."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sursis.domain.access import Permission
from sursis.domain.agents.agent_ports import ToolCatalog
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import Error, NotFound, ValidationFailed
from sursis.domain.policy.authorization_cache import AuthorizationCache
from sursis.domain.policy.policies import own_pre_approvals_count
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records import AuditEntry, Principal
from sursis.domain.records.access_records import Authorization
from sursis.domain.sanitize import canonical_json, sanitize


class BrokenAuthorization(Error):
    """A stored rule that cannot be evaluated; the call it was asked about must be gated."""

    code = "broken_authorization"


class UnsealedPreApproval(Error):
    """The pre-approval that would lift a call is not the service's: its seal does not check (a row
    inserted or changed by SQL). The call must not run; its run fails with an integrity finding."""

    code = "unsealed_pre_approval"

    def __init__(self, authorization: Authorization) -> None:
        self.authorization_id = str(authorization.id)
        self.problem = authorization.seal_problem or "the pre-approval carries no seal"
        super().__init__(f"pre-approval {self.authorization_id}: {self.problem}")


def covers(authorization: Authorization, tool_name: str, args: Mapping[str, Any]) -> bool:
    """True when the rule pre-approves this call: same tool, and every given key equals the call's arg.

    Values are compared as canonical JSON, so `1`, `1.0` and `true` are three different values.
    `args` must be JSON-ready (what the model sent, after validation).
    """
    if authorization.tool_name != tool_name:
        return False
    match = authorization.args_match
    if match is None:
        return True
    if not isinstance(match, dict):
        raise BrokenAuthorization(f"authorization {authorization.id}: args_match is not an object")
    return all(
        key in args and canonical_json(args[key]) == canonical_json(value) for key, value in match.items()
    )


def first_covering(
    rules: Iterable[Authorization], tool_name: str, args: Mapping[str, Any], now: datetime
) -> Authorization | None:
    """The first active rule covering the call. A broken rule among them raises: fail closed."""
    matching = [rule for rule in rules if rule.active(now) and covers(rule, tool_name, args)]
    return matching[0] if matching else None


def sealed_covering(
    rules: Iterable[Authorization], tool_name: str, args: Mapping[str, Any], now: datetime
) -> Authorization | None:
    """`first_covering`, raising `UnsealedPreApproval` when the rule that would lift the call is not
    sealed by the service (read where decisions are sealed: `Authorization.seal_problem`)."""
    covering = first_covering(rules, tool_name, args, now)
    if covering is not None and covering.seal_problem is not None:
        raise UnsealedPreApproval(covering)
    return covering


def not_by_requester(
    rules: Iterable[Authorization], requester: str | None, role: str | None, decision: PolicyDecision
) -> tuple[Authorization, ...]:
    """The pre-approvals that may lift the ask `decision` of a call `requester` caused: never the
    requester's own (`own_pre_approvals_count` says the one exception)."""
    if not requester or own_pre_approvals_count(decision, role):
        return tuple(rules)
    return tuple(rule for rule in rules if rule.created_by != requester)


def _invalid(loc: list[str], message: str) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": loc, "msg": message}]})


class PreApprovalService:
    """List, create and revoke pre-approvals (operators of the workspace, admins)."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        catalog: ToolCatalog,
        *,
        clock: Clock = utcnow,
        changes: AuthorizationCache | None = None,
    ) -> None:
        self._uow = uow
        self._catalog = catalog
        self._clock = clock
        self._changes = changes

    async def create(
        self,
        principal: Principal,
        *,
        tool_name: str,
        reason: str,
        args_match: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
        workspace: str | None = None,
    ) -> Authorization:
        ws = workspace or principal.workspace or "default"
        if not principal.can_see(ws):
            raise NotFound("workspace not found")
        principal.require(Permission.MANAGE_AUTHORIZATIONS)
        now = self._clock()
        parameters = self._catalog.gated_tool_parameters(tool_name)
        if parameters is None:
            raise _invalid(["tool_name"], f"no agent declares a gated tool {tool_name!r}")
        unknown = sorted(set(args_match or {}) - parameters)
        if unknown:
            raise ValidationFailed(
                f"{tool_name!r} has no parameter {', '.join(map(repr, unknown))}",
                extra={"errors": [{"loc": ["args_match", k], "msg": "unknown parameter"} for k in unknown]},
            )
        if expires_at is not None and (expires_at.tzinfo is None or expires_at <= now):
            raise _invalid(["expires_at"], "expires_at must be a future time with a timezone")
        if not reason.strip():
            raise _invalid(["reason"], "a reason is required")
        authorization = Authorization(
            id=uuid.uuid4(),
            workspace=ws,
            tool_name=tool_name,
            args_match=args_match or None,
            reason=reason.strip(),
            created_by=principal.id,
            created_at=now,
            expires_at=expires_at,
        )
        async with self._uow() as uow:
            await uow.authorizations.add(authorization)
            await uow.audit.append(self._audit("authorization.created", principal, authorization), now)
            await uow.commit()
        self._changed(ws)
        return authorization

    async def list_authorizations(
        self, principal: Principal, *, include_inactive: bool = False
    ) -> list[Authorization]:
        principal.require(Permission.MANAGE_AUTHORIZATIONS)
        async with self._uow() as uow:
            return await uow.authorizations.search(
                workspace=None if principal.is_admin else principal.workspace,
                include_inactive=include_inactive,
                now=self._clock(),
            )

    async def revoke(self, principal: Principal, authorization_id: uuid.UUID) -> Authorization:
        """Revoke a pre-approval; revoking a revoked one changes nothing (idempotent)."""
        now = self._clock()
        async with self._uow() as uow:
            authorization = await uow.authorizations.get(authorization_id)
            if authorization is None or not principal.can_see(authorization.workspace):
                raise NotFound("authorization not found")
            principal.require(Permission.MANAGE_AUTHORIZATIONS)
            if await uow.authorizations.revoke(authorization_id, now):
                await uow.audit.append(self._audit("authorization.revoked", principal, authorization), now)
                await uow.commit()
                self._changed(authorization.workspace)
                authorization.revoked_at = now
            return authorization

    def _changed(self, workspace: str) -> None:
        if self._changes is not None:
            self._changes.forget({workspace})

    @staticmethod
    def _audit(action: str, principal: Principal, authorization: Authorization) -> AuditEntry:
        return AuditEntry(
            action=action,
            actor=principal.id,
            workspace=authorization.workspace,
            details={
                "authorization_id": str(authorization.id),
                "tool_name": authorization.tool_name,
                "args_match": sanitize(authorization.args_match),
                "expires_at": authorization.expires_at.isoformat() if authorization.expires_at else None,
                "reason": authorization.reason,
            },
        )
