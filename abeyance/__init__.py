"""Abeyance: agents whose tool calls wait, durably, for a human.

The public names are importable from here; they load on first use, so `import abeyance` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from abeyance.app.logging import configure_logging
    from abeyance.app.service import Service
    from abeyance.app.settings import Settings
    from abeyance.domain.access import Role
    from abeyance.domain.errors import (
        ArgsChanged,
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
    from abeyance.domain.keys import IssuedKey
    from abeyance.domain.records import Conversation, PendingCall, Run
    from abeyance.domain.records import StoredEvent as Event
    from abeyance.domain.runs import RunView
    from abeyance.domain.states import Decision, PendingStatus, RunStatus
    from abeyance.domain.tools import Approval, Category, Executor, PendingKind, ToolSpec
    from abeyance.infra.agents.declarations import AgentDefinition, DeclaredTool

_EXPORTS: dict[str, tuple[str, str]] = {
    "Service": ("abeyance.app.service", "Service"),
    "Settings": ("abeyance.app.settings", "Settings"),
    "configure_logging": ("abeyance.app.logging", "configure_logging"),
    "Role": ("abeyance.domain.access", "Role"),
    "IssuedKey": ("abeyance.domain.keys", "IssuedKey"),
    "AgentDefinition": ("abeyance.infra.agents.declarations", "AgentDefinition"),
    "DeclaredTool": ("abeyance.infra.agents.declarations", "DeclaredTool"),
    "ToolSpec": ("abeyance.domain.tools", "ToolSpec"),
    "Approval": ("abeyance.domain.tools", "Approval"),
    "Category": ("abeyance.domain.tools", "Category"),
    "Executor": ("abeyance.domain.tools", "Executor"),
    "PendingKind": ("abeyance.domain.tools", "PendingKind"),
    "Conversation": ("abeyance.domain.records", "Conversation"),
    "Run": ("abeyance.domain.records", "Run"),
    "PendingCall": ("abeyance.domain.records", "PendingCall"),
    "Event": ("abeyance.domain.records", "StoredEvent"),
    "RunView": ("abeyance.domain.runs", "RunView"),
    "Decision": ("abeyance.domain.states", "Decision"),
    "PendingStatus": ("abeyance.domain.states", "PendingStatus"),
    "RunStatus": ("abeyance.domain.states", "RunStatus"),
    **{
        name: ("abeyance.domain.errors", name)
        for name in (
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
    "RunStatus",
    "RunView",
    "Service",
    "ServiceError",
    "Settings",
    "Stale",
    "ToolPolicyError",
    "ToolSpec",
    "ToolTerminalError",
    "ToolTransientError",
    "ToolUserError",
    "ValidationFailed",
    "configure_logging",
]

assert set(__all__) == set(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'abeyance' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
