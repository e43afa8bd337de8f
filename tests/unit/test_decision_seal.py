"""The decision seal: a MAC under a key derived from the keyring, over facts that name one call, and
the route check a sealed approval must pass."""

from __future__ import annotations

import base64
import os
from dataclasses import replace

from pydantic_ai.messages import ToolCallPart

from sursis.domain.approvals.decision_seal import SELF_APPROVAL, VOTES, decision_facts, unmet_route
from sursis.domain.audit.integrity import DECISION_UNSEALED
from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision, PolicyEffect
from sursis.domain.states import PendingStatus
from sursis.infra.agents.approved_args import binding, mismatch
from sursis.infra.encryption.decision_seal import DecisionSealer
from sursis.infra.encryption.keyring import LocalKeyring
from tests.unit.test_approved_args import ASKED, approved_row

K1, K2 = os.urandom(32), os.urandom(32)
QUORUM_2 = PolicyDecision(
    PolicyEffect.ASK, policy_version=3, rule="finance", route=ApprovalRoute(groups=("finance",), quorum=2)
)


def test_a_seal_checks_only_for_its_own_facts_and_a_key_the_process_holds() -> None:
    sealer = DecisionSealer(LocalKeyring({"k1": K1}))
    call = approved_row(ASKED, policy=QUORUM_2, resolved_by="ann")
    facts = decision_facts(call, PendingStatus.APPROVED, "ann", {"decision": "approve"})
    seal = sealer.seal(facts)
    assert seal is not None and seal.startswith("v1:k1:")
    assert sealer.problem(facts, seal, "decision") is None
    other = decision_facts(approved_row(ASKED, policy=QUORUM_2), PendingStatus.APPROVED, "ann", {})
    assert "does not match" in str(sealer.problem(other, seal, "decision"))
    denied = decision_facts(call, PendingStatus.DENIED, "ann", {"decision": "approve"})
    assert "does not match" in str(sealer.problem(denied, seal, "decision"))
    assert "carries no seal" in str(sealer.problem(facts, None, "decision"))
    # Rotated: k2 active, k1 kept to check what it sealed; a process without k1 cannot.
    assert DecisionSealer(LocalKeyring({"k2": K2, "k1": K1})).problem(facts, seal, "decision") is None
    assert "does not hold" in str(DecisionSealer(LocalKeyring({"k2": K2})).problem(facts, seal, "decision"))


def test_the_seal_key_is_not_the_data_key() -> None:
    import hashlib
    import hmac

    from sursis.domain.approvals.decision_seal import canonical

    facts = {"v": 1}
    seal = DecisionSealer(LocalKeyring({"k1": K1})).seal(facts)
    with_data_key = base64.b64encode(hmac.new(K1, canonical(facts), hashlib.sha256).digest()).decode()
    assert seal is not None and not seal.endswith(with_data_key)


def test_without_a_keyring_nothing_is_sealed() -> None:
    sealer = DecisionSealer(LocalKeyring({}))
    assert sealer.enabled is False and sealer.seal({"v": 1}) is None


def test_the_sealed_votes_must_meet_the_quorum_without_the_requester() -> None:
    def voted(*votes: tuple[str, str], requester: str = "rex", **more: object) -> str | None:
        record = {"decision": "approve", VOTES: [list(v) for v in votes], **more}
        return unmet_route(approved_row(ASKED, policy=QUORUM_2, requested_by=requester, resolution=record))

    assert voted(("ann", "approve"), ("bob", "approve")) is None
    assert "hold 1" in str(voted(("ann", "approve")))
    assert "hold 1" in str(voted(("ann", "approve"), ("ann", "approve")))
    assert "hold 1" in str(voted(("ann", "approve"), ("rex", "approve")))
    assert "hold 1" in str(voted(("ann", "approve"), ("bob", "deny")))
    one_click = approved_row(ASKED, requested_by="rex", resolved_by="rex", resolution={"decision": "approve"})
    assert "own call" in str(unmet_route(one_click))
    allowed = replace(one_click, resolution={"decision": "approve", SELF_APPROVAL: True})
    assert unmet_route(allowed) is None


def test_an_approval_whose_seal_does_not_check_is_bound_to_refusal() -> None:
    row = replace(approved_row(ASKED), seal_problem="the decision carries no seal")
    part = ToolCallPart("refund", ASKED, tool_call_id=row.tool_call_id)
    found = mismatch(part, binding(row, part))
    assert found is not None and found.action == DECISION_UNSEALED and found.code == "decision_seal_invalid"
