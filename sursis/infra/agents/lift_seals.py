"""The seal of a pre-approval's lift: written when a standing authorization clears a call
(`policy_gate`), checked when a redispatched call relies on that recorded clearance (`redispatch`).
Both sides seal the same facts (`domain/decision_seal.lift_facts`): which pre-approval, which call,
which arguments."""

from __future__ import annotations

from typing import Any

from sursis.domain.approvals.decision_seal import lift_facts
from sursis.domain.encryption import Cipher
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.encryption.decision_seal import DecisionSealer, sealer_of


def lift_sealer(deps: RunDeps) -> DecisionSealer:
    """The decision sealer of the keyring the segment's units of work hold (off without one)."""
    cipher: Cipher | None = getattr(deps.uow, "cipher", None)
    return sealer_of(cipher) if cipher is not None else DecisionSealer.off()


def facts_of_lift(
    deps: RunDeps, tool_call_id: str, tool_name: str, hashed: str, authorization: str
) -> dict[str, Any]:
    """What the seal of a lift covers, for the call `tool_call_id` of the segment's conversation."""
    conversation = str(deps.conversation_id)
    return lift_facts(deps.workspace, conversation, tool_call_id, tool_name, hashed, authorization)
