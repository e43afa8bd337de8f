"""The wire formats the fake model server speaks: OpenAI chat completions, the OpenAI Responses API
and Anthropic Messages, each as a whole answer or as the events of a stream, for one `Step`."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Fail:
    status: int
    retry_after: str | None = None
    message: str = "fake failure"


@dataclass(frozen=True)
class Broken:
    """A streamed answer whose connection is cut after the first part of `text`."""

    text: str = "this answer is cut"


Step = Text | Call | Fail | Broken


@dataclass
class Request:
    api: str
    """`chat`, `responses` or `messages`."""
    body: dict[str, Any]

    @property
    def streamed(self) -> bool:
        return bool(self.body.get("stream"))

    def has_tool_result(self) -> bool:
        """Whether the conversation sent ends with a tool's result (the model's turn to answer)."""
        if self.api == "chat":
            last = self.body["messages"][-1]
            return last.get("role") == "tool"
        if self.api == "responses":
            items = self.body.get("input") or []
            return (
                bool(items)
                and isinstance(items[-1], dict)
                and items[-1].get("type") == "function_call_output"
            )
        last = self.body["messages"][-1]
        content = last.get("content")
        return isinstance(content, list) and any(
            isinstance(c, dict) and c.get("type") == "tool_result" for c in content
        )


# OpenAI chat completions


def _chat_whole(n: int, request: Request, step: Step) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if isinstance(step, Text):
        message["content"] = step.text
    elif isinstance(step, Call):
        message["tool_calls"] = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": step.name, "arguments": json.dumps(step.args)},
            }
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": request.body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _chat_streamed(n: int, request: Request, step: Step) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": request.body.get("model", "fake"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    if isinstance(step, Text | Broken):
        words = step.text.split(" ")
        events += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
        events.append(chunk({}, "stop"))
    else:
        assert isinstance(step, Call)
        arguments = json.dumps(step.args)
        half = len(arguments) // 2
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": f"call_{n}",
                            "type": "function",
                            "function": {"name": step.name, "arguments": arguments[:half]},
                        }
                    ]
                }
            )
        )
        events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]}))
        events.append(chunk({}, "tool_calls"))
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    events.append(
        "data: "
        + json.dumps(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": request.body.get("model", "fake"),
                "choices": [],
                "usage": usage,
            }
        )
        + "\n\n"
    )
    events.append("data: [DONE]\n\n")
    return events


# OpenAI Responses


def _responses_items(n: int, step: Step) -> list[dict[str, Any]]:
    if isinstance(step, Call):
        return [
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": step.name,
                "arguments": json.dumps(step.args),
                "status": "completed",
            }
        ]
    assert isinstance(step, Text | Broken)
    return [
        {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    ]


def _response(n: int, request: Request, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": request.body.get("model", "fake"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 11,
            "output_tokens": 7,
            "total_tokens": 18,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _responses_whole(n: int, request: Request, step: Step) -> dict[str, Any]:
    return _response(n, request, "completed", _responses_items(n, step))


def _responses_streamed(n: int, request: Request, step: Step) -> list[str]:
    sequence = itertools.count()

    def event(kind: str, **data: Any) -> str:
        body = {"type": kind, "sequence_number": next(sequence), **data}
        return f"event: {kind}\ndata: {json.dumps(body)}\n\n"

    [item] = _responses_items(n, step)
    events = [event("response.created", response=_response(n, request, "in_progress", []))]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        empty = {**item, "status": "in_progress", "content": []}
        events.append(event("response.output_item.added", output_index=0, item=empty))
        events.append(
            event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": []},
            )
        )
        words = text.split(" ")
        for i, word in enumerate(words):
            events.append(
                event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=0,
                    content_index=0,
                    delta=word if i == 0 else " " + word,
                    logprobs=[],
                )
            )
        events.append(
            event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                text=text,
                logprobs=[],
            )
        )
    else:
        events.append(
            event(
                "response.output_item.added",
                output_index=0,
                item={**item, "arguments": "", "status": "in_progress"},
            )
        )
        events.append(
            event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=0,
                delta=item["arguments"],
            )
        )
        events.append(
            event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=0,
                arguments=item["arguments"],
                name=item["name"],
            )
        )
    events.append(event("response.output_item.done", output_index=0, item=item))
    events.append(event("response.completed", response=_response(n, request, "completed", [item])))
    return events


# Anthropic Messages


def _anthropic_content(n: int, step: Step) -> tuple[list[dict[str, Any]], str]:
    if isinstance(step, Call):
        return [{"type": "tool_use", "id": f"toolu_{n}", "name": step.name, "input": step.args}], "tool_use"
    assert isinstance(step, Text | Broken)
    return [{"type": "text", "text": step.text}], "end_turn"


def _messages_whole(n: int, request: Request, step: Step) -> dict[str, Any]:
    content, stop = _anthropic_content(n, step)
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": request.body.get("model", "fake"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }


def _messages_streamed(n: int, request: Request, step: Step) -> list[str]:
    def event(kind: str, **data: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    content, stop = _anthropic_content(n, step)
    [block] = content
    start = {**_messages_whole(n, request, step), "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": 11, "output_tokens": 1}
    events = [event("message_start", message=start)]
    if block["type"] == "text":
        events.append(event("content_block_start", index=0, content_block={"type": "text", "text": ""}))
        words = block["text"].split(" ")
        for i, word in enumerate(words):
            delta = {"type": "text_delta", "text": word if i == 0 else " " + word}
            events.append(event("content_block_delta", index=0, delta=delta))
    else:
        events.append(event("content_block_start", index=0, content_block={**block, "input": {}}))
        arguments = json.dumps(block["input"])
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            events.append(
                event(
                    "content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": piece}
                )
            )
    events.append(event("content_block_stop", index=0))
    events.append(
        event("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage={"output_tokens": 7})
    )
    events.append(event("message_stop"))
    return events


WHOLE: dict[str, Callable[[int, Request, Step], dict[str, Any]]] = {
    "chat": _chat_whole,
    "responses": _responses_whole,
    "messages": _messages_whole,
}
STREAMED: dict[str, Callable[[int, Request, Step], list[str]]] = {
    "chat": _chat_streamed,
    "responses": _responses_streamed,
    "messages": _messages_streamed,
}
