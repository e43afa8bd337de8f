"""The Slack deliverer: `channel:slack` outbox rows out through the Web API, retried with backoff.

Each row is one delivery with one id. A post carries the id in its message metadata and is
recorded (`slack_posts`) in the transaction that marks the row delivered; a retried delivery first
looks in the thread for a message carrying its id, so a crash between Slack's answer and that
commit does not post twice. Ephemeral notices cannot be looked up: they are at least once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from sursis.domain.audit.audit import actor_names
from sursis.domain.channels.escalation import OPENS_THREAD
from sursis.domain.errors import Error
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records.channel_records import SLACK_TOPIC, ChannelBinding, SlackPost
from sursis.domain.records.event_records import OutboxItem
from sursis.domain.sanitize import sanitize
from sursis.infra.channels import slack_messages as msg
from sursis.infra.faults import crash_point
from sursis.infra.webhook_delivery import DeliveryPolicy

log = structlog.get_logger("sursis.channels.slack")


class ThreadNotStarted(Error):
    """A notice for a thread whose opening message has not gone out yet: retried after it."""

    code = "thread_not_started"


class SlackDeliverer:
    """Claims due Slack rows and sends them; rows of one binding go out in order."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        client: AsyncWebClient,
        policy: DeliveryPolicy,
        *,
        clock: Callable[[], datetime],
        poll_seconds: float,
        inbox_url: str | None = None,
        batch: int = 20,
    ) -> None:
        self._uow = uow
        self._client = client
        self._policy = policy
        self._clock = clock
        self._poll = poll_seconds
        self._inbox_url = inbox_url
        self._batch = batch

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                sent = await self.run_once()
            except Exception:
                log.exception("slack.loop_error")
                sent = 0
            if sent == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), self._poll)

    async def run_once(self) -> int:
        """Attempt every due delivery once; returns how many were attempted."""
        now = self._clock()
        # Hidden from other deliverers while its calls (a lookup, a post) may still be under way.
        lease_until = now + timedelta(seconds=self._policy.timeout * 3)
        async with self._uow() as uow:
            items = await uow.outbox.claim_due(SLACK_TOPIC, now, lease_until, self._batch)
            await uow.commit()
        queues: dict[str, list[OutboxItem]] = defaultdict(list)
        for item in items:
            queues[str(item.payload.get("binding_id") or f"notice:{item.id}")].append(item)
        await asyncio.gather(*(self._in_order(queue) for queue in queues.values()))
        return len(items)

    async def _in_order(self, items: list[OutboxItem]) -> None:
        for item in items:
            try:
                await self._deliver(item)
            except Exception:
                # Its lease runs out and the row is claimed again.
                log.exception("slack.delivery_error", outbox_id=item.id)

    async def _deliver(self, item: OutboxItem) -> None:
        crash_point("slack_claimed")
        wait: float | None = None
        try:
            posted = await self._send(item)
            error = None
        except (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError, ThreadNotStarted) as exc:
            posted, error, wait = None, _describe(exc), retry_after(exc)
        crash_point("slack_posted")
        now = self._clock()
        async with self._uow() as uow:
            if error is None:
                if posted is not None:
                    await uow.channels.record_slack_post(item.id, posted, now)
                    if posted.opens_thread:
                        await uow.channels.start_thread(posted.binding_id, posted.ts)
                await uow.outbox.mark_delivered(item.id, now)
            elif item.attempts >= self._policy.max_attempts:
                cluster = ("clu_slack_delivery", "Slack deliveries failing")
                letter = await uow.outbox.mark_dead(item, error, cluster, now)
                log.warning("slack.dead_lettered", outbox_id=item.id, dead_letter=letter, error=error)
            else:
                delay = self._policy.backoff(item.attempts)
                if wait is not None:
                    delay = max(delay, timedelta(seconds=wait))
                await uow.outbox.schedule_retry(item.id, error, now + delay, now)
            await uow.commit()
        log.info("slack.attempt", outbox_id=item.id, attempt=item.attempts, ok=error is None, error=error)

    async def _send(self, item: OutboxItem) -> SlackPost | None:
        """Send one row; what was posted, to be recorded."""
        notice = item.payload.get("notice")
        if isinstance(notice, dict):
            await self._notice(item, notice)
            return None
        binding, event = await self._binding_and_event(item)
        if binding is None or binding.slack is None or event is None:
            log.info("slack.discarded", outbox_id=item.id)
            return None
        data: dict[str, Any] = event.get("data") or {}
        channel = binding.slack.channel_id
        match event.get("type"):
            case "conversation.started":
                if binding.slack.thread_ts is not None:
                    return None
                text = msg.conversation_started(data, self._inbox_url)
                ts = await self._post(item, binding, text)
                return SlackPost(binding.id, channel, ts, opens_thread=True)
            case "pending.created" | "pending.reviewed" if data.get("kind") == "approval":
                correlation_id = uuid.UUID(str(data["correlation_id"]))
                text = await self._approval_as_it_stands(data, correlation_id)
                ts = await self._post(item, binding, text)
                # An escalation's post opens the thread of the channel it reached.
                return SlackPost(
                    binding.id, channel, ts, correlation_id, opens_thread=binding.slack.thread_ts is None
                )
            case "pending.created":
                text = msg.answer_request(data, self._inbox_url)
            case "pending.resolved":
                await self._update_approvals(binding, data)
                return None
            case "pending.reviewed":
                return None
            case "pending.reminded":
                if not await self._still_awaiting(data):
                    return None
                text = msg.approval_reminder(data)
            case "run.completed":
                output = msg.run_output(data)
                if output is None:
                    return None
                text = output
            case "run.failed":
                text = msg.run_failure(data)
            case _:
                return None
        ts = await self._post(item, binding, text)
        return SlackPost(binding.id, channel, ts)

    async def _binding_and_event(
        self, item: OutboxItem
    ) -> tuple[ChannelBinding | None, dict[str, Any] | None]:
        try:
            binding_id = uuid.UUID(str(item.payload.get("binding_id")))
        except ValueError:
            return None, None
        async with self._uow() as uow:
            binding = await uow.channels.get_binding(binding_id)
        event = item.payload.get("event")
        return binding, event if isinstance(event, dict) else None

    async def _post(self, item: OutboxItem, binding: ChannelBinding, text: msg.SlackText) -> str:
        """Post to the binding's thread once per delivery id (a thread's opening message: to the
        channel); the message's `ts`."""
        assert binding.slack is not None
        channel, thread_ts = binding.slack.channel_id, binding.slack.thread_ts
        opening = (item.payload.get("event") or {}).get("type") == "conversation.started" or bool(
            item.payload.get(OPENS_THREAD)
        )
        if thread_ts is None and not opening:
            raise ThreadNotStarted("the thread's opening message has not been posted yet")
        if item.attempts > 1 and (earlier := await self._posted_before(item.id, channel, thread_ts)):
            return earlier
        response = await self._client.chat_postMessage(
            channel=channel,
            thread_ts=thread_ts,
            text=text.text,
            blocks=text.block_dicts(),
            metadata=msg.delivery_metadata(item.id),
        )
        return str(response["ts"])

    async def _posted_before(self, delivery_id: int, channel: str, thread_ts: str | None) -> str | None:
        """The `ts` of what an earlier attempt of this delivery posted: recorded, or found in the
        thread (in the channel's recent history for a thread's opening message)."""
        async with self._uow() as uow:
            recorded = await uow.channels.slack_post_ts(delivery_id)
        if recorded is not None:
            return recorded
        if thread_ts is None:
            found = await self._client.conversations_history(
                channel=channel, include_all_metadata=True, limit=200
            )
        else:
            found = await self._client.conversations_replies(
                channel=channel, ts=thread_ts, include_all_metadata=True, limit=200
            )
        for message in found.get("messages") or []:
            if msg.posted_delivery_id(message) == delivery_id:
                return str(message["ts"])
        return None

    async def _approval_as_it_stands(self, data: dict[str, Any], correlation_id: uuid.UUID) -> msg.SlackText:
        """Buttons while the call awaits; already decided (over HTTP, before this went out): who did."""
        async with self._uow() as uow:
            call = await uow.pending.get(correlation_id)
            review = (await uow.reviews.reviews([correlation_id])).get(correlation_id)
            shown = review.to_json() if review is not None and review.outcome.settled else None
            if call is None or call.status.value == "awaiting":
                model_args = None
                if call is not None and call.validated_args is not None:
                    model_args = sanitize(call.args)  # the model's own, beside what will run
                return msg.approval_request(data, shown, model_args)
            who = await _decider_name(uow, call.resolved_by)
        return msg.approval_decided({**data, "review": shown}, call.status.value, who)

    async def _still_awaiting(self, data: dict[str, Any]) -> bool:
        """Whether the call a reminder is about still waits (a call decided since is not recalled)."""
        try:
            correlation_id = uuid.UUID(str(data.get("correlation_id")))
        except ValueError:
            return False
        async with self._uow() as uow:
            call = await uow.pending.get(correlation_id)
        return call is not None and call.status.value == "awaiting"

    async def _update_approvals(self, binding: ChannelBinding, data: dict[str, Any]) -> None:
        if data.get("kind") != "approval":
            return
        correlation_id = uuid.UUID(str(data["correlation_id"]))
        async with self._uow() as uow:
            posts = await uow.channels.approval_posts(correlation_id, binding.id)
            call = await uow.pending.get(correlation_id)
            who = await _decider_name(uow, data.get("resolved_by"))
            review = (await uow.reviews.reviews([correlation_id])).get(correlation_id)
        shown = {
            **data,
            "effect_description": call.effect_description if call else "",
            "review": review.to_json() if review is not None and review.outcome.settled else None,
        }
        decided = msg.approval_decided(shown, str(data.get("status")), who)
        for channel, ts in posts:
            await self._client.chat_update(
                channel=channel, ts=ts, text=decided.text, blocks=decided.block_dicts()
            )

    async def _notice(self, item: OutboxItem, notice: dict[str, Any]) -> None:
        channel, text = str(notice["channel_id"]), str(notice["text"])
        thread_ts = str(notice.get("thread_ts") or "") or None
        if user := notice.get("ephemeral_user"):
            await self._client.chat_postEphemeral(
                channel=channel, user=str(user), text=text, thread_ts=thread_ts
            )
            return
        if thread_ts and item.attempts > 1 and await self._posted_before(item.id, channel, thread_ts):
            return
        await self._client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text=text, metadata=msg.delivery_metadata(item.id)
        )


async def _decider_name(uow: UnitOfWork, actor: str | None) -> str:
    names = await actor_names(uow, [actor])
    return names.get(actor or "") or actor or "someone"


MAX_RETRY_AFTER_SECONDS = 3600


def retry_after(exc: Exception) -> float | None:
    """The seconds Slack asked to wait (a 429's `Retry-After`), or None; at most an hour."""
    if not isinstance(exc, SlackApiError) or exc.response.status_code != 429:
        return None
    headers = {k.lower(): v for k, v in (exc.response.headers or {}).items()}
    value = headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        seconds = float(str(value))
    except ValueError:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS) if math.isfinite(seconds) else None


def _describe(exc: Exception) -> str:
    if isinstance(exc, ThreadNotStarted):
        return str(exc)
    if isinstance(exc, SlackApiError):
        return f"Slack answered {exc.response.status_code}: {exc.response.get('error')}"[:500]
    return f"{type(exc).__name__}: {exc}"[:500]
