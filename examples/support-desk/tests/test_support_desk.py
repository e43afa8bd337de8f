"""The support desk on Sursis' pytest plugin: a refund waits for an operator, then runs once."""

from __future__ import annotations

import pytest
from support_desk.agents import AGENTS, REFUNDS

from sursis import AgentDefinition
from sursis.testing import expect_pending, resolve_and_settle


@pytest.fixture
def sursis_agents() -> list[AgentDefinition]:
    return AGENTS


async def test_a_refund_waits_for_an_operator_and_runs_once_approved(sursis_service, scripted_model) -> None:
    REFUNDS.clear()
    scripted_model.call("lookup_order", order_id="A1001")
    scripted_model.call("refund_order", order_id="A1001", amount=20, reason="late delivery")
    scripted_model.text("Refunded 20 on A1001.")
    conversation = await sursis_service.start_conversation("support")
    await sursis_service.send(conversation.id, "My order A1001 came late, can I get 20 back?")
    [call] = await expect_pending(sursis_service, tool_name="refund_order")
    assert call.effect_description == "Refund 20 on order A1001 (late delivery)"
    assert REFUNDS == {}
    view = await resolve_and_settle(sursis_service, call, "approve")
    assert (view.run.status, view.run.output) == ("completed", "Refunded 20 on A1001.")
    assert list(REFUNDS.values()) == [{"refunded": True, "order_id": "A1001", "amount": 20}]


async def test_a_denied_refund_is_not_made(sursis_service, scripted_model) -> None:
    REFUNDS.clear()
    scripted_model.call("refund_order", order_id="A1002", amount=35.5, reason="changed my mind")
    scripted_model.text("I could not refund it.")
    conversation = await sursis_service.start_conversation("support")
    await sursis_service.send(conversation.id, "Refund A1002 please")
    [call] = await expect_pending(sursis_service, tool_name="refund_order")
    view = await resolve_and_settle(sursis_service, call, "deny", reason="outside the return window")
    assert view.run.status == "completed"
    assert REFUNDS == {}
