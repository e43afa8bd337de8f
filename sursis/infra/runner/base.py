"""The runner's configuration and what its collaborators share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import structlog

from sursis.domain.clock import Clock
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.tools import PendingKind
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.telemetry import OtelMetrics

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


@dataclass(frozen=True, slots=True)
class RunnerParts:
    """What the runner's collaborators share: the storage, the clock, the run notifier, the metrics
    and the agents' definitions. A setting that one collaborator reads is given to it alone."""

    uow: UnitOfWorkFactory
    clock: Clock
    notifier: LocalRunNotifier
    metrics: OtelMetrics
    definitions: Mapping[str, AgentDefinition]
