"""The audit log: as operators read it, its per-workspace hash chain, the signed checkpoints of the
chain's head, and the integrity findings (refusals because stored data no longer agrees with a
decision).

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.audit.<module>`). See README.md."""

from sursis.domain.audit import (
    audit,
    audit_chain,
    audit_checkpoint,
    integrity,
)

__all__ = [
    "audit",
    "audit_chain",
    "audit_checkpoint",
    "integrity",
]
