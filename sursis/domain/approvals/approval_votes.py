"""Votes on a call routed to approver groups: who may vote, for whom, and when the votes decide.

Every voter of one call queues on the call's route row (`lock_route`), so the vote that reaches the
quorum is the one that decides, exactly once, however many approvers press at once; a vote that
finds the call decided already is `Stale` and is not kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sursis.domain import approvers as a
from sursis.domain.approvals.decision_seal import counted_votes
from sursis.domain.approvers import AlreadyVoted, NotAnApprover, SelfApproval, Vote
from sursis.domain.audit.audit import actor_names
from sursis.domain.errors import InvalidDecision
from sursis.domain.events.events import EventType, publish
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, PendingCall, Principal
from sursis.domain.reviewer import ReviewerActs
from sursis.domain.reviews.reviewer_steps import with_reviews
from sursis.domain.states import Decision


@dataclass(frozen=True, slots=True)
class Ballot:
    """A vote counted in the caller's transaction: for whom, the approvals now, and whether it decides."""

    vote: Vote
    approvals: int
    decides: bool
    self_approval: bool = False
    """The requester's own vote, counted because the rule allows self-approval."""
    earlier: tuple[Vote, ...] = ()
    """The call's votes before this one, as read (each says whether its seal checks)."""

    def sealed_votes(self) -> list[list[str]]:
        """The votes a decision this ballot makes seals: the earlier ones whose seal checks, and
        this one."""
        return counted_votes([*self.earlier, self.vote])


async def requester_of(uow: UnitOfWork, call: PendingCall) -> str | None:
    """The key that caused the call (recorded on it; for rows written before it was, the
    conversation's owner): its vote never counts unless the rule allows self-approval."""
    if call.requested_by:
        return call.requested_by
    conversation = await uow.conversations.get(call.conversation_id)
    return conversation.created_by if conversation is not None else None


IDP_PREFIX = "idp:"
"""An approver group `idp:NAME` is the identity provider's group NAME, read at each sign-in."""


async def person_of(uow: UnitOfWork, actor: str | None) -> str | None:
    """The identity the approval rules count for an actor: the person a key is linked to, else
    the actor itself (a key that belongs to nobody, a signed-in person's `oidc:` id)."""
    if actor is None:
        return None
    try:
        key_id = uuid.UUID(actor)
    except ValueError:
        return actor
    key = await uow.api_keys.get(key_id)
    return key.person if key is not None and key.person else actor


def in_provider_group(principal: Principal, groups: Iterable[str]) -> bool:
    """Whether a signed-in person is in one of the `idp:NAME` groups among `groups`."""
    return any(g.startswith(IDP_PREFIX) and g.removeprefix(IDP_PREFIX) in principal.groups for g in groups)


def is_requester(principal: Principal, requester: str | None, requester_person: str | None) -> bool:
    """Whether the principal caused the call: the same key, or the same person by any key or sign-in."""
    if requester is None:
        return False
    return principal.id == requester or principal.who in {requester, requester_person}


async def own_approval(uow: UnitOfWork, principal: Principal, call: PendingCall) -> bool:
    """For a call any operator decides in one click: whether this approval is the requester's own
    (True: allowed, and audited as a self-approval). `SelfApproval` unless the rule allows it, or
    an admin approves a call only the tool's default asked (no rule of the workspace is about it:
    an admin may store one that allows it anyway), or the embedded program approves."""
    requester = await requester_of(uow, call)
    if requester is None:
        return False
    # The same key (or person) needs no read of the person the requester's key is linked to.
    same = principal.id == requester or principal.who == requester
    if not same and not is_requester(principal, requester, await person_of(uow, requester)):
        return False
    policy = call.policy
    tool_default = policy is None or (policy.rule is None and not policy.flags)
    if self_approval_allowed(call) or principal.holds_database or (principal.is_admin and tool_default):
        return True
    raise SelfApproval("the key that caused the call may not approve it", extra={"requester": requester})


def self_approval_allowed(call: PendingCall) -> bool:
    """Whether the rule that asked lets the call's requester decide it too."""
    return call.policy is not None and call.policy.allow_self_approval


async def eligible(uow: UnitOfWork, call: PendingCall, route: ApprovalRoute, state: a.RouteState) -> set[str]:
    """The keys that may vote on the call now."""
    found = a.targets(route, state)
    keys = set(a.key_ids(found))  # `idp:` groups have no stored members: see `in_provider_group`
    names = a.group_names(found)
    if names:
        keys |= await uow.approvers.members(call.workspace, names)
    if route.reviewer is not None:
        # The route's reviewer model votes as `reviewer:<model>` (its `no` only: it never denies).
        keys.add(route.reviewer.actor)
    return keys


