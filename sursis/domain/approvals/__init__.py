"""Pending calls and how they are decided: read, list, resolve, expire; votes of approver groups and
their quorum; managing groups and delegations; the decision seal; and approval requests filed by
agents Sursis does not host.

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.approvals.<module>`). See README.md."""

from sursis.domain.approvals import (
    approval_request_records,
    approval_requests,
    approval_votes,
    approver_admin,
    decision_seal,
    pending_calls,
)

__all__ = [
    "approval_request_records",
    "approval_requests",
    "approval_votes",
    "approver_admin",
    "decision_seal",
    "pending_calls",
]
