"""The offline `scripted` model: deterministic turns driven by a `SCRIPT:` line in the user message.

Each model turn after the message takes the next step of the script: a list of
`{"tool": NAME, "args": {...}}` becomes tool calls in one response, a string becomes the text
answer. With no script left it answers in text, quoting the tool results seen since its last
tool call (`RESULTS: [...]`), or `ECHO: <message>`.

A step item naming one of the agent's provider (native) tools, e.g.
`{"tool": "web_search", "args": {"query": "..."}, "result": [...]}`, plays the provider's part:
the response carries the native call and its `result` as the provider would return them, and,
when the step has no function tool calls, a text answer quoting those results.

Streamed, text comes word by word and tool calls as deltas, like a provider's stream.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

SCRIPT_PREFIX = "SCRIPT:"
SCRIPTED = "scripted"


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return " ".join(item for item in part.content if isinstance(item, str))


def _last_prompt(messages: list[ModelMessage]) -> tuple[int, str]:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest):
            prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
            if prompts:
                return index, _prompt_text(prompts[-1])
    return -1, ""


def parse_script(prompt: str) -> list[Any] | None:
    """The JSON list after `SCRIPT:` on its own line, or None; a malformed script raises ValueError."""
    for line in prompt.splitlines():
        stripped = line.strip()
        if stripped.startswith(SCRIPT_PREFIX):
            script = json.loads(stripped[len(SCRIPT_PREFIX) :])
            if not isinstance(script, list):
                raise ValueError("SCRIPT must be a JSON list")
            return script
    return None


def _tool_calls(step: Any, call_prefix: str, provider_tools: set[str]) -> list[ModelResponsePart]:
    items = [step] if isinstance(step, dict) else step
    parts: list[ModelResponsePart] = []
    provided: list[Any] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
            raise ValueError(
                f'script step items must look like {{"tool": NAME, "args": {{...}}}}, got {item!r}'
            )
        args = item.get("args", {})
        if not isinstance(args, dict):
            raise ValueError("tool args must be a JSON object")
        call_id = f"{call_prefix}_{i}"
        if item["tool"] in provider_tools:
            result = item.get("result", [])
            parts.append(NativeToolCallPart(item["tool"], args, tool_call_id=call_id, provider_name=SCRIPTED))
            parts.append(
                NativeToolReturnPart(item["tool"], result, tool_call_id=call_id, provider_name=SCRIPTED)
            )
            provided.append(result)
        else:
            parts.append(ToolCallPart(item["tool"], args, tool_call_id=call_id))
    if not any(isinstance(p, ToolCallPart) for p in parts):
        parts.append(TextPart("RESULTS: " + json.dumps(provided, default=str, sort_keys=True)))
    return parts


def _quote(content: Any) -> Any:
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _results_since_last_call(messages: list[ModelMessage]) -> list[Any]:
    results: list[Any] = []
    for message in reversed(messages):
        if isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts):
            break
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, ToolReturnPart):
                    results.append(_quote(part.content))
                elif isinstance(part, RetryPromptPart):
                    results.append({"retry": part.model_response()})
    results.reverse()
    return results


def _call_id_prefix(prompt: ModelMessage | None, position: int) -> str:
    """Tool call ids unique within a conversation however much of its history the model is shown:
    the prompt's message (its timestamp and run) tells the turns apart, `position` the steps."""
    seed = f"{prompt.timestamp}|{prompt.run_id}" if prompt is not None else ""
    return f"call_{hashlib.sha256(seed.encode()).hexdigest()[:8]}_{position}"


def scripted_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt_index, prompt = _last_prompt(messages)
    turn = sum(1 for m in messages[prompt_index + 1 :] if isinstance(m, ModelResponse))
    try:
        script = parse_script(prompt)
        if script is not None and turn < len(script):
            step = script[turn]
            if isinstance(step, str):
                return ModelResponse(parts=[TextPart(step)])
            provider_tools = {t.unique_id for t in info.model_request_parameters.native_tools}
            prompt_message = messages[prompt_index] if prompt_index >= 0 else None
            prefix = _call_id_prefix(prompt_message, len(messages))
            return ModelResponse(parts=_tool_calls(step, prefix, provider_tools))
    except ValueError as exc:
        return ModelResponse(parts=[TextPart(f"SCRIPT ERROR: {exc}")])
    results = _results_since_last_call(messages)
    if results:
        return ModelResponse(parts=[TextPart("RESULTS: " + json.dumps(results, default=str, sort_keys=True))])
    return ModelResponse(parts=[TextPart(f"ECHO: {prompt}")])


_WORDS = re.compile(r"\S+\s*|\s+")


async def scripted_stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """The same turn as `scripted_turn`, streamed: text word by word, tool calls as deltas."""
    async for delta in stream_response(scripted_turn(messages, info)):
        yield delta


async def stream_response(response: ModelResponse) -> AsyncIterator[str | DeltaToolCalls]:
    """A whole response as a provider streams it: text word by word, tool calls as deltas."""
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            for word in _WORDS.findall(part.content) or [""]:
                yield word
        elif isinstance(part, ToolCallPart):
            yield {
                index: DeltaToolCall(
                    name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id
                )
            }
        elif isinstance(part, NativeToolCallPart | NativeToolReturnPart):
            yield {index: part}  # type: ignore[dict-item]


def scripted_model() -> FunctionModel:
    return FunctionModel(scripted_turn, stream_function=scripted_stream, model_name=SCRIPTED)
