"""The protocol other contexts reach the World Agent through (owned here, the callee)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks: the calling agent's conversation and run, and the workspace it acts in."""

    workspace: str
    conversation_id: uuid.UUID | None = None
    run_id: uuid.UUID | None = None
    agent: str | None = None


class WorldAgentRunner(Protocol):
    """Ask the World Agent of a world a question (`ask`, stateless) or talk to it (`chat`).

    The world must belong to the caller's workspace; otherwise it does not exist for the caller.
    """

    async def ask(self, question: str, *, world_id: uuid.UUID, caller: Caller) -> str: ...

    async def chat(
        self, message: str, *, session_id: uuid.UUID, world_id: uuid.UUID, caller: Caller
    ) -> str: ...
