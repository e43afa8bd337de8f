"""The customer context: platform events taken in (`POST /v1/events`) and the runs they start."""

from __future__ import annotations

from dataclasses import dataclass

from sursis.app.wiring.storage import StorageParts
from sursis.domain.clock import utcnow
from sursis.domain.customer.intake import EventIntakeService


@dataclass(frozen=True, slots=True)
class CustomerParts:
    intake: EventIntakeService


def wire_customer(storage: StorageParts) -> CustomerParts:
    return CustomerParts(EventIntakeService(storage.uow, storage.notifier, clock=utcnow))
