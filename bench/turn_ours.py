"""One approval turn through Abeyance in this process, for the side-by-side benchmark."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from common import BENCH_ADMIN, GATED_TURN, ensure_pg_database, fresh_database

from abeyance.app.container import Container, build_container
from abeyance.app.logging import configure_logging
from abeyance.app.settings import Settings
from abeyance.domain.pending_calls import Resolution
from abeyance.domain.states import Decision, PendingStatus, RunStatus


def log_to_file(path: Path) -> None:
    """Log at INFO as JSON, as a worker does, into `path`: the work is measured, the report stays clean."""
    configure_logging("INFO", json_logs=True)
    logging.getLogger().handlers[0].setStream(path.open("w"))  # type: ignore[attr-defined]


async def ensure_database(url: str) -> None:
    await ensure_pg_database(url)


def ms(seconds: float) -> float:
    return seconds * 1000


@dataclass(eq=False)
class Counter:
    count: int = 0

    def __call__(self, *_: Any) -> None:
        self.count += 1


@dataclass
class OursSide:
    """The service and its worker's claim + runner in this process, on `url`."""

    url: str
    container: Container | None = None
    commits: Counter = field(default_factory=Counter)
    statements_seen: Counter = field(default_factory=Counter)
    last_commits: tuple[int, int] = (0, 0)
    verify: bool = True
    """Read the run back after each turn (off while counting the server's transactions)."""
    bench_reads: int = 0

    @staticmethod
    async def prepare(url: str) -> None:
        await fresh_database(url)

    async def open(self) -> None:
        settings = Settings(
            database_url=self.url,
            model="scripted",
            migrate_on_start=False,
            run_worker=False,
            rate_limit_per_minute=0,
            _env_file=None,  # type: ignore[call-arg]
        )
        self.container = build_container(settings)
        engine = self.container.uow.engine.sync_engine
        sa.event.listen(engine, "commit", self.commits)
        sa.event.listen(engine, "before_cursor_execute", self.statements_seen)
        await self.container.start(run_worker=False)

    async def close(self) -> None:
        if self.container is not None:
            await self.container.close()
            self.container = None

    def statements(self) -> int:
        """Statements sent, less the bench's own reads (finding the pending call, checking the run)."""
        return self.statements_seen.count - self.bench_reads

    def commit_counts(self) -> tuple[int, int]:
        """Commits of the last turn: (message -> suspended, resolve -> completed)."""
        return self.last_commits

    async def new_conversation(self) -> uuid.UUID:
        assert self.container is not None
        return (await self.container.conversations.create_conversation(BENCH_ADMIN, "ops", "default")).id

    async def suspend_only(self, conversation_id: uuid.UUID) -> uuid.UUID:
        assert self.container is not None
        run = await self.container.conversations.post_message(BENCH_ADMIN, conversation_id, GATED_TURN)
        if not await self.container.worker.run_once():
            raise RuntimeError("the queued run was not claimed")
        return run.id

    async def turn(self, conversation_id: uuid.UUID) -> tuple[float, float, float]:
        """(message -> suspended, the resolve call, resolve -> completed) in ms."""
        container = self.container
        assert container is not None
        before = self.commits.count
        started = time.perf_counter()
        run_id = await self.suspend_only(conversation_id)
        suspended = time.perf_counter()
        suspend_commits = self.commits.count - before
        seen = self.statements_seen.count
        async with container.uow() as uow:
            [pending] = await uow.pending.for_run(run_id, PendingStatus.AWAITING)
        self.bench_reads += self.statements_seen.count - seen
        before = self.commits.count
        resume_started = time.perf_counter()
        await container.pending_calls.resolve_pending(
            BENCH_ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        answered = time.perf_counter()
        if not await container.worker.run_once():
            raise RuntimeError("the resolved run was not claimed")
        completed = time.perf_counter()
        self.last_commits = (suspend_commits, self.commits.count - before)
        if self.verify:
            seen = self.statements_seen.count
            view = await container.runs.get_run(BENCH_ADMIN, run_id)
            self.bench_reads += self.statements_seen.count - seen
            if view.run.status is not RunStatus.COMPLETED:
                raise RuntimeError(f"run {run_id} ended {view.run.status}: {view.run.error}")
        return ms(suspended - started), ms(answered - resume_started), ms(completed - resume_started)
