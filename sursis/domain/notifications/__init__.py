"""Who hears of what, above both the event stream and the channels: an event's deliveries (its
workspace's webhooks, its conversation's channel bindings, queued in the transaction that wrote it)
and the sweeper's reminders and escalations of routed calls.

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.notifications.<module>`). See README.md."""

from sursis.domain.notifications import (
    delivery,
    escalation,
)

__all__ = [
    "delivery",
    "escalation",
]
