"""What the service says in Slack: texts and Block Kit messages, built with `slack_sdk.models`.

The Block Kit classes (~2.6 MiB with the Slack SDK) are imported by the messages that use them: the
API answers Slack's requests with the constants and parsers here, and a process without Slack never
builds a block.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slack_sdk.models.blocks import Block
    from slack_sdk.models.views import View

APPROVE_ACTION = "sursis_approve"
DENY_ACTION = "sursis_deny"
DECISION_OF_ACTION = {APPROVE_ACTION: "approve", DENY_ACTION: "deny"}
"""Buttons that decide at once."""
DENY_WITH_REASON_ACTION = "sursis_deny_reason"
REVISE_ACTION = "sursis_revise"
MODAL_OF_ACTION = {DENY_WITH_REASON_ACTION: "deny", REVISE_ACTION: "revise"}
"""Buttons that open a modal (`views.open`) asking what to tell the agent; its submission decides."""
MODAL_CALLBACK = "sursis_decision"
REASON_BLOCK = REASON_INPUT = "reason"
MAX_REASON = 2000
DELIVERY_METADATA = "sursis_delivery"
"""The `metadata.event_type` of every post: its `event_payload.delivery_id` lets a retried delivery
find what an earlier attempt already posted."""
MAX_TEXT = 3000


@dataclass(frozen=True, slots=True)
class SlackText:
    """A message: its fallback text and, for rich messages, its blocks."""

    text: str
    blocks: list[Block] | None = None

    def block_dicts(self) -> list[dict[str, Any]] | None:
        return None if self.blocks is None else [b.to_dict() for b in self.blocks]


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _escape(text: str) -> str:
    """Slack's three control characters in user-supplied text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


REVIEW_WORDS = {
    "yes": "risky",
    "no": "not risky",
    "unsure": "unsure",
    "error": "failed",
    "timeout": "timed out",
    "over_budget": "over its budget",
    "interrupted": "interrupted",
    "skipped": "not asked",
    "queued": "thinking…",
    "reviewing": "thinking…",
}


def review_line(review: dict[str, Any]) -> str:
    """A reviewer model's verdict in one line: model, question, verdict, reason, policy version."""
    verdict = REVIEW_WORDS.get(str(review.get("verdict")), str(review.get("verdict")))
    reason = f" — {review['reason']}" if review.get("reason") else ""
    left = "" if review.get("verdict") == "no" else " (left to people)"
    return _escape(
        f'Reviewer {review.get("model")} asked "{review.get("question")}": {verdict}{left}{reason}'
        f" · policy v{review.get('policy_version')}"
    )


def approval_request(
    data: dict[str, Any], review: dict[str, Any] | None = None, model_args: dict[str, Any] | None = None
) -> SlackText:
    """A pending approval with Approve and Deny buttons carrying its `correlation_id` (and, once a
    reviewer model answered, its verdict). `args_summary` is what will run (pydantic-ai's validated
    arguments); `model_args`, the model's own (sanitized), only when they differ from it."""
    from slack_sdk.models.blocks import (
        ActionsBlock,
        ButtonElement,
        ContextBlock,
        MarkdownTextObject,
        SectionBlock,
    )

    correlation_id = str(data["correlation_id"])
    tool = _escape(str(data.get("tool_name")))
    effect = _escape(str(data.get("effect_description") or ""))
    args = _escape(json.dumps(data.get("args_summary") or {}, ensure_ascii=False))
    text = f"Approval needed: {tool} — {effect}"
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=_clip(f"*Approval needed:* `{tool}`\n{effect}"))),
        SectionBlock(text=MarkdownTextObject(text=_clip(f"```{args}```"))),
        ActionsBlock(
            block_id=f"sursis:{correlation_id}",
            elements=[
                ButtonElement(
                    text="Approve", action_id=APPROVE_ACTION, value=correlation_id, style="primary"
                ),
                ButtonElement(text="Deny", action_id=DENY_ACTION, value=correlation_id, style="danger"),
                ButtonElement(
                    text="Deny with a reason…", action_id=DENY_WITH_REASON_ACTION, value=correlation_id
                ),
                ButtonElement(text="Ask for a revision…", action_id=REVISE_ACTION, value=correlation_id),
            ],
        ),
        ContextBlock(elements=[MarkdownTextObject(text=f"correlation id `{correlation_id}`")]),
    ]
    if model_args is not None:
        raw = _escape(json.dumps(model_args, ensure_ascii=False))
        shown = f"_The model asked for (before validation):_\n```{raw}```"
        blocks.insert(2, SectionBlock(text=MarkdownTextObject(text=_clip(shown))))
    if review is not None:
        line = review_line(review)
        blocks.insert(2, ContextBlock(elements=[MarkdownTextObject(text=_clip(line))]))
        text += f" ({line})"
    return SlackText(_clip(text), blocks)


