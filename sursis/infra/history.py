"""Decoded message logs of recent conversations, extended from the append-only log on each read."""

from __future__ import annotations

import copy
import itertools
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart

from sursis.domain.ports import MessageRepository
from sursis.domain.records import StoredMessage
from sursis.domain.tools import ContextRetention, evicted_result

MESSAGE: TypeAdapter[ModelMessage] = TypeAdapter(ModelMessage)

# pydantic-ai may fill in metadata on the last messages of the history it is given (by assigning
# attributes); those get shallow copies so the cached objects stay as they were read.
MUTABLE_TAIL = 2


def encode(message: ModelMessage) -> str:
    return MESSAGE.dump_json(message).decode()


def decode(stored: Sequence[StoredMessage]) -> list[ModelMessage]:
    return [MESSAGE.validate_json(m.body) for m in stored]


def starts_turn(message: ModelMessage) -> bool:
    """A request that carries a user prompt: where a turn of the conversation begins."""
    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)


@dataclass(frozen=True, slots=True)
class ConversationLog:
    """A conversation's message log up to `last_seq`: the messages, the run that wrote each one and
    the positions where turns (user prompts) begin."""

    messages: tuple[ModelMessage, ...]
    run_ids: tuple[uuid.UUID | None, ...]
    turn_starts: tuple[int, ...]
    last_seq: int

    def extended(self, rows: Sequence[StoredMessage]) -> ConversationLog:
        if not rows:
            return self
        added = decode(rows)
        offset = len(self.messages)
        return ConversationLog(
            self.messages + tuple(added),
            self.run_ids + tuple(r.run_id for r in rows),
            self.turn_starts + tuple(offset + i for i, m in enumerate(added) if starts_turn(m)),
            rows[-1].seq,
        )

    def window(self, turns: int) -> ConversationLog:
        """The last `turns` turns (all of it when `turns` is 0 or the log is shorter).

        It starts at a user prompt, so no tool call is ever separated from its result.
        """
        if turns <= 0 or len(self.turn_starts) <= turns:
            return self
        start = self.turn_starts[-turns]
        return ConversationLog(
            self.messages[start:],
            self.run_ids[start:],
            tuple(i - start for i in self.turn_starts[-turns:]),
            self.last_seq,
        )

    def history(self) -> list[ModelMessage]:
        """The messages as a new list, safe to hand to pydantic-ai."""
        messages = list(self.messages)
        for index in range(max(0, len(messages) - MUTABLE_TAIL), len(messages)):
            messages[index] = copy.copy(messages[index])
        return messages


EMPTY = ConversationLog((), (), (), 0)


class MessageLogCache:
    """Keeps the decoded logs of recently run conversations, up to `max_messages` messages in all.

    The log is append-only and `seq` only grows, so a cached prefix never goes stale: a read
    decodes just the rows after the cached `last_seq`, whichever process wrote them. Without it a
    segment would read and decode the whole conversation, a cost that grows with every turn.
    Entries are replaced, never changed in place, so concurrent readers cannot corrupt one.

    With `keep_turns` (the window a segment shows the model, plus its own turn), a read returns and
    the cache keeps only the last `keep_turns` turns of each log: a conversation costs the cache
    what its window holds, however long it has run. `0` keeps whole logs.
    """

    def __init__(self, max_messages: int = 2_000, keep_turns: int = 0) -> None:
        self._max_messages = max_messages
        self._keep_turns = keep_turns
        self._entries: OrderedDict[uuid.UUID, ConversationLog] = OrderedDict()
        self._size = 0

    async def read(self, messages: MessageRepository, conversation_id: uuid.UUID) -> ConversationLog:
        cached = self._entries.get(conversation_id, EMPTY)
        rows = await messages.read(conversation_id, after_seq=cached.last_seq)
        if rows and rows[0].seq != cached.last_seq + 1:
            # Not a continuation of what is cached (cannot happen with an append-only log): start over.
            cached = EMPTY
            rows = await messages.read(conversation_id)
        log = cached.extended(rows).window(self._keep_turns)
        self._store(conversation_id, log)
        return log

    def position(self, conversation_id: uuid.UUID) -> int | None:
        """The last seq cached of the conversation (None: none cached)."""
        log = self._entries.get(conversation_id)
        return None if log is None else log.last_seq

    def positions(self, limit: int = 256) -> dict[uuid.UUID, int]:
        """The last seq cached for each of the `limit` conversations read most recently: what a
        claim that reads the claimed run's log in the same statement asks for (`log_from`)."""
        return {cid: log.last_seq for cid, log in itertools.islice(reversed(self._entries.items()), limit)}

    def _store(self, conversation_id: uuid.UUID, log: ConversationLog) -> None:
        if self._max_messages <= 0 or len(log.messages) > self._max_messages:
            self._forget(conversation_id)
            return
        self._forget(conversation_id)
        self._entries[conversation_id] = log
        self._size += len(log.messages)
        while self._size > self._max_messages:
            _, evicted = self._entries.popitem(last=False)
            self._size -= len(evicted.messages)

    def _forget(self, conversation_id: uuid.UUID) -> None:
        old = self._entries.pop(conversation_id, None)
        if old is not None:
            self._size -= len(old.messages)


def shown_to_model(
    messages: Sequence[ModelMessage], retention: Mapping[str, ContextRetention]
) -> list[ModelMessage]:
    """The messages as the model is to see them: the results of tools that declare a context
    retention, once out of it, replaced by a stub naming the tool and the call. The messages given
    are not changed (changed requests are copies), so the stored log keeps every result."""
    turn = 0
    turn_of: list[int] = []
    for message in messages:
        turn += starts_turn(message)
        turn_of.append(turn)
    newer: dict[str, int] = {}
    shown = list(messages)
    for index in range(len(shown) - 1, -1, -1):
        message = shown[index]
        if not isinstance(message, ModelRequest):
            continue
        parts = list(message.parts)
        changed = False
        for position in range(len(parts) - 1, -1, -1):
            part = parts[position]
            if type(part) is not ToolReturnPart or (rule := retention.get(part.tool_name)) is None:
                continue  # subclasses (tool search, capability loading) are the framework's own
            later = newer.get(part.tool_name, 0)
            newer[part.tool_name] = later + 1
            if rule.evicts(turn - turn_of[index], later):
                stub: ToolReturnPart[Any] = part
                parts[position] = replace(stub, content=evicted_result(part.tool_name, part.tool_call_id))
                changed = True
        if changed:
            shown[index] = replace(message, parts=parts)
    return shown
