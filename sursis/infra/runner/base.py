"""The runner's configuration and the state its concerns share."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import structlog
from pydantic_ai.models import Model

from sursis.domain.clock import Clock
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.tools import PendingKind
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.agents.run_deps import PreApprovalPolicy
from sursis.infra.history import MessageLogCache
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.runner.agents import serve_agent
from sursis.infra.telemetry import Telemetry

log = structlog.get_logger("sursis.runner")
ACTOR = "system:worker"


@dataclass(slots=True)
class Timeouts:
    approval: timedelta
    elicitation: timedelta
    client_exec: timedelta

    def as_mapping(self) -> Mapping[PendingKind, timedelta]:
        return {
            PendingKind.APPROVAL: self.approval,
            PendingKind.ELICITATION: self.elicitation,
            PendingKind.CLIENT_EXEC: self.client_exec,
        }


class RunnerBase:
    """The runner's configuration: the agents, the storage, the clock, the limits."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        definitions: Mapping[str, AgentDefinition],
        model: Model,
        notifier: LocalRunNotifier,
        *,
        clock: Clock,
        step_limit: int,
        timeouts: Timeouts,
        lease: timedelta,
        policy: PreApprovalPolicy | None = None,
        telemetry: Telemetry | None = None,
        delta_interval: float = 0.1,
        history_cache_messages: int = 2_000,
        history_turns: int = 0,
    ) -> None:
        self._uow = uow
        self._telemetry = telemetry or Telemetry.disabled()
        self._metrics = self._telemetry.metrics
        self._delta_interval = delta_interval
        # A segment shows the model its own turn and `history_turns` before it: the cache keeps those.
        kept = history_turns + 1 if history_turns else 0
        self._logs = MessageLogCache(history_cache_messages, keep_turns=kept)
        self._history_turns = history_turns
        self._definitions = dict(definitions)
        self._served = {
            name: serve_agent(d, d.model if isinstance(d.model, Model) else model, self._telemetry)
            for name, d in definitions.items()
        }
        self._agents = {
            name: served.runnable(d.mcp.connect if d.mcp is not None else None)
            for (name, served), d in zip(self._served.items(), definitions.values(), strict=True)
        }
        self._agent_deps = {name: s.deps for name, s in self._served.items() if s.deps is not None}
        self._notifier = notifier
        self._clock = clock
        self._step_limit = step_limit
        self._timeouts = timeouts.as_mapping()
        self._lease = lease
        self._policy = policy or PreApprovalPolicy()

    def log_position(self, conversation_id: uuid.UUID) -> int | None:
        """How far this runner has read the conversation's log (None: not kept)."""
        return self._logs.position(conversation_id)

    def log_positions(self) -> dict[uuid.UUID, int]:
        """How far this runner has read the logs of recently run conversations (`claim_next`)."""
        return self._logs.positions()
