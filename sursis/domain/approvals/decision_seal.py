"""Sealed decisions: what the service's seal covers, and whether a sealed approval satisfies its route.

A pending call's status is a plaintext column: an insider with SQL rights could flip it to
`approved`, insert a vote row, or copy one call's resolution onto another. So each decision is
evidence, not a flag. The service seals (a MAC under a key the database does not hold, see
`infra/encryption/decision_seal.py`) three things, each in the write that stores it:

- the **ask**: when a call starts to wait, its workspace, id, tool, arguments hash, requester and
  the policy decision that routed it (rule, policy version, route): the route a decision must meet;
- each **vote**: the call, the approver it counts for, the key that pressed, and its decision;
- the **decision**: the call, the approved arguments' hash, the outcome, who decided, the votes
  that counted (only votes whose own seal checks), and whether the requester's own approval was
  allowed.

A pre-approval is a standing decision: a call it covers runs without asking anyone. So the service
seals what a pre-approval grants (`pre_approval_facts`: its id, workspace, tool, argument match,
creator, creation and expiry) when it is created, and the worker lifts an ask only with a
pre-approval whose seal checks; one changed or inserted by SQL lifts nothing and fails the run.
The lift itself is written down, before the tool runs, in a `pending.auto_approved` audit row
carrying a seal over `lift_facts` (which pre-approval, which call, which arguments): a redispatched
call that row clears is not gated again only when that seal checks.

Before an approved call runs (at resume and at dispatch, nested agents included) the worker checks
both seals and that the sealed votes meet the sealed route: a quorum of distinct approvers, never
the requester unless the rule allows it. This module holds the facts each seal covers and those
checks; it knows no key and no algorithm.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from sursis.domain.approvers import Vote, routed
from sursis.domain.records import PendingCall
from sursis.domain.records.access_records import Authorization
from sursis.domain.reviewer import ReviewerActs
from sursis.domain.sanitize import args_hash
from sursis.domain.states import PendingStatus
from sursis.domain.tools import PendingKind

SEAL = "seal"
"""The key of a resolution that holds the decision's seal."""
VOTES = "votes"
"""The key of a resolution that lists the votes that counted, `[approver, decision]` each."""
SELF_APPROVAL = "self_approval"
"""The key of a resolution that says the requester's own approval was allowed (by its rule, or an
admin's on a call only a tool's default asked)."""
VERSION = 1


def canonical(facts: Mapping[str, Any]) -> bytes:
    """The bytes a seal is computed over: one JSON form for the same facts, whatever their order."""
    return json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def ask_facts(call: PendingCall) -> dict[str, Any]:
    """What the ask seal covers: the call as asked and the route its policy decision named."""
    return {
        "v": VERSION,
        "seal": "ask",
        "workspace": call.workspace,
        "correlation_id": str(call.correlation_id),
        "tool_name": call.tool_name,
        "args_hash": call.args_hash,
        "kind": call.kind.value,
        "requested_by": call.requested_by,
        "policy": call.policy.to_json() if call.policy is not None else None,
    }


def pre_approval_facts(authorization: Authorization) -> dict[str, Any]:
    """What a pre-approval's seal covers: what it grants, to whom it may not apply (its creator),
    and for how long. Its reason is left out: it explains, it grants nothing."""
    expires = authorization.expires_at
    return {
        "v": VERSION,
        "seal": "pre_approval",
        "id": str(authorization.id),
        "workspace": authorization.workspace,
        "tool_name": authorization.tool_name,
        "args_match": authorization.args_match,
        "created_by": authorization.created_by,
        "created_at": authorization.created_at.astimezone(UTC).isoformat(),
        "expires_at": expires.astimezone(UTC).isoformat() if expires is not None else None,
    }


