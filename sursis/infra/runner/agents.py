"""The pydantic-ai agents the runner drives, built from the declared definitions or adopted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog
from pydantic_ai import Agent
from pydantic_ai.agent import AbstractAgent, WrapperAgent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.native_tools import SUPPORTED_NATIVE_TOOLS, AbstractNativeTool
from pydantic_ai.tools import DeferredToolRequests, RunContext

from sursis.domain.tools import ContextRetention, Executor
from sursis.infra.agents.adopted_output import deferring, with_deferred
from sursis.infra.agents.agent_deps import DepsFactory
from sursis.infra.agents.declarations import AgentDefinition, DeclaredProviderTool
from sursis.infra.agents.metered import metered
from sursis.infra.agents.observed import ObservedTools
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.history import shown_to_model
from sursis.infra.telemetry import Telemetry

log = structlog.get_logger("sursis.runner")


@dataclass(frozen=True, slots=True)
class ServedAgent:
    """A pydantic-ai agent as the runner drives it; `iter_options` go with each `agent.iter(...)`."""

    agent: AbstractAgent[RunDeps, Any]
    iter_options: Mapping[str, Any] = field(default_factory=dict)
    deps: DepsFactory | None = None
    """The adopted agent's own deps factory; None: its tools get the segment's `RunDeps`."""
    streams: bool = True
    """Whether its model answers streamed requests; otherwise each response is asked for whole."""
    raw_results: bool = False
    """Whether the model is shown its tools' results as pydantic-ai would show them (an adopted
    agent) rather than in the `{"ok": ...}` envelope of the built-in agents."""

    def runnable(self, before: Callable[[], Awaitable[None]] | None = None) -> AbstractAgent[RunDeps, Any]:
        """The agent as another agent's tool runs it (`agent.run(...)`): with the options a segment
        gives it, after `before` (connecting its MCP servers)."""
        if not self.iter_options and before is None:
            return self.agent
        return _WithOptions(self.agent, self.iter_options, before)


def streams(model: Model) -> bool:
    """Whether `model` serves streamed requests: a `FunctionModel` needs a stream function, and a
    model class that does not override `request_stream` has none."""
    while isinstance(model, WrapperModel):
        model = model.wrapped
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    return type(model).request_stream is not Model.request_stream


class _WithOptions(WrapperAgent[RunDeps, Any]):
    def __init__(
        self,
        wrapped: AbstractAgent[RunDeps, Any],
        options: Mapping[str, Any],
        before: Callable[[], Awaitable[None]] | None,
    ) -> None:
        super().__init__(wrapped)
        self._options = dict(options)
        self._before = before

    @asynccontextmanager
    async def iter(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if self._before is not None:
            await self._before()
        given = {**kwargs, **{k: v for k, v in self._options.items() if kwargs.get(k) is None}}
        async with self.wrapped.iter(*args, **given) as run:
            yield run


def serve_agent(definition: AgentDefinition, model: Model, telemetry: Telemetry | None = None) -> ServedAgent:
    """A declared definition becomes a new agent; an adopted one is driven as it is, each run given
    the service's model choice and the tool wrapper, with `DeferredToolRequests` as a further output
    of the agent itself (`adopted_output.deferring`), not of each run."""
    adopted = definition.adopted
    if adopted is None:
        return ServedAgent(build_agent(definition, model, telemetry), streams=streams(model))
    agent, per_run = deferring(adopted, definition.name)
    options: dict[str, Any] = {
        "model": _metered(model, telemetry),
        "capabilities": _capabilities(definition, telemetry, raw_results=True),
    }
    if per_run:
        options["output_type"] = with_deferred(adopted.output_type)
    return ServedAgent(
        agent,
        options,
        deps=definition.deps,
        streams=streams(model),
        raw_results=True,
    )


def _metered(model: Model, telemetry: Telemetry | None) -> Model:
    """`model` recording pydantic-ai's per-request metrics where its agents run without pydantic-ai's
    instrumentation capability (no span is recorded); as it is otherwise."""
    settings = telemetry.model_metrics() if telemetry is not None else None
    return model if settings is None else metered(model, settings)


def _capabilities(
    definition: AgentDefinition,
    telemetry: Telemetry | None,
    *,
    raw_results: bool = False,
    native: Sequence[AbstractNativeTool] = (),
    retention: Mapping[str, ContextRetention] | None = None,
) -> list[AbstractCapability[RunDeps]]:
    """pydantic-ai's instrumentation (where spans are recorded; otherwise the model is `_metered`),
    then Sursis's own part as one capability: pydantic-ai copies the run context for
    each capability at each hook of every step (about 950 Python calls a turn for a capability that
    does nothing), so the tool wrapper, the provider tools and the context retention are not three
    capabilities but one."""
    telemetry = telemetry or Telemetry.disabled()
    observed = _AgentTools(
        {d.spec.name: d.spec for d in definition.tools},
        telemetry.metrics,
        discovered=definition.run_time if definition.run_time is not None else definition.mcp,
        raw_results=raw_results,
        once=at_most_once_tools(definition),
        native=native,
        retention=retention or {},
    )
    instrumentation = telemetry.agent_instrumentation()
    return [observed] if instrumentation is None else [instrumentation, observed]


class _AgentTools(ObservedTools):
    """`ObservedTools` with a declared agent's provider tools (pydantic-ai's `NativeTool` would be
    a capability each) and its tools' context retention, applied to every model request of a run
    (the first one of a segment and those after each batch of tool results alike), in the request
    only: the run's messages, and so what is stored, keep the results."""

    def __init__(
        self,
        *args: Any,
        native: Sequence[AbstractNativeTool],
        retention: Mapping[str, ContextRetention],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.native = tuple(native)
        self.retention = dict(retention)

    def get_native_tools(self) -> Sequence[AbstractNativeTool]:
        return self.native

    async def before_model_request(
        self, ctx: RunContext[RunDeps], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        if self.retention:
            request_context.messages = shown_to_model(request_context.messages, self.retention)
        return request_context


def at_most_once_tools(definition: AgentDefinition) -> frozenset[str]:
    """An adopted agent's tools that run at most once per call (`at_most_once`): those run by the
    service that nobody declared `read` or idempotent (an uncategorised tool included). A built-in
    tool records its outcome with its effect (`record_effect`), so it is not among them."""
    if definition.adopted is None:
        return frozenset()
    return frozenset(
        d.spec.name for d in definition.tools if d.spec.executor is Executor.SERVER and not d.may_repeat
    )


def may_repeat_tools(definition: AgentDefinition) -> list[str]:
    """An adopted agent's function tools that are run again after a crash (declared `read` or
    idempotent), as `agent/tool`: what the start-up banner lists."""
    if definition.adopted is None:
        return []
    return [f"{definition.name}/{d.spec.name}" for d in definition.tools if d.may_repeat]


def build_agent(
    definition: AgentDefinition, model: Model, telemetry: Telemetry | None = None
) -> Agent[RunDeps, str | DeferredToolRequests]:
    """The pydantic-ai agent of a definition: its tools behind `ObservedTools`, traced by pydantic-ai."""
    capabilities = _capabilities(
        definition,
        telemetry,
        native=[p.native for p in supported_provider_tools(definition, model)],
        retention={d.spec.name: d.spec.context for d in definition.tools if d.spec.context is not None},
    )
    return Agent(
        _metered(model, telemetry),
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
