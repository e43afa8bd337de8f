"""Sursis: agents whose tool calls wait, durably, for a human.

The public names are importable from here; they load on first use, so `import sursis` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sursis.app.collector import settle_collector
    from sursis.app.logging import configure_logging
    from sursis.app.service import Service
    from sursis.app.settings import Settings
    from sursis.domain.access import Role
    from sursis.domain.errors import (
        ArgsChanged,
        Error,
        Forbidden,
        NotFound,
        RunActive,
        ServiceError,
        Stale,
        ToolPolicyError,
        ToolTerminalError,
        ToolTransientError,
        ToolUserError,
        ValidationFailed,
    )
    from sursis.domain.identity.keys import IssuedKey
    from sursis.domain.records import Conversation, PendingCall, Run
    from sursis.domain.records.event_records import StoredEvent as Event
    from sursis.domain.runs.runs import RunView
    from sursis.domain.states import Decision, PendingStatus, RunStatus
    from sursis.domain.tools import Approval, Category, Executor, PendingKind, ToolSpec
    from sursis.infra.agents.adopted import ToolOptions, adopt
    from sursis.infra.agents.agent_deps import RunInfo
    from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
    from sursis.infra.agents.delegated import run_agent
    from sursis.infra.agents.run_deps import RunDeps, run_deps

_EXPORTS: dict[str, tuple[str, str]] = {
    "Service": ("sursis.app.service", "Service"),
    "Settings": ("sursis.app.settings", "Settings"),
    "configure_logging": ("sursis.app.logging", "configure_logging"),
    "settle_collector": ("sursis.app.collector", "settle_collector"),
    "Role": ("sursis.domain.access", "Role"),
    "IssuedKey": ("sursis.domain.identity.keys", "IssuedKey"),
    "AgentDefinition": ("sursis.infra.agents.declarations", "AgentDefinition"),
    "DeclaredTool": ("sursis.infra.agents.declarations", "DeclaredTool"),
    "adopt": ("sursis.infra.agents.adopted", "adopt"),
    "ToolOptions": ("sursis.infra.agents.adopted", "ToolOptions"),
    "RunInfo": ("sursis.infra.agents.agent_deps", "RunInfo"),
    "RunDeps": ("sursis.infra.agents.run_deps", "RunDeps"),
    "run_deps": ("sursis.infra.agents.run_deps", "run_deps"),
    "run_agent": ("sursis.infra.agents.delegated", "run_agent"),
    "ToolSpec": ("sursis.domain.tools", "ToolSpec"),
    "Approval": ("sursis.domain.tools", "Approval"),
    "Category": ("sursis.domain.tools", "Category"),
    "Executor": ("sursis.domain.tools", "Executor"),
    "PendingKind": ("sursis.domain.tools", "PendingKind"),
    "Conversation": ("sursis.domain.records", "Conversation"),
    "Run": ("sursis.domain.records", "Run"),
    "PendingCall": ("sursis.domain.records", "PendingCall"),
    "Event": ("sursis.domain.records.event_records", "StoredEvent"),
    "RunView": ("sursis.domain.runs.runs", "RunView"),
    "Decision": ("sursis.domain.states", "Decision"),
    "PendingStatus": ("sursis.domain.states", "PendingStatus"),
    "RunStatus": ("sursis.domain.states", "RunStatus"),
    **{
        name: ("sursis.domain.errors", name)
        for name in (
            "Error",
            "ServiceError",
            "NotFound",
            "Forbidden",
            "Stale",
            "RunActive",
            "ArgsChanged",
            "ValidationFailed",
            "ToolUserError",
            "ToolPolicyError",
            "ToolTransientError",
            "ToolTerminalError",
        )
    },
}

__all__ = [
    "AgentDefinition",
    "Approval",
    "ArgsChanged",
    "Category",
    "Conversation",
    "Decision",
    "DeclaredTool",
    "Error",
    "Event",
    "Executor",
    "Forbidden",
    "IssuedKey",
    "NotFound",
    "PendingCall",
    "PendingKind",
    "PendingStatus",
    "Role",
    "Run",
    "RunActive",
    "RunDeps",
    "RunInfo",
    "RunStatus",
    "RunView",
    "Service",
    "ServiceError",
    "Settings",
    "Stale",
    "ToolOptions",
    "ToolPolicyError",
    "ToolSpec",
    "ToolTerminalError",
    "ToolTransientError",
    "ToolUserError",
    "ValidationFailed",
    "adopt",
    "configure_logging",
    "run_agent",
    "run_deps",
    "settle_collector",
]

assert set(__all__) == set(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'sursis' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
