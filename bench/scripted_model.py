"""The zero-latency model of every approval-turn bench, with no dependency beyond pydantic-ai, so
the peers that run in venvs of their own (`turn_pgtask.py`, `turn_absurd.py`) share it with the
in-process ones (`turn_agent.py`, `turn_dbos.py`)."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Proposes the gated replay for a user message; answers once the tool's result is in."""
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart("replayed")])
    turn = sum(1 for m in messages if m.kind == "request")
    return ModelResponse(
        parts=[ToolCallPart("replay_dlq_event", {"event_id": "evt_1001", "reason": "bench"}, f"call_{turn}")]
    )
