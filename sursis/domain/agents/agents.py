"""The agent catalog: which agents a key may start conversations with, and what their tools do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from sursis.domain.access import Permission
from sursis.domain.records import Principal
from sursis.domain.tools import PendingKind, ToolSpec


@dataclass(frozen=True, slots=True)
class ToolInfo:
    spec: ToolSpec
    description: str | None
    input_schema: Mapping[str, Any] | None = None
    """The JSON schema of the tool's arguments, as the model is shown it."""
    annotations: Mapping[str, Any] | None = None
    """What an MCP server says about its tool (`readOnlyHint`, `destructiveHint`, ...)."""
    may_repeat: bool = False
    """Whether a call whose worker died while the tool ran is run again under the same call id (a
    `read` tool, or one declared idempotent); otherwise the tool is started at most once per call,
    and such a call asks a person ("outcome unknown")."""


@dataclass(frozen=True, slots=True)
class AgentInfo:
    name: str
    description: str | None
    model: str | None
    tools: tuple[ToolInfo, ...]


class AgentDirectory(Protocol):
    """The served agents, described (implemented by the declared catalog)."""

    def describe_agents(self) -> list[AgentInfo]:
        """Every agent a conversation may be created with, by name."""
        ...

    async def discover(self) -> None:
        """Learn the tools agents find at run time (their MCP servers'), so they are described too."""
        ...


@dataclass(frozen=True, slots=True)
class ToolListing:
    """One tool as the catalog lists it: its contract and how long its first suspension waits."""

    info: ToolInfo
    default_timeout: timedelta | None
    """None for a tool that never waits for anyone."""


class AgentCatalogService:
    """`GET /v1/agents`: the agents a key may use, each with its tools."""

    def __init__(self, directory: AgentDirectory, timeouts: Mapping[PendingKind, timedelta]) -> None:
        self._directory = directory
        self._timeouts = dict(timeouts)

    async def list_agents(self, principal: Principal) -> list[tuple[AgentInfo, list[ToolListing]]]:
        """Keys that may converse see every conversational agent; others (a `system` key) are
        refused with `Forbidden`, as on every route but the ones they may use. An agent's MCP
        servers are asked for their tools (connected once per process, then answered from there)."""
        principal.require(Permission.CONVERSE)
        await self._directory.discover()
        return [
            (agent, [ToolListing(t, self.default_timeout(t.spec)) for t in agent.tools])
            for agent in self._directory.describe_agents()
        ]

    def default_timeout(self, spec: ToolSpec) -> timedelta | None:
        """How long a call's first suspension waits: the approval for a gated tool, else the answer."""
        kind = PendingKind.APPROVAL if spec.gated else spec.external_kind()
        return spec.timeout_for(kind, self._timeouts) if kind is not None else None
