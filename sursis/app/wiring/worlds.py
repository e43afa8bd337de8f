"""The worlds context: sandboxed worlds, their World Agent and the workspace memory. Its runner is
bound once the agent runner exists (`wire_runtime`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sursis.app.context_settings import WorldSettings
from sursis.app.wiring.storage import StorageParts
from sursis.domain.clock import utcnow
from sursis.infra.worlds.context import WorldsContext, build_worlds


@dataclass(frozen=True, slots=True)
class WorldParts:
    worlds: WorldsContext


def wire_worlds(settings: WorldSettings, storage: StorageParts) -> WorldParts:
    return WorldParts(build_worlds(storage.uow, utcnow, lease=timedelta(seconds=settings.lease_seconds)))