def decision_modal(decision: str, private_metadata: str) -> View:
    """The modal a "Deny with a reason…" or "Ask for a revision…" press opens: one text input,
    required for a revision (what to change), optional for a denial."""
    from slack_sdk.models.blocks import InputBlock, PlainTextInputElement
    from slack_sdk.models.views import View

    revise = decision == "revise"
    label = "What should the agent change?" if revise else "Why is it denied? (the agent is told)"
    return View(
        type="modal",
        callback_id=MODAL_CALLBACK,
        private_metadata=private_metadata,
        title="Ask for a revision" if revise else "Deny the call",
        submit="Send" if revise else "Deny",
        close="Cancel",
        blocks=[
            InputBlock(
                block_id=REASON_BLOCK,
                label=label,
                optional=not revise,
                element=PlainTextInputElement(action_id=REASON_INPUT, multiline=True, max_length=MAX_REASON),
            )
        ],
    )


def approval_acknowledged(data: dict[str, Any], status: str, user_id: str) -> SlackText:
    """What a press shows at once (the run resumes; the deliverer's update follows): decided by the
    presser, as a mention (`user_id` is a checked Slack id)."""
    return approval_decided(data, status, f"<@{user_id}>", resuming=True)


def approval_decided(
    data: dict[str, Any], status: str, decided_by: str, *, resuming: bool = False
) -> SlackText:
    """The approval message once decided: no buttons, and who decided."""
    from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject, SectionBlock

    tool = _escape(str(data.get("tool_name")))
    mark = {"approved": "✅", "denied": "⛔", "revision_requested": "✏️"}.get(status, "•")
    who = decided_by if resuming else _escape(decided_by)
    line = f"{mark} `{tool}` {status} by {who}"
    if resuming:
        line += " — resuming the run…"
    effect = _escape(str(data.get("effect_description") or ""))
    blocks: list[Block] = [
        SectionBlock(text=MarkdownTextObject(text=_clip(f"{line}\n{effect}" if effect else line))),
        ContextBlock(elements=[MarkdownTextObject(text=f"correlation id `{data.get('correlation_id')}`")]),
    ]
    review = data.get("review")
    if isinstance(review, dict):
        blocks.insert(1, ContextBlock(elements=[MarkdownTextObject(text=_clip(review_line(review)))]))
    return SlackText(_clip(f"{tool} {status} by {decided_by}"), blocks)


def answer_request(data: dict[str, Any], inbox_url: str | None) -> SlackText:
    """A call waiting for an answer that Slack buttons cannot give (elicitation, client execution)."""
    where = f" Answer it in the inbox: {inbox_url}" if inbox_url else " Answer it in the inbox."
    return SlackText(_clip(f"Waiting for an answer: {_escape(str(data.get('tool_name')))}.{where}"))


def approval_reminder(data: dict[str, Any]) -> SlackText:
    """A reminder, in the call's thread, that it still waits (the request above has the buttons)."""
    tool = _escape(str(data.get("tool_name")))
    effect = _escape(str(data.get("effect_description") or ""))
    fraction = data.get("fraction")
    gone = (
        f" {round(float(fraction) * 100)}% of its time has passed;"
        if isinstance(fraction, int | float)
        else ""
    )
    expires = _escape(str(data.get("expires_at") or ""))
    text = f"Reminder: approval still needed: {tool} — {effect}.{gone} it expires at {expires}."
    return SlackText(_clip(text))


def conversation_started(data: dict[str, Any], inbox_url: str | None) -> SlackText:
    """The opening message of a conversation the service started: replies in its thread go to it."""
    source = data.get("event") or {}
    cause = _escape(f"{source.get('type', 'an event')} {source.get('id', '')}".strip())
    agent = _escape(str(data.get("agent")))
    text = f"New conversation ({agent}) after {cause}. Reply in this thread to talk to it."
    if inbox_url:
        text += f" Inbox: {inbox_url}"
    return SlackText(_clip(text))


def run_output(data: dict[str, Any]) -> SlackText | None:
    output = data.get("output")
    return SlackText(_clip(_escape(str(output)))) if output else None


def run_failure(data: dict[str, Any]) -> SlackText:
    error = data.get("error") or {}
    return SlackText(_clip(f"The run failed: {error.get('code')}: {_escape(str(error.get('message')))}"))


def delivery_metadata(delivery_id: int) -> dict[str, Any]:
    return {"event_type": DELIVERY_METADATA, "event_payload": {"delivery_id": delivery_id}}


def posted_delivery_id(message: dict[str, Any]) -> int | None:
    """The delivery id a message in a thread was posted by, if this service posted it."""
    metadata = message.get("metadata") or {}
    if metadata.get("event_type") != DELIVERY_METADATA:
        return None
    value = (metadata.get("event_payload") or {}).get("delivery_id")
    return value if isinstance(value, int) else None


def parse_correlation_id(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
