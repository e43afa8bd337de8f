"""The soak's routed traffic: calls asked of approver groups, decided by racing quorum votes, by an
escalated group, by a denial, or by nobody (the route's timeout denies them), and the invariants
read from the database afterwards.

An adopted agent (`ROUTED`, served by every process as `tests.faults.soak_routed:ROUTED`) asks
`transfer(ref, route)` with the route its argument names, as the policy point will ask it.
"""

from __future__ import annotations

import asyncio
import collections
import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import sqlalchemy as sa
from pydantic_ai import Agent, ApprovalRequired, RunContext

from sursis.domain.policy_decisions import (
    ApprovalRoute,
    Escalation,
    PolicyDecision,
    PolicyEffect,
    TimeoutOutcome,
)
from sursis.infra.agents.observed import POLICY
from sursis.infra.db.engine import create_engine
from tests.conftest import call, script

AGENT_SPEC = "tests.faults.soak_routed:ROUTED"
QUORUM = 2
ROUTES = {
    "quorum": ApprovalRoute(
        groups=("soak-a",),
        quorum=QUORUM,
        escalations=(Escalation(after=timedelta(seconds=1), to=("group:soak-b",)),),
        timeout=timedelta(minutes=10),
    ),
    "timeout": ApprovalRoute(
        groups=("soak-a",), timeout=timedelta(seconds=2), on_timeout=TimeoutOutcome.DENY
    ),
}

ROUTED: Agent[None, str] = Agent(name="routed")


@ROUTED.tool
def transfer(ctx: RunContext[Any], ref: str, route: str) -> str:
    """Move money (asked of approver groups)."""
    if not ctx.tool_call_approved:
        decision = PolicyDecision(effect=PolicyEffect.ASK, policy_version=1, rule=route, route=ROUTES[route])
        raise ApprovalRequired(metadata={"kind": "approval", POLICY: decision.to_json()})
    return f"transferred {ref}"


@dataclass
class RoutedTally:
    turns: collections.Counter[str] = field(default_factory=collections.Counter)
    vote_outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    escalated_votes: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class Approvers:
    """The keys of the routed traffic: the requester, two approvers of `soak-a`, two of `soak-b`."""

    requester: dict[str, str]
    a: list[dict[str, str]]
    b: list[dict[str, str]]


async def make_approvers(http: httpx.AsyncClient, base: str) -> Approvers:
    async def key(name: str) -> tuple[str, dict[str, str]]:
        made = await http.post(
            f"{base}/v1/keys", json={"role": "operator", "workspace": "default", "name": name}
        )
        assert made.status_code == 201, made.text
        body = made.json()
        return str(body["id"]), {"Authorization": f"Bearer {body['key']}"}

    requester = await key("soak requester")
    a = [await key(f"soak a{i}") for i in range(2)]
    b = [await key(f"soak b{i}") for i in range(2)]
    for name, members in (("soak-a", a), ("soak-b", b)):
        group = {"workspace": "default", "name": name, "members": [k for k, _ in members]}
        made = await http.post(f"{base}/v1/groups", json=group)
        assert made.status_code == 201, made.text
    return Approvers(requester[1], [h for _, h in a], [h for _, h in b])


async def routed_loop(
    http: httpx.AsyncClient,
    base: str,
    people: Approvers,
    tally: RoutedTally,
    rng: random.Random,
    stop: asyncio.Event,
    send: Any,
    settle: Any,
) -> None:
    """One conversation of routed turns, as the requester; the approvers vote over HTTP."""
    created = await send(
        http, "POST", f"{base}/v1/conversations", json={"agent": "routed"}, headers=people.requester
    )
    cid = created.json()["id"]
    n = 0
    while not stop.is_set():
        n += 1
        roll = rng.random()
        # Each conversation starts with a call nobody decides: every soak has timeouts.
        kind = (
            "timeout"
            if n == 1 or roll < 0.1
            else "escalated"
            if roll < 0.35
            else "deny"
            if roll < 0.45
            else "quorum"
        )
        route = "timeout" if kind == "timeout" else "quorum"
        turn = script([call("transfer", ref=f"{cid[:8]}-{n}", route=route)], "done")
        posted = await send(
            http,
            "POST",
            f"{base}/v1/conversations/{cid}/messages",
            json={"content": turn},
            headers=people.requester,
        )
        if posted.status_code not in (200, 202):
            raise AssertionError(f"routed message refused: {posted.status_code} {posted.text}")
        run_id = posted.json()["id"]
        tally.turns[kind] += 1
        run = await settle(http, base, run_id, stop)
        if run is None:
            return
        while run["status"] == "suspended":
            if stop.is_set():
                # The traffic is over: a call still waiting stays so (the drain waits for queued and
                # running runs only), rather than polling until a quorum route's timeout decides it.
                return
            pending = run["pending"][0]
            correlation_id = pending["correlation_id"]
            if pending["kind"] == "elicitation":
                # A kill while the approved transfer ran: its outcome is unknown, and the service
                # asks a person what the agent should be told instead of running it again.
                await answer_outcome_unknown(http, base, send, people, tally, pending)
            elif kind != "timeout":  # a timeout turn waits for the sweeper to deny it
                await vote(http, base, send, people, tally, correlation_id, kind, stop)
            run = await settle(http, base, run_id, stop)
            if run is None:
                return


