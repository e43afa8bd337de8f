"""The live event stream (what happens in a conversation, stored in order in the transaction of the
change it tells of) and webhooks (a workspace's subscriptions, signed deliveries).

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.events.<module>`). See README.md."""

from sursis.domain.events import (
    events,
    webhooks,
)

__all__ = [
    "events",
    "webhooks",
]
