"""The `customer` agent: a supervisor with no domain tools that delegates to specialists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic_ai import RunContext

from sursis.domain.customer.intake import CUSTOMER_AGENT
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.customer.delegation import MAX_DELEGATIONS_PER_TURN, Delegations
from sursis.infra.customer.specialists import SPECIALISTS, specialist_definitions
from sursis.infra.db.uow import SqlUnitOfWorkFactory

INSTRUCTIONS = f"""You are the customer-facing assistant of an evaluation platform. You have no data
of your own: consult specialists with `delegate` and answer from their findings.
- scan-analyst: scan verdicts, scores per rubric, what changed.
- onboarding-guide: onboarding steps and getting traces ingested.
- framework-advisor: the evaluation framework configuration and rubrics; proposes changes.
- troubleshooter: failing scans, anomalies, workspace errors; may re-run a scan.
Consult at most {MAX_DELEGATIONS_PER_TURN} specialists per turn, then write one reply."""

SpecialistName = Literal["scan-analyst", "onboarding-guide", "framework-advisor", "troubleshooter"]


def customer_agents(
    uow: SqlUnitOfWorkFactory, specialists: Sequence[AgentDefinition] = ()
) -> list[AgentDefinition]:
    """The supervisor and its four specialists (the specialists are reached only through it).

    `specialists` are further agents it may consult (adopted ones, `adopt(..., supervisor="customer")`),
    named in its instructions with their descriptions; they are served beside it by the caller."""
    extra = tuple(d.name for d in specialists)
    delegations = Delegations(uow, CUSTOMER_AGENT, (*SPECIALISTS, *extra))

    async def delegate(ctx: RunContext[RunDeps], specialist: SpecialistName, task: str) -> dict[str, Any]:
        """Ask a specialist to do a task and return its findings.

        Args:
            specialist: `scan-analyst`, `onboarding-guide`, `framework-advisor` or `troubleshooter`,
                or another specialist your instructions name.
            task: What the specialist should find out or do, with the ids it needs.
        """
        return await delegations.delegate(ctx, specialist, task)

    instructions = INSTRUCTIONS
    if specialists:
        delegate.__annotations__["specialist"] = Literal[(*SPECIALISTS, *extra)]
        more = "\n".join(f"- {d.name}: {_described(d)}" for d in specialists)
        instructions = f"{INSTRUCTIONS}\nFurther specialists you may consult:\n{more}"
    supervisor = AgentDefinition(
        name=CUSTOMER_AGENT,
        instructions=instructions,
        tools=(DeclaredTool.declare(delegate, ToolSpec("delegate")),),
    )
    return [supervisor, *specialist_definitions(uow)]


def _described(definition: AgentDefinition) -> str:
    adopted = definition.adopted
    return (adopted.description if adopted is not None else None) or definition.instructions or "a specialist"
