"""`ScriptedModel`: a model whose turns a test declares, in order, before the agent runs."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ModelResponsePart, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel

from sursis.infra.agents.scripted import scripted_turn, stream_response

_models = itertools.count(1)


class ScriptedModel:
    """Each model request takes the next declared turn: a text answer, one tool call, or several
    tool calls at once (parallel calls). With no turn left it answers in text, quoting the tool
    results it has seen since its last call (`RESULTS: [...]`) or echoing the prompt.

    Turns are shared by every run of the service the model is given to, in request order.
    """

    def __init__(self) -> None:
        self._turns: list[list[ModelResponsePart]] = []
        self._taken = 0
        self._prefix = f"scripted{next(_models)}"
        self.requests: list[list[ModelMessage]] = []
        """The messages of every request the model answered, in order."""
        self.model = FunctionModel(self._respond, stream_function=self._stream, model_name="scripted")
        """The pydantic-ai model to pass as `Service.open(..., model=...)`."""

    def text(self, content: str) -> ScriptedModel:
        """A turn answering `content`, which ends the run."""
        self._turns.append([TextPart(content)])
        return self

    def call(self, tool: str, /, **args: Any) -> ScriptedModel:
        """A turn calling one tool with `args`."""
        return self.calls((tool, args))

    def calls(self, *calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
        """A turn calling several tools at once: `calls(("a", {...}), ("b", {...}))`."""
        if not calls:
            raise ValueError("a turn of tool calls needs at least one call")
        turn = len(self._turns)
        self._turns.append(
            [
                ToolCallPart(name, dict(args), tool_call_id=f"{self._prefix}_{turn}_{i}")
                for i, (name, args) in enumerate(calls)
            ]
        )
        return self

    @property
    def remaining(self) -> int:
        """Declared turns not taken yet."""
        return len(self._turns) - self._taken

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        if self._taken < len(self._turns):
            parts = self._turns[self._taken]
            self._taken += 1
            return ModelResponse(parts=list(parts))
        return scripted_turn(messages, info)

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        async for delta in stream_response(self._respond(messages, info)):
            yield delta
