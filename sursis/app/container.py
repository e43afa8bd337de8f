"""The composition root: everything the app and the worker need, built from one Settings.

`build_container` is the list of the service's contexts in the order they are wired; each wires
itself in one function of `sursis.app.wiring` and hands back what it offers. Every entry point
goes through it: the API (`create_app`), the worker and embedded use (`Service`); the commands of
the command line that need only storage go through its first step (`wire_storage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from pydantic_ai.models import Model

from sursis.app.settings import Settings
from sursis.app.wiring import offered
from sursis.app.wiring.agents import AgentsFactory, wire_agents
from sursis.app.wiring.agents import agent_definitions as agent_definitions
from sursis.app.wiring.channels import wire_channels
from sursis.app.wiring.conversations import wire_conversations
from sursis.app.wiring.customer import wire_customer
from sursis.app.wiring.deliveries import wire_deliveries
from sursis.app.wiring.policy import PolicyCaches, wire_policy
from sursis.app.wiring.runtime import wire_runtime
from sursis.app.wiring.storage import StorageParts, check_storage, wire_storage
from sursis.app.wiring.telemetry import telemetry_config as telemetry_config
from sursis.app.wiring.telemetry import wire_telemetry
from sursis.app.wiring.worlds import wire_worlds
from sursis.domain.agents.agents import AgentCatalogService
from sursis.domain.agents.mcp_pins import McpPinService
from sursis.domain.approvals.approval_requests import ApprovalRequestService
from sursis.domain.approvals.approver_admin import ApproverService
from sursis.domain.approvals.pending_calls import PendingCallService
from sursis.domain.channels.admin import ChannelAdminService
from sursis.domain.channels.slack import SlackInbound
from sursis.domain.conversations.conversations import ConversationService
from sursis.domain.conversations.fork_service import ForkService
from sursis.domain.customer.intake import EventIntakeService
from sursis.domain.events.events import EventService
from sursis.domain.events.webhooks import WebhookService
from sursis.domain.policy.authorizations import PreApprovalService
from sursis.domain.policy.policy_service import PolicyService
from sursis.domain.policy.policy_simulation import PolicySimulation
from sursis.domain.runs.runs import RunService
from sursis.infra.agents.declarations import AgentDefinition, DeclaredToolCatalog
from sursis.infra.agents.models import BuiltModels
from sursis.infra.agents.run_deps import PreApprovalPolicy
from sursis.infra.db.encryption_state import EncryptionState
from sursis.infra.policy.reviewer import ReviewerLoop
from sursis.infra.runner import AgentRunner
from sursis.infra.telemetry import Telemetry
from sursis.infra.worker import Worker
from sursis.infra.worlds.context import WorldsContext

log = structlog.get_logger("sursis.http")


@dataclass(kw_only=True)
class Container(StorageParts):
    """The storage (the parts `wire_storage` offers, inherited: the container starts and closes
    them) and what the other contexts offer, by name, grouped by the wiring function that offers
    them. The routes are given these attributes (`sursis.app.routes.provide`); `Service` wraps the
    whole."""

    settings: Settings
    # telemetry (wire_telemetry)
    telemetry: Telemetry
    owns_telemetry: bool
    # worlds (wire_worlds)
    worlds: WorldsContext
    # agents (wire_agents)
    catalog: DeclaredToolCatalog
    agents: AgentCatalogService
    mcp_pins: McpPinService
    models: BuiltModels
    # policy (wire_policy)
    policies: PolicyService
    policy_simulation: PolicySimulation
    authorizations: PreApprovalService
    approvers: ApproverService
    reviewer: ReviewerLoop
    # deliveries (wire_deliveries)
    webhooks: WebhookService
    # runtime (wire_runtime)
    runner: AgentRunner
    worker: Worker
    # conversations (wire_conversations)
    conversations: ConversationService
    runs: RunService
    pending_calls: PendingCallService
    events: EventService
    forks: ForkService
    approvals: ApprovalRequestService
    # channels (wire_channels)
    channels: ChannelAdminService
    slack: SlackInbound
    # customer (wire_customer)
    intake: EventIntakeService
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
            # The worker's loops wake on the events and pending calls other processes commit.
            self.listen_for_events()
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
        await self.models.close()
        await self.notifier.stop()
        await self.uow.engine.dispose()
        if self.owns_telemetry:
            self.telemetry.shutdown()


def build_container(
    settings: Settings,
    *,
    telemetry: Telemetry | None = None,
    agents: AgentsFactory | None = None,
    extra_agents: Sequence[AgentDefinition] = (),
    model: Model | None = None,
    policy: PreApprovalPolicy | None = None,
) -> Container:
    """Everything wired from `settings`, each context from its own slice of them (its property of
    `Settings`). Illegal tool declarations raise here, at start-up.

    `telemetry`, when given, stays the caller's to shut down; `agents`, `extra_agents` and
    `model` let tests declare their own agents and model; `policy` replaces the stored policy
    point (the default reads the workspace's policy, ladder and `authorizations`): it then decides
    every call, and policies stored over the API have no effect.
    """
    caches = PolicyCaches.build(settings.policy, policy)
    storage = wire_storage(settings.storage, changes=caches.invalidations())
    observed = wire_telemetry(settings.telemetry, telemetry)
    worlds = wire_worlds(settings.worlds, storage)
    served = wire_agents(
        settings.agents_served, storage, worlds, agents=agents, extra=extra_agents, model=model
    )
    decisions = wire_policy(settings.policy, storage, served, caches, policy)
    deliveries = wire_deliveries(settings.deliveries, storage)
    runtime = wire_runtime(settings.runtime, storage, observed, served, decisions, worlds, deliveries)
    inbound = wire_conversations(settings.conversations, storage, observed, served, decisions, runtime)
    channels = wire_channels(settings.channels, storage, inbound)
    customer = wire_customer(storage)
    parts = (storage, observed, worlds, served, decisions, deliveries, runtime, inbound, channels, customer)
    return Container(settings=settings, **offered(*parts))
