"""`remember` and `recall`: the memory tools every agent gets, all writing through the gateway."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable

from pydantic_ai import RunContext, Tool
from pydantic_ai.messages import ModelRequest, ToolReturnPart
from pydantic_ai.tools import ToolDefinition

from sursis.domain.errors import ToolPolicyError, ToolUserError
from sursis.domain.tools import Category, ToolSpec
from sursis.domain.worlds.memory import MemoryKind, MemoryRefused, MemoryTier
from sursis.infra.agents.declarations import DeclaredTool
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.worlds.memory import MemoryGateway, MemoryScope

WorldOf = Callable[[RunContext[RunDeps]], Awaitable[uuid.UUID | None]]
"""The world a run's memory is keyed to (None: the agent's workspace memory)."""
Prepare = Callable[[RunContext[RunDeps], ToolDefinition], Awaitable[ToolDefinition | None]]


def tool_outputs(ctx: RunContext[RunDeps]) -> list[str]:
    """The tool results the model has seen in this run, as text (what a memory must not copy)."""
    outputs: list[str] = []
    for message in ctx.messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    content = part.content
                    outputs.append(content if isinstance(content, str) else json.dumps(content, default=str))
    return outputs


def memory_tools(
    gateway: MemoryGateway, world_of: WorldOf, prepare: Prepare | None = None
) -> list[DeclaredTool]:
    async def scope(ctx: RunContext[RunDeps]) -> MemoryScope:
        deps = ctx.deps
        return MemoryScope(
            deps.workspace, deps.agent_name, await world_of(ctx), deps.conversation_id, deps.run_id
        )

    async def remember(
        ctx: RunContext[RunDeps],
        text: str,
        tier: MemoryTier = MemoryTier.SESSION,
        kind: MemoryKind = MemoryKind.OBSERVATION,
    ) -> dict[str, str]:
        """Remember meta-knowledge: what you learned about the work, never rule content or tool output.

        Args:
            text: The note, in your own words (no personal data, no secrets, no copied tool output).
            tier: `interaction` (this run), `session` (this conversation) or `persistent` (this world).
            kind: `observation`, `pattern`, `preference` or `exploration`.
        """
        try:
            return await gateway.remember(await scope(ctx), text, tier, kind, tool_outputs(ctx))
        except MemoryRefused as exc:
            raise ToolPolicyError(exc.message, code=exc.code) from None

    async def recall(ctx: RunContext[RunDeps], query: str, limit: int = 10) -> list[dict[str, object]]:
        """Recall remembered notes that resemble the query (this run, this conversation, the world).

        Args:
            query: A few words of what you are looking for.
            limit: At most this many notes (1-50).
        """
        if not 1 <= limit <= 50:
            raise ToolUserError("limit must be between 1 and 50")
        if not query.strip():
            raise ToolUserError("query is empty")
        return list(await gateway.recall(await scope(ctx), query, limit))

    def declare(function: Callable[..., object], spec: ToolSpec) -> DeclaredTool:
        declared = DeclaredTool.declare(function, spec)
        if prepare is None:
            return declared
        return DeclaredTool(spec=spec, tool=Tool(function, name=spec.name, max_retries=2, prepare=prepare))

    return [
        declare(remember, ToolSpec("remember", category=Category.SUGGEST)),
        declare(recall, ToolSpec("recall")),
    ]
