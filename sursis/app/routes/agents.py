"""`GET /v1/agents`: the agent catalog."""

from __future__ import annotations

from litestar import get
from litestar.di import NamedDependency

from sursis.app.routes.provide import services
from sursis.app.schemas.agents import AgentOut, agent_out
from sursis.domain.agents.agents import AgentCatalogService
from sursis.domain.records import Principal


@get("/v1/agents", tags=["agents"], dependencies=services("agents"))
async def list_agents(
    agents: NamedDependency[AgentCatalogService], principal: NamedDependency[Principal]
) -> list[AgentOut]:
    """The agents the key may start conversations with, each with its tools: what each does, its
    category (read, suggest, mutate), who executes it, whether it waits for an approval and how long
    its calls wait by default. A key that may not converse (a `system` key) gets 403."""
    return [agent_out(agent, tools) for agent, tools in await agents.list_agents(principal)]
