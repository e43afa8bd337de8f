"""The steps of a call's review by a reviewer model that write: the review queued with the suspension,
the verdict recorded (audit row and `pending.reviewed` event), and the identity under which a `no`
approves or votes.

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.reviews.<module>`). See README.md."""

from sursis.domain.reviews import (
    reviewer_steps,
)

__all__ = [
    "reviewer_steps",
]
