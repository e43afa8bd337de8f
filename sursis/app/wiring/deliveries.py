"""What goes out: webhooks (the subscriptions and their deliverer) and the channels' deliveries
(Slack messages, email digests), run by the worker as loops."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sursis.app.channel_wiring import channel_loops
from sursis.app.context_settings import DeliverySettings
from sursis.app.wiring import INNER
from sursis.app.wiring.storage import StorageParts
from sursis.domain.clock import utcnow
from sursis.domain.events.webhooks import WebhookService
from sursis.infra.supervisor import Loop
from sursis.infra.webhook_delivery import DeliveryPolicy, WebhookDeliverer


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryParts:
    webhooks: WebhookService
    deliverer: WebhookDeliverer = field(metadata=INNER)
    loops: Sequence[Loop] = field(metadata=INNER)
    """The channels' delivery loops (only those configured: a Slack token, an SMTP host)."""


def wire_deliveries(settings: DeliverySettings, storage: StorageParts) -> DeliveryParts:
    uow = storage.uow
    deliverer = WebhookDeliverer(
        uow,
        DeliveryPolicy(
            max_attempts=settings.webhook_max_attempts,
            backoff_base=settings.webhook_backoff_seconds,
            backoff_max=settings.webhook_backoff_max_seconds,
            timeout=settings.webhook_timeout_seconds,
            allow_private_hosts=settings.webhook_allow_private_hosts,
            public_url=settings.public_url,
        ),
        clock=utcnow,
        poll_seconds=settings.webhook_poll_seconds,
        hearing=storage.hearing,
    )
    return DeliveryParts(
        webhooks=WebhookService(uow, clock=utcnow, allow_private_hosts=settings.webhook_allow_private_hosts),
        deliverer=deliverer,
        loops=channel_loops(settings, uow, utcnow),
    )
