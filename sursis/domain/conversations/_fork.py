"""Forking a conversation at one of its turns: what the fork is given of the original's log.

A fork point `at` is the `seq` of a message that starts a turn: a request carrying a user prompt.
The fork holds every message before it, then runs a user message of its own at that place (the
replacement given, or the original's prompt again). The rule here only reads message JSON (the
pydantic-ai form the log stores); it never runs or re-runs a tool:

* results that the copied messages hold (tool returns, retry prompts) are copied as history;
* a turn's request may also answer calls an earlier run left unanswered (a run cancelled while
  its call awaited a decision): those answers are copied too, without the prompt, so the fork's
  history never ends in a call without a result. Such a call would otherwise look like one a
  crashed segment dispatched, and be dispatched again;
* nothing after the fork point is copied: the original's later calls, pending or not, stay its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sursis.domain.errors import Conflict, ValidationFailed
from sursis.domain.records import StoredMessage

USER_PROMPT = "user-prompt"
TOOL_CALL = "tool-call"
ANSWERS = frozenset({"tool-return", "retry-prompt"})


class ForkPointOutOfRange(ValidationFailed):
    """`at` is past the end of the conversation's log."""

    code = "fork_point_out_of_range"


class ForkPointNotATurn(ValidationFailed):
    """`at` names a message that does not start a turn (a model response, tool results)."""

    code = "fork_point_not_a_turn"


class ForkPointUnsettled(Conflict):
    """The history before `at` ends in a tool call without a result: copying it could run it again."""

    code = "fork_point_unsettled"


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """What a fork at `at` is given: the message bodies it starts with and its first user message."""

    at: int
    copied: tuple[tuple[str, str | None], ...]
    """The bodies to copy, in order, each with the channel of the run that wrote it."""
    prompt: str
    replaced: bool
    """Whether `prompt` is the replacement given rather than the original's prompt at `at`."""


def plan_fork(messages: Sequence[StoredMessage], at: int, replacement: str | None) -> ForkPlan:
    """The plan of a fork of the log `messages` (in `seq` order) at `at`; `ValidationFailed` when
    `at` is out of range or not the start of a turn, `ForkPointUnsettled` when the history before it
    ends in an unanswered call."""
    last = messages[-1].seq if messages else 0
    if not 1 <= at <= last:
        raise ForkPointOutOfRange(
            f"at must be the seq of a message of this conversation (1-{last})",
            extra={
                "errors": [{"loc": ["at"], "msg": "beyond the end of the conversation"}],
                "last_seq": last,
            },
        )
    before = [m for m in messages if m.seq < at]
    point = next((m for m in messages if m.seq == at), None)
    parsed = _parsed(point.body) if point is not None else {}
    parts = [p for p in parsed.get("parts", []) if isinstance(p, dict)]
    prompts = [p for p in parts if p.get("part_kind") == USER_PROMPT]
    if parsed.get("kind") != "request" or not prompts:
        raise ForkPointNotATurn(
            f"message {at} does not start a turn: fork at the seq of a user message",
            extra={"errors": [{"loc": ["at"], "msg": "not a user message"}], "turns": turn_starts(messages)},
        )
    copied = [(m.body, m.channel) for m in before]
    answers = [p for p in parts if p.get("part_kind") != USER_PROMPT]
    if answers and point is not None:
        copied.append((json.dumps({**parsed, "parts": answers}), point.channel))
    if unanswered_calls([body for body, _ in copied]):
        raise ForkPointUnsettled(
            f"the history before message {at} ends in a tool call without a result",
            extra={"errors": [{"loc": ["at"], "msg": "unsettled"}]},
        )
    prompt = replacement if replacement is not None else _prompt_text(prompts[-1])
    if prompt is None:
        raise ValidationFailed(
            f"the user message at {at} is not plain text: give the fork's message",
            extra={"errors": [{"loc": ["message"], "msg": "required"}]},
        )
    return ForkPlan(at=at, copied=tuple(copied), prompt=prompt, replaced=replacement is not None)


def turn_starts(messages: Sequence[StoredMessage]) -> list[int]:
    """The seqs a conversation can be forked at: those of its user messages."""
    return [m.seq for m in messages if starts_turn(_parsed(m.body))]


def starts_turn(message: dict[str, Any]) -> bool:
    return message.get("kind") == "request" and any(
        isinstance(p, dict) and p.get("part_kind") == USER_PROMPT for p in message.get("parts", [])
    )


def unanswered_calls(bodies: Sequence[str]) -> list[str]:
    """The tool call ids of the last response in `bodies` that no later request answers."""
    answered: set[str] = set()
    for body in reversed(bodies):
        message = _parsed(body)
        parts = [p for p in message.get("parts", []) if isinstance(p, dict)]
        if message.get("kind") == "response":
            calls = [str(p.get("tool_call_id")) for p in parts if p.get("part_kind") == TOOL_CALL]
            return [c for c in calls if c not in answered]
        answered.update(str(p.get("tool_call_id")) for p in parts if p.get("part_kind") in ANSWERS)
    return []


def _prompt_text(part: dict[str, Any]) -> str | None:
    content = part.get("content")
    return content if isinstance(content, str) else None


def _parsed(body: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
