"""The decoded message-log cache and the window of turns shown to the model (no I/O)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from sursis.domain.records import StoredMessage
from sursis.infra.history import MessageLogCache, encode

CONVERSATION = uuid.uuid4()
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class FakeMessageRepository:
    """An append-only log in memory that remembers from where it was asked to read."""

    def __init__(self, conversation_id: uuid.UUID = CONVERSATION) -> None:
        self.conversation_id = conversation_id
        self.rows: list[StoredMessage] = []
        self.reads: list[int] = []

    def add(self, *messages: ModelRequest | ModelResponse, run_id: uuid.UUID | None = None) -> None:
        for message in messages:
            seq = len(self.rows) + 1
            self.rows.append(StoredMessage(self.conversation_id, seq, run_id, encode(message), NOW))

    async def read(self, conversation_id: uuid.UUID, after_seq: int = 0) -> list[StoredMessage]:
        self.reads.append(after_seq)
        return [r for r in self.rows if r.conversation_id == conversation_id and r.seq > after_seq]


def turn(repository: FakeMessageRepository, prompt: str, run_id: uuid.UUID | None = None) -> None:
    """A turn with a tool call: prompt, call, result, answer."""
    repository.add(
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[ToolCallPart("lookup", {"q": prompt}, tool_call_id=f"id-{prompt}")]),
        ModelRequest(parts=[ToolReturnPart("lookup", "found", tool_call_id=f"id-{prompt}")]),
        ModelResponse(parts=[TextPart(f"answer to {prompt}")]),
        run_id=run_id,
    )


def prompts(messages: object) -> list[str]:
    return [
        str(p.content)
        for m in messages  # type: ignore[attr-defined]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


async def test_a_read_decodes_only_the_rows_after_what_is_cached() -> None:
    repository = FakeMessageRepository()
    cache = MessageLogCache()
    turn(repository, "a")
    first = await cache.read(repository, CONVERSATION)
    turn(repository, "b")
    second = await cache.read(repository, CONVERSATION)
    assert repository.reads == [0, 4]
    assert second.last_seq == 8
    assert second.messages[:4] == first.messages
    assert prompts(second.messages) == ["a", "b"]
    assert second.turn_starts == (0, 4)


async def test_without_a_cache_every_read_starts_from_the_beginning() -> None:
    repository = FakeMessageRepository()
    cache = MessageLogCache(max_messages=0)
    turn(repository, "a")
    await cache.read(repository, CONVERSATION)
    turn(repository, "b")
    log = await cache.read(repository, CONVERSATION)
    assert repository.reads == [0, 0]
    assert prompts(log.messages) == ["a", "b"]


async def test_least_recently_read_conversations_are_evicted_beyond_the_budget() -> None:
    first, second = FakeMessageRepository(), FakeMessageRepository(uuid.uuid4())
    cache = MessageLogCache(max_messages=6)
    turn(first, "a")
    turn(second, "x")
    await cache.read(first, first.conversation_id)
    await cache.read(second, second.conversation_id)  # 8 messages in all: the first log goes
    await cache.read(first, first.conversation_id)
    await cache.read(second, second.conversation_id)
    assert first.reads == [0, 0]
    assert second.reads == [0, 0]
    turn(first, "b")
    log = await cache.read(first, first.conversation_id)
    assert len(log.messages) == 8
    await cache.read(first, first.conversation_id)  # a log larger than the budget is never kept
    assert first.reads == [0, 0, 0, 0]


async def test_the_window_starts_at_a_prompt_and_keeps_calls_with_their_results() -> None:
    repository = FakeMessageRepository()
    runs = [uuid.uuid4() for _ in range(3)]
    for name, run_id in zip("abc", runs, strict=True):
        turn(repository, name, run_id)
    log = await MessageLogCache().read(repository, CONVERSATION)
    shown = log.window(2)
    assert prompts(shown.messages) == ["b", "c"]
    assert isinstance(shown.messages[0], ModelRequest)
    assert shown.run_ids == (runs[1],) * 4 + (runs[2],) * 4
    assert shown.turn_starts == (0, 4)
    assert log.window(0) is log
    assert log.window(5) is log


async def test_history_is_a_new_list_whose_tail_can_be_changed_without_touching_the_cache() -> None:
    repository = FakeMessageRepository()
    turn(repository, "a")
    cache = MessageLogCache()
    log = await cache.read(repository, CONVERSATION)
    history = log.history()
    history[-1].run_id = "changed by the agent"
    history.append(ModelRequest(parts=[UserPromptPart("next")]))
    again = await cache.read(repository, CONVERSATION)
    assert again.messages[-1].run_id != "changed by the agent"
    assert len(again.messages) == 4


async def test_a_cache_that_keeps_turns_holds_only_the_last_ones_and_shows_the_same_window() -> None:
    repository = FakeMessageRepository()
    runs = [uuid.uuid4() for _ in range(6)]
    for name, run_id in zip("abcdef", runs, strict=True):
        turn(repository, name, run_id)
    whole = await MessageLogCache(max_messages=0).read(repository, CONVERSATION)
    kept = MessageLogCache(max_messages=12, keep_turns=3)
    log = await kept.read(repository, CONVERSATION)
    assert prompts(log.messages) == ["d", "e", "f"]
    assert log.last_seq == whole.last_seq == 24
    for turns in (1, 2, 3):
        assert log.window(turns) == whole.window(turns)
    # The whole log (24 messages) is larger than the budget; its last three turns (12) are kept,
    # so the next read decodes only the new turn's rows.
    turn(repository, "g", uuid.uuid4())
    again = await kept.read(repository, CONVERSATION)
    assert repository.reads[-1] == 24
    assert prompts(again.messages) == ["e", "f", "g"]
    assert again.turn_starts == (0, 4, 8)
