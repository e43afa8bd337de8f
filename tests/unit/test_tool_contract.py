"""The tool contract's legal matrix and effect templates."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sursis.domain.errors import ToolDeclarationError
from sursis.domain.tools import (
    DEFAULT_TIMEOUTS,
    Approval,
    Category,
    Executor,
    PendingKind,
    ToolApprovalRequest,
    ToolSpec,
)


@pytest.mark.parametrize(
    ("executor", "approval", "legal"),
    [
        (Executor.SERVER, Approval.REQUIRES_APPROVAL, True),
        (Executor.CLIENT, Approval.REQUIRES_APPROVAL, True),
        (Executor.HUMAN, Approval.REQUIRES_APPROVAL, False),
        (Executor.PROVIDER, Approval.REQUIRES_APPROVAL, False),
        (Executor.SERVER, Approval.AUTO, True),
        (Executor.CLIENT, Approval.AUTO, True),
        (Executor.HUMAN, Approval.AUTO, True),
        (Executor.PROVIDER, Approval.AUTO, True),
    ],
)
def test_approval_may_gate_only_server_and_client(
    executor: Executor, approval: Approval, legal: bool
) -> None:
    if legal:
        assert ToolSpec("t", executor=executor, approval=approval).gated is (
            approval is Approval.REQUIRES_APPROVAL
        )
    else:
        with pytest.raises(ToolDeclarationError, match="approval may gate only"):
            ToolSpec("t", executor=executor, approval=approval)


def test_mutate_defaults_to_approval_and_read_to_auto() -> None:
    assert ToolSpec("m", category=Category.MUTATE).gated
    assert ToolSpec("m", category=Category.MUTATE, approval=Approval.REQUIRES_APPROVAL).gated
    assert ToolSpec("c", executor=Executor.CLIENT, category=Category.MUTATE).gated
    assert not ToolSpec("r", category=Category.READ).gated
    assert not ToolSpec("s", category=Category.SUGGEST).gated


def test_a_mutate_tool_cannot_be_declared_ungated() -> None:
    with pytest.raises(ToolDeclarationError, match="mutate tool always requires approval"):
        ToolSpec("x", category=Category.MUTATE, approval=Approval.AUTO)
    with pytest.raises(ToolDeclarationError, match="mutate tool always requires approval"):
        ToolSpec("x", executor=Executor.CLIENT, category=Category.MUTATE, approval=Approval.AUTO)


@pytest.mark.parametrize("executor", [Executor.HUMAN, Executor.PROVIDER])
def test_a_mutate_tool_needs_an_executor_that_can_be_gated(executor: Executor) -> None:
    with pytest.raises(ToolDeclarationError, match="executor must be server or client"):
        ToolSpec("x", executor=executor, category=Category.MUTATE)


def test_suspension_kinds() -> None:
    assert ToolSpec("h", executor=Executor.HUMAN).external_kind() is PendingKind.ELICITATION
    assert ToolSpec("c", executor=Executor.CLIENT).external_kind() is PendingKind.CLIENT_EXEC
    assert ToolSpec("s").external_kind() is None
    assert ToolSpec("c", executor=Executor.CLIENT, approval=Approval.REQUIRES_APPROVAL).suspends
    assert not ToolSpec("s").suspends


def test_effect_template_renders_args_and_keeps_missing_names() -> None:
    spec = ToolSpec("replay", category=Category.MUTATE, effect="Replay DLQ event {event_id} ({reason})")
    assert spec.describe_effect({"event_id": "evt_1", "reason": "fixed"}) == "Replay DLQ event evt_1 (fixed)"
    assert spec.describe_effect({"event_id": "evt_1"}) == "Replay DLQ event evt_1 ({reason})"
    assert ToolSpec("plain").describe_effect({}) == "Run plain"
    with pytest.raises(ToolDeclarationError, match="bad effect template"):
        ToolSpec("broken", effect="Replay {event_id")


def test_timeouts_default_per_kind_and_must_be_positive() -> None:
    assert ToolSpec("t").timeout_for(PendingKind.APPROVAL, DEFAULT_TIMEOUTS) == timedelta(hours=24)
    assert ToolSpec("t", timeout=timedelta(minutes=5)).timeout_for(
        PendingKind.APPROVAL, DEFAULT_TIMEOUTS
    ) == (timedelta(minutes=5))
    with pytest.raises(ToolDeclarationError, match="timeout must be positive"):
        ToolSpec("t", timeout=timedelta(0))


def test_an_approval_request_masks_secrets_and_spells_out_the_effect() -> None:
    spec = ToolSpec("rotate_key", category=Category.MUTATE, effect="Rotate the key of {service}")
    args = {"service": "billing", "api_key": "sk-live-0123456789abcdef"}
    first = ToolApprovalRequest.for_call(spec, "rotate_key", "ops", args)
    second = ToolApprovalRequest.for_call(spec, "rotate_key", "ops", args)
    assert first.effect_description == "Rotate the key of billing"
    assert first.args_summary["service"] == "billing"
    assert "sk-live" not in str(first.args_summary)
    assert first.correlation_id != second.correlation_id
    assert ToolApprovalRequest.for_call(None, "gone", "ops", {}).effect_description == "Run gone"
