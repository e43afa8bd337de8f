"""Everything of the worlds context the composition root wires, built once from a unit-of-work factory."""

from __future__ import annotations

import uuid
from datetime import timedelta

from pydantic_ai import RunContext

from sursis.domain.clock import Clock
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.worlds.agent import world_agent
from sursis.infra.worlds.corpus import RuleCorpus
from sursis.infra.worlds.memory import MemoryGateway
from sursis.infra.worlds.memory_tools import memory_tools
from sursis.infra.worlds.runner import InProcessWorldAgentRunner
from sursis.infra.worlds.sandbox import SandboxLimits
from sursis.infra.worlds.service import WorldService


class WorldsContext:
    """The worlds context's parts (a plain class: the container is a dataclass that Litestar
    inspects, and an agent definition's pydantic-ai types are not meant for that)."""

    def __init__(
        self,
        service: WorldService,
        corpus: RuleCorpus,
        memory: MemoryGateway,
        runner: InProcessWorldAgentRunner,
        definition: AgentDefinition,
    ) -> None:
        self.service = service
        self.corpus = corpus
        self.memory = memory
        self.runner = runner
        self.definition = definition

    def workspace_memory_tools(self) -> list[DeclaredTool]:
        """`remember`/`recall` for an agent outside any world (keyed to its workspace), same gateway."""

        async def no_world(_: RunContext[RunDeps]) -> uuid.UUID | None:
            return None

        return memory_tools(self.memory, no_world)


def build_worlds(
    uow: SqlUnitOfWorkFactory,
    clock: Clock,
    *,
    lease: timedelta = timedelta(seconds=30),
    limits: SandboxLimits | None = None,
) -> WorldsContext:
    corpus = RuleCorpus(uow, clock, limits)
    memory = MemoryGateway(uow, clock)
    return WorldsContext(
        service=WorldService(uow, clock),
        corpus=corpus,
        memory=memory,
        runner=InProcessWorldAgentRunner(uow, clock, lease),
        definition=world_agent(uow, corpus, memory),
    )
