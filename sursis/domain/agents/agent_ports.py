"""Ports of the agent side and the process: the tool catalog, and what wakes workers and long-polls."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sursis.domain.tools import ToolSpec


class ToolCatalog(Protocol):
    """The declared tools of every agent, as the service layer needs them."""

    def agent_names(self) -> list[str]: ...
    def spec(self, agent: str, tool_name: str) -> ToolSpec | None: ...
    def validate_args(self, agent: str, tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Validated, JSON-ready args, or `ValidationFailed` with field errors."""
        ...

    def validate_result(self, agent: str, tool_name: str, result: Any) -> Any:
        """An answer to a `human`/`client` call checked against the tool's declared result type.

        Returns the validated, JSON-ready value, or raises `ValidationFailed` with field errors.
        """
        ...

    def gated_tool_parameters(self, tool_name: str) -> set[str] | None:
        """Parameter names of the gated tool of that name (in any agent); None if there is none."""
        ...


class RunNotifier(Protocol):
    """Wakes workers and long-pollers. Best effort: everything also works by polling."""

    async def run_queued(self, run_id: uuid.UUID) -> None: ...
    async def run_changed(self, run_id: uuid.UUID) -> None: ...


class RunWatcher(Protocol):
    """What a long-poll waits on: an event set when the run may have changed (best effort)."""

    def watch(self, run_id: uuid.UUID) -> AbstractContextManager[asyncio.Event]: ...
    def mark(self) -> int:
        """Where the process's record of run changes stands now."""
        ...

    def changed_since(self, run_id: uuid.UUID, mark: int) -> bool:
        """False only when no change of the run (other than its queueing here) was heard since `mark`."""
        ...
