"""Webhook subscriptions."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import Field

from abeyance.app.schemas.validation import FromRecord, Strict
from abeyance.domain.records import (
    Webhook,
)


class CreateWebhook(Strict):
    url: str = Field(min_length=1, max_length=2000)
    events: list[str] = Field(min_length=1, max_length=10)
    workspace: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")


class WebhookOut(FromRecord):
    id: uuid.UUID
    workspace: str
    url: str
    events: list[str]
    created_by: str
    created_at: datetime


class WebhookCreatedOut(WebhookOut):
    secret: str = Field(description="The signing secret; shown only in this response.")


def webhook_out(w: Webhook) -> WebhookOut:
    return WebhookOut.model_validate(w)


def webhook_created_out(w: Webhook) -> WebhookCreatedOut:
    """The one response that shows the signing secret."""
    return WebhookCreatedOut.model_validate(w)
