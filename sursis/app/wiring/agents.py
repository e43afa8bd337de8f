"""The agents: the built-in ones the settings name (and those loaded by name or entry point), each
with its model, declared once in the tool catalog (illegal declarations raise here, at start-up),
with the MCP servers' pins and what the API tells of them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from pydantic_ai.models import Model

from sursis.app.agent_loading import BUILT_IN, check_no_clash, select_agents
from sursis.app.context_settings import AgentSettings
from sursis.app.wiring import INNER
from sursis.app.wiring.storage import StorageParts
from sursis.app.wiring.worlds import WorldParts
from sursis.domain.agents.agents import AgentCatalogService
from sursis.domain.agents.mcp_pins import McpPinService
from sursis.domain.clock import utcnow
from sursis.infra.agents.assistant import assistant_agent
from sursis.infra.agents.declarations import AgentDefinition, DeclaredToolCatalog
from sursis.infra.agents.models import BuiltModels
from sursis.infra.agents.ops import ops_agent
from sursis.infra.db.mcp_pins import SqlMcpPinStore
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.runner import Timeouts
from sursis.infra.worlds.context import WorldsContext, build_worlds

AgentsFactory = Callable[[SqlUnitOfWorkFactory], Mapping[str, AgentDefinition]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentParts:
    catalog: DeclaredToolCatalog
    agents: AgentCatalogService
    mcp_pins: McpPinService
    definitions: Mapping[str, AgentDefinition] = field(metadata=INNER)
    """Every served agent by name, each with its model."""
    model: Model = field(metadata=INNER)
    """The service's model (`SURSIS_MODEL`, or the one given to the root)."""
    models: BuiltModels
    """The models built from names, the agents' and the reviewers' (closed with the service)."""
    timeouts: Timeouts = field(metadata=INNER)


def timeouts_from(settings: AgentSettings) -> Timeouts:
    """How long each kind of suspension may wait."""
    return Timeouts(
        approval=timedelta(seconds=settings.approval_timeout_seconds),
        elicitation=timedelta(seconds=settings.elicitation_timeout_seconds),
        client_exec=timedelta(seconds=settings.client_exec_timeout_seconds),
    )


def wire_agents(
    settings: AgentSettings,
    storage: StorageParts,
    worlds: WorldParts,
    *,
    agents: AgentsFactory | None = None,
    extra: Sequence[AgentDefinition] = (),
    model: Model | None = None,
) -> AgentParts:
    """The agents `settings.agents` selects, or those `agents` makes (tests), with `extra` beside
    them; `model` stands in for every agent's model."""
    uow = storage.uow
    if agents is not None:
        built = agents(uow)
    else:
        selection = select_agents(settings.agents)
        built = agent_definitions(uow, worlds.worlds, selection.built_in, selection.definitions)
        check_no_clash(built, selection.definitions)
        extra = (*selection.definitions, *extra)
    models = ModelChoice(settings, model)
    definitions = {name: models.for_agent(d) for name, d in {**built, **{d.name: d for d in extra}}.items()}
    catalog = DeclaredToolCatalog(definitions.values())
    pins = SqlMcpPinStore(uow)
    catalog.use_pins(pins)
    timeouts = timeouts_from(settings)
    return AgentParts(
        catalog=catalog,
        agents=AgentCatalogService(catalog, timeouts.as_mapping()),
        mcp_pins=McpPinService(pins, clock=utcnow),
        definitions=definitions,
        model=models.default(),
        models=models.built,
        timeouts=timeouts,
    )


def agent_definitions(
    uow: SqlUnitOfWorkFactory,
    worlds: WorldsContext | None = None,
    groups: Iterable[str] = BUILT_IN,
    loaded: Iterable[AgentDefinition] = (),
) -> dict[str, AgentDefinition]:
    """The built-in agents of the named groups (`ops` comes with the World Agent it asks); the
    customer supervisor may consult the `loaded` agents adopted with `supervisor="customer"`.
    A group's modules are imported only when it is served."""
    worlds = worlds or build_worlds(uow, utcnow)
    wanted = set(groups)
    definitions: list[AgentDefinition] = []
    if "ops" in wanted:
        from sursis.app.bridges import ask_world_bridge

        definitions.append(
            ops_agent(
                uow, ask_world=ask_world_bridge(worlds.runner), extra_tools=worlds.workspace_memory_tools()
            )
        )
    if "assistant" in wanted:
        definitions.append(assistant_agent(uow))
    if wanted & {"ops", "world"}:
        definitions.append(worlds.definition)
    if "customer" in wanted:
        from sursis.infra.customer.supervisor import customer_agents

        definitions += customer_agents(uow, [d for d in loaded if d.supervisor == "customer"])
    return {d.name: d for d in definitions}


class ModelChoice:
    """Each agent's model: the one it names, else the service's (`SURSIS_MODEL`), each built once
    (`BuiltModels`).

    A `Model` given to the composition root (`override`, e.g. a test's scripted model) stands in
    for every agent's model.
    """

    def __init__(self, settings: AgentSettings, override: Model | None = None) -> None:
        self._settings = settings
        self._override = override
        key = settings.openai_api_key
        self.built = BuiltModels(
            openai_base_url=settings.openai_base_url, openai_api_key=key.get_secret_value() if key else None
        )

    def named(self, name: str) -> Model:
        return self.built.named(name)

    def default(self) -> Model:
        return self._override or self.named(self._settings.model)

    def for_agent(self, definition: AgentDefinition) -> AgentDefinition:
        model = definition.model
        if self._override is not None or model is None:
            return replace(definition, model=self.default())
        return replace(definition, model=self.named(model) if isinstance(model, str) else model)
