"""What the model is shown of tool results under each tool's context retention (no I/O)."""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from sursis.domain.tools import ContextRetention
from sursis.infra.history import shown_to_model


def turn(prompt: str, *results: tuple[str, str]) -> list[ModelMessage]:
    """A user prompt, one response calling the tools, and their results."""
    calls = [ToolCallPart(tool, {}, call_id) for tool, call_id in results]
    returns = [ToolReturnPart(tool, f"result {call_id}", call_id) for tool, call_id in results]
    return [ModelRequest([UserPromptPart(prompt)]), ModelResponse(calls), ModelRequest(returns)]


def shown(messages: list[ModelMessage]) -> dict[str, str]:
    return {
        p.tool_call_id: str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


def test_count_keeps_the_latest_results_even_within_one_turn() -> None:
    messages = turn("go", ("search", "a"), ("search", "b"), ("search", "c"), ("other", "d"))
    view = shown(shown_to_model(messages, {"search": ContextRetention(count=2)}))
    assert view["c"] == "result c" and view["b"] == "result b" and view["d"] == "result d"
    assert view["a"].startswith("[result of search (call a) no longer shown")


def test_age_counts_turns_from_the_one_that_produced_the_result() -> None:
    messages = turn("1", ("look", "a")) + turn("2", ("look", "b")) + turn("3", ("look", "c"))
    two_turns = shown(shown_to_model(messages, {"look": ContextRetention(age=2)}))
    assert [two_turns[c].startswith("[") for c in "abc"] == [True, False, False]
    never = shown(shown_to_model(messages, {"look": ContextRetention(never_evict=True)}))
    assert never == {c: f"result {c}" for c in "abc"}


def test_the_messages_given_are_not_changed() -> None:
    messages = turn("1", ("look", "a")) + turn("2", ("look", "b"))
    view = shown_to_model(messages, {"look": ContextRetention(age=1)})
    assert shown(messages) == {"a": "result a", "b": "result b"}  # what is stored keeps everything
    assert view[2] is not messages[2] and view[5] is messages[5]  # only changed requests are copies
    assert shown_to_model(messages, {}) == messages
