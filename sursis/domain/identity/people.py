"""People who sign in with the identity provider: the rules that give their groups a role, the
sign-ins in progress and the sessions, as records and ports (`sursis.app.oidc` runs the flow).

Provisioning rules come from two places: `SURSIS_OIDC_GROUPS` (read-only, the bootstrap that lets
the first admin sign in) and the rules admins store over the API. A stored rule for a group
replaces the setting's rule for that group; removing it brings the setting's rule back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from sursis.domain.access import Permission, Role
from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, Principal

__all__ = [
    "GROUP",
    "PROVISIONED_ROLES",
    "PeopleUnitOfWork",
    "PeopleUnitOfWorkFactory",
    "PersonSession",
    "PersonSessionRepository",
    "ProvisioningRule",
    "ProvisioningRuleRepository",
    "ProvisioningService",
    "SignIn",
    "rules_from_setting",
]

GROUP = re.compile(r"^[^/\x00-\x1f\x7f]{1,200}$")
"""A provider group's name: 1-200 characters, no `/` (it is a path segment) and no control character."""
PROVISIONED_ROLES = (Role.USER, Role.OPERATOR, Role.ADMIN)
WORKSPACE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
NO_WORKSPACE = "*"
"""The audit `workspace` of an admin rule (admins have none), as for admin keys."""


@dataclass(frozen=True, slots=True)
class ProvisioningRule:
    """Members of the provider's `group` are `role` in `workspace` (None for admins)."""

    group: str
    role: Role
    workspace: str | None
    source: Literal["settings", "stored"] = "stored"
    updated_by: str | None = None
    updated_at: datetime | None = None


def rules_from_setting(setting: Mapping[str, Mapping[str, str]]) -> dict[str, ProvisioningRule]:
    """The rules of `SURSIS_OIDC_GROUPS` (group → `{"role": ..., "workspace": ...}`); a rule without
    a role makes operators, one without a workspace (not an admin's) the `default` workspace.
    `ValueError` for a role no person may have."""
    rules: dict[str, ProvisioningRule] = {}
    for group, rule in setting.items():
        role = Role(rule.get("role", "operator"))
        if role not in PROVISIONED_ROLES:
            raise ValueError(
                f"group {group!r}: a person is a user, an operator or an admin, not {role.value}"
            )
        workspace = None if role is Role.ADMIN else rule.get("workspace", "default")
        rules[group] = ProvisioningRule(group, role, workspace, source="settings")
    return rules


@dataclass(slots=True)
class SignIn:
    """A sign-in between the redirect to the provider and its return: used once."""

    nonce: str
    verifier: str
    expires_at: float


@dataclass(slots=True)
class PersonSession:
    """A signed-in person: the principal requests act as, when their groups were last read, and
    the refresh token that reads them again (a secret: sealed where it is stored)."""

    principal: Principal
    expires_at: float
    refreshed_at: float
    refresh_token: str | None = None
    groups: list[str] = field(default_factory=list)
    csrf_token: str = ""
    """Derived from the session's id, never stored (`sursis.app.oidc.csrf_token_of`)."""


class ProvisioningRuleRepository(Protocol):
    async def rules(self) -> list[ProvisioningRule]: ...
    async def get(self, group: str) -> ProvisioningRule | None: ...
    async def put(self, rule: ProvisioningRule) -> None:
        """Insert or replace the rule of its group."""
        ...

    async def remove(self, group: str) -> ProvisioningRule | None:
        """The removed rule; None when the group had none."""
        ...


class PersonSessionRepository(Protocol):
    """Sessions and sign-ins in progress, by the hash of their id (of their `state`): a copy of the
    database holds no cookie that signs anyone in."""

    async def add_sign_in(self, state_hash: str, sign_in: SignIn, *, keep: int) -> None:
        """Store a sign-in; past `keep` of them, the oldest are forgotten."""
        ...

    async def take_sign_in(self, state_hash: str) -> SignIn | None:
        """The sign-in of this state, deleted (a state is used once)."""
        ...

    async def add(self, session_hash: str, session: PersonSession) -> None: ...
    async def get(self, session_hash: str) -> PersonSession | None: ...
    async def refreshed(self, session_hash: str, session: PersonSession) -> None:
        """Write a session's new principal, groups, refresh time and refresh token."""
        ...

    async def remove(self, session_hash: str) -> None: ...
    async def remove_expired(self, now: float) -> int:
        """Delete the sessions and sign-ins expired at `now`; how many."""
        ...


