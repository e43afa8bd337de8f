"""The composition root: everything the app and the worker need, built from one Settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import structlog
from pydantic_ai.models import Model

from sursis.app.bridges import ask_world_bridge
from sursis.app.channel_wiring import channel_loops
from sursis.app.settings import Settings
from sursis.domain.audit import AuditService
from sursis.domain.authorizations import PreApprovalService
from sursis.domain.channels.admin import ChannelAdminService
from sursis.domain.channels.slack import SlackInbound
from sursis.domain.clock import utcnow
from sursis.domain.conversations import ConversationService
from sursis.domain.customer.intake import EventIntakeService
from sursis.domain.events import ClientPresence, EventService
from sursis.domain.keys import KeyService
from sursis.domain.pending_calls import PendingCallService
from sursis.domain.runs import RunService
from sursis.domain.webhooks import WebhookService
from sursis.infra.agents.assistant import assistant_agent
from sursis.infra.agents.declarations import AgentDefinition, DeclaredToolCatalog
from sursis.infra.agents.models import build_model
from sursis.infra.agents.observed import PreApprovalPolicy
from sursis.infra.agents.ops import ops_agent
from sursis.infra.agents.policy import StoredPreApprovalPolicy
from sursis.infra.customer.supervisor import customer_agents
from sursis.infra.db.engine import create_engine, is_sqlite
from sursis.infra.db.errors import database_unreachable
from sursis.infra.db.listener import PgEventListener
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.encryption import AesGcmCipher, load_keyring
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.pg_notify import PostgresRunNotifier
from sursis.infra.runner import AgentRunner, Timeouts
from sursis.infra.telemetry import Telemetry, TelemetryConfig, build_telemetry
from sursis.infra.webhook_delivery import DeliveryPolicy, WebhookDeliverer
from sursis.infra.worker import Worker
from sursis.infra.worlds.context import WorldsContext, build_worlds

log = structlog.get_logger("sursis.http")


@dataclass
class Container:
    settings: Settings
    uow: SqlUnitOfWorkFactory
    notifier: LocalRunNotifier
    catalog: DeclaredToolCatalog
    conversations: ConversationService
    runs: RunService
    pending_calls: PendingCallService
    audit: AuditService
    keys: KeyService
    authorizations: PreApprovalService
    runner: AgentRunner
    worker: Worker
    telemetry: Telemetry
    events: EventService
    webhooks: WebhookService
    intake: EventIntakeService
    worlds: WorldsContext
    channels: ChannelAdminService
    slack: SlackInbound
    listener: PgEventListener | None = None
    owns_telemetry: bool = field(default=False)

    async def start(self, *, run_worker: bool) -> None:
        self.notifier.start()
        if run_worker:
            self.worker.start()

    async def refresh_backlog(self) -> None:
        """Read the awaiting calls and active runs into the gauges (right before a scrape)."""
        async with self.uow() as uow:
            awaiting = await uow.pending.count_awaiting()
            active = await uow.runs.count_by_status()
        self.telemetry.metrics.set_backlog(awaiting, active)

    def listen_for_events(self) -> None:
        """Wake this process's event streams on commits made elsewhere (PostgreSQL only)."""
        if self.listener is not None:
            self.listener.ensure_started()

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.stop()
        await self.worker.stop(grace=self.settings.shutdown_grace_seconds)
        await self.notifier.stop()
        await self.uow.engine.dispose()
        if self.owns_telemetry:
            self.telemetry.shutdown()


def unreachable_while_waiting(exc: BaseException) -> bool:
    """Whether a long-poll after a committed message stopped because the database is out of reach
    (logged here: the caller answers with the queued run instead of an error)."""
    if not database_unreachable(exc):
        return False
    log.warning("run.wait_interrupted", error=str(exc)[:200])
    return True


def agent_definitions(
    uow: SqlUnitOfWorkFactory, worlds: WorldsContext | None = None
) -> dict[str, AgentDefinition]:
    worlds = worlds or build_worlds(uow, utcnow)
    ops = ops_agent(
        uow, ask_world=ask_world_bridge(worlds.runner), extra_tools=worlds.workspace_memory_tools()
    )
    definitions = [ops, assistant_agent(uow), worlds.definition, *customer_agents(uow)]
    return {d.name: d for d in definitions}


AgentsFactory = Callable[[SqlUnitOfWorkFactory], Mapping[str, AgentDefinition]]


def telemetry_config(settings: Settings) -> TelemetryConfig:
    return TelemetryConfig(
        otlp_endpoint=settings.otlp_endpoint,
        otlp_traces_endpoint=settings.otlp_traces_endpoint,
        otlp_metrics_endpoint=settings.otlp_metrics_endpoint,
        console=settings.trace_console,
        include_content=settings.trace_content,
    )


def build_cipher(settings: Settings) -> AesGcmCipher:
    """The cipher over the keyring the settings name (no keys: encryption off)."""
    keys = settings.encryption_keys.get_secret_value() if settings.encryption_keys else None
    return AesGcmCipher(load_keyring(keys, settings.encryption_keys_file))


