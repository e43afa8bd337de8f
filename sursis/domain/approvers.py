"""Approver groups, votes, delegations and the routing state of a call that asks groups.

A call whose policy decision routes it to approver groups (`ApprovalRoute.groups`) is decided by
votes: a quorum of distinct approvers approves it, one denial decides it, and the key that started
the conversation never counts. Who may vote changes while the call waits: each escalation that is
due adds its groups, and an admin may reassign the call to other groups or keys. A delegate votes
for an approver for a period, and the vote reads "for X by Y".
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sursis.domain.errors import Conflict, Forbidden
from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision

GROUP_PREFIX = "group:"
KEY_PREFIX = "key:"
SLACK_PREFIX = "slack:"
EMAIL_PREFIX = "email:"


class NotAnApprover(Forbidden):
    """The caller is none of the call's approvers (nor the delegate of one)."""

    code = "not_an_approver"


class SelfApproval(Forbidden):
    """The key that started the conversation asked for the call: its vote never counts."""

    code = "self_approval"


class AlreadyVoted(Conflict):
    """This approver's vote on the call is already counted; a vote is not changed."""

    code = "already_voted"


@dataclass(frozen=True, slots=True)
class ApproverGroup:
    """A workspace's named set of API keys that a policy rule may ask."""

    id: uuid.UUID
    workspace: str
    name: str
    description: str | None
    created_by: str
    created_at: datetime
    members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Vote:
    """One approver's decision on one call. `voter` is the approver it counts for; `cast_by` the key
    that pressed (a delegate, when it differs)."""

    correlation_id: uuid.UUID
    voter: str
    cast_by: str
    decision: str
    reason: str | None
    at: datetime
    sealed: bool = True
    """Whether the service's seal on the vote checks (always, where decisions are not sealed): a vote
    row written without the service (by SQL) is shown but never counts toward a sealed decision."""

    @property
    def on_behalf_of(self) -> str | None:
        return self.voter if self.cast_by != self.voter else None


@dataclass(frozen=True, slots=True)
class ApprovalDelegation:
    """`delegate` votes for `delegator` from `starts_at` until `ends_at` (unless revoked)."""

    id: uuid.UUID
    workspace: str | None
    delegator: str
    delegate: str
    starts_at: datetime
    ends_at: datetime
    created_by: str
    created_at: datetime
    revoked_at: datetime | None = None

    def active(self, now: datetime) -> bool:
        return self.revoked_at is None and self.starts_at <= now < self.ends_at


@dataclass(frozen=True, slots=True)
class RouteState:
    """Where a routed call stands: approvals counted, escalations reached, the next reminder or
    escalation (`due_at`), and an admin's reassignment (targets that replace the route's)."""

    correlation_id: uuid.UUID
    workspace: str
    approvals: int = 0
    escalation_level: int = 0
    reminded_at: datetime | None = None
    due_at: datetime | None = None
    reassigned_to: tuple[str, ...] = ()
    created_at: datetime | None = None
    reminders_sent: int = 0
    """How many of the route's `reminders` (fractions of the deadline) have been sent."""


@dataclass(frozen=True, slots=True)
class ApprovalView:
    """What a person sees of a routed call: who may decide now, the votes, what is still needed,
    and whether the caller may decide it (None: not asked for a particular caller)."""

    quorum: int
    approvals: int
    still_needed: int
    approvers: tuple[str, ...]
    escalation_level: int
    votes: tuple[Vote, ...]
    requester: str | None
    can_decide: bool | None = None
    names: Mapping[str, str] = field(default_factory=dict)
    """The names of the keys that voted (by key id)."""


def routed(policy: PolicyDecision | None) -> ApprovalRoute | None:
    """The route of a call decided by votes of approver groups; None: any operator decides."""
    if policy is None or policy.route is None or not policy.route.groups:
        return None
    return policy.route


def swept(policy: PolicyDecision | None) -> ApprovalRoute | None:
    """The route the sweeper follows for a call: a routed one's, or any route that names reminders
    before its deadline (None: nothing for the sweeper to do but expire the call)."""
    if policy is None or policy.route is None:
        return None
    return policy.route if policy.route.groups or policy.route.reminders else None


def targets(route: ApprovalRoute, state: RouteState) -> tuple[str, ...]:
    """Who may vote now: the reassignment if there is one, else the route's groups and the groups
    of every escalation reached (`group:NAME` and `key:ID`)."""
    if state.reassigned_to:
        return state.reassigned_to
    found = [GROUP_PREFIX + g for g in route.groups]
    for escalation in route.escalations[: state.escalation_level]:
        found.extend(t for t in escalation.to if t.startswith(GROUP_PREFIX))
    return tuple(dict.fromkeys(found))


def group_names(found: Iterable[str]) -> list[str]:
    return [t.removeprefix(GROUP_PREFIX) for t in found if t.startswith(GROUP_PREFIX)]


def key_ids(found: Iterable[str]) -> list[str]:
    return [t.removeprefix(KEY_PREFIX) for t in found if t.startswith(KEY_PREFIX)]


@dataclass(frozen=True, slots=True)
class RouteStep:
    """What the sweeper does for a routed call at `now`: remind (once), escalate to a new level
    (`targets` of each escalation reached), send the deadline reminder `reminder` (the latest
    fraction reached; earlier ones a late sweeper passed are not sent as well), and when to look
    again. `reminders_sent`: how many of the route's fractions are behind the call after this step."""

    remind: bool
    level: int
    reached: tuple[tuple[str, ...], ...]
    due_at: datetime | None
    reminder: float | None = None
    reminders_sent: int = 0
    passed: tuple[float, ...] = ()
    """Fractions due together with `reminder`: counted sent, without a reminder of their own."""