class PeopleUnitOfWork(UnitOfWork, Protocol):
    @property
    def provisioning(self) -> ProvisioningRuleRepository: ...
    @property
    def person_sessions(self) -> PersonSessionRepository: ...


class PeopleUnitOfWorkFactory(Protocol):
    def __call__(self) -> PeopleUnitOfWork: ...
    def reader(self) -> PeopleUnitOfWork: ...


def _field(name: str, message: str) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": [name], "msg": message}]})


@dataclass
class ProvisioningService:
    """The rules that give a provider group a role and a workspace: admins list, set and remove
    them (audited as `oidc.rule_set`, `oidc.rule_removed`); each sign-in and refresh reads them."""

    uow: PeopleUnitOfWorkFactory
    clock: Callable[[], datetime]
    bootstrap: Mapping[str, ProvisioningRule] = field(default_factory=dict)
    """The rules of `SURSIS_OIDC_GROUPS`, which stored rules replace group by group."""

    async def rules(self) -> dict[str, ProvisioningRule]:
        """The rules in force: the setting's, each group's stored rule in place of its own."""
        async with self.uow.reader() as uow:
            stored = await uow.provisioning.rules()
        return {**self.bootstrap, **{r.group: r for r in stored}}

    async def list_rules(self, principal: Principal) -> list[ProvisioningRule]:
        principal.require(Permission.MANAGE_KEYS)
        return sorted((await self.rules()).values(), key=lambda r: r.group)

    async def set_rule(
        self, principal: Principal, group: str, role: Role | str, workspace: str | None
    ) -> ProvisioningRule:
        """Store (or replace) the group's rule: its members are `role` in `workspace` from their
        next sign-in or session refresh."""
        principal.require(Permission.MANAGE_KEYS)
        check_group(group)
        try:
            role = Role(role)
        except ValueError:
            role = Role.SYSTEM
        if role not in PROVISIONED_ROLES:
            names = ", ".join(r.value for r in PROVISIONED_ROLES)
            raise _field("role", f"role must be one of {names}")
        if role is Role.ADMIN and workspace is not None:
            raise _field("workspace", "an admin rule has no workspace (admins see every workspace)")
        if role is not Role.ADMIN and (workspace is None or not WORKSPACE.match(workspace)):
            raise _field("workspace", f"a {role.value} rule needs a workspace: 1-100 of A-Z a-z 0-9 _ . -")
        now = self.clock()
        rule = ProvisioningRule(group, role, workspace, "stored", principal.id, now)
        async with self.uow() as uow:
            was = await uow.provisioning.get(group)
            await uow.provisioning.put(rule)
            details = {"group": group, "role": role.value, "workspace": workspace, "was": _view(was)}
            entry = AuditEntry("oidc.rule_set", principal.id, workspace or NO_WORKSPACE, details=details)
            await uow.audit.append(entry, now)
            await uow.commit()
        return rule

    async def remove_rule(self, principal: Principal, group: str) -> ProvisioningRule:
        """Remove the group's stored rule (`NotFound` without one): its members lose what it gave
        them at their next refresh, unless `SURSIS_OIDC_GROUPS` maps the group."""
        principal.require(Permission.MANAGE_KEYS)
        check_group(group)
        now = self.clock()
        async with self.uow() as uow:
            removed = await uow.provisioning.remove(group)
            if removed is None:
                raise NotFound("no stored provisioning rule for this group")
            details = {"group": group, "was": _view(removed)}
            entry = AuditEntry(
                "oidc.rule_removed", principal.id, removed.workspace or NO_WORKSPACE, details=details
            )
            await uow.audit.append(entry, now)
            await uow.commit()
        return removed


def check_group(group: str) -> None:
    if not GROUP.match(group):
        raise _field("group", "1-200 characters, no '/' and no control character")


def _view(rule: ProvisioningRule | None) -> dict[str, str | None] | None:
    return None if rule is None else {"role": rule.role.value, "workspace": rule.workspace}
