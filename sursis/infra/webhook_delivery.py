"""The webhook delivery loop: outbox rows out over HTTP, signed, retried with backoff, dead-lettered."""

from __future__ import annotations

import asyncio
import copy
import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog

from sursis.domain.errors import Error
from sursis.domain.events.events import WEBHOOK_TOPIC_PREFIX
from sursis.domain.events.webhooks import SIGNATURE_HEADER, is_private_host, sign
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records.event_records import OutboxItem, Webhook
from sursis.infra.faults import crash_point
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.wakeup import Hearing

log = structlog.get_logger("sursis.webhooks")
USER_AGENT = "sursis-webhooks/1"


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    max_attempts: int
    backoff_base: float
    backoff_max: float
    timeout: float
    allow_private_hosts: bool
    public_url: str | None = None

    def backoff(self, attempts: int) -> timedelta:
        """Exponential, capped, with ±20 % jitter so failing receivers are not hit in lockstep."""
        seconds = min(self.backoff_max, self.backoff_base * 2 ** max(0, attempts - 1))
        return timedelta(seconds=seconds * random.uniform(0.8, 1.2))


def host_of(url: str) -> str:
    """The URL's host for messages and cluster titles; the URL itself when it does not parse."""
    try:
        return urlsplit(url).hostname or url
    except ValueError:
        return url


class DeliveryRefused(Error):
    """The URL may not be contacted (a private address while those are not allowed)."""

    code = "delivery_refused"


