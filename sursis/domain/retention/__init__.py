"""Retention: a policy per workspace, legal holds, the purge the sweeper runs in batches, and the audit
chain's sealing and verification (`audit_verify`), which run under the same unit of work
(`RetentionUnitOfWork`) and cut the chain at an anchor.

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.retention.<module>`). See README.md."""

from sursis.domain.retention import (
    audit_verify,
    retention,
    retention_ports,
    retention_records,
)

__all__ = [
    "audit_verify",
    "retention",
    "retention_ports",
    "retention_records",
]
