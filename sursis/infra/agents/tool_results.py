"""A tool's result as pydantic-ai serializes it: what the `tool_calls` row stores and what a replay
(after a crash) shows the model again.

pydantic-ai sends a tool's return value to the model through pydantic (a model, a dataclass, a
`TypedDict`, dates, UUIDs, decimals, enums, and lists and dicts of them become JSON; a
`BinaryContent` or an `ImageUrl` stays a file the model reads), and a `ToolReturn` adds content sent
beside the result and metadata kept for the application. The row stores the JSON form of that same
serialization (`ToolReturn`'s own pydantic schema); a replay validates it back through the schema, so
the files come back as files and the model is shown the same request as on the first dispatch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import structlog
from pydantic import TypeAdapter
from pydantic_ai import ToolReturn
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import AudioUrl, BinaryContent, DocumentUrl, ImageUrl, UploadedFile, VideoUrl
from pydantic_core import PydanticSerializationError, to_jsonable_python

from sursis.domain.errors import ToolTerminalError, ok_result

EDITED_NOTE = "args_edited_by_operator"
"""Key, in a success that ran on arguments an operator edited, of what they were."""
TOOL_RETURN = "tool_return"
"""Key of a stored success holding what a `ToolReturn` adds to its result: `content` (sent to the
model beside the result) and `metadata` (kept for the application, never sent)."""

log = structlog.get_logger("sursis.tools")

_TOOL_RETURN: TypeAdapter[ToolReturn[Any]] = TypeAdapter(ToolReturn)
_EXTRAS = ("content", "metadata", "tools")
_JSON_SCALARS = (str, int, bool, type(None))
_FILES = (BinaryContent, ImageUrl, AudioUrl, DocumentUrl, VideoUrl, UploadedFile)
"""pydantic-ai's multimodal parts (`MultiModalContent`): sent to a model as files."""
_FILE_KINDS = frozenset(part.__dataclass_fields__["kind"].default for part in _FILES)


def stored_result(value: Any) -> dict[str, Any]:
    """The `{"ok": true, "result": ...}` outcome of a call whose tool returned `value`, in JSON form;
    a value pydantic cannot serialize is a tool error naming its type (the model reads it)."""
    if type(value) in _JSON_SCALARS:
        return ok_result(value)
    try:
        if not isinstance(value, ToolReturn) and not _has_files(value):
            # What pydantic-ai's schema does with any other value, without building the union.
            return ok_result(to_jsonable_python(value, inf_nan_mode="null"))
        wrapped = value if isinstance(value, ToolReturn) else ToolReturn(return_value=value)
        dumped = _TOOL_RETURN.dump_python(wrapped, mode="json")
    except PydanticSerializationError:
        return unstorable(value)
    payload = ok_result(dumped["return_value"])
    if isinstance(value, ToolReturn):
        payload[TOOL_RETURN] = {key: dumped[key] for key in _EXTRAS if dumped.get(key) is not None}
    return payload


def unstorable(value: Any) -> dict[str, Any]:
    """The tool error a result that cannot be stored becomes: its effect may have happened, so the
    model is told what came back rather than that the call failed for no reason."""
    kind = type(value.return_value if isinstance(value, ToolReturn) else value)
    name = f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__
    log.warning("tool.result_unstorable", result_type=name)
    return ToolTerminalError(
        f"The tool returned a value of type {name}, which cannot be stored as JSON; "
        "its result is not known to this conversation.",
        code="UNSTORABLE_RESULT",
    ).to_result()


def shown_result(payload: Mapping[str, Any]) -> Any:
    """What the model is shown of a stored success: the result as pydantic-ai reads it back from
    JSON (files as files), or the `ToolReturn` it came in."""
    extras = payload.get(TOOL_RETURN)
    result = payload.get("result")
    if not isinstance(extras, Mapping) and not _holds_files(result):
        return result
    data = {"return_value": result, **(extras if isinstance(extras, Mapping) else {})}
    restored = _TOOL_RETURN.validate_python(data)
    return restored if isinstance(extras, Mapping) else restored.return_value


def _has_files(value: Any) -> bool:
    """Whether pydantic-ai would send `value` (or an item of it) to the model as a file."""
    if isinstance(value, _FILES):
        return True
    return isinstance(value, list | tuple) and any(isinstance(item, _FILES) for item in value)


def _holds_files(result: Any) -> bool:
    """Whether a stored result holds a file in pydantic-ai's JSON form (`kind` names a file part)."""
    if isinstance(result, dict):
        return result.get("kind") in _FILE_KINDS
    return isinstance(result, list) and any(
        isinstance(item, dict) and item.get("kind") in _FILE_KINDS for item in result
    )


def with_note(result: Any, note: str) -> ToolReturn[Any]:
    """`result` with a note sent to the model beside it (before any content it already carries)."""
    if not isinstance(result, ToolReturn):
        return ToolReturn(return_value=result, content=note)
    content = result.content
    before = [content] if isinstance(content, str) else list(content or [])
    return ToolReturn(
        return_value=result.return_value,
        content=[note, *before],
        metadata=result.metadata,
        tools=result.tools,
    )


def failure_message(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, default=str)


def failure_text(payload: Mapping[str, Any]) -> str:
    """A failure as an adopted agent's model reads it: pydantic-ai puts it in `{"error": ...}`
    itself, so it is plain text (`ToolTransientError MCP_SERVER_UNAVAILABLE: ...`), not JSON."""
    error = payload.get("error")
    if not isinstance(error, Mapping):
        return str(error)
    return f"{error.get('class')} {error.get('code')}: {error.get('message')}"


def told(payload: Any, *, raw: bool = False) -> Any:
    """What the model is told of an outcome: the `{"ok": ...}` envelope (a failure is a
    `ToolFailed` either way), or, for an adopted agent (`raw`), a success as its tool returned it,
    with an operator's edit of the arguments told beside it."""
    if not raw:
        return _enveloped(payload)
    if isinstance(payload, dict) and payload.get("ok") is False:
        raise ToolFailed(failure_text(payload))
    if not (isinstance(payload, dict) and payload.get("ok") is True):
        return _enveloped(payload)
    result = shown_result(payload)
    edited = payload.get(EDITED_NOTE)
    if edited is None:
        return result
    ran_with = json.dumps(edited, default=str)
    note = f"An operator edited this call's arguments before it ran; it ran with {ran_with}."
    return with_note(result, note)


def _enveloped(payload: Any) -> Any:
    if isinstance(payload, dict) and payload.get("ok") is False:
        raise ToolFailed(failure_message(payload))
    return payload
