"""A plain pydantic-ai `Agent`, adopted as it is: its gated and deferring tools become pending calls,
on SQLite and PostgreSQL through the migrations."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ApprovalRequired, RunContext

from sursis import Service
from sursis.domain.errors import ToolDeclarationError
from sursis.infra.agents.adopted import ToolOptions, adopt
from sursis.infra.agents.compat import call_deferred
from sursis.testing import ScriptedModel, expect_pending, resolve_and_settle, settle

REFUNDS: list[tuple[str, str, int]] = []


def support_agent() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(name="support", instructions="Help customers with their orders.")

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        return {"order_id": order_id, "total": 40}

    @agent.tool(requires_approval=True)
    def refund(ctx: RunContext[Any], order_id: str, amount: int) -> str:
        """Refund part of an order."""
        REFUNDS.append((ctx.tool_call_id or "", order_id, amount))
        return f"refunded {amount} on {order_id}"

    @agent.tool
    def cancel_order(ctx: RunContext[Any], order_id: str) -> str:
        """Cancel an order; a large one needs an approval."""
        if order_id.startswith("BIG") and not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"reason": "large order"})
        return f"cancelled {order_id}"

    @agent.tool_plain
    def ask_customer(question: str) -> str:
        """Ask the customer something."""
        raise call_deferred({}, "question")  # CallDeferred(kind="question") where pydantic-ai has kinds

    return agent


async def test_a_requires_approval_tool_waits_and_runs_once_approved(database_url: str) -> None:
    REFUNDS.clear()
    model = ScriptedModel().calls(
        ("lookup_order", {"order_id": "A1"}), ("refund", {"order_id": "A1", "amount": 5})
    )
    model.text("Refunded.")
    definition = adopt(
        support_agent(),
        tools={"refund": ToolOptions(effect="Refund {amount} on order {order_id}", timeout=600)},
    )
    async with Service.open(database_url, agents=[definition], model=model.model) as svc:
        conversation = await svc.start_conversation("support")
        await svc.send(conversation.id, "refund A1")
        [call] = await expect_pending(svc, tool_name="refund")
        assert (call.kind, call.executor, call.agent) == ("approval", "server", "support")
        assert call.effect_description == "Refund 5 on order A1"
        assert call.expires_at - call.created_at == timedelta(seconds=600)
        assert REFUNDS == []
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "Refunded.")
        assert [(call.tool_call_id, "A1", 5)] == REFUNDS
        records = await svc.container.runs.list_tool_calls(svc.principal, view.run.id)
        assert sorted(r.metadata.tool_name for r in records) == ["lookup_order", "refund"]
    # The agent's own instructions reached the model.
    first_request = model.requests[0][0]
    assert first_request.instructions == "Help customers with their orders."


async def test_a_denied_requires_approval_tool_never_runs(database_url: str) -> None:
    REFUNDS.clear()
    model = ScriptedModel().call("refund", order_id="A2", amount=9).text("Not refunded.")
    async with Service.open(database_url, agents=[support_agent()], model=model.model) as svc:
        conversation = await svc.start_conversation("support")
        await svc.send(conversation.id, "refund A2")
        [call] = await expect_pending(svc, tool_name="refund")
        view = await resolve_and_settle(svc, call, "deny", reason="no receipt")
        assert view.run.status == "completed"
        assert REFUNDS == []
        denial = json.dumps([m.parts for m in model.requests[-1]], default=str)
        assert "APPROVAL_DENIED" in denial and "no receipt" in denial


async def test_approval_required_and_call_deferred_raised_by_tools_become_pending_calls(
    database_url: str,
) -> None:
    model = ScriptedModel().calls(
        ("cancel_order", {"order_id": "BIG-7"}),
        ("cancel_order", {"order_id": "small-1"}),
        ("ask_customer", {"question": "Which address?"}),
    )
    model.text("All done.")
    async with Service.open(database_url, agents=[support_agent()], model=model.model) as svc:
        conversation = await svc.start_conversation("support")
        run = await svc.send(conversation.id, "cancel my orders")
        await settle(svc, run.id)
        calls = {c.tool_name: c for c in await svc.pending(conversation_id=conversation.id)}
        assert sorted(calls) == ["ask_customer", "cancel_order"]
        assert calls["cancel_order"].kind == "approval"
        assert calls["cancel_order"].args["order_id"] == "BIG-7"
        assert calls["ask_customer"].kind == "elicitation"
        await svc.resolve(calls["cancel_order"].correlation_id, "approve")
        await svc.resolve(calls["ask_customer"].correlation_id, "answer", result="12 Main St")
        await svc.run_until_idle()
        done = (await svc.get_run(run.id)).run
        assert (done.status, done.output) == ("completed", "All done.")
        seen = json.dumps([m.parts for m in model.requests[-1]], default=str)
        assert "cancelled BIG-7" in seen and "cancelled small-1" in seen and "12 Main St" in seen


class Verdict(BaseModel):
    approved: bool
    note: str


async def test_the_agents_output_type_is_kept_and_stored_as_json(database_url: str) -> None:
    agent: Agent[None, Verdict] = Agent(name="judge", output_type=Verdict)
    model = ScriptedModel().call("final_result", approved=True, note="fine")
    async with Service.open(database_url, agents=[agent], model=model.model) as svc:
        conversation = await svc.start_conversation("judge")
        run = await svc.send(conversation.id, "judge this")
        await svc.run_until_idle()
        view = await svc.get_run(run.id)
        assert view.run.status == "completed", view.run.error
        assert json.loads(view.run.output or "") == {"approved": True, "note": "fine"}


async def test_an_agent_runs_on_its_own_model_and_the_others_on_the_services(database_url: str) -> None:
    own = Agent(name="triage", model="test", instructions="Sort tickets.")
    plain = Agent(name="plain")
    async with Service.open(database_url, agents=[own, plain], model="scripted") as svc:
        outputs = {}
        for name in ("triage", "plain"):
            conversation = await svc.start_conversation(name)
            run = await svc.send(conversation.id, "hello")
            await svc.run_until_idle()
            outputs[name] = (await svc.get_run(run.id)).run.output
    assert outputs == {"triage": "success (no tool calls)", "plain": "ECHO: hello"}


def test_adoption_refuses_what_it_cannot_serve() -> None:
    with pytest.raises(ToolDeclarationError, match="needs a name"):
        adopt(Agent())
    with pytest.raises(ToolDeclarationError, match="does not have: nope"):
        adopt(support_agent(), tools={"nope": ToolOptions(category="read")})
    with pytest.raises(ToolDeclarationError, match="a mutate tool must be gated, so its executor must be"):
        adopt(support_agent(), tools={"refund": ToolOptions(executor="human")})
    with pytest.raises(ToolDeclarationError, match="agent 'support': tool 'refund': a mutate tool always"):
        adopt(support_agent(), tools={"refund": ToolOptions(approval="auto")})
    with pytest.raises(ToolDeclarationError, match="tool 'refund': 'bogus' is not a valid Category"):
        adopt(support_agent(), tools={"refund": ToolOptions(category="bogus")})


async def test_an_option_saying_auto_runs_a_requires_approval_tool_without_asking(database_url: str) -> None:
    # A requires_approval tool counts as `mutate`, which always waits for a person: running it
    # unattended means saying it changes nothing that needs one.
    REFUNDS.clear()
    model = ScriptedModel().call("refund", order_id="A4", amount=1).text("Refunded A4.")
    definition = adopt(support_agent(), tools={"refund": ToolOptions(approval="auto", category="suggest")})
    async with Service.open(database_url, agents=[definition], model=model.model) as svc:
        conversation = await svc.start_conversation("support")
        run = await svc.send(conversation.id, "refund A4")
        await svc.run_until_idle()
        view = await svc.get_run(run.id)
    assert (view.run.status, view.pending, len(REFUNDS)) == ("completed", [], 1)


def test_the_catalog_describes_adopted_tools() -> None:
    definition = adopt(support_agent())
    specs = {d.spec.name: d.spec for d in definition.tools}
    assert specs["refund"].gated and specs["refund"].category == "mutate"
    assert not specs["lookup_order"].gated and specs["lookup_order"].category == "read"
    assert not specs["cancel_order"].gated


async def test_a_pre_approval_covers_a_requires_approval_tool(database_url: str) -> None:
    REFUNDS.clear()
    model = ScriptedModel().call("refund", order_id="A3", amount=2).text("Refunded A3.")
    async with Service.open(database_url, agents=[support_agent()], model=model.model) as svc:
        await svc.container.authorizations.create(
            svc.principal, tool_name="refund", reason="small refunds", args_match={"amount": 2}
        )
        conversation = await svc.start_conversation("support")
        run = await svc.send(conversation.id, "refund A3")
        await svc.run_until_idle()
        view = await svc.get_run(run.id)
        assert (view.run.status, view.pending) == ("completed", [])
        assert [(order, amount) for _, order, amount in REFUNDS] == [("A3", 2)]


async def test_a_run_of_an_agent_the_worker_does_not_serve_fails_with_a_clear_code(database_url: str) -> None:
    async with Service.open(database_url, agents=[support_agent()], model="scripted") as api:
        conversation = await api.start_conversation("support")
        run = await api.send(conversation.id, "hello")
    async with Service.open(database_url, agents=[Agent(name="other")], model="scripted") as worker:
        await worker.run_until_idle()
        view = await worker.get_run(run.id)
    assert view.run.status == "failed"
    assert view.run.error is not None and view.run.error.code == "agent_not_served"
