"""The events a segment publishes: tool calls and results, run status and the run's end."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_core import to_jsonable_python

from sursis.domain.events.events import EventType, publish
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import Run
from sursis.domain.sanitize import sanitize
from sursis.domain.tools import Executor
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.history import encode
from sursis.infra.runner.base import RunnerParts


def _tool_outcome(content: Any, failed: bool) -> dict[str, Any]:
    """`ok` plus `result` or `error`, read from the `{"ok": ...}` convention when the content follows it."""
    if isinstance(content, str):
        with contextlib.suppress(ValueError):
            content = json.loads(content)
    if isinstance(content, dict) and isinstance(content.get("ok"), bool):
        if content["ok"]:
            return {"ok": True, "result": content.get("result")}
        return {"ok": False, "error": content.get("error")}
    if failed:
        return {"ok": False, "error": {"class": "ToolError", "message": str(content)}}
    return {"ok": True, "result": content}


def _retry_text(part: ToolReturnPart | RetryPromptPart) -> str:
    """A retry as the model reads it: the tool's text (or the validation errors) and the request to
    fix it."""
    if isinstance(part, RetryPromptPart):
        return part.model_response()
    return part.model_response_str(wrap_if_error=False)


def message_events(
    run_id: uuid.UUID,
    messages: Sequence[ModelMessage],
    definition: AgentDefinition,
    announced: set[str] | None = None,
) -> list[tuple[EventType, dict[str, Any]]]:
    """The `tool.call` / `tool.result` events that messages stand for.

    `announced` holds what was already published (`call:<id>` for calls, `<id>` for results)
    and is updated, so each call and each result is published once per segment.
    """
    events: list[tuple[EventType, dict[str, Any]]] = []
    announced = announced if announced is not None else set()

    def base(tool_name: str, tool_call_id: str) -> dict[str, Any]:
        spec = definition.spec(tool_name)
        return {
            "run_id": str(run_id),
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "executor": spec.executor.value if spec else Executor.SERVER.value,
        }

    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart | NativeToolCallPart):
                    if "call:" + part.tool_call_id in announced:
                        continue
                    announced.add("call:" + part.tool_call_id)
                    spec = definition.spec(part.tool_name)
                    data = base(part.tool_name, part.tool_call_id)
                    if isinstance(part, NativeToolCallPart):
                        data["executor"] = Executor.PROVIDER.value
                    data["args"] = sanitize(part.args_as_dict())
                    data["streaming"] = bool(spec and spec.streaming)
                    events.append((EventType.TOOL_CALL, data))
                elif isinstance(part, NativeToolReturnPart):
                    if part.tool_call_id in announced:
                        continue
                    announced.add(part.tool_call_id)
                    data = base(part.tool_name, part.tool_call_id)
                    data["executor"] = Executor.PROVIDER.value
                    data.update(_tool_outcome(to_jsonable_python(part.content, fallback=str), False))
                    events.append((EventType.TOOL_RESULT, data))
        elif isinstance(message, ModelRequest):
            for request_part in message.parts:
                if (
                    not isinstance(request_part, ToolReturnPart | RetryPromptPart)
                    or not request_part.tool_name
                ):
                    continue
                if request_part.tool_call_id in announced:
                    continue
                announced.add(request_part.tool_call_id)
                data = base(request_part.tool_name, request_part.tool_call_id)
                if isinstance(request_part, ToolReturnPart) and request_part.outcome != "retried":
                    content = to_jsonable_python(request_part.content, fallback=str)
                    data.update(_tool_outcome(content, request_part.outcome == "failed"))
                else:
                    # A retry (`ModelRetry`, invalid arguments) is a failure the model is to correct.
                    error = {"class": "RetryPrompt", "message": _retry_text(request_part)}
                    data.update({"ok": False, "error": error})
                events.append((EventType.TOOL_RESULT, data))
    return events


class Announced(set[str]):
    """What a segment has published, plus events held for its next transaction.

    The text a model streamed since the last `message.delta` is held rather than written in a
    transaction of its own: the response it belongs to is stored right after the stream ends,
    and the held delta goes out in that same transaction, ahead of the response's other events.
    """

    def __init__(self) -> None:
        super().__init__()
        self.held: list[tuple[EventType, dict[str, Any]]] = []
        self.last_seq: int | None = None
        """The log's last seq as of the segment's last commit: only the holder of the run's lease
        appends to the conversation's log, so the segment numbers its messages without a read."""

    def take_held(self) -> list[tuple[EventType, dict[str, Any]]]:
        held, self.held = self.held, []
        return held


def dumps(value: Any) -> str:
    return json.dumps(value, default=str)


class EventPublisher:
    """Publishing a segment's events, in the caller's transaction or in one of their own."""

    def __init__(self, parts: RunnerParts) -> None:
        self._uow, self._clock, self._definitions = parts.uow, parts.clock, parts.definitions

    @staticmethod
    async def append(
        uow: UnitOfWork,
        run: Run,
        messages: Sequence[ModelMessage],
        now: datetime,
        announced: set[str] | None,
    ) -> int | None:
        """Store messages in the caller's transaction; the new last seq (None: nothing stored).
        Call `appended` with it once the transaction has committed."""
        if not messages:
            return None
        after = announced.last_seq if isinstance(announced, Announced) else None
        bodies = [encode(m) for m in messages]
        return await uow.messages.append(
            run.conversation_id, run.id, bodies, now, run.channel, after_seq=after
        )

    @staticmethod
    def appended(announced: set[str] | None, last_seq: int | None) -> None:
        if last_seq is not None and isinstance(announced, Announced):
            announced.last_seq = last_seq

    async def publish_messages(
        self,
        uow: UnitOfWork,
        run: Run,
        messages: Sequence[ModelMessage],
        now: datetime,
        announced: set[str] | None = None,
    ) -> None:
        """`tool.call` and `tool.result` events for messages stored in the same transaction."""
        for event_type, data in self.tool_events(run, messages, announced):
            await publish(uow, run.conversation_id, run.workspace, event_type, data, now)

    def tool_events(
        self, run: Run, messages: Sequence[ModelMessage], announced: set[str] | None = None
    ) -> list[tuple[EventType, dict[str, Any]]]:
        """The events messages stand for; results already announced before the request went to
        the model are not repeated. Events held for this transaction come first."""
        held = announced.take_held() if isinstance(announced, Announced) else []
        if not messages:
            return held
        return held + message_events(run.id, messages, self._definitions[run.agent], announced)

    async def publish_request(self, run: Run, request: ModelRequest, announced: set[str]) -> None:
        await self.publish_now(
            run, message_events(run.id, [request], self._definitions[run.agent], announced)
        )

    async def publish_now(self, run: Run, events: Sequence[tuple[EventType, dict[str, Any]]]) -> None:
        """Events that describe no stored change, in a transaction of their own."""
        if not events:
            return
        now = self._clock()
        async with self._uow() as uow:
            for event_type, data in events:
                await publish(uow, run.conversation_id, run.workspace, event_type, data, now)
            await uow.commit()