async def voter_for(
    uow: UnitOfWork,
    principal: Principal,
    call: PendingCall,
    approvers: set[str],
    requester: str | None,
    voted: set[str],
    now: datetime,
    requester_person: str | None = None,
) -> str:
    """The approver the principal's vote counts for: itself if it is one, else the first approver
    (by id) it is the delegate of who has not voted. `SelfApproval` for the requester (or its
    delegate voting for it) unless the rule allows self-approval, `NotAnApprover` otherwise."""
    # A person votes as themselves whichever key or sign-in they use: one person, one vote.
    if self_approval_allowed(call) and principal.id in approvers:
        return principal.who
    if is_requester(principal, requester, requester_person):
        raise SelfApproval(
            "the person or key that caused the call may not decide it", extra={"requester": requester}
        )
    if principal.id in approvers:
        return principal.who
    delegators = [d for d in sorted(await uow.approvers.delegators(principal.id, now)) if d in approvers]
    for delegator in delegators:
        if delegator == requester:
            continue
        if delegator not in voted:
            return delegator
    if delegators and all(d == requester for d in delegators):
        raise SelfApproval(
            "the approver you act for started the conversation: that vote never counts",
            extra={"requester": requester},
        )
    if delegators:
        return delegators[0]  # already voted: `add_vote` refuses it as `AlreadyVoted`
    raise NotAnApprover(
        "you are none of this call's approvers",
        extra={"approvers": list(a.targets(_route(call), await _state(uow, call)))},
    )


async def cast(
    uow: UnitOfWork,
    principal: Principal,
    call: PendingCall,
    route: ApprovalRoute,
    decision: Decision,
    reason: str | None,
    args: dict[str, Any] | None,
    now: datetime,
) -> Ballot:
    """Check the principal may vote, store the vote and count it, holding the route's row."""
    state = await _state(uow, call)
    approvers = await eligible(uow, call, route, state)
    if in_provider_group(principal, a.group_names(a.targets(route, state))):
        approvers.add(principal.id)
    requester = await requester_of(uow, call)
    requester_person = await person_of(uow, requester)
    votes = (await uow.approvers.votes([call.correlation_id])).get(call.correlation_id, [])
    voted = {v.voter for v in votes}
    voter = await voter_for(uow, principal, call, approvers, requester, voted, now, requester_person)
    if decision is Decision.APPROVE and args is not None and route.quorum > 1:
        raise InvalidDecision(
            "a call that needs several approvers is approved with its arguments as asked; "
            "deny or revise it with a reason instead of editing them",
            extra={"quorum": route.quorum},
        )
    vote = Vote(call.correlation_id, voter, principal.id, decision.value, reason, now)
    if not await uow.approvers.add_vote(vote):
        raise AlreadyVoted(
            "this approver's vote on the call is already counted",
            extra={"approver": voter},
        )
    approving = decision is Decision.APPROVE
    counted = await uow.approvers.lock_route(call.correlation_id, 1 if approving else 0)
    read = sum(1 for v in votes if v.decision == Decision.APPROVE.value) + int(approving)
    if counted is None:
        await uow.approvers.add_route(
            a.RouteState(call.correlation_id, call.workspace, approvals=int(approving), created_at=now)
        )
        counted = read
    elif counted != read:
        # Another approval committed between the read above and the route's row, which now holds
        # the call's voters in line: the votes this ballot counts (and a decision seals) are read
        # again, or the seal would cover fewer votes than the quorum it met.
        votes = await _votes_before(uow, call, voter)
    mine = requester is not None and voter in {requester, requester_person}
    # A reviewer whose rule lets its `no` approve decides the call alone; otherwise it is one vote.
    reviewer = route.reviewer
    outright = reviewer is not None and reviewer.acts is ReviewerActs.APPROVE and voter == reviewer.actor
    decides = not approving or counted >= route.quorum or outright
    return Ballot(vote, counted, decides=decides, self_approval=mine, earlier=tuple(votes))


async def _votes_before(uow: UnitOfWork, call: PendingCall, voter: str) -> list[Vote]:
    """The call's votes as committed now, but `voter`'s own (this transaction's)."""
    found = (await uow.approvers.votes([call.correlation_id])).get(call.correlation_id, [])
    return [v for v in found if v.voter != voter]


