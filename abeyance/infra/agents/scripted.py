"""The offline `scripted` model: deterministic turns driven by a `SCRIPT:` line in the user message.

Each model turn after the message takes the next step of the script: a list of
`{"tool": NAME, "args": {...}}` becomes tool calls in one response, a string becomes the text
answer. With no script left it answers in text, quoting the tool results seen since its last
tool call (`RESULTS: [...]`), or `ECHO: <message>`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

SCRIPT_PREFIX = "SCRIPT:"


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


def _tool_calls(step: Any, call_prefix: str) -> list[ToolCallPart]:
    items = [step] if isinstance(step, dict) else step
    parts = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
            raise ValueError(
                f'script step items must look like {{"tool": NAME, "args": {{...}}}}, got {item!r}'
            )
        args = item.get("args", {})
        if not isinstance(args, dict):
            raise ValueError("tool args must be a JSON object")
        parts.append(ToolCallPart(item["tool"], args, tool_call_id=f"{call_prefix}_{i}"))
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


def scripted_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt_index, prompt = _last_prompt(messages)
    turn = sum(1 for m in messages[prompt_index + 1 :] if isinstance(m, ModelResponse))
    try:
        script = parse_script(prompt)
        if script is not None and turn < len(script):
            step = script[turn]
            if isinstance(step, str):
                return ModelResponse(parts=[TextPart(step)])
            return ModelResponse(parts=_tool_calls(step, f"call_{len(messages)}"))
    except ValueError as exc:
        return ModelResponse(parts=[TextPart(f"SCRIPT ERROR: {exc}")])
    results = _results_since_last_call(messages)
    if results:
        return ModelResponse(parts=[TextPart("RESULTS: " + json.dumps(results, default=str, sort_keys=True))])
    return ModelResponse(parts=[TextPart(f"ECHO: {prompt}")])


def scripted_model() -> FunctionModel:
    return FunctionModel(scripted_turn, model_name="scripted")