def lift_facts(
    workspace: str, conversation_id: str, tool_call_id: str, tool_name: str, hashed: str, authorization: str
) -> dict[str, Any]:
    """What the seal of a lift covers: the pre-approval that let one call of one conversation run
    on arguments hashing to `hashed`."""
    return {
        "v": VERSION,
        "seal": "lift",
        "workspace": workspace,
        "conversation_id": conversation_id,
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "args_hash": hashed,
        "authorization_id": authorization,
    }


def vote_facts(vote: Vote) -> dict[str, Any]:
    """What a vote's seal covers (its call's id is unique across workspaces)."""
    return {
        "v": VERSION,
        "seal": "vote",
        "correlation_id": str(vote.correlation_id),
        "voter": vote.voter,
        "cast_by": vote.cast_by,
        "decision": vote.decision,
    }


def approved_args_hash(call: PendingCall, resolution: Mapping[str, Any] | None) -> str:
    """The hash of the arguments a decision lets run: the edited ones when the deciders edited them."""
    edited = (resolution or {}).get("args")
    return args_hash(call.tool_name, edited) if edited is not None else call.args_hash


def decision_facts(
    call: PendingCall, status: PendingStatus, resolved_by: str | None, resolution: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What a decision's seal covers: the call, the arguments it lets run, the outcome, the deciders
    and votes, and the rule and policy version that routed it."""
    record = resolution or {}
    policy = call.policy
    return {
        "v": VERSION,
        "seal": "decision",
        "workspace": call.workspace,
        "correlation_id": str(call.correlation_id),
        "tool_call_id": call.tool_call_id,
        "args_hash": approved_args_hash(call, record),
        "status": status.value,
        "decision": record.get("decision"),
        "resolved_by": resolved_by,
        "requested_by": call.requested_by,
        "votes": [list(v) for v in record.get(VOTES) or ()],
        "self_approval": bool(record.get(SELF_APPROVAL)),
        "rule": policy.rule if policy is not None else None,
        "policy_version": policy.policy_version if policy is not None else None,
        "quorum": policy.route.quorum if policy is not None and policy.route is not None else None,
    }


def counted_votes(votes: Sequence[Vote]) -> list[list[str]]:
    """The votes a decision seals: `[approver, decision]`, only those whose own seal checked."""
    return [[v.voter, v.decision] for v in votes if v.sealed]


def needs_decision_seal(call: PendingCall) -> bool:
    """Whether the worker requires a sealed decision before `call` runs: an approved approval."""
    return call.kind is PendingKind.APPROVAL and call.status is PendingStatus.APPROVED


def unmet_route(call: PendingCall) -> str | None:
    """Why the (sealed) decision of an approved call does not satisfy the route its (sealed) ask
    named; None when it does.

    A call routed to groups needs `quorum` distinct approving approvers among the sealed votes, the
    requester never one of them unless the rule allows self-approval (or the route's reviewer decides
    alone). A call any operator decides needs a decider other than the requester, unless the
    service allowed and recorded the requester's own approval.
    """
    record = call.resolution or {}
    requester = call.requested_by
    route = routed(call.policy)
    if route is None:
        if call.resolved_by is None:
            return "the approval names no decider"
        if requester is not None and call.resolved_by == requester and not record.get(SELF_APPROVAL):
            return "the requester approved its own call and no rule allowed it"
        return None
    approving: set[str] = set()
    for entry in record.get(VOTES) or ():
        if isinstance(entry, Sequence) and len(entry) == 2 and entry[1] == "approve":
            approving.add(str(entry[0]))
    allowed_self = call.policy is not None and call.policy.allow_self_approval
    if requester is not None and not allowed_self:
        approving.discard(requester)
    reviewer = route.reviewer
    if reviewer is not None and reviewer.acts is ReviewerActs.APPROVE and reviewer.actor in approving:
        return None
    if len(approving) < route.quorum:
        return (
            f"the route needs {route.quorum} distinct approvers other than the requester; "
            f"the sealed votes hold {len(approving)}"
        )
    return None
