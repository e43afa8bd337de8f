"""The rule of what a fork copies, on hand-made logs in the stored JSON form of pydantic-ai messages."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from sursis.domain.conversations._fork import (
    ForkPointNotATurn,
    ForkPointOutOfRange,
    ForkPointUnsettled,
    plan_fork,
    turn_starts,
    unanswered_calls,
)
from sursis.domain.errors import ValidationFailed
from sursis.domain.records import StoredMessage

CONVERSATION = uuid.uuid4()
AT = datetime(2026, 1, 1, tzinfo=UTC)


def prompt(text: Any) -> dict[str, Any]:
    return {"part_kind": "user-prompt", "content": text}


def request(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "request", "parts": list(parts)}


def response(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "response", "parts": list(parts)}


def tool_call(call_id: str) -> dict[str, Any]:
    return {"part_kind": "tool-call", "tool_name": "replay", "tool_call_id": call_id, "args": "{}"}


def tool_return(call_id: str) -> dict[str, Any]:
    return {"part_kind": "tool-return", "tool_name": "replay", "tool_call_id": call_id, "content": "ok"}


def log(*messages: dict[str, Any], channel: str = "web") -> list[StoredMessage]:
    return [
        StoredMessage(CONVERSATION, seq, None, json.dumps(m), AT, channel)
        for seq, m in enumerate(messages, start=1)
    ]


TWO_TURNS = log(
    request(prompt("replay it")),
    response(tool_call("c1")),
    request(tool_return("c1")),
    response({"part_kind": "text", "content": "done"}),
    request(prompt("what happened?")),
    response({"part_kind": "text", "content": "it ran"}),
)


def test_a_fork_copies_every_message_before_the_turn_and_runs_its_prompt_again() -> None:
    plan = plan_fork(TWO_TURNS, 5, None)
    assert [body for body, _ in plan.copied] == [m.body for m in TWO_TURNS[:4]]
    assert plan.prompt == "what happened?" and not plan.replaced
    assert [channel for _, channel in plan.copied] == ["web"] * 4


def test_a_replacement_message_takes_the_prompt_s_place() -> None:
    plan = plan_fork(TWO_TURNS, 1, "replay the other one")
    assert plan.copied == () and plan.prompt == "replay the other one" and plan.replaced


def test_only_user_messages_are_fork_points() -> None:
    assert turn_starts(TWO_TURNS) == [1, 5]
    for at in (2, 3, 4, 6):
        with pytest.raises(ForkPointNotATurn) as refused:
            plan_fork(TWO_TURNS, at, "x")
        assert refused.value.extra["turns"] == [1, 5]
    for at in (0, -1, 7):
        with pytest.raises(ForkPointOutOfRange):
            plan_fork(TWO_TURNS, at, "x")
    with pytest.raises(ForkPointOutOfRange):
        plan_fork([], 1, "x")


def test_answers_given_with_a_prompt_are_copied_without_it() -> None:
    cancelled = log(
        request(prompt("replay it")),
        response(tool_call("c1")),
        request(tool_return("c1"), prompt("what happened?")),
    )
    plan = plan_fork(cancelled, 3, None)
    copied = [json.loads(body) for body, _ in plan.copied]
    assert copied[-1] == request(tool_return("c1"))
    assert unanswered_calls([body for body, _ in plan.copied]) == []
    assert plan.prompt == "what happened?"


def test_a_history_that_ends_in_an_unanswered_call_is_never_copied() -> None:
    dangling = log(
        request(prompt("replay it")), response(tool_call("c1"), tool_call("c2")), request(prompt("hm"))
    )
    assert unanswered_calls([m.body for m in dangling[:2]]) == ["c1", "c2"]
    with pytest.raises(ForkPointUnsettled):
        plan_fork(dangling, 3, None)


def test_a_prompt_that_is_not_text_needs_a_replacement() -> None:
    multimodal = log(request(prompt(["look", {"kind": "image-url", "url": "https://example.com/a.png"}])))
    with pytest.raises(ValidationFailed) as refused:
        plan_fork(multimodal, 1, None)
    assert refused.value.extra["errors"][0]["loc"] == ["message"]
    assert plan_fork(multimodal, 1, "describe it").prompt == "describe it"