class WebhookDeliverer:
    """Claims due `webhook:*` outbox rows and posts them. Safe to run in any number of workers."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        policy: DeliveryPolicy,
        *,
        clock: Callable[[], datetime],
        poll_seconds: float,
        batch: int = 20,
        hearing: Hearing | None = None,
    ) -> None:
        self._uow = uow
        self._hearing = hearing
        self._retry_at: datetime | None = None
        """The first retry this process scheduled that no pass has reached yet: the loop wakes for it.
        A pass that began before it (woken early by an event) leaves it in place."""
        self._policy = policy
        self._clock = clock
        self._poll = poll_seconds
        self._batch = batch

    async def run(self, stopping: asyncio.Event) -> None:
        """A pass, then a wait for events (deliveries are written with them) or for a retry this
        process scheduled to fall due (`wakeup.py`). The HTTP client is made for the first delivery:
        a process whose webhooks never fire loads no TLS context and no connection pool."""
        hearing = self._hearing or Hearing(LocalRunNotifier(), self._poll)
        client = _FirstUse()
        try:
            with hearing.wakeup(self._poll) as wakeup:
                while not stopping.is_set():
                    try:
                        delivered = await self.run_once(client.get)
                    except Exception:
                        log.exception("webhooks.loop_error")
                        delivered = 0
                    if delivered == 0:
                        retry_at = self._retry_at
                        due_in = None if retry_at is None else (retry_at - self._clock()).total_seconds()
                        await wakeup.wait(stopping, due_in=due_in)
        finally:
            await client.aclose()

    async def run_once(self, client: Callable[[], httpx.AsyncClient]) -> int:
        """Attempt every due delivery once, through `client()` (asked only when one is due);
        returns how many were attempted."""
        now = self._clock()
        lease_until = now + timedelta(seconds=self._policy.timeout + 30)
        async with self._uow() as uow:
            items = await uow.outbox.claim_due(WEBHOOK_TOPIC_PREFIX, now, lease_until, self._batch)
            await uow.commit()
        if self._retry_at is not None and self._retry_at <= now:
            self._retry_at = None  # this pass claimed it (or another process did)
        if items:
            http = client()
            outcomes = await asyncio.gather(
                *(self._deliver(http, item) for item in items), return_exceptions=True
            )
            for item, outcome in zip(items, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    # Its lease runs out and the row is claimed again; the others were not held up.
                    log.error("webhook.delivery_error", outbox_id=item.id, exc_info=outcome)
                elif isinstance(outcome, BaseException):
                    raise outcome
        return len(items)

    async def _deliver(self, http: httpx.AsyncClient, item: OutboxItem) -> None:
        webhook = await self._webhook(item)
        event = item.payload.get("event")
        if webhook is None or not isinstance(event, dict):
            async with self._uow() as uow:
                await uow.outbox.discard(item.id, "the webhook no longer exists", self._clock())
                await uow.commit()
            log.info("webhook.discarded", outbox_id=item.id)
            return
        crash_point("webhook_claimed")
        error = await self._post(http, webhook, item, event)
        # Delivered but not yet marked so: a crash here means one more delivery (at least once).
        crash_point("webhook_posted")
        now = self._clock()
        async with self._uow() as uow:
            if error is None:
                await uow.outbox.mark_delivered(item.id, now)
            elif item.attempts >= self._policy.max_attempts:
                host = host_of(webhook.url)
                cluster = (f"clu_webhook_{webhook.id.hex[:12]}", f"Webhook deliveries to {host} failing")
                letter = await uow.outbox.mark_dead(item, error, cluster, now)
                log.warning("webhook.dead_lettered", outbox_id=item.id, dead_letter=letter, error=error)
            else:
                retry_at = now + self._policy.backoff(item.attempts)
                await uow.outbox.schedule_retry(item.id, error, retry_at, now)
                self._retry_at = retry_at if self._retry_at is None else min(self._retry_at, retry_at)
            await uow.commit()
        log.info(
            "webhook.attempt",
            outbox_id=item.id,
            webhook_id=str(webhook.id),
            attempt=item.attempts,
            ok=error is None,
            error=error,
        )

    async def _webhook(self, item: OutboxItem) -> Webhook | None:
        try:
            webhook_id = uuid.UUID(str(item.payload.get("webhook_id")))
        except ValueError:
            return None
        async with self._uow() as uow:
            webhook = await uow.webhooks.get(webhook_id)
        return webhook if webhook is not None and webhook.workspace == item.workspace else None

    async def _post(
        self, http: httpx.AsyncClient, webhook: Webhook, item: OutboxItem, event: dict[str, Any]
    ) -> str | None:
        """None when the receiver took it (2xx); otherwise why not."""
        body = json.dumps(self._with_public_links(event), separators=(",", ":")).encode()
        timestamp = int(self._clock().timestamp())
        headers = {
            "Content-Type": "application/json",
            "Sursis-Event-Id": str(event.get("id")),
            "Sursis-Event-Type": str(event.get("type")),
            "Sursis-Delivery-Id": str(item.id),
            "Sursis-Delivery-Attempt": str(item.attempts),
            SIGNATURE_HEADER: sign(webhook.secret, timestamp, body),
        }
        try:
            await self._check_destination(webhook.url)
            response = await http.post(
                webhook.url, content=body, headers=headers, timeout=self._policy.timeout
            )
        except DeliveryRefused as exc:
            return f"refused: {exc}"
        except (ValueError, httpx.InvalidURL) as exc:
            # A URL stored before it was checked as it is now, or one httpx reads differently.
            return f"invalid url: {exc}"[:500]
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:500]
        except Exception as exc:
            # Whatever else the attempt raised (the transport reports a port out of range as an
            # ExceptionGroup), it failed: counted, retried with backoff, dead-lettered in the end.
            log.warning("webhook.attempt_error", outbox_id=item.id, exc_info=exc)
            return f"{type(exc).__name__}: {exc}"[:500]
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code} from {host_of(webhook.url)}"

    async def _check_destination(self, url: str) -> None:
        """Refuse private addresses unless allowed, also when a public-looking name resolves to one."""
        if self._policy.allow_private_hosts:
            return
        parts = urlsplit(url)
        host = parts.hostname or ""
        if is_private_host(host):
            raise DeliveryRefused(f"{host} is a private address")
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443)
        except OSError as exc:
            raise DeliveryRefused(f"{host} does not resolve: {exc}") from exc
        if any(is_private_host(str(info[4][0])) for info in infos):
            raise DeliveryRefused(f"{host} resolves to a private address")

    def _with_public_links(self, event: dict[str, Any]) -> dict[str, Any]:
        base = self._policy.public_url
        links = event.get("data", {}).get("links") if isinstance(event.get("data"), dict) else None
        if not base or not isinstance(links, dict):
            return event
        absolute = copy.deepcopy(event)
        absolute["data"]["links"] = {k: base.rstrip("/") + str(v) for k, v in links.items()}
        return absolute


class _FirstUse:
    """The deliverer's HTTP client, made when it is first asked for, closed with the loop."""

    def __init__(self) -> None:
        self._http: httpx.AsyncClient | None = None

    def get(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(headers={"User-Agent": USER_AGENT}, follow_redirects=False)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