async def record_vote(uow: UnitOfWork, call: PendingCall, ballot: Ballot, quorum: int, now: datetime) -> None:
    """The vote's audit row and `pending.vote` event, in the caller's transaction."""
    vote = ballot.vote
    details = {
        "decision": vote.decision,
        "approver": vote.voter,
        "on_behalf_of": vote.on_behalf_of,
        "approvals": ballot.approvals,
        "quorum": quorum,
        "reason": vote.reason,
    }
    if ballot.self_approval:
        details["self_approval"] = True
    await uow.audit.append(AuditEntry.of_call("pending.vote", vote.cast_by, call, details), now)
    await publish(
        uow,
        call.conversation_id,
        call.workspace,
        EventType.PENDING_VOTE,
        {
            "correlation_id": str(call.correlation_id),
            "tool_name": call.tool_name,
            "approver": vote.voter,
            "cast_by": vote.cast_by,
            "decision": vote.decision,
            "approvals": ballot.approvals,
            "quorum": quorum,
            "still_needed": max(quorum - ballot.approvals, 0),
        },
        now,
    )


async def with_approval(
    uow: UnitOfWork, principal: Principal | None, calls: list[PendingCall], now: datetime
) -> list[PendingCall]:
    """`calls` with the approval view of each routed one (votes, quorum, still needed, approvers,
    escalation level, and whether `principal` may decide it now), and the reviewer's verdict where
    the route names one. Calls without a route cost nothing."""
    calls = await with_reviews(uow, calls)
    ids = [c.correlation_id for c in calls if a.routed(c.policy) is not None]
    if not ids:
        return calls
    states = await uow.approvers.routes(ids)
    votes = await uow.approvers.votes(ids)
    delegators: list[str] | None = None
    # A page of calls often shares conversations and routes: each is read once.
    requesters: dict[object, str | None] = {}
    members: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    out: list[PendingCall] = []
    for call in calls:
        route = a.routed(call.policy)
        if route is None:
            out.append(call)
            continue
        state = a.by_id(states, call.correlation_id, call.workspace)
        if call.requested_by:
            requester: str | None = call.requested_by
        else:
            if call.conversation_id not in requesters:
                requesters[call.conversation_id] = await requester_of(uow, call)
            requester = requesters[call.conversation_id]
        can: bool | None = None
        if principal is not None:
            key = (call.workspace, a.targets(route, state))
            if key not in members:
                members[key] = await eligible(uow, call, route, state)
            approvers = members[key]
            if in_provider_group(principal, a.group_names(key[1])):
                approvers = approvers | {principal.id}
            if delegators is None:
                delegators = await uow.approvers.delegators(principal.id, now)
            mine = {principal.id, *delegators}
            if not self_approval_allowed(call):
                mine -= {requester}
            voted = {v.voter for v in votes.get(call.correlation_id, [])}
            own = not self_approval_allowed(call) and is_requester(
                principal, requester, await person_of(uow, requester)
            )
            mine_now = mine & approvers
            if principal.id in mine_now and principal.who in voted:
                mine_now.discard(principal.id)  # the person voted already, by another key or sign-in
            can = not own and bool(mine_now - voted)
        call_votes = votes.get(call.correlation_id, [])
        out.append(replace(call, approval=a.view(route, state, call_votes, requester, can)))
    names = await vote_names(uow, out)
    if names:
        out = [replace(c, approval=replace(c.approval, names=names)) if c.approval else c for c in out]
    return out


async def vote_names(uow: UnitOfWork, calls: list[PendingCall]) -> dict[str, str]:
    """The names of the keys that voted on `calls` (and for whom), for showing the votes."""
    ids = {k for c in calls if c.approval for v in c.approval.votes for k in (v.voter, v.cast_by)}
    return await actor_names(uow, list(ids)) if ids else {}


def _route(call: PendingCall) -> ApprovalRoute:
    route = a.routed(call.policy)
    assert route is not None
    return route


async def _state(uow: UnitOfWork, call: PendingCall) -> a.RouteState:
    states = await uow.approvers.routes([call.correlation_id])
    return a.by_id(states, call.correlation_id, call.workspace)


def new_route_state(call: PendingCall) -> a.RouteState | None:
    """The route row a routed call (or one whose route names reminders) starts with: its first
    reminder or escalation due."""
    route = a.swept(call.policy)
    if route is None:
        return None
    return a.RouteState(
        correlation_id=call.correlation_id,
        workspace=call.workspace,
        due_at=a.next_due(route, call.created_at, False, 0, expires_at=call.expires_at),
        created_at=call.created_at,
    )
