import pytest

from sursis import AgentDefinition, Category, DeclaredTool, ToolSpec
from sursis.testing import expect_pending, resolve_and_settle


async def refund(order_id: str, amount: int) -> dict[str, object]:
    """Refund an order."""
    return {"refunded": order_id, "amount": amount}


@pytest.fixture
def sursis_agents() -> list[AgentDefinition]:
    spec = ToolSpec("refund", category=Category.MUTATE, effect="Refund {amount} on {order_id}")
    return [AgentDefinition("support", "Help customers.", (DeclaredTool.declare(refund, spec),))]


async def test_a_refund_waits_for_approval(sursis_service, scripted_model) -> None:
    scripted_model.call("refund", order_id="A1", amount=5).text("Refunded A1.")
    conversation = await sursis_service.start_conversation("support")
    await sursis_service.send(conversation.id, "Please refund order A1")
    [call] = await expect_pending(sursis_service, tool_name="refund")
    assert call.effect_description == "Refund 5 on A1"
    view = await resolve_and_settle(sursis_service, call, "approve")
    assert (view.run.status, view.run.output) == ("completed", "Refunded A1.")
