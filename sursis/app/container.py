"""The composition root: everything the app and the worker need, built from one Settings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

import structlog
from pydantic_ai.models import Model

from sursis.app.agent_loading import BUILT_IN, check_no_clash, select_agents
from sursis.app.channel_wiring import channel_loops
from sursis.app.policy_wiring import PolicyCaches, policy_parts
from sursis.app.reviewer_wiring import reviewer_loop, reviewer_models
from sursis.app.settings import Settings
from sursis.app.storage import (
    build_audit_chain,
    build_engine,
    build_retention,
    build_unit_of_work,
    check_storage,
)
from sursis.domain.agents import AgentCatalogService
from sursis.domain.approver_admin import ApproverService
from sursis.domain.audit import AuditService
from sursis.domain.audit_verify import AuditChainService
from sursis.domain.authorizations import PreApprovalService
from sursis.domain.channels.admin import ChannelAdminService
from sursis.domain.channels.slack import SlackInbound
from sursis.domain.clock import utcnow
from sursis.domain.conversations import ConversationService
from sursis.domain.credential_cache import CredentialCache
from sursis.domain.customer.intake import EventIntakeService
from sursis.domain.events import ClientPresence, EventService
from sursis.domain.keys import KeyService
from sursis.domain.mcp_pins import McpPinService
from sursis.domain.pending_calls import PendingCallService
from sursis.domain.policy_service import PolicyService
from sursis.domain.policy_simulation import PolicySimulation
from sursis.domain.retention import RetentionService
from sursis.domain.runs import RunService
from sursis.domain.webhooks import WebhookService
from sursis.infra.agents.assistant import assistant_agent
from sursis.infra.agents.declarations import AgentDefinition, DeclaredToolCatalog
from sursis.infra.agents.models import build_model
from sursis.infra.agents.ops import ops_agent
from sursis.infra.agents.run_deps import PreApprovalPolicy
from sursis.infra.db.encryption_state import EncryptionState
from sursis.infra.db.engine import is_sqlite
from sursis.infra.db.errors import database_unreachable
from sursis.infra.db.listen_connection import ListenConnection
from sursis.infra.db.listen_target import listen_url
from sursis.infra.db.listener import PgEventListener
from sursis.infra.db.mcp_pins import SqlMcpPinStore
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.pg_notify import PostgresRunNotifier
from sursis.infra.policy.reviewer import PydanticAiReviewer, ReviewerLoop
from sursis.infra.retention_loop import RetentionLoop
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
    agents: AgentCatalogService
    conversations: ConversationService
    runs: RunService
    pending_calls: PendingCallService
    audit: AuditService
    audit_chain: AuditChainService
    retention: RetentionService
    keys: KeyService
    authorizations: PreApprovalService
    policies: PolicyService
    policy_simulation: PolicySimulation
    runner: AgentRunner
    worker: Worker
    telemetry: Telemetry
    events: EventService
    webhooks: WebhookService
    intake: EventIntakeService
    worlds: WorldsContext
    channels: ChannelAdminService
    slack: SlackInbound
    approvers: ApproverService
    mcp_pins: McpPinService
    reviewer: ReviewerLoop | None = None
    """Asks route reviewers about queued calls (a loop of the worker; `run_once` in tests)."""
    listener: PgEventListener | None = None
    credentials: CredentialCache | None = None
    owns_telemetry: bool = field(default=False)
    encryption: EncryptionState | None = None
    """Set by `start`: whether encryption is on and the active key (the banner, `/readyz`)."""

    async def start(self, *, run_worker: bool) -> None:
        """Start serving; refuses (`EncryptionRefused`) a keyring this database may not be used
        with, and (`AuditSigningKeyRequired`) a worker without the audit signing key on a database
        with signed checkpoints, before anything runs."""
        self.encryption = await check_storage(self.uow)
        log.info("encryption.state", on=self.encryption.on, active_key_id=self.encryption.active_key_id)
        if run_worker:  # the worker seals the audit chains: never unsigned over signed checkpoints
            await self.audit_chain.require_signing()
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

    def listen_for_key_changes(self) -> None:
        """On PostgreSQL the credential cache serves only while this process hears of revocations
        made by others: the API starts listening with the app, not with the first event stream."""
        if self.credentials is not None:
            self.listen_for_events()

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.stop()
        await self.worker.stop(grace=self.settings.shutdown_grace_seconds)
        await self.catalog.disconnect()
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
    uow: SqlUnitOfWorkFactory,
    worlds: WorldsContext | None = None,
    groups: Iterable[str] = BUILT_IN,
    loaded: Iterable[AgentDefinition] = (),
) -> dict[str, AgentDefinition]:
    """The built-in agents of the named groups (`ops` comes with the World Agent it asks); the
    customer supervisor may consult the `loaded` agents adopted with `supervisor="customer"`.
    A group's modules are imported only when it is served."""
    worlds = worlds or build_worlds(uow, utcnow)
    wanted = set(groups)
    definitions: list[AgentDefinition] = []
    if "ops" in wanted:
        from sursis.app.bridges import ask_world_bridge

        definitions.append(
            ops_agent(
                uow, ask_world=ask_world_bridge(worlds.runner), extra_tools=worlds.workspace_memory_tools()
            )
        )
    if "assistant" in wanted:
        definitions.append(assistant_agent(uow))
    if wanted & {"ops", "world"}:
        definitions.append(worlds.definition)
    if "customer" in wanted:
        from sursis.infra.customer.supervisor import customer_agents

        definitions += customer_agents(uow, [d for d in loaded if d.supervisor == "customer"])
    return {d.name: d for d in definitions}


