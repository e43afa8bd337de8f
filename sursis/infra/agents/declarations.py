"""Agents as declared data: tools with their contract, instructions, and the catalog built from them."""

from __future__ import annotations

import asyncio
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import Tool
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models import Model
from pydantic_ai.native_tools import AbstractNativeTool
from pydantic_core import to_jsonable_python

from sursis.domain.agents.agents import AgentInfo, ToolInfo
from sursis.domain.errors import ToolDeclarationError, ValidationFailed
from sursis.domain.tools import Category, Executor, ToolSpec
from sursis.infra.agents.models import model_label

if TYPE_CHECKING:
    from sursis.infra.agents.capability_tools import RunTimeTools
    from sursis.infra.agents.mcp_tools import McpTools
    from sursis.infra.db.mcp_pins import SqlMcpPinStore


@dataclass(frozen=True, slots=True)
class DeclaredTool:
    """One tool: its contract (`spec`) and the pydantic-ai tool made from the function.

    `result` validates what a person or a client sends as the result of a `human` or `client`
    call: answers come from outside the service and are untrusted. It is the function's return
    annotation unless `result_type` says otherwise; a `client` tool must have one.
    """

    spec: ToolSpec
    tool: Tool[Any]
    result: TypeAdapter[Any] | None = None
    idempotent: bool = False
    """Whether the tool keys its effect on the tool call id, so a call may run again after a crash
    (`ToolOptions(idempotent=True)`; see `sursis.infra.agents.at_most_once`)."""
    category_declared: bool = True
    """Whether the tool's category was said by someone (its declaration, `ToolOptions(category=)`,
    or `requires_approval`); an adopted tool nobody categorised is `read` for the policy but is
    still started at most once: nobody said a second run is harmless."""

    @property
    def may_repeat(self) -> bool:
        """Whether a call whose worker died while it ran is run again under the same id: a tool the
        service runs that was declared `read`, or idempotent."""
        if self.spec.executor is not Executor.SERVER:
            return False
        return self.idempotent or (self.spec.category is Category.READ and self.category_declared)

    @classmethod
    def declare(
        cls, function: Callable[..., Any], spec: ToolSpec, *, result_type: Any = None
    ) -> DeclaredTool:
        if spec.executor is Executor.PROVIDER:
            raise ToolDeclarationError(
                f"tool {spec.name!r}: provider tools are hosted by the model provider; "
                "declare them with DeclaredProviderTool"
            )
        result: TypeAdapter[Any] | None = None
        if spec.external_kind() is not None:
            declared = result_type if result_type is not None else _return_annotation(spec.name, function)
            if declared is None or declared is Any:
                if spec.executor is Executor.CLIENT:
                    raise ToolDeclarationError(
                        f"tool {spec.name!r}: a client tool must declare its result type "
                        "(return annotation or result_type=)"
                    )
            else:
                result = TypeAdapter(declared)
        return cls(spec=spec, tool=Tool(function, name=spec.name, max_retries=2), result=result)


def _return_annotation(name: str, function: Callable[..., Any]) -> Any:
    try:
        return typing.get_type_hints(function).get("return")
    except NameError as exc:
        raise ToolDeclarationError(f"tool {name!r}: cannot resolve its return annotation: {exc}") from exc


