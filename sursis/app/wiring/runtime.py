"""The runtime: the agent runner that drives segments (claim, model, gated call, suspend, resume)
and the worker that claims runs, sweeps, hands off and runs the loops of deliveries and retention."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sursis.app.context_settings import RuntimeSettings
from sursis.app.wiring.agents import AgentParts
from sursis.app.wiring.deliveries import DeliveryParts
from sursis.app.wiring.policy import PolicyParts
from sursis.app.wiring.storage import StorageParts
from sursis.app.wiring.telemetry import TelemetryParts
from sursis.app.wiring.worlds import WorldParts
from sursis.domain.clock import utcnow
from sursis.infra.retention_loop import RetentionLoop
from sursis.infra.runner import AgentRunner
from sursis.infra.worker import Worker


@dataclass(frozen=True, slots=True)
class RuntimeParts:
    runner: AgentRunner
    worker: Worker


def wire_runtime(
    settings: RuntimeSettings,
    storage: StorageParts,
    observed: TelemetryParts,
    agents: AgentParts,
    policy: PolicyParts,
    worlds: WorldParts,
    deliveries: DeliveryParts,
) -> RuntimeParts:
    """The runner asks `policy.point` before every tool call; the World Agent runs on it too."""
    uow, lease = storage.uow, timedelta(seconds=settings.lease_seconds)
    runner = AgentRunner(
        uow,
        agents.definitions,
        agents.model,
        storage.notifier,
        clock=utcnow,
        step_limit=settings.step_limit,
        timeouts=agents.timeouts,
        lease=lease,
        telemetry=observed.telemetry,
        policy=policy.point,
        delta_interval=settings.events_delta_interval_seconds,
        history_cache_messages=settings.history_cache_messages,
        history_turns=settings.history_turns,
    )
    worlds.worlds.bind(runner)
    retention = RetentionLoop(
        storage.audit_chain,
        storage.retention,
        settings.audit_seal_seconds,
        settings.retention_sweep_seconds,
        storage.hearing,
    )
    worker = Worker(
        uow,
        runner,
        storage.notifier,
        clock=utcnow,
        concurrency=settings.worker_slots,
        poll_seconds=settings.worker_poll_seconds,
        lease=lease,
        sweep_seconds=settings.sweep_seconds,
        max_segment_attempts=settings.max_segment_attempts,
        telemetry=observed.telemetry,
        deliverer=deliveries.deliverer,
        loops=[*deliveries.loops, retention, policy.reviewer],
        hearing=storage.hearing,
    )
    return RuntimeParts(runner, worker)
