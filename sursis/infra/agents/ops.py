"""The `ops` reference agent: it operates this service's own outbox and dead letters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic_ai import RunContext

from sursis.domain.errors import ToolTerminalError, ToolUserError
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.tools import Category, Executor, ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.effects import record_effect
from sursis.infra.agents.run_deps import RunDeps

INSTRUCTIONS = """You are the operations agent of the Sursis service. You inspect the dead-letter
queue and failure clusters and propose fixes. Replaying an event or triaging a cluster needs an
operator's approval; explain why you propose it. Ask the operator when you are unsure."""


AskWorld = Callable[[RunDeps, str, str], Awaitable[str]]
"""`(deps, world_id, question) -> answer`: a question to a world's World Agent, injected by the
composition root (this module knows nothing of worlds)."""


def ops_agent(
    uow: UnitOfWorkFactory, *, ask_world: AskWorld | None = None, extra_tools: Sequence[DeclaredTool] = ()
) -> AgentDefinition:
    """Build the `ops` agent's tools over a unit-of-work factory (the closed-over dependency).

    `ask_world` adds the `ask_world_agent` bridge; `extra_tools` are tools composed elsewhere
    (the memory tools).
    """
    bridge = () if ask_world is None else (_world_bridge(ask_world),)
    return AgentDefinition(
        name="ops",
        instructions=INSTRUCTIONS,
        tools=(*_dead_letter_tools(uow), *_cluster_tools(uow), _operator_tool(), *bridge, *extra_tools),
    )


def _dead_letter_tools(uow: UnitOfWorkFactory) -> tuple[DeclaredTool, ...]:
    """Reading the dead-letter queue, and replaying an event (approved)."""

    async def list_dlq_events(
        ctx: RunContext[RunDeps], status: str | None = "dead", limit: int = 20
    ) -> list[Any]:
        """List dead-lettered events of this workspace, newest first.

        Args:
            status: `dead` (not replayed yet), `replayed`, or null for all.
            limit: At most this many events (1-100).
        """
        if not 1 <= limit <= 100:
            raise ToolUserError("limit must be between 1 and 100")
        async with uow() as u:
            return await u.ops.list_dead_letters(ctx.deps.workspace, status, limit)

    async def get_dlq_event_detail(ctx: RunContext[RunDeps], event_id: str) -> dict[str, Any]:
        """Show one dead-lettered event with its payload and last error.

        Args:
            event_id: The id of the dead-lettered event.
        """
        async with uow() as u:
            letter = await u.ops.get_dead_letter(ctx.deps.workspace, event_id)
        if letter is None:
            raise ToolUserError(f"no dead-lettered event {event_id!r}")
        return letter

    async def replay_dlq_event(ctx: RunContext[RunDeps], event_id: str, reason: str) -> dict[str, Any]:
        """Put a dead-lettered event back on the outbox for delivery.

        Args:
            event_id: The id of the dead-lettered event.
            reason: Why replaying it should now succeed.
        """
        async with uow() as u:
            try:
                result = await u.ops.replay_dead_letter(
                    ctx.deps.workspace, event_id, reason, ctx.deps.clock()
                )
            except LookupError:
                raise ToolUserError(f"no dead-lettered event {event_id!r}") from None
            await record_effect(u, ctx, "replay_dlq_event", result)
            await u.commit()
        return result

    return (
        DeclaredTool.declare(list_dlq_events, ToolSpec("list_dlq_events")),
        DeclaredTool.declare(get_dlq_event_detail, ToolSpec("get_dlq_event_detail")),
        DeclaredTool.declare(
            replay_dlq_event,
            ToolSpec("replay_dlq_event", category=Category.MUTATE, effect="Replay DLQ event {event_id}"),
        ),
    )


def _cluster_tools(uow: UnitOfWorkFactory) -> tuple[DeclaredTool, ...]:
    """Reading failure clusters, and triaging one (approved)."""

    async def list_failure_clusters(ctx: RunContext[RunDeps], status: str | None = None) -> list[Any]:
        """List groups of dead letters that failed for the same reason.

        Args:
            status: Filter by `open`, `dismissed`, `escalate` or `wait`; null for all.
        """
        async with uow() as u:
            return await u.ops.list_clusters(ctx.deps.workspace, status)

    async def get_cluster_detail(ctx: RunContext[RunDeps], cluster_id: str) -> dict[str, Any]:
        """Show one failure cluster with its recent events.

        Args:
            cluster_id: The cluster's id.
        """
        async with uow() as u:
            cluster = await u.ops.get_cluster(ctx.deps.workspace, cluster_id)
        if cluster is None:
            raise ToolUserError(f"no failure cluster {cluster_id!r}")
        return cluster

    async def triage_cluster(
        ctx: RunContext[RunDeps],
        cluster_id: str,
        status: Literal["dismissed", "escalate", "wait"],
        notes: str,
    ) -> dict[str, Any]:
        """Record a triage decision on a failure cluster.

        Args:
            cluster_id: The cluster's id.
            status: `dismissed`, `escalate` or `wait`.
            notes: Why.
        """
        async with uow() as u:
            try:
                result = await u.ops.triage_cluster(
                    ctx.deps.workspace, cluster_id, status, notes, ctx.deps.clock()
                )
            except LookupError:
                raise ToolUserError(f"no failure cluster {cluster_id!r}") from None
            await record_effect(u, ctx, "triage_cluster", result)
            await u.commit()
        return result

    return (
        DeclaredTool.declare(list_failure_clusters, ToolSpec("list_failure_clusters")),
        DeclaredTool.declare(get_cluster_detail, ToolSpec("get_cluster_detail")),
        DeclaredTool.declare(
            triage_cluster,
            ToolSpec(
                "triage_cluster",
                category=Category.MUTATE,
                effect="Mark failure cluster {cluster_id} as {status}",
            ),
        ),
    )


def _operator_tool() -> DeclaredTool:
    """A question to the operator, answered by a person."""

    async def ask_operator(question: str) -> str:
        """Ask the human operator a question; their answer is the result.

        Args:
            question: What you need to know.
        """
        raise ToolTerminalError("ask_operator is answered by a person, never run by the service")

    return DeclaredTool.declare(
        ask_operator,
        ToolSpec(
            "ask_operator",
            executor=Executor.HUMAN,
            category=Category.SUGGEST,
            effect="Ask: {question}",
        ),
    )


def _world_bridge(ask_world: AskWorld) -> DeclaredTool:
    """A question to a world's World Agent."""

    async def ask_world_agent(ctx: RunContext[RunDeps], world_id: str, question: str) -> dict[str, str]:
        """Ask the World Agent of one of this workspace's worlds; it answers from the world's rules.

        Args:
            world_id: The world's id.
            question: What you want to know.
        """
        if not question.strip():
            raise ToolUserError("question is empty")
        return {"world_id": world_id, "answer": await ask_world(ctx.deps, world_id, question)}

    return DeclaredTool.declare(
        ask_world_agent,
        ToolSpec("ask_world_agent", category=Category.SUGGEST, effect="Ask world {world_id}: {question}"),
    )
