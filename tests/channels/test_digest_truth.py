"""An email digest tells the state at send time: calls decided before it was sent are not "waiting",
and calls still waiting from earlier windows are listed again ("waiting since ...")."""

from __future__ import annotations

from datetime import timedelta

from sursis.app.container import Container, build_container
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.records import PendingCall
from sursis.domain.states import Decision, PendingStatus
from tests.channels.smtp_fake import bodies, smtp_server
from tests.channels.test_email_digest import ADMIN, GATED, Clock, digest_sender, drain
from tests.conftest import make_settings


def section(text: str, heading: str) -> str:
    """The lines under `heading` in a digest's text part, up to the next blank line."""
    if heading not in text:
        return ""
    return text.split(heading, 1)[1].split("\n\n", 1)[0]


async def awaiting(container: Container) -> list[PendingCall]:
    page = await container.pending_calls.list_pending(
        ADMIN, status=PendingStatus.AWAITING, kind=None, tool_name=None, after=None, limit=10
    )
    return list(page.items)


async def test_a_digest_tells_what_was_decided_before_it_was_sent_and_what_still_waits(seeded: str) -> None:
    async with smtp_server() as (mailbox, port):
        settings = make_settings(seeded, smtp_host="127.0.0.1", smtp_port=port, smtp_starttls=False)
        container = build_container(settings)
        try:
            service = container.conversations
            first_conversation = await service.create_conversation(ADMIN, "ops", "default")
            await container.channels.bind_email(ADMIN, "ops@example.com", None, "default")
            await service.post_message(ADMIN, first_conversation.id, GATED)
            await drain(container)
            [first] = await awaiting(container)
            clock = Clock()
            sender = digest_sender(settings, container.uow, clock)

            # Window 1 ends; the call is approved a moment before the digest goes out.
            clock.now += timedelta(seconds=settings.digest_window_seconds)
            await container.pending_calls.resolve_pending(
                ADMIN, first.correlation_id, Resolution(Decision.APPROVE)
            )
            await drain(container)
            assert await sender.run_once() == 1
            text, html = bodies(mailbox.messages[-1])
            assert "Waiting for you" not in text, text
            decided = section(text, "Decided before this digest was sent")
            assert "Approval waiting: replay_dlq_event" in decided
            assert "approved by admin:test at " in decided
            assert "Decided before this digest was sent" in html

            # Window 2: a second call waits and is listed as waiting.
            await service.post_message(ADMIN, first_conversation.id, GATED)
            await drain(container)
            [second] = await awaiting(container)
            clock.now += timedelta(seconds=settings.digest_window_seconds)
            assert await sender.run_once() == 1
            text, _ = bodies(mailbox.messages[-1])
            assert f"#call={second.correlation_id}" in section(text, "Waiting for you")
            assert "Still waiting from earlier digests" not in text

            # Window 3: a third call, in another conversation; the second still waits.
            other = await service.create_conversation(ADMIN, "ops", "default")
            await service.post_message(ADMIN, other.id, GATED)
            await drain(container)
            [third] = [c for c in await awaiting(container) if c.correlation_id != second.correlation_id]
            clock.now += timedelta(seconds=settings.digest_window_seconds)
            assert await sender.run_once() == 1
            text, _ = bodies(mailbox.messages[-1])
            assert f"#call={third.correlation_id}" in section(text, "Waiting for you")
            still = section(text, "Still waiting from earlier digests")
            assert f"#call={second.correlation_id}" in still, text
            assert "waiting since " in still
            assert f"#call={first.correlation_id}" not in text
            assert mailbox.messages[-1]["Subject"] == "Sursis digest: 2 notices"
        finally:
            await container.close()
