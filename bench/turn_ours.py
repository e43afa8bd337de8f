"""One approval turn through Sursis in this process (`sursis.Service`, no HTTP), with the
commits and statements of each phase: for the per-turn bench, the side-by-side bench and the profile."""

from __future__ import annotations

import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from bench_agent import AGENT_NAME, AGENTS
from common import GATED_TURN, DatabaseCounter, ensure_pg_database, fresh_database

import sursis
from sursis import RunStatus, Service


def log_to_file(path: Path) -> None:
    """Log at INFO as JSON, as a worker does, into `path`: the work is measured, the report stays clean."""
    sursis.configure_logging("INFO", json_logs=True, stream=path.open("w"))


async def ensure_database(url: str) -> None:
    await ensure_pg_database(url)


def ms(seconds: float) -> float:
    return seconds * 1000


@dataclass
class PhaseCounts:
    """Commits and statements of one turn's phases: message -> suspended, resolve -> completed."""

    suspend_commits: int = 0
    suspend_statements: int = 0
    resume_commits: int = 0
    resume_statements: int = 0


@dataclass
class OursSide:
    """`sursis.Service` over `url` with the offline `scripted` model; queued work runs in this task
    (`run_once`), as a worker would run it. The database counter sees every engine in the process:
    the bench's own reads (finding the pending call, checking the run) are left out of the figures."""

    url: str
    verify: bool = True
    """Read the run back after each turn (off while counting the server's transactions)."""
    history_turns: int | None = None
    encryption_keys: str | None = None
    """`SURSIS_ENCRYPTION_KEYS` for this side (None: encryption off)."""
    hand_off: bool = True
    """Run the worker's loops in this process, as `sursis serve` does: the message's and the
    decision's transactions hand their run to a free slot (no claim transactions), and the turn
    waits for the run to settle. False: no loops, the bench drives each segment with `run_once`."""
    agent: str = AGENT_NAME
    """The agent of the turn: `bench_ops` (`bench_agent.py`, the peers' agent and tool, served
    alone, as a program embedding the service serves its own agent) or a built-in (`ops`: its
    `replay_dlq_event` reads and writes the outbox in the run's transaction)."""
    stream: bool = False
    """Post the message with `stream` on (text deltas while the model answers). Off by default: the
    bench reads only each turn's outcome, as the peers' clients do, none of which streams tokens."""
    service: Service | None = None
    counter: DatabaseCounter = field(default_factory=DatabaseCounter)
    last: PhaseCounts = field(default_factory=PhaseCounts)
    bench_statements: int = 0
    _settled: Any = None
    _stack: AsyncExitStack | None = None

    @staticmethod
    async def prepare(url: str) -> None:
        await fresh_database(url)

    async def open(self) -> None:
        overrides: dict[str, object] = (
            {} if self.history_turns is None else {"history_turns": self.history_turns}
        )
        if self.encryption_keys is not None:
            overrides["encryption_keys"] = self.encryption_keys
        if self.hand_off:
            # The turn is measured, not the background loops' polls (webhooks, channels, the
            # sweeper, the queue): they would land in some turns and not others.
            overrides.update(
                worker_poll_seconds=60.0,
                sweep_seconds=60.0,
                webhook_poll_seconds=60.0,
                channel_poll_seconds=60.0,
                reviewer_poll_seconds=60.0,
            )
        self.counter.database = sa.engine.make_url(self.url).database  # not another library's engine
        self._stack = AsyncExitStack()
        self.service = await self._stack.enter_async_context(
            Service.open(
                self.url,
                agents=AGENTS if self.agent == AGENT_NAME else None,
                model="scripted",
                actor="bench",
                rate_limit_per_minute=0,
                run_worker=self.hand_off,
                **overrides,
            )
        )
        self.counter.install()

    async def close(self) -> None:
        if self._stack is not None:
            self.counter.remove()
            await self._stack.aclose()
            self._stack = self.service = None

    def statements(self) -> int:
        """Statements sent, less the bench's own reads."""
        return self.counter.statements - self.bench_statements

    def commit_counts(self) -> tuple[int, int]:
        """Commits of the last turn: (message -> suspended, resolve -> completed)."""
        return self.last.suspend_commits, self.last.resume_commits

    async def new_conversation(self) -> uuid.UUID:
        assert self.service is not None
        return (await self.service.start_conversation(self.agent, workspace="default")).id

    async def suspend_only(self, conversation_id: uuid.UUID) -> uuid.UUID:
        assert self.service is not None
        run = await self.service.send(conversation_id, GATED_TURN, stream=self.stream)
        self._settled = await self._settle(run.id)
        return run.id

    async def _settle(self, run_id: uuid.UUID) -> Any:
        """The run driven to its next settled state, by this process's worker loops (waited for,
        then read: the bench's statements) or here (`run_once`, nothing read)."""
        assert self.service is not None
        if not self.hand_off:
            if not await self.service.run_once():
                raise RuntimeError("the queued run was not claimed")
            return None
        await self.service.wait_until_idle(within=30)
        before = self.counter.statements
        view = await self.service.get_run(run_id)
        if not view.run.status.settled:  # no slot was free: a loop claims it
            view = await self.service.wait_for_run(run_id, within=30)
        self.bench_statements += self.counter.statements - before
        if not view.run.status.settled:
            raise RuntimeError(f"run {run_id} did not settle")
        return view

    async def turn(self, conversation_id: uuid.UUID) -> tuple[float, float, float]:
        """(message -> suspended, the resolve call, resolve -> completed) in ms."""
        service = self.service
        assert service is not None
        mark = self.counter.mark()
        started = time.perf_counter()
        run_id = await self.suspend_only(conversation_id)
        suspended = time.perf_counter()
        suspend_commits, suspend_statements = self.counter.since(mark)
        before = self.counter.statements
        [pending] = (self._settled or await service.get_run(run_id)).pending
        self.bench_statements += self.counter.statements - before
        mark = self.counter.mark()
        resume_started = time.perf_counter()
        await service.resolve(pending.correlation_id, "approve")
        answered = time.perf_counter()
        await self._settle(run_id)
        completed = time.perf_counter()
        self.last = PhaseCounts(suspend_commits, suspend_statements, *self.counter.since(mark))
        if self.verify:
            before = self.counter.statements
            view = await service.get_run(run_id)
            self.bench_statements += self.counter.statements - before
            if view.run.status is not RunStatus.COMPLETED:
                raise RuntimeError(f"run {run_id} ended {view.run.status}: {view.run.error}")
        return ms(suspended - started), ms(answered - resume_started), ms(completed - resume_started)
