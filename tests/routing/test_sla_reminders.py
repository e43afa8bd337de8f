"""Reminders before a deadline, on SQLite and PostgreSQL: a route names fractions of the call's
deadline; the sweeper (driven here at chosen times, no sleeping) sends each once, audited with its
fraction, on every channel the call was posted to (its Slack threads, its email digests, webhooks
subscribed to `pending.reminded`); two sweepers racing send each reminder once."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.domain.notifications.escalation import advance_routes
from sursis.domain.policy.policies import InvalidPolicy, PolicyRule, check_rules
from sursis.domain.policy_decisions import ApprovalRoute, PolicyEffect
from sursis.domain.records import PendingCall
from sursis.domain.records.channel_records import SLACK_TOPIC, ChannelBinding, SlackAddress
from sursis.infra.db import channel_tables as ch
from sursis.infra.db import tables as t
from tests.routing.kit import ADMIN, People, routing_service

HOUR = timedelta(hours=1)
ROUTES = {
    # Any operator decides (no groups): a route of its own only for its reminders.
    "R1": ApprovalRoute(timeout=HOUR, reminders=(0.5, 0.9)),
    "R2": ApprovalRoute(groups=("finance",), timeout=HOUR, reminders=(0.25, 0.5, 0.75)),
}


async def sweep_at(people: People, now: datetime) -> int:
    """One sweeper pass of the routes at `now`."""
    async with people.svc.container.uow() as uow:
        done = await advance_routes(uow, now, 25)
        await uow.commit()
    return len(done)


async def reminders(people: People, call: PendingCall) -> list[dict[str, Any]]:
    return [dict(r.details) for r in await people.audit(call) if r.action == "pending.reminded"]


async def bind_channels(people: People, call: PendingCall) -> None:
    """The call's conversation is posted to a Slack thread and an email digest."""
    slack = SlackAddress("T0TEAM", "C0THREAD", "1700000000.000100")
    async with people.svc.container.uow() as uow:
        for binding in (
            ChannelBinding.new("default", call.conversation_id, "test", call.created_at, slack=slack),
            ChannelBinding.new(
                "default", call.conversation_id, "test", call.created_at, email="ops@example.com"
            ),
        ):
            await uow.channels.add_binding(binding)
        await uow.commit()


async def posted(people: People) -> tuple[list[str], list[str], list[str]]:
    """What the channels were given: Slack notices' event types, digest lines, webhook topics."""
    async with people.svc.container.uow.engine.connect() as conn:
        outbox = (await conn.execute(sa.select(t.outbox.c.topic, t.outbox.c.payload))).all()
        lines = (
            await conn.execute(sa.select(ch.digest_items.c.summary).order_by(ch.digest_items.c.id))
        ).all()
    slack = [p["event"]["type"] for topic, p in outbox if topic == SLACK_TOPIC]
    hooks = [topic for topic, _ in outbox if topic.startswith("webhook:")]
    return slack, [line for (line,) in lines], hooks


async def test_each_reminder_is_sent_once_at_its_fraction_on_every_channel(database_url: str) -> None:
    async with routing_service(database_url, ROUTES) as people:
        await people.key("rex")
        await people.svc.container.webhooks.create(
            ADMIN, "https://hooks.example/sursis", ["pending.reminded"], "default"
        )
        call = await people.ask("rex", "R1")
        assert call.expires_at - call.created_at == HOUR
        await bind_channels(people, call)
        start = call.created_at

        assert await sweep_at(people, start + timedelta(minutes=29)) == 0
        assert await reminders(people, call) == []
        assert await sweep_at(people, start + timedelta(minutes=30, seconds=1)) == 1
        assert await sweep_at(people, start + timedelta(minutes=31)) == 0  # sent once
        [half] = await reminders(people, call)
        assert (half["fraction"], half["passed"]) == (0.5, [])
        assert await sweep_at(people, start + timedelta(minutes=55)) == 1
        assert await sweep_at(people, start + timedelta(minutes=59)) == 0
        assert [r["fraction"] for r in await reminders(people, call)] == [0.5, 0.9]

        events = [e async for e in people.svc.events(call.conversation_id, follow=False)]
        reminded = [e.data for e in events if e.type == "pending.reminded"]
        assert [d["fraction"] for d in reminded] == [0.5, 0.9]
        assert all(d["correlation_id"] == str(call.correlation_id) for d in reminded)
        slack, lines, hooks = await posted(people)
        assert slack.count("pending.reminded") == 2  # in the call's Slack thread
        assert [line for line in lines if line.startswith("Reminder:")] == [
            f"Reminder: approval still waiting: refund — {call.effect_description}, 50% of its time passed; "
            f"expires {call.expires_at.isoformat()}",
            f"Reminder: approval still waiting: refund — {call.effect_description}, 90% of its time passed; "
            f"expires {call.expires_at.isoformat()}",
        ]
        assert hooks.count("webhook:pending.reminded") == 2


async def test_a_late_sweeper_sends_the_latest_reminder_only(database_url: str) -> None:
    async with routing_service(database_url, ROUTES) as people:
        for name in ("ann", "rex"):
            await people.key(name)
        await people.group("finance", "ann")
        call = await people.ask("rex", "R2")
        assert await sweep_at(people, call.created_at + timedelta(minutes=50)) == 1
        [late] = await reminders(people, call)
        assert (late["fraction"], late["passed"]) == (0.75, [0.25, 0.5])
        assert await sweep_at(people, call.created_at + timedelta(minutes=59)) == 0
        # Decided: no reminder is left to send, nor sent.
        await people.vote("ann", call)
        assert await sweep_at(people, call.created_at + timedelta(minutes=59, seconds=30)) == 0


async def test_two_sweepers_racing_send_each_reminder_once(database_url: str) -> None:
    async with routing_service(database_url, ROUTES) as people:
        await people.key("rex")
        calls = [await people.ask("rex", "R1") for _ in range(3)]
        start = max(c.created_at for c in calls)
        for at in (timedelta(minutes=31), timedelta(minutes=55)):
            done = await asyncio.gather(*(sweep_at(people, start + at) for _ in range(4)))
            assert sum(done) == len(calls), done
        for call in calls:
            assert [r["fraction"] for r in await reminders(people, call)] == [0.5, 0.9]


@pytest.mark.parametrize(
    "fractions",
    [(0.0,), (1.0,), (0.5, 0.5), (0.9, 0.5), (-0.1,), (1.5,), tuple(i / 20 for i in range(1, 13))],
)
def test_reminders_are_fractions_in_increasing_order(fractions: tuple[float, ...]) -> None:
    rule = PolicyRule("r", PolicyEffect.ASK, route=ApprovalRoute(reminders=fractions))
    with pytest.raises(InvalidPolicy) as refused:
        check_rules([rule])
    assert refused.value.extra["errors"][0]["loc"] == ["rules", "0", "route", "reminders"]
    check_rules([PolicyRule("r", PolicyEffect.ASK, route=ApprovalRoute(reminders=(0.5, 0.9)))])
    assert ApprovalRoute.from_json(ApprovalRoute(reminders=(0.5, 0.9)).to_json()).reminders == (0.5, 0.9)
