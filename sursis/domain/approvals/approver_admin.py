"""Managing who decides: approver groups (admins), delegations (an approver's own, or any for an
admin) and the reassignment of a waiting call (admins)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sursis.domain import approvers as a
from sursis.domain.access import Permission, Role
from sursis.domain.approvals.approval_votes import with_approval
from sursis.domain.approvers import ApprovalDelegation, ApproverGroup
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import Conflict, NotFound, Stale, ValidationFailed
from sursis.domain.identity.keys import NO_WORKSPACE
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import AuditEntry, PendingCall, Principal
from sursis.domain.states import PendingStatus

GROUP_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
MAX_DELEGATION = timedelta(days=90)
"""The longest period a delegation may cover: a standing delegation is a group membership."""
MAX_MEMBERS = 200


class GroupExists(Conflict):
    code = "group_exists"


class InvalidMember(ValidationFailed):
    """A member must be a valid operator or admin key that can see the group's workspace."""

    code = "invalid_member"


def _field(loc: str, message: str) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": ["body", loc], "msg": message}]})


@dataclass
class ApproverService:
    uow: UnitOfWorkFactory
    clock: Clock = field(default=utcnow)

    # Groups (admins)

    async def create_group(
        self,
        principal: Principal,
        workspace: str,
        name: str,
        description: str | None = None,
        members: Sequence[str] = (),
    ) -> ApproverGroup:
        principal.require(Permission.MANAGE_APPROVERS)
        _require_workspace(principal, workspace)
        if not GROUP_NAME.match(name):
            raise _field("name", "1-100 characters of letters, digits, '_', '.' or '-'")
        now = self.clock()
        group = ApproverGroup(uuid.uuid4(), workspace, name, description, principal.id, now)
        async with self.uow() as uow:
            for key in dict.fromkeys(members):
                await _require_member(uow, workspace, key)
            if not await uow.approvers.add_group(group):
                raise GroupExists(f"the workspace has a group named {name!r} already")
            for key in dict.fromkeys(members):
                await uow.approvers.add_member(group.id, key, principal.id, now)
            await _audit(
                uow, "approvers.group_created", principal, workspace, now, group=name, members=list(members)
            )
            await uow.commit()
        return await self.get_group(principal, workspace, name)

    async def list_groups(self, principal: Principal, workspace: str | None) -> list[ApproverGroup]:
        principal.require(Permission.MANAGE_APPROVERS)
        if workspace is not None:
            _require_workspace(principal, workspace)
        scope = workspace if workspace is not None or principal.workspace is None else principal.workspace
        async with self.uow.reader() as uow:
            return await uow.approvers.groups(scope)

    async def get_group(self, principal: Principal, workspace: str, name: str) -> ApproverGroup:
        principal.require(Permission.MANAGE_APPROVERS)
        async with self.uow.reader() as uow:
            return await _group(uow, principal, workspace, name)

    async def add_member(self, principal: Principal, workspace: str, name: str, key: str) -> ApproverGroup:
        """Add a key; adding a member again changes nothing."""
        principal.require(Permission.MANAGE_APPROVERS)
        now = self.clock()
        async with self.uow() as uow:
            group = await _group(uow, principal, workspace, name)
            await _require_member(uow, workspace, key)
            if await uow.approvers.add_member(group.id, key, principal.id, now):
                await _audit(uow, "approvers.member_added", principal, workspace, now, group=name, key_id=key)
                await uow.commit()
        return await self.get_group(principal, workspace, name)

    async def remove_member(self, principal: Principal, workspace: str, name: str, key: str) -> ApproverGroup:
        principal.require(Permission.MANAGE_APPROVERS)
        now = self.clock()
        async with self.uow() as uow:
            group = await _group(uow, principal, workspace, name)
            if not await uow.approvers.remove_member(group.id, key):
                raise NotFound("that key is not a member of the group")
            await _audit(uow, "approvers.member_removed", principal, workspace, now, group=name, key_id=key)
            await uow.commit()
        return await self.get_group(principal, workspace, name)

    async def delete_group(self, principal: Principal, workspace: str, name: str) -> None:
        principal.require(Permission.MANAGE_APPROVERS)
        now = self.clock()
        async with self.uow() as uow:
            group = await _group(uow, principal, workspace, name)
            if not await uow.approvers.delete_group(group.id):
                raise NotFound("approver group not found")
            await _audit(uow, "approvers.group_deleted", principal, workspace, now, group=name)
            await uow.commit()

    # Delegations (an approver's own; an admin's for anyone)

    async def delegate(
        self,
        principal: Principal,
        *,
        delegate: str,
        ends_at: datetime,
        starts_at: datetime | None = None,
        delegator: str | None = None,
    ) -> ApprovalDelegation:
        principal.require(Permission.APPROVE)
        now = self.clock()
        delegator = delegator or principal.id
        if delegator != principal.id:
            principal.require(Permission.MANAGE_APPROVERS)
        starts = starts_at or now
        if ends_at <= starts or ends_at <= now:
            raise _field("ends_at", "a moment in the future, after starts_at")
        if ends_at - starts > MAX_DELEGATION:
            raise _field("ends_at", f"a delegation covers at most {MAX_DELEGATION.days} days")
        if delegate == delegator:
            raise _field("delegate", "a key does not delegate to itself")
        async with self.uow() as uow:
            given_by = await _approver_key(uow, principal, delegator, "delegator")
            await _approver_key(uow, principal, delegate, "delegate", workspace=given_by)
            delegation = ApprovalDelegation(
                id=uuid.uuid4(),
                workspace=given_by,
                delegator=delegator,
                delegate=delegate,
                starts_at=starts,
                ends_at=ends_at,
                created_by=principal.id,
                created_at=now,
            )
            await uow.approvers.add_delegation(delegation)
            await _audit(
                uow,
                "approvers.delegation_created",
                principal,
                given_by or NO_WORKSPACE,
                now,
                delegation_id=str(delegation.id),
                delegator=delegator,
                delegate=delegate,
                starts_at=starts.isoformat(),
                ends_at=ends_at.isoformat(),
            )
            await uow.commit()
        return delegation

    async def list_delegations(self, principal: Principal) -> list[ApprovalDelegation]:
        """An admin sees every delegation of its workspaces; an approver those it gave or received."""
        principal.require(Permission.APPROVE)
        async with self.uow.reader() as uow:
            if principal.may(Permission.MANAGE_APPROVERS):
                return await uow.approvers.delegations(workspace=None, key=None)
            return await uow.approvers.delegations(workspace=None, key=principal.id)

    async def revoke_delegation(self, principal: Principal, delegation_id: uuid.UUID) -> ApprovalDelegation:
        """End a delegation now (its delegator or an admin); revoking it again changes nothing."""
        principal.require(Permission.APPROVE)
        now = self.clock()
        async with self.uow() as uow:
            found = await uow.approvers.get_delegation(delegation_id)
            if found is None or not _may_manage(principal, found):
                raise NotFound("delegation not found")
            if await uow.approvers.revoke_delegation(delegation_id, now):
                await _audit(
                    uow,
                    "approvers.delegation_revoked",
                    principal,
                    found.workspace or NO_WORKSPACE,
                    now,
                    delegation_id=str(found.id),
                )
                await uow.commit()
                return replace(found, revoked_at=now)
        return found

    # Reassignment (admins)

    async def reassign(
        self, principal: Principal, correlation_id: uuid.UUID, to: Sequence[str]
    ) -> PendingCall:
        """Put a waiting routed call before other groups or keys (`group:NAME`, `key:ID`): they
        replace who may vote; the votes already cast stay counted."""
        principal.require(Permission.MANAGE_APPROVERS)
        now = self.clock()
        async with self.uow() as uow:
            call = await uow.pending.get(correlation_id)
            if call is None or not principal.can_see(call.workspace):
                raise NotFound("pending call not found")
            route = a.routed(call.policy)
            if route is None:
                raise ValidationFailed(
                    "only a call routed to approver groups is reassigned; any operator decides this one",
                    extra={"errors": [{"loc": ["path", "correlation_id"], "msg": "not routed"}]},
                )
            if call.status is not PendingStatus.AWAITING:
                raise Stale(
                    f"the pending call is already {call.status.value}",
                    extra={"pending_status": call.status.value},
                )
            for target in to:
                if target.startswith(a.GROUP_PREFIX):
                    name = target.removeprefix(a.GROUP_PREFIX)
                    if await uow.approvers.get_group(call.workspace, name) is None:
                        raise _field("to", f"no approver group {name!r} in the call's workspace")
                else:
                    await _require_member(uow, call.workspace, target.removeprefix(a.KEY_PREFIX))
            if not await uow.approvers.reassign(correlation_id, list(to)):
                state = a.RouteState(correlation_id, call.workspace, reassigned_to=tuple(to), created_at=now)
                await uow.approvers.add_route(state)
            await uow.audit.append(
                AuditEntry.of_call("pending.reassigned", principal.id, call, {"to": list(to)}), now
            )
            shown = (await with_approval(uow, principal, [call], now))[0]
            await uow.commit()
        return shown


