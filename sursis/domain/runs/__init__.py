"""Runs as their users follow them (read, wait, list tool calls, cancel), queueing a run for a message,
and a run's end of life (suspended, completed, failed, cancelled) in one place.

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.runs.<module>`). See README.md."""

from sursis.domain.runs import (
    run_lifecycle,
    run_queue,
    runs,
)

__all__ = [
    "run_lifecycle",
    "run_queue",
    "runs",
]
