"""A route's reminder before the deadline reaches the email addresses the call was posted to: a line
of their next digest, sent over a real SMTP server (aiosmtpd, in-process) and parsed back."""

from __future__ import annotations

from datetime import timedelta

from sursis.app.container import build_container
from sursis.domain.notifications.escalation import advance_routes
from sursis.domain.policy.policies import PolicyRule
from sursis.domain.policy_decisions import ApprovalRoute, PolicyEffect
from sursis.domain.states import PendingStatus
from tests.channels.smtp_fake import bodies, smtp_server
from tests.channels.test_email_digest import ADMIN, GATED, Clock, digest_sender
from tests.conftest import make_settings

REMINDED = ApprovalRoute(timeout=timedelta(hours=1), reminders=(0.5,))


async def test_a_reminder_is_a_line_of_the_next_digest(seeded: str) -> None:
    async with smtp_server() as (mailbox, port):
        settings = make_settings(
            seeded,
            smtp_host="127.0.0.1",
            smtp_port=port,
            smtp_starttls=False,
            smtp_from="sursis@example.com",
            public_url="https://sursis.example",
        )
        container = build_container(settings)
        try:
            rule = PolicyRule("replays", PolicyEffect.ASK, tools=("replay_dlq_event",), route=REMINDED)
            await container.policies.put(ADMIN, "default", [rule], None)
            conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
            await container.channels.bind_email(ADMIN, "dev@example.com", conversation.id, None)
            await container.conversations.post_message(ADMIN, conversation.id, GATED)
            assert await container.worker.run_once()
            [call] = (
                await container.pending_calls.list_pending(
                    ADMIN, status=PendingStatus.AWAITING, kind=None, tool_name=None, after=None, limit=10
                )
            ).items
            assert call.expires_at - call.created_at == timedelta(hours=1)

            at = call.created_at + timedelta(minutes=31)
            async with container.uow() as uow:
                [reminded] = await advance_routes(uow, at, 25)
                await uow.commit()
            assert reminded.step.reminder == 0.5

            clock = Clock()
            clock.now = at + timedelta(seconds=settings.digest_window_seconds)
            sender = digest_sender(settings, container.uow, clock)
            assert await sender.run_once() >= 1
            texts = [bodies(m)[0] for m in mailbox.messages if str(m["To"]) == "dev@example.com"]
            lines = [line for text in texts for line in text.splitlines() if "Reminder:" in line]
            assert len(lines) == 1, texts
            assert "Reminder: approval still waiting: replay_dlq_event" in lines[0]
            assert "50% of its time passed" in lines[0]
            assert any(f"https://sursis.example/inbox/#call={call.correlation_id}" in t for t in texts)
        finally:
            await container.close()