async def vote(
    http: httpx.AsyncClient,
    base: str,
    send: Any,
    people: Approvers,
    tally: RoutedTally,
    correlation_id: str,
    kind: str,
    stop: asyncio.Event,
) -> None:
    url = f"{base}/v1/pending/{correlation_id}/resolve"
    if kind == "deny":
        answer = await send(
            http, "POST", url, json={"decision": "deny", "reason": "soak"}, headers=people.a[0]
        )
        tally.vote_outcomes[f"deny:{answer.status_code}"] += 1
        return
    voters = people.a
    if kind == "escalated":
        # Wait until the escalation made soak-b eligible (a sweeper pass after 1 s), then soak-b votes.
        for _ in range(100):
            shown = (
                await send(http, "GET", f"{base}/v1/pending/{correlation_id}", headers=people.b[0])
            ).json()
            # A call shown without its approval view (`escalation_level` null) has not escalated.
            escalated = (shown.get("escalation_level") or 0) >= 1
            if shown.get("status") != "awaiting" or escalated or stop.is_set():
                break
            await asyncio.sleep(0.2)
        voters = people.b
        tally.escalated_votes += 1
    # The requester, every approver, and the first approver twice, all at once.
    presses = [people.requester, *voters, voters[0]]
    answers = await asyncio.gather(
        *(send(http, "POST", url, json={"decision": "approve"}, headers=h) for h in presses)
    )
    statuses = sorted(a.status_code for a in answers)
    outcome = "/".join(str(s) for s in statuses)
    tally.vote_outcomes[outcome] += 1
    requester, approvals = answers[0], answers[1:]
    refused = [a.json().get("code") for a in approvals if a.status_code != 200]
    # Two approvals, one counted and one deciding; the requester refused as such, or told `stale`
    # when its press came after the decision; the first approver's second press (either of its two)
    # refused as a second vote, or `stale`.
    if (
        requester.json().get("code") not in REQUESTER_REFUSALS
        or len(refused) != 1
        or refused[0] not in REPEAT_REFUSALS
    ):
        codes = [a.json().get("code", "") for a in answers if a.status_code >= 400]
        tally.problems.append(f"{correlation_id}: {outcome} {codes}")


REQUESTER_REFUSALS = ("self_approval", "stale")
REPEAT_REFUSALS = ("already_voted", "stale")


async def answer_outcome_unknown(
    http: httpx.AsyncClient,
    base: str,
    send: Any,
    people: Approvers,
    tally: RoutedTally,
    pending: dict[str, Any],
) -> None:
    """Answer a call whose outcome a kill left unknown, as the person asked to check it would."""
    if "outcome_unknown" not in (pending.get("args") or {}).get("review", {}):
        tally.problems.append(f"{pending['correlation_id']}: an elicitation that is no outcome-unknown ask")
        return
    answered = await send(
        http,
        "POST",
        f"{base}/v1/pending/{pending['correlation_id']}/resolve",
        json={"decision": "answer", "result": {"checked_by": "soak", "transferred": "unknown"}},
        headers=people.a[0],
    )
    tally.vote_outcomes[f"outcome_unknown:{answered.status_code}"] += 1
    if answered.status_code not in (200, 409):
        tally.problems.append(f"{pending['correlation_id']}: outcome-unknown answer {answered.status_code}")


