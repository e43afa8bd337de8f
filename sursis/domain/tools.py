"""The tool contract: how a tool is declared, and which declarations are legal."""

from __future__ import annotations

import string
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, assert_never

from sursis.domain.errors import ToolDeclarationError
from sursis.domain.sanitize import sanitize


class Executor(StrEnum):
    """Who produces the tool's result."""

    SERVER = "server"
    HUMAN = "human"
    CLIENT = "client"
    PROVIDER = "provider"


class Approval(StrEnum):
    AUTO = "auto"
    REQUIRES_APPROVAL = "requires_approval"


class Category(StrEnum):
    READ = "read"
    SUGGEST = "suggest"
    MUTATE = "mutate"


class PendingKind(StrEnum):
    """How a UI prompts for a suspension."""

    APPROVAL = "approval"
    ELICITATION = "elicitation"
    CLIENT_EXEC = "client_exec"


DEFAULT_TIMEOUTS: Mapping[PendingKind, timedelta] = {
    PendingKind.APPROVAL: timedelta(hours=24),
    PendingKind.ELICITATION: timedelta(hours=1),
    PendingKind.CLIENT_EXEC: timedelta(seconds=30),
}


@dataclass(frozen=True, slots=True)
class ContextRetention:
    """How long a tool's results stay in the model's view (its context), not in storage.

    `age`: a result is shown for `age` turns, the turn that produced it included (1: only during
    its own turn). `count`: only the latest `count` results of the tool are shown. Both may be
    set (a result goes when either says so). `never_evict` says explicitly that the results stay
    for as long as the history window shows their turn (also what a tool without a declaration
    gets). An older result is shown to the model as a short stub naming the tool and the call; the
    stored result is untouched and operators still see it.
    """

    age: int | None = None
    count: int | None = None
    never_evict: bool = False

    def __post_init__(self) -> None:
        if self.never_evict and (self.age is not None or self.count is not None):
            raise ToolDeclarationError("context retention: never_evict excludes age and count")
        if not self.never_evict and self.age is None and self.count is None:
            raise ToolDeclarationError("context retention: declare age, count or never_evict")
        for name, value in (("age", self.age), ("count", self.count)):
            if value is not None and value < 1:
                raise ToolDeclarationError(f"context retention: {name} must be at least 1")

    def evicts(self, turns_old: int, newer_results: int) -> bool:
        """Whether a result `turns_old` turns old (0: produced in the current turn), followed by
        `newer_results` results of the same tool, is out of the model's view."""
        if self.never_evict:
            return False
        too_old = self.age is not None and turns_old >= self.age
        too_many = self.count is not None and newer_results >= self.count
        return too_old or too_many


def evicted_result(tool_name: str, tool_call_id: str) -> str:
    """What the model sees instead of a result out of its view."""
    return (
        f"[result of {tool_name} (call {tool_call_id}) no longer shown: the tool keeps its results "
        "in context for a limited time; call it again if you need them]"
    )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """Everything the service needs to know about a tool besides its signature.

    `approval=None` means "the default for the category": `mutate` tools require approval,
    everything else runs automatically. A `mutate` tool can't be declared ungated, nor with a
    `human` or `provider` executor (neither can be gated). The legal matrix (docs/core-loop.md)
    is checked on construction.
    """

    name: str
    executor: Executor = Executor.SERVER
    category: Category = Category.READ
    approval: Approval | None = None
    effect: str | None = None
    timeout: timedelta | None = None
    streaming: bool = False
    context: ContextRetention | None = None
    """How long its results stay in the model's view; None: as long as their turn is shown."""
    server: str | None = None
    """The MCP server that provides the tool; None for a function tool."""
    schema_digest: str | None = None
    """A digest of what the model is told about the tool (description and input schema), so a
    policy can tell when a tool it allowed has changed since (MCP tools)."""
    capability: str | None = None
    """The pydantic-ai capability that brings the tool (its `id`, else its class name); None for
    the agent's own tools."""
    _resolved_approval: Approval = field(init=False, repr=False)

    def __post_init__(self) -> None:
        approval = self.approval
        if self.category is Category.MUTATE:
            # A change to the world always waits for a person (or a stored pre-authorization,
            # which stands in for one): only a gate can guarantee that.
            if self.executor not in (Executor.SERVER, Executor.CLIENT):
                raise ToolDeclarationError(
                    f"tool {self.name!r}: a mutate tool must be gated, so its executor must be "
                    f"server or client, not {self.executor.value!r}"
                )
            if approval is Approval.AUTO:
                raise ToolDeclarationError(
                    f"tool {self.name!r}: a mutate tool always requires approval; "
                    "declare it read or suggest to run it unattended"
                )
            approval = Approval.REQUIRES_APPROVAL
        elif approval is None:
            approval = Approval.AUTO
        if approval is Approval.REQUIRES_APPROVAL and self.executor in (Executor.PROVIDER, Executor.HUMAN):
            raise ToolDeclarationError(
                f"tool {self.name!r}: approval may gate only server and client tools, "
                f"not executor {self.executor.value!r}"
            )
        if self.timeout is not None and self.timeout <= timedelta(0):
            raise ToolDeclarationError(f"tool {self.name!r}: timeout must be positive")
        if self.effect is not None:
            _check_template(self.name, self.effect)
        object.__setattr__(self, "_resolved_approval", approval)

    @property
    def gated(self) -> bool:
        return self._resolved_approval is Approval.REQUIRES_APPROVAL

    @property
    def suspends(self) -> bool:
        """True when a call of this tool waits for something outside the agent."""
        return self.gated or self.executor in (Executor.HUMAN, Executor.CLIENT)

    def external_kind(self) -> PendingKind | None:
        """The kind of the suspension that produces the result (after any approval)."""
        match self.executor:
            case Executor.HUMAN:
                return PendingKind.ELICITATION
            case Executor.CLIENT:
                return PendingKind.CLIENT_EXEC
            case Executor.SERVER | Executor.PROVIDER:
                return None
            case _:
                assert_never(self.executor)

    def timeout_for(self, kind: PendingKind, defaults: Mapping[PendingKind, timedelta]) -> timedelta:
        return self.timeout if self.timeout is not None else defaults[kind]

    def describe_effect(self, args: Mapping[str, Any]) -> str:
        """Render the effect template with the call's arguments; missing names stay visible."""
        if self.effect is None:
            return f"Run {self.name}"
        return string.Formatter().vformat(self.effect, (), _Missing(args))


@dataclass(frozen=True, slots=True)
class ToolApprovalRequest:
    """What an operator sees before deciding: the arguments sanitized, the effect spelled out."""

    tool_name: str
    agent_name: str
    args_summary: Any
    effect_description: str
    correlation_id: uuid.UUID

    @classmethod
    def for_call(
        cls, spec: ToolSpec | None, tool_name: str, agent_name: str, args: Mapping[str, Any]
    ) -> ToolApprovalRequest:
        """The request for one suspended call, under a new correlation id."""
        return cls(
            tool_name=tool_name,
            agent_name=agent_name,
            args_summary=sanitize(dict(args)),
            effect_description=spec.describe_effect(args) if spec else f"Run {tool_name}",
            correlation_id=uuid.uuid4(),
        )


class _Missing(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _check_template(name: str, template: str) -> None:
    try:
        list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ToolDeclarationError(f"tool {name!r}: bad effect template: {exc}") from exc
