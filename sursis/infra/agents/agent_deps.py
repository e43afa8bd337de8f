"""An adopted agent's own deps, built for each segment by the factory its author gives to `adopt`.

The factory receives the run's context (`RunInfo`) and returns the deps, sync or async, or returns a
context manager (sync or async: a function decorated with `asynccontextmanager`, say) that is entered
once before the segment and exited after it, also when the segment fails. Its tools get those deps as
`ctx.deps`; the service's own context of the call stays reachable with `sursis.run_deps(ctx)`.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import structlog

from sursis.domain.errors import Error
from sursis.domain.sanitize import mask_text

log = structlog.get_logger("sursis.runner")


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a deps factory knows of the run its deps serve."""

    workspace: str
    conversation_id: uuid.UUID
    run_id: uuid.UUID
    agent: str
    channel: str
    """Where the run's message came from: `web`, `slack`, `email` or `system`."""
    key_id: str | None
    """The API key (principal id) that posted the run's message; None for a run no key started
    (a domain event, a channel whose sender has no key, a run queued before this was recorded)."""
    role: str | None
    """That key's role (`user`, `operator`, `admin`, `system`), or None with `key_id`."""
    segment: int


DepsFactory = Callable[[RunInfo], Any]
"""`factory(info)` returns the deps, an awaitable of them, or a context manager yielding them."""


class DepsFactoryFailed(Error):
    """The deps factory of an agent raised; the message (for the logs) names the factory and the
    error; `summary` (for the run's caller) names the factory and the error's class only, since an
    error's text may hold a host or a credential."""

    code = "deps_factory_failed"

    def __init__(self, message: str, summary: str) -> None:
        super().__init__(message)
        self.summary = summary

    def masked(self) -> dict[str, str]:
        """The message, credentials and personal data masked, as a trace's exception attributes."""
        return {"exception.message": mask_text(str(self))}


def factory_name(factory: DepsFactory) -> str:
    """`module.qualname` of a factory, for errors and logs."""
    module = getattr(factory, "__module__", None) or "?"
    name = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return f"{module}.{name}"


def _failure(factory: DepsFactory, agent: str, exc: BaseException) -> DepsFactoryFailed:
    text = " ".join(str(exc).split()) or type(exc).__name__
    what = f"the deps factory {factory_name(factory)} of agent {agent!r} failed"
    return DepsFactoryFailed(f"{what}: {type(exc).__name__}: {text}"[:500], f"{what} ({type(exc).__name__})")


class OpenedDeps:
    """`async with OpenedDeps(factory, info) as deps`: the deps of one segment.

    Opening raises `DepsFactoryFailed` when the factory (or entering what it returned) raises.
    Closing never raises and never swallows the segment's own exception: a failure to close is
    logged, since the segment's outcome is already decided by then.
    """

    def __init__(self, factory: DepsFactory, info: RunInfo) -> None:
        self._factory = factory
        self._info = info
        self._async: AbstractAsyncContextManager[Any] | None = None
        self._sync: AbstractContextManager[Any] | None = None
        self.failure: BaseException | None = None
        """The error the segment failed on, when the runner caught it: the deps are closed with it,
        as if it had been raised through them."""

    async def __aenter__(self) -> Any:
        try:
            made = self._factory(self._info)
            if inspect.isawaitable(made):
                made = await made
            if isinstance(made, AbstractAsyncContextManager):
                value = await made.__aenter__()
                self._async = made
                return value
            if isinstance(made, AbstractContextManager):
                value = made.__enter__()
                self._sync = made
                return value
            return made
        except Exception as exc:
            raise _failure(self._factory, self._info.agent, exc) from exc

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if exc is None and self.failure is not None:
            kind, exc, tb = type(self.failure), self.failure, self.failure.__traceback__
        try:
            if self._async is not None:
                await self._async.__aexit__(kind, exc, tb)
            elif self._sync is not None:
                self._sync.__exit__(kind, exc, tb)
        except Exception:
            log.exception(
                "agent.deps_close_failed", factory=factory_name(self._factory), agent=self._info.agent
            )
        return False