async def check_routed(database_url: str, tally: RoutedTally) -> list[str]:
    """The routing invariants, read straight from the database."""
    checked: list[str] = []
    engine = create_engine(database_url)

    async def none(name: str, sql: str) -> None:
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.text(sql))).all()
        assert rows == [], f"{name}: {rows[:5]}"
        checked.append(name)

    try:
        assert not tally.problems, f"racing votes not answered 200+200+403+409: {tally.problems[:5]}"
        checked.append(
            "every racing vote round: one counted, one deciding, the requester 403 (409 once decided), "
            "the repeat 409"
        )
        await none(
            "the requester never voted (nor a delegate for it)",
            "SELECT v.correlation_id FROM pending_votes v JOIN pending_calls p USING (correlation_id) "
            "JOIN conversations c ON c.id = p.conversation_id "
            "WHERE v.voter = c.created_by OR v.cast_by = c.created_by",
        )
        # Order by the audit rows, not by clocks: each request reads its clock when it starts, and
        # the votes of one call commit in the order they queue on the call's route row.
        decided = (
            "(SELECT MIN(d.id) FROM audit_log d WHERE d.correlation_id = p.correlation_id "
            "AND d.action IN ('pending.approved','pending.denied','pending.revision_requested',"
            "'pending.timed_out','pending.expired'))"
        )
        await none(
            "quorum met before approval: an approved routed call's approval follows its quorum of votes",
            "SELECT p.correlation_id FROM pending_calls p WHERE p.status = 'approved' AND p.policy IS NOT NULL "
            "AND jsonb_array_length(p.policy->'route'->'groups') > 0 "
            "AND (SELECT COUNT(*) FROM audit_log v WHERE v.correlation_id = p.correlation_id "
            f"AND v.action = 'pending.vote' AND v.details->>'decision' = 'approve' AND v.id < {decided}) "
            "< (p.policy->'route'->>'quorum')::int",
        )
        await none(
            "the deciding approval counted exactly the quorum",
            "SELECT p.correlation_id FROM pending_calls p WHERE p.status = 'approved' AND p.policy IS NOT NULL "
            "AND jsonb_array_length(p.policy->'route'->'groups') > 0 AND (SELECT (v.details->>'approvals')::int "
            "FROM audit_log v WHERE v.correlation_id = p.correlation_id AND v.action = 'pending.vote' "
            "ORDER BY v.id DESC LIMIT 1) <> (p.policy->'route'->>'quorum')::int",
        )
        await none(
            "the approvals counted are the approve votes stored",
            "SELECT r.correlation_id FROM pending_routes r WHERE r.approvals <> (SELECT COUNT(*) "
            "FROM pending_votes v WHERE v.correlation_id = r.correlation_id AND v.decision = 'approve')",
        )
        await none(
            "every stored vote has its audit row, and no vote was kept after the decision",
            "SELECT p.correlation_id FROM pending_calls p WHERE p.policy IS NOT NULL AND ("
            "(SELECT COUNT(*) FROM pending_votes v WHERE v.correlation_id = p.correlation_id) <> "
            "(SELECT COUNT(*) FROM audit_log a WHERE a.correlation_id = p.correlation_id "
            "AND a.action = 'pending.vote') OR EXISTS (SELECT 1 FROM audit_log a "
            "WHERE a.correlation_id = p.correlation_id AND a.action = 'pending.vote' "
            f"AND a.id > {decided}))",
        )
        await none(
            "an escalated group voted only after its escalation",
            "SELECT v.correlation_id FROM pending_votes v JOIN pending_routes r USING (correlation_id) "
            "JOIN approver_group_members m ON m.key_id = v.voter JOIN approver_groups g ON g.id = m.group_id "
            "WHERE g.name = 'soak-b' AND r.escalation_level < 1",
        )
        await none(
            "each escalation happened once (audit rows match the escalation level)",
            "SELECT r.correlation_id FROM pending_routes r WHERE r.escalation_level <> (SELECT COUNT(*) "
            "FROM audit_log a WHERE a.correlation_id = r.correlation_id AND a.action = 'pending.escalated')",
        )
        await none(
            "a call nobody decided in time was denied by its route, not by a person",
            "SELECT p.correlation_id FROM pending_calls p WHERE p.policy->>'rule' = 'timeout' "
            "AND p.status NOT IN ('awaiting') AND NOT (p.status = 'denied' AND p.resolved_by = 'system:sweeper' "
            "AND p.resolution->>'decision' = 'timeout') AND p.status <> 'cancelled'",
        )
        await none(
            "no transfer ran without an approved call (a call dispatched again after a crash asks again)",
            "SELECT t.tool_call_id FROM tool_calls t WHERE t.tool_name = 'transfer' AND t.ok "
            "AND NOT EXISTS (SELECT 1 FROM pending_calls p WHERE p.conversation_id = "
            "t.conversation_id AND p.tool_call_id = t.tool_call_id AND p.status = 'approved')",
        )
        await none(
            "no transfer ran with arguments other than approved (it names the ref its deciders saw)",
            "SELECT t.tool_call_id FROM tool_calls t JOIN pending_calls p ON p.conversation_id = "
            "t.conversation_id AND p.tool_call_id = t.tool_call_id AND p.kind = 'approval' "
            "AND p.status = 'approved' WHERE t.tool_name = 'transfer' AND t.ok "
            "AND t.result->>'result' IS DISTINCT FROM 'transferred ' || (p.args->>'ref')",
        )
    finally:
        await engine.dispose()
    return checked
