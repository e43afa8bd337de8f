"""`Service`: Sursis in a Python process, the same object the HTTP app and the worker run on."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic import AliasChoices
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models import Model
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from sursis.app.agent_loading import definitions_from
from sursis.app.container import Container, build_container
from sursis.app.logging import quiet_unless_configured
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import PendingCursor, Resolution
from sursis.domain.clock import utcnow
from sursis.domain.identity.keys import IssuedKey
from sursis.domain.records import Conversation, PendingCall, Principal, Run
from sursis.domain.records.event_records import StoredEvent
from sursis.domain.runs.runs import RunView
from sursis.domain.states import Decision, PendingStatus
from sursis.domain.tools import PendingKind
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.db.migrations import upgrade_async
from sursis.infra.telemetry import Telemetry

EMBEDDED = "embedded"
"""The actor of embedded calls unless `Service.open(actor=...)` names another."""

_PAGE = 500


def embedded_principal(actor: str = EMBEDDED) -> Principal:
    """Code that opens the service holds its database: it acts as an admin of every workspace,
    recorded in the audit log under `actor`."""
    return Principal(id=actor, role=Role.ADMIN, workspace=None, name=actor, holds_database=True)


class _PassedSettings(Settings):
    """Settings from the arguments alone."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def settings_from(values: dict[str, Any]) -> Settings:
    """`Settings` from field names and values only: no environment variables, no `.env` file."""
    by_alias: dict[str, Any] = {}
    for name, value in values.items():
        field = Settings.model_fields.get(name)
        if field is None:
            raise TypeError(f"unknown setting {name!r}")
        alias = field.validation_alias
        key = alias.choices[0] if isinstance(alias, AliasChoices) else name
        by_alias[key if isinstance(key, str) else name] = value
    return _PassedSettings(**by_alias)


