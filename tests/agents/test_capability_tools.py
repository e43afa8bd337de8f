"""Tools a pydantic-ai capability brings (docs/compatibility.md, "Compatibility with pydantic-ai"): listed in
the catalog with the capability's name, open to `ToolOptions`, gated by the policy point, recorded in
`tool_calls`; one that nothing categorised asks; one added at run time asks too. On SQLite and
PostgreSQL, on the lowest and the newest supported pydantic-ai."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import Capability
from pydantic_ai.messages import ToolReturnPart

from sursis import Service, ToolOptions, adopt
from sursis.app.main import create_app
from sursis.domain.access import Role
from sursis.infra.agents.declarations import AgentDefinition
from sursis.testing import ScriptedModel, expect_pending, resolve_and_settle, settle
from tests.conftest import KeyMaker, bearer, make_settings

RAN: list[tuple[str, Any]] = []


def billing_agent(*, deferred: bool = False) -> Agent[None, str]:
    """An agent whose tools all come from a capability (eager, or loaded on demand)."""
    billing = Capability[Any](id="billing", description="Billing tools", defer_loading=deferred)

    @billing.tool_plain
    def invoice_total(order_id: str) -> int:
        """The total of an order's invoice."""
        RAN.append(("invoice_total", order_id))
        return 40

    @billing.tool(requires_approval=True)
    def charge(ctx: RunContext[Any], order_id: str, amount: int) -> str:
        """Charge a customer."""
        RAN.append(("charge", (ctx.tool_call_id, order_id, amount)))
        return f"charged {amount} on {order_id}"

    @billing.tool_plain
    def void_invoice(order_id: str) -> str:
        """Void an invoice."""
        RAN.append(("void_invoice", order_id))
        return f"voided {order_id}"

    return Agent(name="billing", capabilities=[billing])


def billing(**options: ToolOptions) -> AgentDefinition:
    return adopt(billing_agent(), tools={"invoice_total": ToolOptions(category="read"), **options})


@asynccontextmanager
async def served(
    database_url: str, definition: AgentDefinition, model: ScriptedModel, keys: KeyMaker
) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    """The real app over a service the test drives (`run_until_idle`), with an operator's key."""
    settings = make_settings(database_url, run_worker=False)
    service = Service.from_settings(settings, agents=[definition], model=model.model)
    app = create_app(settings, service=service)
    headers = bearer(await keys.make(Role.OPERATOR))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://app", headers=headers) as http,
    ):
        yield service, http


async def test_a_capabilitys_tools_are_in_the_catalog_with_its_name(
    database_url: str, keys: KeyMaker
) -> None:
    definition = billing(void_invoice=ToolOptions(effect="Void the invoice of {order_id}"))
    async with served(database_url, definition, ScriptedModel(), keys) as (_, http):
        [agent] = [a for a in (await http.get("/v1/agents")).json() if a["name"] == "billing"]
    tools = {t["name"]: t for t in agent["tools"]}
    assert sorted(tools) == ["charge", "invoice_total", "void_invoice"]
    assert {t["capability"] for t in tools.values()} == {"billing"}
    assert (tools["invoice_total"]["category"], tools["invoice_total"]["approval"]) == ("read", "auto")
    assert (tools["charge"]["category"], tools["charge"]["approval"]) == ("mutate", "requires_approval")
    # Nothing categorised it: `mutate`, asked.
    assert (tools["void_invoice"]["category"], tools["void_invoice"]["approval"]) == (
        "mutate",
        "requires_approval",
    )
    assert tools["void_invoice"]["effect"] == "Void the invoice of {order_id}"
    assert tools["charge"]["input_schema"]["required"] == ["order_id", "amount"]


@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "defer_loading"])
async def test_a_gated_capability_tool_suspends_and_runs_once_approved(
    database_url: str, deferred: bool
) -> None:
    RAN.clear()
    model = ScriptedModel()
    if deferred:
        model.call("load_capability", id="billing")
    model.call("invoice_total", order_id="A1").call("charge", order_id="A1", amount=5).text("Charged.")
    definition = adopt(
        billing_agent(deferred=deferred), tools={"invoice_total": ToolOptions(category="read")}
    )
    async with Service.open(database_url, agents=[definition], model=model.model) as svc:
        conversation = await svc.start_conversation("billing")
        await svc.send(conversation.id, "charge A1")
        [call] = await expect_pending(svc, tool_name="charge")
        assert (call.kind, call.category) == ("approval", "mutate")
        assert RAN == [("invoice_total", "A1")]
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "Charged.")
        charged = [args for name, args in RAN if name == "charge"]
        assert charged == [(call.tool_call_id, "A1", 5)]
        records = await svc.container.runs.list_tool_calls(svc.principal, view.run.id)
        assert sorted(r.metadata.tool_name for r in records) == ["charge", "invoice_total"]


