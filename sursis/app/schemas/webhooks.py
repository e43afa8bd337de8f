"""Webhook subscriptions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import Field

from sursis.app.schemas.validation import FromRecord, Strict, WebhookUrl, WorkspaceName
from sursis.domain.events.events import WEBHOOK_EVENT_TYPES
from sursis.domain.records.event_records import Webhook

WebhookEventName = Annotated[
    str,
    Field(
        json_schema_extra={"enum": sorted(t.value for t in WEBHOOK_EVENT_TYPES)},
        description="An event type a webhook may subscribe to (checked by `check_events`)",
    ),
]


class CreateWebhook(Strict):
    url: WebhookUrl
    events: list[WebhookEventName] = Field(min_length=1, max_length=10)
    workspace: WorkspaceName | None = None


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