@dataclass(frozen=True, slots=True)
class DeclaredProviderTool:
    """A tool hosted by the model provider (a pydantic-ai native tool such as web search).

    It is passed to the model untouched and never dispatched here, so it cannot be gated:
    the legal matrix in `ToolSpec` rejects `requires_approval` for it when it is declared.
    """

    spec: ToolSpec
    native: AbstractNativeTool

    @classmethod
    def declare(cls, native: AbstractNativeTool, spec: ToolSpec | None = None) -> DeclaredProviderTool:
        spec = spec if spec is not None else ToolSpec(native.unique_id, executor=Executor.PROVIDER)
        if spec.executor is not Executor.PROVIDER:
            raise ToolDeclarationError(
                f"tool {spec.name!r}: a native tool is declared with executor 'provider'"
            )
        return cls(spec=spec, native=native)


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """An agent the service serves: its instructions and declared tools, or an adopted pydantic-ai
    `Agent` (`adopted`, see `sursis.infra.agents.adopted.adopt`) whose tools are declared here too."""

    name: str
    instructions: str
    tools: tuple[DeclaredTool, ...]
    provider_tools: tuple[DeclaredProviderTool, ...] = field(default=())
    conversational: bool = True
    """False for an agent reached only through another one (a specialist): no conversation
    is created with it directly."""
    model: Model | str | None = None
    """The agent's own model (a pydantic-ai `Model` or model name); None: the service's model
    (`SURSIS_MODEL`)."""
    adopted: AbstractAgent[Any, Any] | None = None
    """A pydantic-ai agent served as it is (instructions, output type, toolsets, model settings);
    `instructions` and `tools` then describe it for the catalog and the tool wrapper."""
    deps: Callable[[Any], Any] | None = None
    """An adopted agent's deps factory (`adopt(agent, deps=...)`, see `agent_deps.RunInfo`); None: its
    tools get the service's `RunDeps` as `ctx.deps`."""
    mcp: McpTools | None = None
    """The adopted agent's MCP servers, whose tools are discovered at run time."""
    supervisor: str | None = None
    """The built-in supervisor that may delegate to this agent (`customer`), if any."""
    run_time: RunTimeTools | None = None
    """An adopted agent's tools found at run time (its MCP servers', those a capability adds to a
    run): see `sursis.infra.agents.capability_tools`."""

    def __post_init__(self) -> None:
        names = [t.spec.name for t in self.tools] + [p.spec.name for p in self.provider_tools]
        if len(names) != len(set(names)):
            raise ToolDeclarationError(f"agent {self.name!r} declares a tool twice")

    def spec(self, tool_name: str) -> ToolSpec | None:
        for declared in self.tools:
            if declared.spec.name == tool_name:
                return declared.spec
        for provided in self.provider_tools:
            if provided.spec.name == tool_name:
                return provided.spec
        spec = self.mcp.spec(tool_name) if self.mcp is not None else None
        if spec is None and self.run_time is not None:
            spec = self.run_time.spec(tool_name)
        return spec

    def run_time_tool(self, tool_name: str) -> bool:
        """Whether `tool_name` can only be a tool an adopted agent finds at run time (its MCP servers'
        or one a capability adds to a run): it declares no such tool itself."""
        return self.adopted is not None and self.declared(tool_name) is None

    def declared(self, tool_name: str) -> DeclaredTool | None:
        return next((d for d in self.tools if d.spec.name == tool_name), None)


def _describe(definition: AgentDefinition) -> AgentInfo:
    model = definition.model
    adopted = definition.adopted
    run_time = definition.run_time
    return AgentInfo(
        name=definition.name,
        description=(adopted.description if adopted is not None else None) or None,
        model=None if model is None else model_label(model),
        tools=(
            *(
                ToolInfo(
                    d.spec, d.tool.description, d.tool.function_schema.json_schema, may_repeat=d.may_repeat
                )
                for d in definition.tools
            ),
            *(ToolInfo(p.spec, None) for p in definition.provider_tools),
            *(
                ToolInfo(
                    t.spec,
                    t.description,
                    t.input_schema,
                    t.annotations,
                    may_repeat=definition.mcp.resends(t.spec) if definition.mcp is not None else False,
                )
                for t in (definition.mcp.tools() if definition.mcp is not None else [])
            ),
            *(ToolInfo(spec, None) for spec in (run_time.specs() if run_time is not None else [])),
        ),
    )


def _field_errors(prefix: str, exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [prefix, *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False)
    ]


