"""Agents as declared data: tools with their contract, instructions, and the catalog built from them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_ai import Tool
from pydantic_core import to_jsonable_python

from abeyance.domain.errors import ToolDeclarationError, ValidationFailed
from abeyance.domain.tools import ToolSpec


@dataclass(frozen=True, slots=True)
class DeclaredTool:
    """One tool: its contract (`spec`) and the pydantic-ai tool made from the function."""

    spec: ToolSpec
    tool: Tool[Any]

    @classmethod
    def declare(cls, function: Callable[..., Any], spec: ToolSpec) -> DeclaredTool:
        return cls(spec=spec, tool=Tool(function, name=spec.name, max_retries=2))


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    instructions: str
    tools: tuple[DeclaredTool, ...]
    native_tools: tuple[Any, ...] = field(default=())

    def __post_init__(self) -> None:
        names = [t.spec.name for t in self.tools]
        if len(names) != len(set(names)):
            raise ToolDeclarationError(f"agent {self.name!r} declares a tool twice")

    def spec(self, tool_name: str) -> ToolSpec | None:
        for declared in self.tools:
            if declared.spec.name == tool_name:
                return declared.spec
        return None


class DeclaredToolCatalog:
    """`ToolCatalog` over the declared agents; validates edited args with each tool's own schema."""

    def __init__(self, agents: Iterable[AgentDefinition]) -> None:
        self._agents = {a.name: a for a in agents}

    def agent_names(self) -> list[str]:
        return sorted(self._agents)

    def definition(self, agent: str) -> AgentDefinition:
        return self._agents[agent]

    def spec(self, agent: str, tool_name: str) -> ToolSpec | None:
        definition = self._agents.get(agent)
        return definition.spec(tool_name) if definition else None

    def validate_args(self, agent: str, tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
        definition = self._agents.get(agent)
        declared = (
            next((d for d in definition.tools if d.spec.name == tool_name), None) if definition else None
        )
        if declared is None:
            raise ValidationFailed(f"tool {tool_name!r} is not declared by agent {agent!r}")
        try:
            validated = declared.tool.function_schema.validator.validate_python(args)
        except ValidationError as exc:
            raise ValidationFailed(
                "the edited arguments do not fit the tool's schema",
                extra={
                    "errors": [
                        {"loc": ["args", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]}
                        for e in exc.errors(include_url=False)
                    ]
                },
            ) from exc
        jsonable = to_jsonable_python(validated)
        assert isinstance(jsonable, dict)
        return jsonable
