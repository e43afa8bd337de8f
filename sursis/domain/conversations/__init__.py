"""Conversations as their users hold them (start, read, post a message, which queues a run) and forks
(a new conversation with the original's history up to a turn, its legal holds and an audit row).

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.conversations.<module>`). See README.md."""

from sursis.domain.conversations import (
    conversations,
    fork_service,
)

__all__ = [
    "conversations",
    "fork_service",
]
