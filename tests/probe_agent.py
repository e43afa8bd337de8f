"""A small agent for observability tests: one tool per outcome of the tool contract."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sursis.domain.errors import ToolPolicyError, ToolTerminalError, ToolTransientError, ToolUserError
from sursis.domain.tools import Category, ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool

SECRET_DETAIL = "connection string postgres://admin:hunter2@db"

# tool name -> (ok, error_class, error_code) that its call must be recorded with
OUTCOMES: dict[str, tuple[bool, str | None, str | None]] = {
    "succeed": (True, None, None),
    "user_error": (False, "ToolUserError", "INVALID_INPUT"),
    "policy_error": (False, "ToolPolicyError", "POLICY_DENIED"),
    "transient_error": (False, "ToolTransientError", "TRANSIENT"),
    "terminal_error": (False, "ToolTerminalError", "TERMINAL"),
    "unexpected_error": (False, "ToolTerminalError", "UNEXPECTED"),
}


def probe_agent() -> AgentDefinition:
    async def succeed(value: str = "hello") -> dict[str, Any]:
        """Return the value."""
        return {"echo": value}

    async def user_error() -> None:
        """Fail as bad input."""
        raise ToolUserError("the input is not valid")

    async def policy_error() -> None:
        """Fail as refused by policy."""
        raise ToolPolicyError("not allowed in this workspace")

    async def transient_error() -> None:
        """Fail as an infrastructure blip."""
        raise ToolTransientError("the upstream timed out")

    async def terminal_error() -> None:
        """Fail as a broken invariant."""
        raise ToolTerminalError("the ledger does not balance")

    async def unexpected_error() -> None:
        """Fail outside the taxonomy."""
        raise RuntimeError(SECRET_DETAIL)

    async def gated_write(target: str) -> dict[str, Any]:
        """Write something; needs an operator's approval."""
        return {"written": target}

    async def quick_write(target: str) -> dict[str, Any]:
        """Write something; its approval expires after a second."""
        return {"written": target}

    return AgentDefinition(
        name="probe",
        instructions="Call the tools you are told to call.",
        tools=(
            DeclaredTool.declare(succeed, ToolSpec("succeed")),
            DeclaredTool.declare(user_error, ToolSpec("user_error")),
            DeclaredTool.declare(policy_error, ToolSpec("policy_error")),
            DeclaredTool.declare(transient_error, ToolSpec("transient_error")),
            DeclaredTool.declare(terminal_error, ToolSpec("terminal_error")),
            DeclaredTool.declare(unexpected_error, ToolSpec("unexpected_error")),
            DeclaredTool.declare(
                gated_write, ToolSpec("gated_write", category=Category.MUTATE, effect="Write {target}")
            ),
            DeclaredTool.declare(
                quick_write,
                ToolSpec(
                    "quick_write",
                    category=Category.MUTATE,
                    effect="Write {target}",
                    timeout=timedelta(seconds=1),
                ),
            ),
        ),
    )