class ModelChoice:
    """Each agent's model: the one it names, else the service's (`SURSIS_MODEL`), each built once.

    A `Model` given to the composition root (`override`, e.g. a test's scripted model) stands in
    for every agent's model.
    """

    def __init__(self, settings: Settings, override: Model | None = None) -> None:
        self._settings = settings
        self._override = override
        self._built: dict[str, Model] = {}

    def named(self, name: str) -> Model:
        if name not in self._built:
            key = self._settings.openai_api_key
            self._built[name] = build_model(
                name,
                openai_base_url=self._settings.openai_base_url,
                openai_api_key=key.get_secret_value() if key else None,
            )
        return self._built[name]

    def default(self) -> Model:
        return self._override or self.named(self._settings.model)

    def for_agent(self, definition: AgentDefinition) -> AgentDefinition:
        model = definition.model
        if self._override is not None or model is None:
            return replace(definition, model=self.default())
        return replace(definition, model=self.named(model) if isinstance(model, str) else model)


AgentsFactory = Callable[[SqlUnitOfWorkFactory], Mapping[str, AgentDefinition]]


def telemetry_config(settings: Settings) -> TelemetryConfig:
    return TelemetryConfig(
        otlp_endpoint=settings.otlp_endpoint,
        otlp_traces_endpoint=settings.otlp_traces_endpoint,
        otlp_metrics_endpoint=settings.otlp_metrics_endpoint,
        console=settings.trace_console,
        include_content=settings.trace_content,
    )


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
    `model` let tests declare their own agents and model; `policy` replaces the stored policy
    point (the default reads the workspace's policy, ladder and `authorizations`): it then decides
    every call, and policies stored over the API have no effect.
    """
    owns_telemetry = telemetry is None
    telemetry = telemetry or build_telemetry(telemetry_config(settings))
    engine = build_engine(settings)
    sqlite = is_sqlite(settings.database_url)
    listening = None if sqlite else listen_url(settings.database_url, settings.database_listen_url)
    caches = PolicyCaches.build(settings, sqlite=sqlite, policy=policy)
    # One LISTEN connection per process, shared by everything that listens in it.
    listen = None if listening is None else ListenConnection(listening)
    notifier = (
        LocalRunNotifier()
        if sqlite
        else PostgresRunNotifier(engine, listen, authorizations=caches.invalidations())
    )
    uow = build_unit_of_work(
        settings,
        engine,
        on_events=notifier.conversations_changed,
        on_pending=notifier.pending_changed,
        on_runs=notifier.runs_notified,
    )
    worlds = build_worlds(uow, utcnow, lease=timedelta(seconds=settings.lease_seconds))
    if agents is not None:
        built = agents(uow)
    else:
        selection = select_agents(settings.agents)
        built = agent_definitions(uow, worlds, selection.built_in, selection.definitions)
        check_no_clash(built, selection.definitions)
        extra_agents = (*selection.definitions, *extra_agents)
    models = ModelChoice(settings, model)
    definitions = {
        name: models.for_agent(d) for name, d in {**built, **{d.name: d for d in extra_agents}}.items()
    }
    catalog = DeclaredToolCatalog(definitions.values())
    pins = SqlMcpPinStore(uow)
    catalog.use_pins(pins)
    review_model = PydanticAiReviewer(reviewer_models(settings))
    policies = policy_parts(uow, catalog, caches, policy, review_model)
    reviewer = reviewer_loop(settings, uow, review_model, utcnow)
    timeouts = Timeouts(
        approval=timedelta(seconds=settings.approval_timeout_seconds),
        elicitation=timedelta(seconds=settings.elicitation_timeout_seconds),
        client_exec=timedelta(seconds=settings.client_exec_timeout_seconds),
    )
    runner = AgentRunner(
        uow,
        definitions,
        models.default(),
        notifier,
        clock=utcnow,
        step_limit=settings.step_limit,
        timeouts=timeouts,
        lease=timedelta(seconds=settings.lease_seconds),
        telemetry=telemetry,
        policy=policies.point,
        delta_interval=settings.events_delta_interval_seconds,
        history_cache_messages=settings.history_cache_messages,
        history_turns=settings.history_turns,
    )
    worlds.bind(runner)
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
    chain = build_audit_chain(settings, uow)
    retention = build_retention(settings, uow, chain)
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
        loops=[
            *channel_loops(settings, uow, utcnow),
            RetentionLoop(chain, retention, settings.audit_seal_seconds, settings.retention_sweep_seconds),
            reviewer,
        ],
    )
    pending_calls = PendingCallService(
        uow, catalog, notifier, clock=utcnow, metrics=telemetry.metrics, hand_off=worker
    )
    reviewer.bind(pending_calls)
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
    credentials = (
        CredentialCache(settings.credential_cache_seconds, live=sqlite)
        if settings.credential_cache_seconds > 0
        else None
    )
    return Container(
        settings=settings,
        uow=uow,
        notifier=notifier,
        catalog=catalog,
        agents=AgentCatalogService(catalog, timeouts.as_mapping()),
        conversations=ConversationService(
            uow,
            catalog,
            notifier,
            clock=utcnow,
            max_content_chars=settings.max_content_chars,
            metrics=telemetry.metrics,
            hand_off=worker,
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
        audit_chain=chain,
        retention=retention,
        keys=KeyService(uow, cache=credentials),
        credentials=credentials,
        authorizations=PreApprovalService(uow, catalog, changes=caches.rules),
        policies=policies.service,
        policy_simulation=policies.simulation,
        reviewer=reviewer,
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
        approvers=ApproverService(uow, clock=utcnow),
        mcp_pins=McpPinService(pins, clock=utcnow),
        listener=None
        if listen is None
        else PgEventListener(
            listen,
            notifier.conversations_changed,
            on_pending=notifier.pending_changed,
            keys=credentials,
        ),
    )
