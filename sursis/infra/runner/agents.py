"""The pydantic-ai agents the runner drives, built from the declared definitions."""

from __future__ import annotations

import structlog
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, NativeTool
from pydantic_ai.models import Model
from pydantic_ai.native_tools import SUPPORTED_NATIVE_TOOLS
from pydantic_ai.tools import DeferredToolRequests

from sursis.infra.agents.declarations import AgentDefinition, DeclaredProviderTool
from sursis.infra.agents.observed import (
    ObservedTools,
    RunDeps,
)
from sursis.infra.history import ContextRetentionView
from sursis.infra.telemetry import Telemetry

log = structlog.get_logger("sursis.runner")


def build_agent(
    definition: AgentDefinition, model: Model, telemetry: Telemetry | None = None
) -> Agent[RunDeps, str | DeferredToolRequests]:
    """The pydantic-ai agent of a definition: its tools behind `ObservedTools`, traced by pydantic-ai."""
    telemetry = telemetry or Telemetry.disabled()
    observed = ObservedTools({d.spec.name: d.spec for d in definition.tools}, telemetry.metrics)
    instrumentation = telemetry.agent_instrumentation()
    capabilities: list[AbstractCapability[RunDeps]] = (
        [observed] if instrumentation is None else [instrumentation, observed]
    )
    capabilities += [NativeTool(p.native) for p in supported_provider_tools(definition, model)]
    retention = {d.spec.name: d.spec.context for d in definition.tools if d.spec.context is not None}
    if retention:
        capabilities.append(ContextRetentionView(retention))
    return Agent(
        model,
        name=definition.name,
        instructions=definition.instructions,
        deps_type=RunDeps,
        output_type=[str, DeferredToolRequests],
        tools=[declared.tool for declared in definition.tools],
        capabilities=capabilities,
    )


def supported_provider_tools(definition: AgentDefinition, model: Model) -> list[DeclaredProviderTool]:
    """The agent's provider tools this model can host; the others are left out, with a warning."""
    supported = tuple(model.profile.get("supported_native_tools", SUPPORTED_NATIVE_TOOLS))
    kept = []
    for provided in definition.provider_tools:
        if isinstance(provided.native, supported):
            kept.append(provided)
        else:
            log.warning(
                "agent.provider_tool_unsupported",
                agent=definition.name,
                tool_name=provided.spec.name,
                model=model.model_name,
            )
    return kept