def _may_manage(principal: Principal, delegation: ApprovalDelegation) -> bool:
    if principal.may(Permission.MANAGE_APPROVERS):
        return delegation.workspace is None or principal.can_see(delegation.workspace)
    return delegation.delegator == principal.id


def _require_workspace(principal: Principal, workspace: str) -> None:
    if not principal.can_see(workspace):
        raise NotFound("workspace not found")


async def _group(uow: UnitOfWork, principal: Principal, workspace: str, name: str) -> ApproverGroup:
    group = await uow.approvers.get_group(workspace, name) if principal.can_see(workspace) else None
    if group is None:
        raise NotFound("approver group not found")
    return group


async def _require_member(uow: UnitOfWork, workspace: str, key: str) -> None:
    found = await uow.api_keys.get(uuid.UUID(key)) if _is_uuid(key) else None
    if (
        found is None
        or found.revoked_at is not None
        or found.role not in (Role.OPERATOR, Role.ADMIN)
        or found.workspace not in (None, workspace)
    ):
        raise InvalidMember(
            "a member is the id of a valid operator or admin key of the group's workspace",
            extra={"key_id": key},
        )


async def _approver_key(
    uow: UnitOfWork, principal: Principal, key: str, loc: str, workspace: str | None = None
) -> str | None:
    """The workspace of `key`, a valid operator or admin key the principal can see."""
    found = await uow.api_keys.get(uuid.UUID(key)) if _is_uuid(key) else None
    if (
        found is None
        or found.revoked_at is not None
        or found.role not in (Role.OPERATOR, Role.ADMIN)
        or (found.workspace is not None and not principal.can_see(found.workspace))
        or (workspace is not None and found.workspace not in (None, workspace))
    ):
        raise InvalidMember(
            f"{loc} is the id of a valid operator or admin key of the same workspace", extra={"key_id": key}
        )
    return found.workspace


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


async def _audit(
    uow: UnitOfWork, action: str, principal: Principal, workspace: str, now: datetime, **details: object
) -> None:
    await uow.audit.append(
        AuditEntry(action=action, actor=principal.id, workspace=workspace, details=dict(details)), now
    )
