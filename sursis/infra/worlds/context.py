"""Everything of the worlds context the composition root wires, built from a unit-of-work factory.

The worlds API (`service`) is always there; the World Agent's parts (its definition, rule corpus,
sandbox, memory and runner) are imported and built at first use, so a process that serves neither
the World Agent nor the ops agent that asks it does not carry them.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from pydantic_ai import RunContext

from sursis.domain.clock import Clock
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.worlds.service import WorldService

if TYPE_CHECKING:
    from sursis.infra.runner import AgentRunner
    from sursis.infra.worlds.corpus import RuleCorpus
    from sursis.infra.worlds.memory import MemoryGateway
    from sursis.infra.worlds.runner import InProcessWorldAgentRunner
    from sursis.infra.worlds.sandbox import SandboxLimits


class WorldsContext:
    """The worlds context's parts (a plain class: the container is a dataclass that Litestar
    inspects, and an agent definition's pydantic-ai types are not meant for that)."""

    def __init__(
        self,
        uow: SqlUnitOfWorkFactory,
        clock: Clock,
        *,
        lease: timedelta = timedelta(seconds=30),
        limits: SandboxLimits | None = None,
    ) -> None:
        self.service = WorldService(uow, clock)
        self._uow = uow
        self._clock = clock
        self._lease = lease
        self._limits = limits
        self._agent_runner: AgentRunner | None = None

    def bind(self, runner: AgentRunner) -> None:
        """The agent runner is built after the agents (it needs their definitions): bound at
        composition, handed to the World Agent's runner whenever that is built."""
        self._agent_runner = runner
        if "runner" in self.__dict__:
            self.runner.bind(runner)

    @cached_property
    def corpus(self) -> RuleCorpus:
        from sursis.infra.worlds.corpus import RuleCorpus

        return RuleCorpus(self._uow, self._clock, self._limits)

    @cached_property
    def memory(self) -> MemoryGateway:
        from sursis.infra.worlds.memory import MemoryGateway

        return MemoryGateway(self._uow, self._clock)

    @cached_property
    def runner(self) -> InProcessWorldAgentRunner:
        from sursis.infra.worlds.runner import InProcessWorldAgentRunner

        runner = InProcessWorldAgentRunner(self._uow, self._clock, self._lease)
        if self._agent_runner is not None:
            runner.bind(self._agent_runner)
        return runner

    @cached_property
    def definition(self) -> AgentDefinition:
        from sursis.infra.worlds.agent import world_agent

        return world_agent(self._uow, self.corpus, self.memory)

    def workspace_memory_tools(self) -> list[DeclaredTool]:
        """`remember`/`recall` for an agent outside any world (keyed to its workspace), same gateway."""
        from sursis.infra.worlds.memory_tools import memory_tools

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
    return WorldsContext(uow, clock, lease=lease, limits=limits)
