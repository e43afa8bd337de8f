"""Email digests over a real SMTP server (aiosmtpd, in-process), parsed with the `email` package."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from sursis.app.channel_wiring import channel_loops
from sursis.app.container import Container, build_container
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.channels.fanout import digest_item
from sursis.domain.clock import utcnow
from sursis.domain.errors import ValidationFailed
from sursis.domain.records import Principal
from sursis.domain.records.channel_records import BindingKind, ChannelBinding, DigestItemKind
from sursis.domain.records.customer_records import PlatformEvent, PlatformEventType
from sursis.domain.records.event_records import StoredEvent
from sursis.domain.states import Decision, PendingStatus
from sursis.infra.channels.email_digest import DigestSender, window_end
from tests.channels.smtp_fake import bodies, smtp_server
from tests.conftest import call, make_settings, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
SYSTEM = Principal(id="system:test", role=Role.SYSTEM, workspace="default")
GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "replayed")


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


async def drain(container: Container) -> None:
    """Run the worker until no run is waiting."""
    while await container.worker.run_once():
        pass


def digest_sender(settings: object, uow: object, clock: Callable[[], datetime]) -> DigestSender:
    [sender] = [
        loop for loop in channel_loops(settings.deliveries, uow, clock) if isinstance(loop, DigestSender)
    ]  # type: ignore[arg-type]
    return sender


async def test_a_digest_lists_what_waited_in_one_email_per_window(seeded: str) -> None:
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
            service = container.conversations
            conversation = await service.create_conversation(ADMIN, "ops", "default")
            await container.channels.bind_email(ADMIN, "ops@example.com", None, "default")
            await container.channels.bind_email(ADMIN, "dev@example.com", conversation.id, None)
            await container.channels.bind_email(ADMIN, "elsewhere@example.com", None, "elsewhere")
            await service.post_message(ADMIN, conversation.id, GATED)
            assert await container.worker.run_once()
            intake = await container.intake.receive(
                SYSTEM,
                PlatformEvent(
                    id="evt-digest-1",
                    workspace="default",
                    type=PlatformEventType.ANOMALY_DETECTED,
                    data={"kind": "cost_spike", "metric": "judge_cost_usd", "baseline": 1.0, "observed": 9.0},
                    occurred_at=None,
                ),
            )
            assert intake.conversation_id is not None

            [pending] = (
                await container.pending_calls.list_pending(
                    ADMIN, status=PendingStatus.AWAITING, kind=None, tool_name=None, after=None, limit=10
                )
            ).items
            clock = Clock()
            sender = digest_sender(settings, container.uow, clock)
            assert await sender.run_once() == 0, "the window has not ended: nothing is sent yet"
            clock.now += timedelta(seconds=settings.digest_window_seconds)
            assert await sender.run_once() == 2
            assert await sender.run_once() == 0, "nothing new: no empty digest"
            by_recipient = {str(m["To"]): m for m in mailbox.messages}
            assert set(by_recipient) == {"ops@example.com", "dev@example.com"}

            text, html = bodies(by_recipient["ops@example.com"])
            assert by_recipient["ops@example.com"]["From"] == "sursis@example.com"
            assert by_recipient["ops@example.com"]["Subject"] == "Sursis digest: 2 notices"
            assert "Approval waiting: replay_dlq_event" in text
            assert (
                "Conversation started by the service (customer) after anomaly.detected evt-digest-1" in text
            )
            link = f"https://sursis.example/inbox/#call={pending.correlation_id}"
            assert link in text and f'href="{link}"' in html
            assert 'href="https://sursis.example/inbox/"' in html
            dev_text, _ = bodies(by_recipient["dev@example.com"])
            assert "Approval waiting" in dev_text and "Conversation started" not in dev_text

            # Something new in a later window: one more digest, listing only the new notice.
            await container.pending_calls.resolve_pending(
                ADMIN, pending.correlation_id, Resolution(Decision.DENY)
            )
            await drain(container)
            await service.post_message(ADMIN, conversation.id, GATED)
            await drain(container)
            clock.now += timedelta(seconds=settings.digest_window_seconds)
            assert await sender.run_once() == 2
            assert len(mailbox.messages) == 4
            later, _ = bodies(mailbox.messages[-1])
            assert later.count("Approval waiting") == 1
        finally:
            await container.close()


async def test_a_refused_send_is_retried_and_no_server_means_nothing_is_lost(seeded: str) -> None:
    async with smtp_server() as (mailbox, port):
        dead_port = port + 1 if port < 65535 else port - 1
        settings = make_settings(seeded, smtp_host="127.0.0.1", smtp_port=dead_port, smtp_starttls=False)
        container = build_container(settings)
        try:
            conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
            await container.channels.bind_email(ADMIN, "ops@example.com", conversation.id, None)
            await container.conversations.post_message(ADMIN, conversation.id, GATED)
            assert await container.worker.run_once()
            clock = Clock()
            clock.now += timedelta(seconds=settings.digest_window_seconds)
            failing = digest_sender(settings, container.uow, clock)
            assert await failing.run_once() == 0
            clock.now += timedelta(minutes=10)  # past the backoff
            working = digest_sender(settings.model_copy(update={"smtp_port": port}), container.uow, clock)
            assert await working.run_once() == 1
            [message] = mailbox.messages
            assert "Approval waiting: replay_dlq_event" in bodies(message)[0]
        finally:
            await container.close()


async def test_only_email_addresses_are_bound(seeded: str) -> None:
    container = build_container(make_settings(seeded))
    try:
        for bad in ("not-an-address", "a@b", "two@@example.com", "x@example.com, y@example.com"):
            with pytest.raises(ValidationFailed):
                await container.channels.bind_email(ADMIN, bad, None, "default")
    finally:
        await container.close()


def test_windows_are_aligned_and_failed_runs_make_a_digest_line() -> None:
    hour = timedelta(hours=1)
    assert window_end(datetime(2026, 1, 1, 10, 59, 59, tzinfo=UTC), hour) == datetime(
        2026, 1, 1, 10, tzinfo=UTC
    )
    assert window_end(datetime(2026, 1, 1, 11, 0, 0, tzinfo=UTC), hour) == datetime(
        2026, 1, 1, 11, tzinfo=UTC
    )
    binding = ChannelBinding(
        uuid.uuid4(), "default", None, BindingKind.EMAIL, "admin", datetime.now(UTC), email="a@example.com"
    )
    event = StoredEvent(
        1,
        uuid.uuid4(),
        "default",
        "run.failed",
        {"run_id": "r1", "error": {"code": "step_limit", "message": "too many steps"}},
        datetime.now(UTC),
    )
    item = digest_item(binding, event)
    assert item is not None
    assert item.kind is DigestItemKind.RUN_FAILED
    assert item.summary == "Run failed: step_limit: too many steps"
    assert (
        digest_item(binding, StoredEvent(2, uuid.uuid4(), "default", "run.completed", {}, event.created_at))
        is None
    )
