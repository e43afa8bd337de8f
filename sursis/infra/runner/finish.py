"""The end of a run: completed, failed or cancelled, written in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import structlog
from pydantic_ai.messages import (
    ModelMessage,
)

from sursis.domain import run_lifecycle
from sursis.domain.errors import ServiceError
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, Run, RunError, Usage
from sursis.domain.run_lifecycle import ToolEvents
from sursis.domain.states import RunStatus
from sursis.infra.db.held import GuardFailed
from sursis.infra.runner.base import ACTOR, log
from sursis.infra.runner.events import EventPublishing
from sursis.infra.runner.leases import LeaseLost


class Ending(EventPublishing):
    """A run's end: its last messages, the final status, the audit row, the closing events."""

    async def _step_limit_reached(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        usage: Usage,
        announced: set[str] | None = None,
    ) -> RunStatus:
        return await self._finish(
            run,
            owner,
            messages,
            RunStatus.FAILED,
            usage,
            announced=announced,
            error=RunError(
                "step_limit",
                f"the agent made {self._step_limit} model requests in this run without finishing; "
                "the conversation stays usable",
            ),
        )

    async def _finish(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        status: RunStatus,
        usage: Usage,
        *,
        output: str | None = None,
        error: RunError | None = None,
        announced: set[str] | None = None,
        findings: Sequence[AuditEntry] = (),
    ) -> RunStatus:
        """End the run; `findings` are audit rows written in the same transaction (what a refusal
        found, e.g. `integrity.args_mismatch`)."""
        now = self._clock()
        tool_events = self._tool_events(run, messages, announced)
        completing = status is RunStatus.COMPLETED

        try:
            async with self._uow() as uow:
                for finding in findings:
                    await uow.audit.append(finding, now)
                last_seq = await self._end(
                    uow,
                    run,
                    owner,
                    messages,
                    status,
                    usage,
                    now,
                    output=output,
                    error=error,
                    announced=announced,
                    tool_events=tool_events,
                    unless_cancel_requested=completing,
                )
                if last_seq is False and completing and await uow.runs.cancel_requested(run.id):
                    # A cancel that came after the last persistence point still wins; the answer
                    # stays in the log.
                    status, output = RunStatus.CANCELLED, None
                    last_seq = await self._end_cancelled(
                        uow, run, owner, messages, usage, now, announced, tool_events
                    )
                if last_seq is False:
                    raise LeaseLost()
                await uow.commit()
        except GuardFailed:
            # On PostgreSQL the end was held to the commit, which found the lease gone (or, for a
            # completion, a cancel requested) and wrote nothing: asked again in a transaction.
            async with self._uow() as uow:
                if not (completing and await uow.runs.cancel_requested(run.id)):
                    raise LeaseLost() from None
                status, output = RunStatus.CANCELLED, None
                last_seq = await self._end_cancelled(
                    uow, run, owner, messages, usage, now, announced, tool_events
                )
                if last_seq is False:
                    raise LeaseLost() from None
                await uow.commit()
        return self._ended(
            announced, last_seq, status, error=error.code if error else None, usage=usage.to_json()
        )

    def _ended(
        self, announced: set[str] | None, last_seq: int | None, status: RunStatus, **logged: Any
    ) -> RunStatus:
        """After the end's commit: the stored messages counted as announced, the status counted and
        logged (`run.<status>`, with `logged`)."""
        self._appended(announced, last_seq)
        self._metrics.run_status(status)
        log.info(f"run.{status.value}", **logged)
        return status

    async def _end_cancelled(
        self,
        uow: UnitOfWork,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        usage: Usage,
        now: datetime,
        announced: set[str] | None,
        tool_events: ToolEvents,
        details: dict[str, Any] | None = None,
    ) -> int | Literal[False] | None:
        """The end written as cancelled in the caller's transaction (see `_end`): a cancel requested
        after the last persistence point wins over a completion or a suspension."""
        return await self._end(
            uow,
            run,
            owner,
            messages,
            RunStatus.CANCELLED,
            usage,
            now,
            announced=announced,
            details=details,
            tool_events=tool_events,
        )

    async def _end(
        self,
        uow: UnitOfWork,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        status: RunStatus,
        usage: Usage,
        now: datetime,
        *,
        output: str | None = None,
        error: RunError | None = None,
        announced: set[str] | None = None,
        details: dict[str, Any] | None = None,
        tool_events: ToolEvents | None = None,
        unless_cancel_requested: bool = False,
    ) -> int | Literal[False] | None:
        """Write the run's end in the caller's transaction: the final status, the audit row, the
        conversation freed, its last messages and the closing events.

        Returns the log's new last seq (None: no message stored; see `_appended`), or False, having
        written nothing, when the lease is no longer `owner`'s (or, with `unless_cancel_requested`,
        a cancel was requested).
        """
        if tool_events is None:
            tool_events = self._tool_events(run, messages, announced)
        match status:
            case RunStatus.COMPLETED:
                ended = await run_lifecycle.complete(
                    uow,
                    run,
                    owner,
                    usage,
                    output,
                    now,
                    actor=ACTOR,
                    tool_events=tool_events,
                    unless_cancel_requested=unless_cancel_requested,
                )
            case RunStatus.FAILED if error is not None:
                ended = await run_lifecycle.fail(
                    uow, run, owner, usage, error, now, actor=ACTOR, tool_events=tool_events
                )
            case RunStatus.CANCELLED:
                ended = await run_lifecycle.cancel(
                    uow, run, owner, usage, now, actor=ACTOR, tool_events=tool_events, details=details
                )
            case _:
                raise ValueError(f"a segment does not end a run as {status.value} (error: {error})")
        if not ended:
            return False
        return await self._append(uow, run, messages, now, announced)

    async def fail_unreadable(self, run: Run, owner: str, exc: ServiceError) -> RunStatus:
        """Fail a run the worker just claimed whose log does not open (`encryption_key_unavailable`
        or `encrypted_value_unreadable`, naming the key): no attempt can succeed until the key is
        back, so the run is not left `running` or re-queued; the conversation is freed."""
        with structlog.contextvars.bound_contextvars(
            run_id=str(run.id), conversation_id=str(run.conversation_id)
        ):
            status = await self._finish(
                run, owner, [], RunStatus.FAILED, run.usage, error=RunError(exc.code, exc.message)
            )
        await self._notifier.run_changed(run.id)
        return status

    async def give_up(self, run: Run, owner: str, attempts: int) -> RunStatus:
        """Fail a run the worker just claimed whose last `attempts` segments all ended without
        reaching a persistence point; the conversation is freed."""
        with structlog.contextvars.bound_contextvars(
            run_id=str(run.id), conversation_id=str(run.conversation_id)
        ):
            log.error("run.segment_attempts_exhausted", attempts=attempts)
            status = await self._finish(
                run,
                owner,
                [],
                RunStatus.FAILED,
                run.usage,
                error=RunError(
                    "segment_attempts_exhausted",
                    f"{attempts} attempts in a row to continue this run ended without progress; "
                    "details are in the service logs; the conversation stays usable",
                ),
            )
        await self._notifier.run_changed(run.id)
        return status