async def test_an_uncategorised_capability_tool_asks_and_a_denied_one_never_runs(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("void_invoice", order_id="A2").text("Not voided.")
    async with Service.open(database_url, agents=[billing()], model=model.model) as svc:
        conversation = await svc.start_conversation("billing")
        await svc.send(conversation.id, "void A2")
        [call] = await expect_pending(svc, tool_name="void_invoice")
        assert (call.kind, call.category) == ("approval", "mutate")
        view = await resolve_and_settle(svc, call, "deny", reason="keep it")
    assert (view.run.status, RAN) == ("completed", [])


async def test_options_make_a_capability_tool_read_and_it_runs_recorded(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("void_invoice", order_id="A3").text("Voided.")
    definition = billing(void_invoice=ToolOptions(category="suggest", approval="auto"))
    async with Service.open(database_url, agents=[definition], model=model.model) as svc:
        conversation = await svc.start_conversation("billing")
        run = await svc.send(conversation.id, "void A3")
        view = await settle(svc, run.id)
        records = await svc.container.runs.list_tool_calls(svc.principal, view.run.id)
    assert (view.run.status, view.pending, RAN) == ("completed", [], [("void_invoice", "A3")])
    assert [r.metadata.tool_name for r in records] == ["void_invoice"]


def per_run_agent() -> Agent[None, str]:
    """An agent whose capability builds its toolset for each run: nothing lists its tools before."""

    def tools_for_the_run(ctx: RunContext[Any]) -> Any:
        from pydantic_ai.toolsets import FunctionToolset

        def erase_account(account: str) -> str:
            """Erase an account."""
            RAN.append(("erase_account", account))
            return f"erased {account}"

        return FunctionToolset([erase_account])

    return Agent(name="accounts", capabilities=[Capability[Any](toolsets=[tools_for_the_run])])


async def test_a_tool_added_at_run_time_asks_and_runs_once_approved(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("erase_account", account="acme").text("Erased.")
    async with Service.open(database_url, agents=[per_run_agent()], model=model.model) as svc:
        conversation = await svc.start_conversation("accounts")
        await svc.send(conversation.id, "erase acme")
        [call] = await expect_pending(svc, tool_name="erase_account")
        assert (call.kind, call.category, RAN) == ("approval", "mutate", [])
        # Seen called, it is in the catalog (and the policy's tool list) as what it was taken for.
        [agent] = svc.container.catalog.describe_agents()
        assert [(t.spec.name, t.spec.category) for t in agent.tools] == [("erase_account", "mutate")]
        assert [s.name for s in svc.container.catalog.discovered_specs()] == ["erase_account"]
        view = await resolve_and_settle(svc, call, "approve")
        records = await svc.container.runs.list_tool_calls(svc.principal, view.run.id)
    assert (view.run.status, RAN) == ("completed", [("erase_account", "acme")])
    assert [r.metadata.tool_name for r in records] == ["erase_account"]


async def test_options_may_name_a_tool_added_at_run_time(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("erase_account", account="demo").text("Erased.")
    definition = adopt(per_run_agent(), tools={"erase_account": ToolOptions(category="read")})
    async with Service.open(database_url, agents=[definition], model=model.model) as svc:
        conversation = await svc.start_conversation("accounts")
        run = await svc.send(conversation.id, "erase demo")
        view = await settle(svc, run.id)
    assert (view.run.status, view.pending, RAN) == ("completed", [], [("erase_account", "demo")])


QUESTION = {
    "header": "Plan",
    "question": "Which plan should the account move to?",
    "options": [{"label": "Basic"}, {"label": "Pro"}],
}


async def test_the_harness_askuser_question_is_answered_through_the_pending_call_api(
    database_url: str, keys: KeyMaker
) -> None:
    harness = pytest.importorskip("pydantic_ai_harness")
    agent = Agent(name="concierge", capabilities=[harness.AskUser(answerer=None)])
    model = ScriptedModel().call("ask_user_question", questions=[QUESTION]).text("Moved to Pro.")
    async with served(database_url, adopt(agent), model, keys) as (svc, http):
        [listed] = [a for a in (await http.get("/v1/agents")).json() if a["name"] == "concierge"]
        [tool] = listed["tools"]
        assert (tool["name"], tool["executor"], tool["capability"]) == (
            "ask_user_question",
            "human",
            "ask_user",
        )
        conversation = await svc.start_conversation("concierge")
        run = await svc.send(conversation.id, "move my account")
        [call] = await expect_pending(svc, tool_name="ask_user_question")
        shown = (await http.get(f"/v1/pending/{call.correlation_id}")).json()
        assert (shown["kind"], shown["args"]["questions"][0]["header"]) == ("elicitation", "Plan")
        url = f"/v1/pending/{call.correlation_id}/resolve"
        wrong = await http.post(url, json={"decision": "answer", "result": {"Plan": "Pro"}})
        assert wrong.status_code == 422, wrong.text
        answered = await http.post(url, json={"decision": "answer", "result": {"Plan": ["Pro"]}})
        assert answered.status_code == 200, answered.text
        view = await settle(svc, run.id)
    assert (view.run.status, view.run.output) == ("completed", "Moved to Pro.")
    told = [p.content for m in model.requests[-1] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert told == [{"Plan": ["Pro"]}]
