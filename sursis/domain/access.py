"""Roles and what each may do: the one table every use case consults.

Two questions are asked in this order, and answered differently on purpose:

1. *May the caller see the object?* An object of another workspace answers `NotFound`, so ids
   leak nothing (`Principal.can_see`).
2. *May the caller's role do this to an object it can see?* If not, `Forbidden`
   (`Principal.require`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from sursis.domain.tools import PendingKind


class Role(StrEnum):
    USER = "user"
    OPERATOR = "operator"
    ADMIN = "admin"
    SYSTEM = "system"
    """The rest of the platform: it may post domain events (`POST /v1/events`) and nothing else."""


class Permission(StrEnum):
    CONVERSE = "converse"
    """Create conversations, post messages, read conversations, runs and pending calls, cancel runs."""
    ANSWER = "answer"
    """Resolve elicitation and client-execution calls (a person's or the client's answer) of the
    conversations the key created."""
    ANSWER_ANY = "answer_any"
    """Answer the elicitation and client-execution calls of any conversation the caller can see."""
    APPROVE = "approve"
    """Resolve approvals (approve, deny, revise) and see the full arguments of pending calls."""
    READ_AUDIT = "read_audit"
    MANAGE_AUTHORIZATIONS = "manage_authorizations"
    """List, create and revoke pre-approvals."""
    MANAGE_WEBHOOKS = "manage_webhooks"
    """List, register and delete the workspace's webhooks."""
    MANAGE_KEYS = "manage_keys"
    POST_EVENTS = "post_events"
    """Post domain events of the key's workspace (`POST /v1/events`)."""
    ALL_WORKSPACES = "all_workspaces"
    MANAGE_APPROVERS = "manage_approvers"
    """Create and change approver groups, reassign a routed call, manage anyone's delegations (admin only)."""
    MANAGE_RETENTION = "manage_retention"
    """Set retention policies, place and release legal holds, plan and run purges (admin only)."""
    MANAGE_POLICIES = "manage_policies"
    """Read and change the workspace's approval policy, simulate one, set ladder ceilings (admin only)."""
    MOVE_LADDER = "move_ladder"
    """Move a tool on the workspace's autonomy ladder, within the ceiling the admin set."""
    FORK_ANY = "fork_any"
    """Fork any conversation the caller can see; without it, only the conversations the key created."""


_USER = frozenset({Permission.CONVERSE, Permission.ANSWER, Permission.MOVE_LADDER})
_OPERATOR = _USER | {
    Permission.ANSWER_ANY,
    Permission.FORK_ANY,
    Permission.APPROVE,
    Permission.READ_AUDIT,
    Permission.MANAGE_AUTHORIZATIONS,
    Permission.MANAGE_WEBHOOKS,
}

PERMISSIONS: Mapping[Role, frozenset[Permission]] = {
    Role.USER: _USER,
    Role.OPERATOR: _OPERATOR,
    Role.ADMIN: frozenset(Permission),
    Role.SYSTEM: frozenset({Permission.POST_EVENTS}),
}


def permission_to_resolve(kind: PendingKind) -> Permission:
    """Approvals need an operator; answers (elicitation, client execution) any conversing role."""
    return Permission.APPROVE if kind is PendingKind.APPROVAL else Permission.ANSWER
