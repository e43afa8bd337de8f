"""`WorldAgentRunner` in process: a question to the World Agent is a run of its own, driven here.

The nested run is written like any run (conversation, session, run, audit) and driven by the same
`AgentRunner`, inside the caller's span, so its `run.segment` span is a child of the calling tool's
span. It never suspends the caller: a run that stops for an approval answers that an operator must
decide, and the pending call stays for the operator (approving it resumes the run in a worker).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import sqlalchemy as sa

from sursis.domain.clock import Clock
from sursis.domain.errors import Error
from sursis.domain.records import AuditEntry, Conversation, Run, Usage
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.worlds.ports import Caller
from sursis.domain.worlds.rules import WorldMode
from sursis.infra.db import tables as t
from sursis.infra.db.uow import SqlUnitOfWork, SqlUnitOfWorkFactory
from sursis.infra.runner import AgentRunner
from sursis.infra.telemetry import current_trace_context
from sursis.infra.worlds.repository import SqlWorldRepository
from sursis.infra.worlds.service import WORLD_AGENT


class WorldNotFound(Error):
    """No such world in the caller's workspace."""

    code = "world_not_found"


class WorldBusy(Error):
    """The session already has a run that has not finished."""

    code = "world_busy"


class InProcessWorldAgentRunner:
    """Implements `sursis.domain.worlds.ports.WorldAgentRunner` over the service's own runner."""

    def __init__(self, uow: SqlUnitOfWorkFactory, clock: Clock, lease: timedelta) -> None:
        self._uow = uow
        self._clock = clock
        self._lease = lease
        self._runner: AgentRunner | None = None

    def bind(self, runner: AgentRunner) -> None:
        """The runner is built after the agents (it needs their definitions): bound at composition."""
        self._runner = runner

    async def ask(self, question: str, *, world_id: uuid.UUID, caller: Caller) -> str:
        return await self._converse(question, uuid.uuid4(), world_id, caller)

    async def chat(self, message: str, *, session_id: uuid.UUID, world_id: uuid.UUID, caller: Caller) -> str:
        return await self._converse(message, session_id, world_id, caller)

    async def _converse(
        self, text: str, conversation_id: uuid.UUID, world_id: uuid.UUID, caller: Caller
    ) -> str:
        if self._runner is None:
            raise RuntimeError("the World Agent runner is not bound to an agent runner")
        owner = f"ask:{uuid.uuid4()}"
        run = await self._start(text, conversation_id, world_id, caller, owner)
        await self._runner.run_segment(run, owner)
        async with self._uow() as uow:
            finished = await uow.runs.get(run.id)
            pending = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
        if finished is None:
            raise RuntimeError("the World Agent's run disappeared")
        if finished.status is RunStatus.SUSPENDED and pending:
            waiting = "; ".join(
                f"{p.effect_description} (correlation_id {p.correlation_id})" for p in pending
            )
            return (
                f"An operator must decide before the World Agent can go on: {waiting}. "
                f"The call waits for the operator in the World Agent conversation {run.conversation_id}."
            )
        if finished.status is RunStatus.COMPLETED:
            return finished.output or ""
        error = finished.error.message if finished.error else finished.status.value
        return f"The World Agent could not answer: {error}"

    async def _start(
        self, text: str, conversation_id: uuid.UUID, world_id: uuid.UUID, caller: Caller, owner: str
    ) -> Run:
        now = self._clock()
        actor = f"agent:{caller.agent or 'unknown'}"
        async with self._uow() as uow:
            repo = SqlWorldRepository(uow.session)
            world = await repo.get_world(world_id)
            if world is None or world.workspace != caller.workspace:
                raise WorldNotFound(f"no world {world_id} in this workspace")
            session = await repo.session(conversation_id)
            if session is None:
                await uow.conversations.add(
                    Conversation(
                        id=conversation_id,
                        workspace=world.workspace,
                        agent=WORLD_AGENT,
                        status="open",
                        active_run_id=None,
                        created_at=now,
                        updated_at=now,
                        created_by=actor,
                    )
                )
                await repo.add_session(conversation_id, world.id, WorldMode.OPERATOR, actor, now)
            elif session[0] != world.id:
                raise WorldNotFound(f"session {conversation_id} belongs to another world")
            run = Run(
                id=uuid.uuid4(),
                conversation_id=conversation_id,
                workspace=world.workspace,
                agent=WORLD_AGENT,
                status=RunStatus.RUNNING,
                input=text,
                output=None,
                error=None,
                segment=1,
                awaiting_count=0,
                usage=Usage(),
                cancel_requested=False,
                lease_owner=owner,
                lease_expires_at=now + self._lease,
                created_at=now,
                updated_at=now,
                finished_at=None,
                trace_context=current_trace_context(),
                claims=1,
            )
            if not await uow.conversations.claim_active_run(conversation_id, run.id, now):
                raise WorldBusy(f"the World Agent session {conversation_id} has a run that has not finished")
            await uow.runs.add(run)
            # Claimed by this process in the transaction that creates it: no worker ever sees it queued.
            await uow.session.execute(
                sa.update(t.runs)
                .where(t.runs.c.id == run.id)
                .values(lease_owner=owner, lease_expires_at=run.lease_expires_at)
            )
            await self._audit_both(
                uow, caller, actor, world.workspace, conversation_id, run.id, world_id, now
            )
            await uow.commit()
        return run

    @staticmethod
    async def _audit_both(
        uow: SqlUnitOfWork,
        caller: Caller,
        actor: str,
        workspace: str,
        conversation_id: uuid.UUID,
        run_id: uuid.UUID,
        world_id: uuid.UUID,
        now: datetime,
    ) -> None:
        details = {
            "world_id": str(world_id),
            "world_conversation_id": str(conversation_id),
            "world_run_id": str(run_id),
            "caller_conversation_id": str(caller.conversation_id) if caller.conversation_id else None,
            "caller_run_id": str(caller.run_id) if caller.run_id else None,
        }
        await uow.audit.append(
            AuditEntry(
                action="world.asked",
                actor=actor,
                workspace=workspace,
                conversation_id=conversation_id,
                run_id=run_id,
                details=details,
            ),
            now,
        )
        if caller.conversation_id is not None:
            await uow.audit.append(
                AuditEntry(
                    action="world.asked",
                    actor=actor,
                    workspace=workspace,
                    conversation_id=caller.conversation_id,
                    run_id=caller.run_id,
                    details=details,
                ),
                now,
            )
