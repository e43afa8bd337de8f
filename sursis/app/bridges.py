"""Calls between contexts, composed here: the ops agent asks a World Agent through its protocol."""

from __future__ import annotations

import uuid

from sursis.domain.errors import ToolUserError
from sursis.domain.worlds.ports import Caller, WorldAgentRunner
from sursis.infra.agents.ops import AskWorld
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.worlds.runner import WorldBusy, WorldNotFound


def ask_world_bridge(worlds: WorldAgentRunner) -> AskWorld:
    """The ops agent's `ask_world_agent`, over `WorldAgentRunner.ask` (stateless)."""

    async def ask(deps: RunDeps, world_id: str, question: str) -> str:
        try:
            world = uuid.UUID(world_id)
        except ValueError:
            raise ToolUserError(f"world_id {world_id!r} is not a UUID") from None
        caller = Caller(
            workspace=deps.workspace,
            conversation_id=deps.conversation_id,
            run_id=deps.run_id,
            agent=deps.agent_name,
        )
        try:
            return await worlds.ask(question, world_id=world, caller=caller)
        except (WorldNotFound, WorldBusy) as exc:
            raise ToolUserError(str(exc)) from None

    return ask
