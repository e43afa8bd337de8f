"""Streaming a model response and tool progress to the conversation's events as they arrive."""

from __future__ import annotations

import time
from typing import Any

from pydantic_ai.messages import (
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_core import to_jsonable_python

from sursis.domain.events.events import EventType, publish
from sursis.domain.records import Run
from sursis.infra.agents.run_deps import ProgressSink
from sursis.infra.runner.base import RunnerParts, log
from sursis.infra.runner.events import Announced, EventPublisher, message_events


class ResponseStreamer:
    """Text deltas, provider tool calls and tool progress, published while the segment runs."""

    def __init__(self, parts: RunnerParts, events: EventPublisher, delta_interval: float) -> None:
        self._uow, self._clock, self._definitions = parts.uow, parts.clock, parts.definitions
        self.events = events
        self._delta_interval = delta_interval

    async def stream_response(self, run: Run, stream: Any, announced: set[str]) -> None:
        """Publish a streamed model response as it arrives.

        Text becomes `message.delta` events: deltas arriving within `delta_interval` of each
        other are sent as one event, so a fast model costs a few writes per second, not one per
        token. Provider tool calls and their results are announced where they occur in the
        response (the model runs them; nothing else will). The text left at the end of the
        stream is held for the transaction that stores the response (see `Announced`).
        """
        definition = self._definitions[run.agent]
        pending: list[str] = []
        last_flush = time.monotonic()
        async for event in stream:
            text: str | None = None
            provided: NativeToolCallPart | NativeToolReturnPart | None = None
            if isinstance(event, PartStartEvent | PartEndEvent):
                part = event.part
                if isinstance(event, PartStartEvent) and isinstance(part, TextPart):
                    text = part.content
                elif isinstance(part, NativeToolReturnPart) or (
                    isinstance(event, PartEndEvent) and isinstance(part, NativeToolCallPart)
                ):
                    provided = part
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                text = event.delta.content_delta
            if provided is not None:
                events = message_events(run.id, [ModelResponse(parts=[provided])], definition, announced)
                if events and pending:
                    await self._publish_delta(run, "".join(pending))
                    pending.clear()
                await self.events.publish_now(run, events)
                continue
            if text:
                pending.append(text)
            if pending and time.monotonic() - last_flush >= self._delta_interval:
                await self._publish_delta(run, "".join(pending))
                pending.clear()
                last_flush = time.monotonic()
        if pending:
            text = "".join(pending)
            if isinstance(announced, Announced):
                announced.held.append((EventType.MESSAGE_DELTA, {"run_id": str(run.id), "text": text}))
            else:
                await self._publish_delta(run, text)

    async def deliver_response(self, run: Run, response: ModelResponse, announced: set[str]) -> None:
        """Publish a response asked for whole (a model that does not stream) as a stream of it
        would be: its provider tool calls and results, then its text as one delta, held for the
        transaction that stores the response."""
        definition = self._definitions[run.agent]
        provided = [p for p in response.parts if isinstance(p, NativeToolCallPart | NativeToolReturnPart)]
        if provided:
            await self.events.publish_now(
                run, message_events(run.id, [ModelResponse(parts=provided)], definition, announced)
            )
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        if not text:
            return
        if isinstance(announced, Announced):
            announced.held.append((EventType.MESSAGE_DELTA, {"run_id": str(run.id), "text": text}))
        else:
            await self._publish_delta(run, text)

    async def _publish_delta(self, run: Run, text: str) -> None:
        async with self._uow() as uow:
            await publish(
                uow,
                run.conversation_id,
                run.workspace,
                EventType.MESSAGE_DELTA,
                {"run_id": str(run.id), "text": text},
                self._clock(),
            )
            await uow.commit()

    def progress_sink(self, run: Run) -> ProgressSink:
        definition = self._definitions[run.agent]

        async def sink(tool_name: str, tool_call_id: str, progress: Any) -> None:
            spec = definition.spec(tool_name)
            if spec is None or not spec.streaming:
                log.warning("tool.progress_ignored", tool_name=tool_name, reason="tool is not streaming")
                return
            data = {
                "run_id": str(run.id),
                "tool_call_id": tool_call_id,
                "tool_name": tool_name,
                "progress": progress,
            }
            try:
                async with self._uow() as uow:
                    await publish(
                        uow,
                        run.conversation_id,
                        run.workspace,
                        EventType.TOOL_PROGRESS,
                        to_jsonable_python(data, fallback=str),
                        self._clock(),
                    )
                    await uow.commit()
            except Exception:
                # A lost progress report must not fail the tool that sent it.
                log.exception("tool.progress_failed", tool_name=tool_name, tool_call_id=tool_call_id)

        return sink