def _id(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


class Service:
    """Conversations, runs and pending calls in-process, over one database and one agent catalog.

    Open it with `async with Service.open(database_url, agents=..., model=...) as svc:`. Queued work
    runs when you call `run_until_idle()` (in the calling task), or in a background worker when
    opened with `run_worker=True`. `create_app` and `sursis worker` are built on this object.
    """

    def __init__(self, container: Container, *, actor: str = EMBEDDED) -> None:
        self.container = container
        self.principal = embedded_principal(actor)
        self.last_run_id: uuid.UUID | None = None
        """The run the last `send` started (what the testing helpers report on a failure)."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        agents: Iterable[AgentDefinition | AbstractAgent[Any, Any]] | None = None,
        model: Model | None = None,
        telemetry: Telemetry | None = None,
        actor: str = EMBEDDED,
    ) -> Service:
        """Wire everything from `settings`; nothing is started. `agents` (definitions or pydantic-ai
        `Agent`s, adopted as they are) replaces the agents `settings.agents` names; `model` replaces
        every agent's model (otherwise an agent's own model, else `settings.model`)."""
        if agents is None:
            container = build_container(settings, telemetry=telemetry, model=model)
        else:
            definitions = tuple(d for a in agents for d in definitions_from(a, "agents="))
            container = build_container(
                settings, telemetry=telemetry, agents=lambda _: {}, extra_agents=definitions, model=model
            )
        return cls(container, actor=actor)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        database_url: str,
        *,
        agents: Sequence[AgentDefinition | AbstractAgent[Any, Any]] | None = None,
        model: Model | str | None = None,
        migrate: bool = False,
        run_worker: bool = False,
        actor: str = EMBEDDED,
        telemetry: Telemetry | None = None,
        **settings_overrides: Any,
    ) -> AsyncIterator[Service]:
        """The service over `database_url`, closed on exit.

        `migrate=True` applies the migrations first (SQLite or PostgreSQL). `model` is a
        pydantic-ai `Model` or a model name (`"scripted"`, `"openai:gpt-4.1-mini"`); other keyword
        arguments override `Settings` fields (e.g. `step_limit=10`). Environment variables are not
        read: what is not passed keeps its default.
        """
        quiet_unless_configured()
        values: dict[str, Any] = {"database_url": database_url, "run_worker": run_worker}
        if isinstance(model, str):
            values["model"] = model
        values.update(settings_overrides)
        settings = settings_from(values)
        if migrate:
            await upgrade_async(database_url)
        service = cls.from_settings(
            settings,
            agents=agents,
            model=model if isinstance(model, Model) else None,
            telemetry=telemetry,
            actor=actor,
        )
        try:
            await service.start(run_worker=run_worker)
        except BaseException:
            await service.close()
            raise
        try:
            yield service
        finally:
            await service.close()

    @property
    def settings(self) -> Settings:
        return self.container.settings

    async def start(self, *, run_worker: bool) -> None:
        await self.container.start(run_worker=run_worker)

    async def close(self) -> None:
        await self.container.close()

    # Conversations and runs

    async def start_conversation(self, agent: str, *, workspace: str = "default") -> Conversation:
        return await self.container.conversations.create_conversation(self.principal, agent, workspace)

    async def send(self, conversation_id: uuid.UUID | str, content: str, *, stream: bool = True) -> Run:
        """Post a user message; the run it starts is queued (see `run_until_idle`). `stream=False`:
        its model is asked for whole responses (no text deltas while they arrive)."""
        run = await self.container.conversations.post_message(
            self.principal, _id(conversation_id), content, stream=stream
        )
        self.last_run_id = run.id
        return run

    async def get_run(self, run_id: uuid.UUID | str) -> RunView:
        """The run and its awaiting pending calls."""
        return await self.container.runs.get_run(self.principal, _id(run_id))

    async def wait_for_run(self, run_id: uuid.UUID | str, *, within: float = 30.0) -> RunView:
        """The run once it is settled (a background worker runs it), or as it is after `within`
        seconds (at most `max_wait_seconds`)."""
        return await self.container.runs.wait_for_run(self.principal, _id(run_id), within)

    async def cancel(self, run_id: uuid.UUID | str) -> RunView:
        return await self.container.runs.cancel_run(self.principal, _id(run_id))

    # Pending calls

    async def pending(
        self,
        *,
        conversation_id: uuid.UUID | str | None = None,
        status: PendingStatus | str | None = PendingStatus.AWAITING,
        kind: PendingKind | str | None = None,
        tool_name: str | None = None,
    ) -> list[PendingCall]:
        """Pending calls, oldest first: by default every awaiting one; `status=None` for all."""
        wanted = _id(conversation_id) if conversation_id is not None else None
        found: list[PendingCall] = []
        after: PendingCursor | None = None
        while True:
            page = await self.container.pending_calls.list_pending(
                self.principal,
                status=PendingStatus(status) if status is not None else None,
                kind=PendingKind(kind) if kind is not None else None,
                tool_name=tool_name,
                after=after,
                limit=_PAGE,
            )
            found.extend(c for c in page.items if wanted is None or c.conversation_id == wanted)
            if page.next_cursor is None:
                return found
            after = page.next_cursor

    async def resolve(
        self,
        correlation_id: uuid.UUID | str,
        decision: Decision | str,
        *,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        result: Any = None,
        args_hash: str | None = None,
    ) -> PendingCall:
        """Decide one pending call (`approve`, `deny`, `revise`, `answer`); raises `Stale` if it
        was decided already. The run resumes when its work runs (see `run_until_idle`)."""
        resolution = Resolution(
            Decision(decision), reason=reason, args=args, result=result, args_hash=args_hash
        )
        return await self.container.pending_calls.resolve_pending(
            self.principal, _id(correlation_id), resolution
        )

    # Work and events

    async def run_once(self) -> bool:
        """Claim one queued run and drive it, in the calling task, until it suspends, completes or
        fails; False when nothing was queued. `run_until_idle` is this in a loop, then the sweep."""
        return await self.container.worker.run_once()

    async def wait_until_idle(self, *, within: float = 30.0) -> bool:
        """With a background worker (`run_worker=True`): until it runs no segment and has none
        handed to it, without reading the database; False if `within` seconds pass first. A message
        or a decision this process committed while a slot was free is already that slot's work when
        `send` or `resolve` returns."""
        return await self.container.worker.wait_idle(within)

    async def run_until_idle(self) -> int:
        """Run queued work in the calling task until none is left: every queued run is driven until
        it suspends, completes or fails, and overdue calls are expired. Returns the segments run."""
        worker = self.container.worker
        segments = 0
        while True:
            while await worker.run_once():
                segments += 1
            if not await worker.sweep():
                return segments

    async def sweep(self) -> int:
        """One pass of the sweeper: runs whose lease ran out are re-queued and at most one batch of
        overdue pending calls expires. Returns how many calls and runs it changed."""
        return await self.container.worker.sweep()

    async def events(
        self, conversation_id: uuid.UUID | str, *, after: int = 0, follow: bool = True
    ) -> AsyncIterator[StoredEvent]:
        """The conversation's events after id `after`, in order: the events its SSE stream carries
        (`event.envelope()` is the SSE `data`). With `follow=False` it ends after the stored ones;
        otherwise it waits for new ones until the caller stops iterating."""
        conversation = _id(conversation_id)
        await self.container.conversations.get_conversation(self.principal, conversation)
        if follow:
            self.container.listen_for_events()
        cursor = after
        while True:
            with self.container.notifier.watch_conversation(conversation) as changed:
                batch = await self.container.events.events_after(self.principal, conversation, cursor, _PAGE)
                for event in batch:
                    yield event
                    cursor = event.id
                if len(batch) == _PAGE:
                    continue
                if not follow:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), self.settings.events_poll_seconds)

    # Administration: what `sursis keys create`, `sursis demo seed` and the agents' `recall` do

    async def create_api_key(
        self, role: Role | str, *, workspace: str | None, name: str | None = None
    ) -> IssuedKey:
        """A new API key for the HTTP API (`admin`, `operator`, `user` or `system`); `workspace=None`
        only for an admin of every workspace. `.secret` is the bearer token, shown only here."""
        return await self.container.keys.create(self.principal, role=role, workspace=workspace, name=name)

    async def seed_demo(self, workspace: str = "default") -> int:
        """The demo dead letters and clusters the `ops` agent works on, unless they exist (as
        `sursis demo seed`); returns how many dead letters were added."""
        from sursis.infra.demo import seed_demo

        return await seed_demo(self.container.uow, workspace, utcnow())

    async def recall_memory(
        self,
        agent: str,
        query: str,
        *,
        workspace: str = "default",
        world_id: uuid.UUID | str | None = None,
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        """What `agent`'s `recall` tool finds for `query` outside any conversation: its persistent
        memories of `workspace` (of one world when `world_id` is given), best match first, each as
        `{"id", "tier", "kind", "text", "score"}`."""
        from sursis.infra.worlds.memory import MemoryScope

        world = _id(world_id) if world_id is not None else None
        scope = MemoryScope(workspace, agent, world, uuid.uuid4(), uuid.uuid4())
        return await self.container.worlds.memory.recall(scope, query, limit)
