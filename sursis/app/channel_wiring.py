"""The channel loops the worker runs, built from the settings: the Slack deliverer (with a bot
token) and the email digest sender (with an SMTP host).

The Slack Web API client (with aiohttp, ~10 MiB) and the SMTP client are imported only when their
channel is configured: a process without channels does not carry them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sursis.app.context_settings import DeliverySettings
from sursis.domain.ports import UnitOfWorkFactory
from sursis.infra.supervisor import Loop
from sursis.infra.webhook_delivery import DeliveryPolicy

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient


def inbox_url(settings: DeliverySettings) -> str:
    base = settings.public_url or f"http://{settings.host}:{settings.port}"
    return base.rstrip("/") + "/inbox/"


def slack_client(settings: DeliverySettings) -> AsyncWebClient | None:
    if settings.slack_bot_token is None:
        return None
    from slack_sdk.web.async_client import AsyncWebClient

    return AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        timeout=int(settings.webhook_timeout_seconds),
    )


def channel_loops(
    settings: DeliverySettings, uow: UnitOfWorkFactory, clock: Callable[[], datetime]
) -> list[Loop]:
    """Slack deliveries reuse the webhook retry settings (attempts, backoff, timeout)."""
    loops: list[Loop] = []
    client = slack_client(settings)
    if client is not None:
        from sursis.infra.channels.slack_delivery import SlackDeliverer

        policy = DeliveryPolicy(
            max_attempts=settings.webhook_max_attempts,
            backoff_base=settings.webhook_backoff_seconds,
            backoff_max=settings.webhook_backoff_max_seconds,
            timeout=settings.webhook_timeout_seconds,
            allow_private_hosts=True,
        )
        loops.append(
            SlackDeliverer(
                uow,
                client,
                policy,
                clock=clock,
                poll_seconds=settings.channel_poll_seconds,
                inbox_url=inbox_url(settings),
            )
        )
    if settings.smtp_host is not None:
        from sursis.infra.channels.email_digest import DigestSender, SmtpConfig

        smtp = SmtpConfig(
            host=settings.smtp_host,
            port=settings.smtp_port,
            starttls=settings.smtp_starttls,
            username=settings.smtp_username,
            password=settings.smtp_password.get_secret_value() if settings.smtp_password else None,
            sender=settings.smtp_from,
            timeout=settings.smtp_timeout_seconds,
        )
        loops.append(
            DigestSender(
                uow,
                smtp,
                window=timedelta(seconds=settings.digest_window_seconds),
                clock=clock,
                poll_seconds=settings.channel_poll_seconds,
                inbox_url=inbox_url(settings),
                max_attempts=settings.webhook_max_attempts,
            )
        )
    return loops