def reminder_at(route: ApprovalRoute, created_at: datetime, expires_at: datetime, index: int) -> datetime:
    """When the route's reminder `index` falls due: that fraction of the call's deadline."""
    return created_at + (expires_at - created_at) * route.reminders[index]


def next_due(
    route: ApprovalRoute,
    created_at: datetime,
    reminded: bool,
    level: int,
    *,
    expires_at: datetime | None = None,
    sent: int = 0,
) -> datetime | None:
    """When the next reminder or escalation of a call is due; None when none is left."""
    times: list[datetime] = []
    if route.remind_after is not None and not reminded:
        times.append(created_at + route.remind_after)
    if level < len(route.escalations):
        times.append(created_at + route.escalations[level].after)
    if expires_at is not None and sent < len(route.reminders):
        times.append(reminder_at(route, created_at, expires_at, sent))
    return min(times) if times else None


def step(
    route: ApprovalRoute,
    created_at: datetime,
    state: RouteState,
    now: datetime,
    expires_at: datetime | None = None,
) -> RouteStep:
    elapsed = now - created_at
    remind = state.reminded_at is None and route.remind_after is not None and route.remind_after <= elapsed
    level = state.escalation_level
    reached: list[tuple[str, ...]] = []
    while level < len(route.escalations) and route.escalations[level].after <= elapsed:
        reached.append(route.escalations[level].to)
        level += 1
    sent = state.reminders_sent
    due: list[float] = []
    while expires_at is not None and sent < len(route.reminders):
        if reminder_at(route, created_at, expires_at, sent) > now:
            break
        due.append(route.reminders[sent])
        sent += 1
    reminded = state.reminded_at is not None or remind
    return RouteStep(
        remind,
        level,
        tuple(reached),
        next_due(route, created_at, reminded, level, expires_at=expires_at, sent=sent),
        reminder=due[-1] if due else None,
        reminders_sent=sent,
        passed=tuple(due[:-1]),
    )


def view(
    route: ApprovalRoute,
    state: RouteState,
    votes: Sequence[Vote],
    requester: str | None,
    can_decide: bool | None = None,
) -> ApprovalView:
    approvals = sum(1 for v in votes if v.decision == "approve")
    return ApprovalView(
        quorum=route.quorum,
        approvals=approvals,
        still_needed=max(route.quorum - approvals, 0),
        approvers=targets(route, state),
        escalation_level=state.escalation_level,
        votes=tuple(sorted(votes, key=lambda v: v.at)),
        requester=requester,
        can_decide=can_decide,
    )


class ApproverRepository(Protocol):
    """Groups, members, votes, routes and delegations in storage."""

    async def add_group(self, group: ApproverGroup) -> bool:
        """False when the workspace has a group of that name already."""
        ...

    async def get_group(self, workspace: str, name: str) -> ApproverGroup | None: ...
    async def groups(self, workspace: str | None) -> list[ApproverGroup]: ...
    async def delete_group(self, group_id: uuid.UUID) -> bool: ...
    async def add_member(self, group_id: uuid.UUID, key_id: str, by: str, now: datetime) -> bool:
        """False when the key is a member already."""
        ...

    async def remove_member(self, group_id: uuid.UUID, key_id: str) -> bool: ...
    async def members(self, workspace: str, names: Sequence[str]) -> set[str]:
        """The keys of the workspace's groups named `names`."""
        ...

    async def add_route(self, state: RouteState) -> None: ...
    async def routes(self, correlation_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, RouteState]: ...
    async def lock_route(self, correlation_id: uuid.UUID, approvals: int) -> int | None:
        """Add `approvals` to the call's count and return the new count, holding the route's row
        until the transaction ends (deciders of one call queue here); None: no route row."""
        ...

    async def due_routes(self, now: datetime, limit: int) -> list[RouteState]:
        """Routes of awaiting calls whose next reminder or escalation is due."""
        ...

    async def next_route_due(self) -> datetime | None:
        """When the first reminder or escalation of an awaiting call falls due (None: none will)."""
        ...

    async def advance(self, state: RouteState, step: RouteStep, now: datetime) -> bool:
        """Record `step` unless another sweeper did (conditional on the `due_at` it read)."""
        ...

    async def reassign(self, correlation_id: uuid.UUID, to: Sequence[str]) -> bool: ...
    async def add_vote(self, vote: Vote) -> bool:
        """False when the approver's vote on the call is counted already."""
        ...

    async def votes(self, correlation_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[Vote]]: ...
    async def add_delegation(self, delegation: ApprovalDelegation) -> None: ...
    async def get_delegation(self, delegation_id: uuid.UUID) -> ApprovalDelegation | None: ...
    async def delegations(self, *, workspace: str | None, key: str | None) -> list[ApprovalDelegation]:
        """Delegations given by or to `key` (any key when None), of a workspace (all when None)."""
        ...

    async def revoke_delegation(self, delegation_id: uuid.UUID, now: datetime) -> bool: ...
    async def delegators(self, delegate: str, now: datetime) -> list[str]:
        """The approvers `delegate` votes for at `now`."""
        ...


def by_id(states: Mapping[uuid.UUID, RouteState], call_id: uuid.UUID, workspace: str) -> RouteState:
    """A call's route state; a call without a row (asked before groups existed) starts afresh."""
    return states.get(call_id) or RouteState(correlation_id=call_id, workspace=workspace)