def build_container(
    settings: Settings,
    *,
    telemetry: Telemetry | None = None,
    agents: AgentsFactory | None = None,
    extra_agents: Sequence[AgentDefinition] = (),
    model: Model | None = None,
    policy: PreApprovalPolicy | None = None,
) -> Container:
    """Everything wired from `settings`. Illegal tool declarations raise here, at start-up.

    `telemetry`, when given, stays the caller's to shut down; `agents`, `extra_agents` and
    `model` let tests declare their own agents and model; `policy` replaces the stored
    pre-approval policy (the default reads the workspace's `authorizations`).
    """
    owns_telemetry = telemetry is None
    telemetry = telemetry or build_telemetry(telemetry_config(settings))
    engine = create_engine(settings.database_url, pool_size=settings.db_pool_size)
    notifier = (
        LocalRunNotifier()
        if is_sqlite(settings.database_url)
        else PostgresRunNotifier(engine, settings.database_url)
    )
    uow = SqlUnitOfWorkFactory(
        engine,
        on_events=notifier.conversations_changed,
        on_pending=notifier.pending_changed,
        on_runs=notifier.runs_notified,
        cipher=build_cipher(settings),
    )
    worlds = build_worlds(uow, utcnow, lease=timedelta(seconds=settings.lease_seconds))
    built = agents(uow) if agents is not None else agent_definitions(uow, worlds)
    definitions = {**built, **{d.name: d for d in extra_agents}}
    catalog = DeclaredToolCatalog(definitions.values())
    model = model or build_model(
        settings.model,
        openai_base_url=settings.openai_base_url,
        openai_api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
    )
    runner = AgentRunner(
        uow,
        definitions,
        model,
        notifier,
        clock=utcnow,
        step_limit=settings.step_limit,
        timeouts=Timeouts(
            approval=timedelta(seconds=settings.approval_timeout_seconds),
            elicitation=timedelta(seconds=settings.elicitation_timeout_seconds),
            client_exec=timedelta(seconds=settings.client_exec_timeout_seconds),
        ),
        lease=timedelta(seconds=settings.lease_seconds),
        telemetry=telemetry,
        policy=policy or StoredPreApprovalPolicy(uow),
        delta_interval=settings.events_delta_interval_seconds,
        history_cache_messages=settings.history_cache_messages,
        history_turns=settings.history_turns,
    )
    worlds.runner.bind(runner)
    deliverer = WebhookDeliverer(
        uow,
        DeliveryPolicy(
            max_attempts=settings.webhook_max_attempts,
            backoff_base=settings.webhook_backoff_seconds,
            backoff_max=settings.webhook_backoff_max_seconds,
            timeout=settings.webhook_timeout_seconds,
            allow_private_hosts=settings.webhook_allow_private_hosts,
            public_url=settings.public_url,
        ),
        clock=utcnow,
        poll_seconds=settings.webhook_poll_seconds,
    )
    worker = Worker(
        uow,
        runner,
        notifier,
        clock=utcnow,
        concurrency=settings.worker_concurrency,
        poll_seconds=settings.worker_poll_seconds,
        lease=timedelta(seconds=settings.lease_seconds),
        sweep_seconds=settings.sweep_seconds,
        max_segment_attempts=settings.max_segment_attempts,
        telemetry=telemetry,
        deliverer=deliverer,
        loops=channel_loops(settings, uow, utcnow),
    )
    pending_calls = PendingCallService(uow, catalog, notifier, clock=utcnow, metrics=telemetry.metrics)
    slack = SlackInbound(
        uow,
        notifier,
        pending_calls,
        agent=settings.slack_agent,
        clock=utcnow,
        max_content_chars=settings.max_content_chars,
        notice_workspace=settings.slack_workspace,
    )
    events = EventService(
        uow,
        ClientPresence(
            grace=timedelta(seconds=settings.client_exec_timeout_seconds),
            max_wait=timedelta(seconds=settings.client_exec_max_seconds),
        ),
        clock=utcnow,
        settle=timedelta(seconds=settings.events_settle_seconds),
    )
    webhooks = WebhookService(uow, clock=utcnow, allow_private_hosts=settings.webhook_allow_private_hosts)
    return Container(
        settings=settings,
        uow=uow,
        notifier=notifier,
        catalog=catalog,
        conversations=ConversationService(
            uow,
            catalog,
            notifier,
            clock=utcnow,
            max_content_chars=settings.max_content_chars,
            metrics=telemetry.metrics,
        ),
        runs=RunService(
            uow,
            notifier,
            notifier,
            clock=utcnow,
            max_wait_seconds=settings.max_wait_seconds,
            metrics=telemetry.metrics,
            store_unreachable=unreachable_while_waiting,
        ),
        pending_calls=pending_calls,
        audit=AuditService(uow),
        keys=KeyService(uow),
        authorizations=PreApprovalService(uow, catalog),
        runner=runner,
        worker=worker,
        telemetry=telemetry,
        owns_telemetry=owns_telemetry,
        events=events,
        webhooks=webhooks,
        intake=EventIntakeService(uow, notifier, clock=utcnow),
        worlds=worlds,
        channels=ChannelAdminService(uow, clock=utcnow),
        slack=slack,
        listener=None
        if is_sqlite(settings.database_url)
        else PgEventListener(
            settings.database_url, notifier.conversations_changed, on_pending=notifier.pending_changed
        ),
    )
