"""Who is calling: the identity every decision is recorded under."""

from __future__ import annotations

from dataclasses import dataclass

from sursis.domain.access import PERMISSIONS, Permission, Role
from sursis.domain.errors import Forbidden


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the identity every decision is recorded under (an API key's id)."""

    id: str
    role: Role
    workspace: str | None
    name: str | None = None
    holds_database: bool = False
    person: str | None = None
    """The person behind the caller (`oidc:<subject>`): a person signed in, or a key an admin linked
    to one. The approval rules that need a person (no self-approval, distinct approvers) compare
    this; None: the caller is a program, its own key."""
    groups: frozenset[str] = frozenset()
    """A signed-in person's groups at the identity provider (an approver group `idp:NAME`)."""
    """The program that opened the service in its own process (the embedded `Service`): not a key
    anyone holds, and one identity for everything it does, so the requester rules of approvals do
    not apply to it (its self-approvals are still audited as such)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", Role(self.role))

    @property
    def who(self) -> str:
        """The identity the approval rules count: the person, else the key."""
        return self.person or self.id

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def may(self, permission: Permission) -> bool:
        return permission in PERMISSIONS[self.role]

    def require(self, permission: Permission) -> None:
        """`Forbidden` unless the role grants `permission`; ask `can_see` first (404 before 403)."""
        if not self.may(permission):
            raise Forbidden(
                f"role {self.role.value!r} may not {permission.value.replace('_', ' ')}",
                extra={"required": permission.value},
            )

    def can_see(self, workspace: str) -> bool:
        return self.may(Permission.ALL_WORKSPACES) or self.workspace == workspace

    def require_may_answer(self, created_by: str | None) -> None:
        """`Forbidden` unless the caller may answer the calls of a conversation created by
        `created_by`: its own (the same key), or any it can see with `answer_any`. A conversation
        without an owner (`None`) is nobody's own."""
        self.require(Permission.ANSWER)
        if self.may(Permission.ANSWER_ANY) or (created_by is not None and created_by == self.id):
            return
        raise Forbidden(
            "only the key that created the conversation, an operator or an admin may answer its calls",
            extra={"required": Permission.ANSWER_ANY.value},
        )
