"""An AG-UI resume whose call was decided between the run's read and its decision ends in the code a
client can act on: `interrupt_expired` when the call's deadline decided it (this decision found it
past, or the sweeper expired it first), `interrupt_stale` when a person did."""

from __future__ import annotations

from sursis.app.ag_ui import stale_refusal
from sursis.domain.approvals.pending_calls import EXPIRY_ACTOR
from sursis.domain.errors import Stale


def stale(status: str, **extra: object) -> Stale:
    return Stale(f"the pending call is already {status}", extra={"pending_status": status, **extra})


def test_a_call_the_sweeper_expired_first_is_an_expired_interrupt() -> None:
    refused = stale_refusal(stale("expired", resolved_by=EXPIRY_ACTOR, resolved_at="2026-12-06T00:00:00"))
    assert (refused.code, refused.message) == ("interrupt_expired", "the pending call is already expired")


def test_a_call_its_route_denied_at_the_deadline_is_an_expired_interrupt() -> None:
    assert stale_refusal(stale("denied", resolved_by=EXPIRY_ACTOR)).code == "interrupt_expired"


def test_a_call_this_decision_found_past_its_deadline_is_an_expired_interrupt() -> None:
    assert stale_refusal(stale("expired", expires_at="2026-12-06T00:00:00")).code == "interrupt_expired"


def test_a_call_a_person_decided_first_is_a_stale_interrupt() -> None:
    assert stale_refusal(stale("denied", resolved_by="key:operator")).code == "interrupt_stale"
    assert stale_refusal(stale("approved", resolved_by="key:operator")).code == "interrupt_stale"
