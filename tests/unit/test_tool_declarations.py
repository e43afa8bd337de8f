"""Illegal tool declarations fail when the service starts, not when a tool is called."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile

from sursis.app.container import build_container
from sursis.app.settings import Settings
from sursis.domain.errors import ToolDeclarationError, ValidationFailed
from sursis.domain.tools import Approval, Category, Executor, ToolSpec
from sursis.infra.agents.assistant import assistant_agent
from sursis.infra.agents.declarations import (
    AgentDefinition,
    DeclaredProviderTool,
    DeclaredTool,
    DeclaredToolCatalog,
)
from sursis.infra.agents.scripted import scripted_turn
from sursis.infra.runner import supported_provider_tools


def test_a_gated_provider_tool_is_refused() -> None:
    with pytest.raises(ToolDeclarationError, match="approval may gate only server and client tools"):
        DeclaredProviderTool.declare(
            WebSearchTool(),
            ToolSpec("web_search", executor=Executor.PROVIDER, approval=Approval.REQUIRES_APPROVAL),
        )


def test_a_mutating_provider_tool_is_refused() -> None:
    with pytest.raises(ToolDeclarationError, match="executor must be server or client"):
        DeclaredProviderTool.declare(
            WebSearchTool(), ToolSpec("web_search", executor=Executor.PROVIDER, category=Category.MUTATE)
        )


def test_start_up_fails_on_a_gated_provider_tool(tmp_path: Path) -> None:
    def agents(_uow: object) -> dict[str, AgentDefinition]:
        gated = ToolSpec("web_search", executor=Executor.PROVIDER, approval=Approval.REQUIRES_APPROVAL)
        definition = AgentDefinition(
            "searcher", "search", (), provider_tools=(DeclaredProviderTool.declare(WebSearchTool(), gated),)
        )
        return {definition.name: definition}

    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", model="scripted")
    with pytest.raises(ToolDeclarationError, match="'web_search'"):
        build_container(settings, agents=agents)


def test_native_tools_are_declared_as_provider_tools_only() -> None:
    async def web_search(query: str) -> str:
        return query

    with pytest.raises(ToolDeclarationError, match="provider tools are hosted by the model provider"):
        DeclaredTool.declare(web_search, ToolSpec("web_search", executor=Executor.PROVIDER))
    with pytest.raises(ToolDeclarationError, match="executor 'provider'"):
        DeclaredProviderTool.declare(WebSearchTool(), ToolSpec("web_search"))


def test_a_client_tool_must_declare_its_result_type() -> None:
    async def read_clipboard():  # type: ignore[no-untyped-def]
        """Runs in the caller's app; the service only suspends on it."""

    with pytest.raises(ToolDeclarationError, match="must declare its result type"):
        DeclaredTool.declare(read_clipboard, ToolSpec("read_clipboard", executor=Executor.CLIENT))
    declared = DeclaredTool.declare(
        read_clipboard, ToolSpec("read_clipboard", executor=Executor.CLIENT), result_type=str
    )
    catalog = DeclaredToolCatalog([AgentDefinition("a", "", (declared,))])
    assert catalog.validate_result("a", "read_clipboard", "copied text") == "copied text"
    with pytest.raises(ValidationFailed) as raised:
        catalog.validate_result("a", "read_clipboard", {"text": "x"})
    assert raised.value.extra["errors"][0]["loc"] == ["result"]


def test_provider_tools_the_model_cannot_host_are_left_out() -> None:
    definition = assistant_agent(uow=None)  # type: ignore[arg-type]
    hosting = FunctionModel(scripted_turn)
    plain = FunctionModel(scripted_turn, profile=ModelProfile(supported_native_tools=frozenset()))
    assert [p.spec.name for p in supported_provider_tools(definition, hosting)] == ["web_search"]
    assert supported_provider_tools(definition, plain) == []
