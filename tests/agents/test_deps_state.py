"""The state in an adopted agent's deps (pydantic-ai's `StateDeps[...]`) survives an approval: what
the tools put in it before the gated call is there for the resumed segment, whose deps the factory
builds again, in another `Service` over the same database too; stored sealed. On SQLite and
PostgreSQL."""

from __future__ import annotations

import base64
import os
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.ui import StateDeps
from sqlalchemy.ext.asyncio import create_async_engine

from sursis import Service, adopt
from sursis.testing import ScriptedModel, expect_pending, settle

KEYS = f"k1:{base64.b64encode(os.urandom(32)).decode()}"


class Frames(BaseModel):
    """What a data analyst agent keeps between its tools: the frames it loaded, as `Out[n]`."""

    loaded: list[str] = []


def analyst(built: list[int]) -> Any:
    agent: Agent[StateDeps[Frames], str] = Agent(name="analyst", deps_type=StateDeps[Frames])

    @agent.tool
    def load(ctx: RunContext[StateDeps[Frames]], table: str) -> str:
        """Load a table."""
        ctx.deps.state.loaded.append(table)
        return f"Out[{len(ctx.deps.state.loaded)}]"

    @agent.tool(requires_approval=True)
    def publish(ctx: RunContext[StateDeps[Frames]], ref: str) -> str:
        """Publish a loaded frame."""
        return f"published {ref} of {ctx.deps.state.loaded}"

    def deps(info: Any) -> StateDeps[Frames]:
        built.append(info.segment)
        return StateDeps(Frames())

    return adopt(agent, deps=deps)


async def test_the_deps_state_survives_an_approval_in_another_service(database_url: str) -> None:
    built: list[int] = []
    model = (
        ScriptedModel().call("load", table="sales").call("load", table="costs").call("publish", ref="Out[2]")
    )
    model.text("Published.")
    definition = analyst(built)
    async with Service.open(
        database_url, agents=[definition], model=model.model, encryption_keys=KEYS
    ) as svc:
        conversation = await svc.start_conversation("analyst")
        run = await svc.send(conversation.id, "publish the costs")
        [asked] = await expect_pending(svc, tool_name="publish")
    async with Service.open(
        database_url, agents=[definition], model=model.model, encryption_keys=KEYS
    ) as svc:
        await svc.resolve(asked.correlation_id, "approve")
        view = await settle(svc, run.id)
    assert (view.run.status, view.run.output) == ("completed", "Published.")
    told = [
        str(part.content)
        for message in model.requests[-1]
        for part in getattr(message, "parts", [])
        if getattr(part, "tool_name", None) == "publish" and part.part_kind == "tool-return"
    ]
    assert told == ["published Out[2] of ['sales', 'costs']"]
    assert len(built) == 2, "the factory built the deps for each segment"
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as connection:
            stored = (
                await connection.execute(
                    sa.text("SELECT deps_state FROM runs WHERE id = :id"), {"id": run.id.hex}
                )
                if database_url.startswith("sqlite")
                else await connection.execute(
                    sa.text("SELECT deps_state FROM runs WHERE id = :id"), {"id": run.id}
                )
            ).scalar_one()
    finally:
        await engine.dispose()
    assert stored is not None and "sales" not in str(stored), "stored sealed"


async def test_without_a_state_nothing_is_kept(database_url: str) -> None:
    agent: Agent[dict[str, Any], str] = Agent(name="plain", deps_type=dict[str, Any])

    @agent.tool(requires_approval=True)
    def act(ctx: RunContext[dict[str, Any]]) -> str:
        """Act."""
        return "done"

    model = ScriptedModel().call("act").text("Done.")
    async with Service.open(
        database_url, agents=[adopt(agent, deps=lambda info: {})], model=model.model
    ) as svc:
        conversation = await svc.start_conversation("plain")
        run = await svc.send(conversation.id, "act")
        [asked] = await expect_pending(svc, tool_name="act")
        await svc.resolve(asked.correlation_id, "approve")
        view = await settle(svc, run.id)
        async with svc.container.uow.reader() as uow:
            stored = await uow.runs.deps_state(run.id)
    assert (view.run.status, stored) == ("completed", None)
