"""Webhook subscriptions."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from abeyance.app.schemas.validation import Strict
from abeyance.domain.records import (
    Webhook,
)


class CreateWebhook(Strict):
    url: str = Field(min_length=1, max_length=2000)
    events: list[str] = Field(min_length=1, max_length=10)
    workspace: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")


class WebhookOut(BaseModel):
    id: uuid.UUID
    workspace: str
    url: str
    events: list[str]
    created_by: str
    created_at: datetime


class WebhookCreatedOut(WebhookOut):
    secret: str = Field(description="The signing secret; shown only in this response.")


def webhook_out(w: Webhook) -> WebhookOut:
    return WebhookOut(
        id=w.id,
        workspace=w.workspace,
        url=w.url,
        events=list(w.events),
        created_by=w.created_by,
        created_at=w.created_at,
    )


def webhook_created_out(w: Webhook) -> WebhookCreatedOut:
    return WebhookCreatedOut(**webhook_out(w).model_dump(), secret=w.secret)
