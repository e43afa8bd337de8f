"""What comes in and what is waited on: conversations and their messages, runs, pending calls (the
approvals, answers and client executions a person or an app resolves) and the event streams."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import structlog

from sursis.app.context_settings import ConversationSettings
from sursis.app.wiring.agents import AgentParts
from sursis.app.wiring.policy import PolicyParts
from sursis.app.wiring.runtime import RuntimeParts
from sursis.app.wiring.storage import StorageParts
from sursis.app.wiring.telemetry import TelemetryParts
from sursis.domain.approvals.approval_requests import ApprovalRequestService
from sursis.domain.approvals.pending_calls import PendingCallService
from sursis.domain.clock import utcnow
from sursis.domain.conversations.conversations import ConversationService
from sursis.domain.conversations.fork_service import ForkService
from sursis.domain.events.events import ClientPresence, EventService
from sursis.domain.runs.runs import RunService
from sursis.infra.db.errors import database_unreachable
from sursis.infra.policy.external import ExternalPolicyPoint

log = structlog.get_logger("sursis.http")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationParts:
    conversations: ConversationService
    runs: RunService
    pending_calls: PendingCallService
    events: EventService
    forks: ForkService
    approvals: ApprovalRequestService


def unreachable_while_waiting(exc: BaseException) -> bool:
    """Whether a long-poll after a committed message stopped because the database is out of reach
    (logged here: the caller answers with the queued run instead of an error)."""
    if not database_unreachable(exc):
        return False
    log.warning("run.wait_interrupted", error=str(exc)[:200])
    return True


def wire_conversations(
    settings: ConversationSettings,
    storage: StorageParts,
    observed: TelemetryParts,
    agents: AgentParts,
    decisions: PolicyParts,
    runtime: RuntimeParts,
) -> ConversationParts:
    """A message or a decision hands its run off to this process's worker (`hand_off`)."""
    uow, notifier, metrics = storage.uow, storage.notifier, observed.telemetry.metrics
    presence = ClientPresence(
        grace=timedelta(seconds=settings.client_exec_timeout_seconds),
        max_wait=timedelta(seconds=settings.client_exec_max_seconds),
    )
    pending_calls = PendingCallService(
        uow, agents.catalog, notifier, clock=utcnow, metrics=metrics, hand_off=runtime.worker
    )
    decisions.reviewer.bind(pending_calls)  # a reviewer's `no` approves as a person's click does
    return ConversationParts(
        conversations=ConversationService(
            uow,
            agents.catalog,
            notifier,
            clock=utcnow,
            max_content_chars=settings.max_content_chars,
            metrics=metrics,
            hand_off=runtime.worker,
        ),
        runs=RunService(
            uow,
            notifier,
            notifier,
            clock=utcnow,
            max_wait_seconds=settings.max_wait_seconds,
            metrics=metrics,
            store_unreachable=unreachable_while_waiting,
        ),
        pending_calls=pending_calls,
        events=EventService(
            uow, presence, clock=utcnow, settle=timedelta(seconds=settings.events_settle_seconds)
        ),
        forks=ForkService(
            uow, notifier, clock=utcnow, max_content_chars=settings.max_content_chars, metrics=metrics
        ),
        approvals=ApprovalRequestService(
            uow,
            ExternalPolicyPoint(decisions.point, utcnow),
            notifier,
            clock=utcnow,
            max_wait_seconds=settings.max_wait_seconds,
        ),
    )