class DeclaredToolCatalog:
    """`ToolCatalog` over the declared agents; validates edits and answers with each tool's own schema."""

    def __init__(self, agents: Iterable[AgentDefinition]) -> None:
        self._agents = {a.name: a for a in agents}
        self._discovering: asyncio.Task[None] | None = None

    def agent_names(self) -> list[str]:
        """The agents a conversation may be created with."""
        return sorted(name for name, a in self._agents.items() if a.conversational)

    def describe_agents(self) -> list[AgentInfo]:
        """The conversational agents with their tools, for the catalog (`GET /v1/agents`)."""
        return [_describe(self._agents[name]) for name in self.agent_names()]

    def use_pins(self, pins: SqlMcpPinStore) -> None:
        """Pin what the MCP servers say about their tools in `pins` (the database)."""
        for definition in self._agents.values():
            if definition.mcp is not None:
                definition.mcp.pins = pins

    def serves_mcp(self) -> bool:
        """Whether a served agent has MCP servers."""
        return any(definition.mcp is not None for definition in self._agents.values())

    def unavailable_servers(self) -> list[str]:
        """`agent/server: why` of each MCP server this process cannot reach now."""
        return [
            f"{name}/{server}: {why}"
            for name, definition in sorted(self._agents.items())
            if definition.mcp is not None
            for server, why in sorted(definition.mcp.unavailable().items())
        ]

    async def discover(self) -> None:
        """Connect the adopted agents' MCP servers (once per process) and list their tools."""
        for definition in self._agents.values():
            if definition.mcp is not None:
                await definition.mcp.connect()

    def discover_soon(self, report: Callable[[DeclaredToolCatalog], None] | None = None) -> None:
        """Start discovering the MCP servers' tools in the background (at start-up), so a person who
        decides on an MCP call finds its tool described without waiting for the catalog; `report`
        is called once every server was tried (the start-up banner)."""
        if any(d.mcp is not None for d in self._agents.values()):

            async def discover() -> None:
                await self.discover()
                if report is not None:
                    report(self)

            self._discovering = asyncio.get_running_loop().create_task(discover(), name="mcp discovery")

    async def disconnect(self) -> None:
        """Close the MCP servers' connections this process holds."""
        if self._discovering is not None:
            await asyncio.gather(self._discovering, return_exceptions=True)
        for definition in self._agents.values():
            if definition.mcp is not None:
                await definition.mcp.close()

    def declared_tools(self) -> list[DeclaredTool]:
        """Every function tool of every agent (the policy's Cedar schema is made from them)."""
        return [d for a in self._agents.values() for d in a.tools]

    def gated_tool_names(self) -> list[str]:
        """The tools a pre-approval may name: gated tools of any agent (an MCP tool once listed)."""
        declared = {d.spec.name for a in self._agents.values() for d in a.tools if d.spec.gated}
        return sorted(declared | {t.spec.name for t in self._mcp_tools() if t.spec.gated})

    def discovered_specs(self) -> list[ToolSpec]:
        """The specs of the MCP servers' tools listed so far (none before discovery), and of the
        tools capabilities added at run time that this process has seen called."""
        run_time = [s for a in self._agents.values() if a.run_time is not None for s in a.run_time.specs()]
        return [t.spec for t in self._mcp_tools()] + run_time

    def _mcp_tools(self) -> list[Any]:
        return [t for a in self._agents.values() if a.mcp is not None for t in a.mcp.tools()]

    def definition(self, agent: str) -> AgentDefinition:
        return self._agents[agent]

    def spec(self, agent: str, tool_name: str) -> ToolSpec | None:
        definition = self._agents.get(agent)
        return definition.spec(tool_name) if definition else None

    def gated_tool_parameters(self, tool_name: str) -> set[str] | None:
        for definition in self._agents.values():
            for declared in definition.tools:
                if declared.spec.name == tool_name and declared.spec.gated:
                    return set(declared.tool.function_schema.json_schema.get("properties", {}))
        for tool in self._mcp_tools():
            if tool.spec.name == tool_name and tool.spec.gated:
                return set(tool.input_schema.get("properties", {}))
        return None

    def _declared(self, agent: str, tool_name: str) -> DeclaredTool:
        definition = self._agents.get(agent)
        declared = definition.declared(tool_name) if definition else None
        if declared is None:
            raise ValidationFailed(f"tool {tool_name!r} is not declared by agent {agent!r}")
        return declared

    def validate_args(self, agent: str, tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
        definition = self._agents.get(agent)
        if definition is not None and definition.mcp is not None and definition.declared(tool_name) is None:
            # An MCP tool: checked against its server's schema once this process has listed it; the
            # server checks the arguments it receives in any case.
            listed = definition.mcp.tool(tool_name)
            return validate_mcp_args(listed.input_schema if listed else {"type": "object"}, args)
        if definition is not None and definition.run_time_tool(tool_name):
            # A tool a capability added to a run: pydantic-ai validates the arguments it runs with.
            jsonable_args = to_jsonable_python(args)
            assert isinstance(jsonable_args, dict)
            return jsonable_args
        declared = self._declared(agent, tool_name)
        try:
            validated = declared.tool.function_schema.validator.validate_python(args)
        except ValidationError as exc:
            raise ValidationFailed(
                "the edited arguments do not fit the tool's schema",
                extra={"errors": _field_errors("args", exc)},
            ) from exc
        jsonable = to_jsonable_python(validated)
        assert isinstance(jsonable, dict)
        return jsonable

    def validate_result(self, agent: str, tool_name: str, result: Any) -> Any:
        definition = self._agents.get(agent)
        if definition is not None and definition.run_time_tool(tool_name):
            return to_jsonable_python(result)  # an MCP tool, or one added at run time: no result type
        declared = self._declared(agent, tool_name)
        if declared.result is None:
            return result
        try:
            validated = declared.result.validate_python(result)
        except ValidationError as exc:
            raise ValidationFailed(
                "the result does not fit the tool's result type",
                extra={"errors": _field_errors("result", exc)},
            ) from exc
        return to_jsonable_python(validated)


def validate_mcp_args(schema: Mapping[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Edited arguments of an MCP tool checked against the input schema its server gave."""
    import jsonschema  # type: ignore[import-untyped]  # loaded only where MCP tools are served

    validator = jsonschema.Draft202012Validator(dict(schema))
    errors = [
        {"loc": ["args", *map(str, e.absolute_path)], "msg": e.message, "type": str(e.validator)}
        for e in validator.iter_errors(args)
    ]
    if errors:
        raise ValidationFailed("the edited arguments do not fit the tool's schema", extra={"errors": errors})
    return args
