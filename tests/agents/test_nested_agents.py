"""Agents that call agents: an adopted agent's tool runs another adopted agent (`run_agent`), and the
built-in customer supervisor delegates to an adopted specialist. The inner agent's gated call
suspends the whole chain; approved, the run resumes inside it, the effect applied once; usage is
summed and the inner agent's spans are nested under the call. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, RunContext

from sursis import RunInfo, Service, adopt, run_agent
from sursis.app.container import build_container
from sursis.domain.records import PendingCall, Run
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.customer.supervisor import customer_agents
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.telemetry import TelemetryConfig, build_telemetry
from sursis.testing import ScriptedModel, expect_pending, resolve_and_settle, settle
from tests.conftest import make_settings

REFUNDS: list[tuple[str, str]] = []


def billing_agent() -> Agent[Any, str]:
    billing: Agent[Any, str] = Agent(name="billing", description="Refunds and invoices.")

    @billing.tool(requires_approval=True)
    def refund(ctx: RunContext[Any], order_id: str) -> str:
        """Refund an order."""
        REFUNDS.append((ctx.tool_call_id or "", order_id))
        return f"refunded {order_id}"

    return billing


def concierge_agent(billing: Agent[Any, str]) -> Agent[Any, str]:
    concierge: Agent[Any, str] = Agent(name="concierge", instructions="Route requests to billing.")

    @concierge.tool
    async def ask_billing(ctx: RunContext[Any], request: str) -> str:
        """Ask the billing agent to handle a request."""
        output: str = await run_agent(ctx, billing, request)
        return output

    return concierge


@asynccontextmanager
async def traced(
    database_url: str, model: ScriptedModel, agents: Any, **settings: Any
) -> AsyncIterator[tuple[Service, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = build_telemetry(TelemetryConfig(), tracer_provider=provider)
    container = build_container(
        make_settings(database_url, run_worker=False, **settings),
        telemetry=telemetry,
        agents=agents,
        model=model.model,
    )
    service = Service(container)
    try:
        yield service, exporter
    finally:
        await service.close()
        telemetry.shutdown()
        provider.shutdown()


@dataclass
class ConciergeRefund:
    """A concierge turn that asked billing to refund an order, parked on billing's `refund` call."""

    service: Service
    spans: InMemorySpanExporter
    model: ScriptedModel
    run: Run
    call: PendingCall


@asynccontextmanager
async def concierge_refund(
    database_url: str, order_id: str, inner: str, outer: str, message: str, **settings: Any
) -> AsyncIterator[ConciergeRefund]:
    """`concierge` runs `billing` (`run_agent`); the model asks for `order_id`'s refund, then
    answers `inner` as billing and `outer` as the concierge."""
    REFUNDS.clear()
    billing = billing_agent()
    definitions = [adopt(concierge_agent(billing)), adopt(billing, conversational=False)]
    model = ScriptedModel().call("ask_billing", request=f"refund order {order_id}")
    model.call("refund", order_id=order_id).text(inner).text(outer)
    async with traced(database_url, model, lambda _: {d.name: d for d in definitions}, **settings) as (
        svc,
        spans,
    ):
        conversation = await svc.start_conversation("concierge")
        run = await svc.send(conversation.id, message)
        await svc.run_until_idle()
        [call] = await expect_pending(svc, tool_name="refund")
        yield ConciergeRefund(svc, spans, model, run, call)


def _under(spans: list[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    by_parent: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            by_parent.setdefault(span.parent.span_id, []).append(span)
    found: list[ReadableSpan] = []
    waiting = [root]
    while waiting:
        current = waiting.pop()
        assert current.context is not None
        children = by_parent.get(current.context.span_id, [])
        found += children
        waiting += children
    return found


async def test_an_adopted_agent_calling_another_suspends_on_its_gated_call_and_resumes_inside(
    database_url: str,
) -> None:
    async with concierge_refund(
        database_url, "A1", "billing: refunded A1", "Refunded, as asked.", "please refund A1"
    ) as turn:
        svc, spans, model, run, call = turn.service, turn.spans, turn.model, turn.run, turn.call
        assert (call.agent, call.agent_path, call.kind) == ("billing", "concierge/billing", "approval")
        assert REFUNDS == []
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "Refunded, as asked.")
        assert [order for _, order in REFUNDS] == ["A1"]
        assert REFUNDS[0][0] == call.tool_call_id
        # Every model request of both agents counts towards the run.
        assert view.run.usage.requests == 4
        records = await svc.container.runs.list_tool_calls(svc.principal, run.id)
        assert sorted((r.metadata.tool_name, r.metadata.agent_name) for r in records) == [
            ("ask_billing", "concierge"),
            ("refund", "billing"),
        ]
        outer_result = str([m.parts for m in model.requests[-1]])
        assert "billing: refunded A1" in outer_result
        finished = spans.get_finished_spans()
    delegations = [s for s in finished if s.name == "delegate concierge/billing"]
    assert len(delegations) == 2  # the segment that suspended and the one that resumed
    resumed = next(s for s in delegations if (s.attributes or {}).get("sursis.delegation.resumed"))
    inner = _under(list(finished), resumed)
    assert any("refund" in s.name for s in inner), [s.name for s in inner]


async def test_the_customer_supervisor_delegates_to_an_adopted_specialist(database_url: str) -> None:
    REFUNDS.clear()
    specialist = adopt(billing_agent(), conversational=False, supervisor="customer")

    def agents(uow: SqlUnitOfWorkFactory) -> dict[str, AgentDefinition]:
        return {d.name: d for d in [*customer_agents(uow, [specialist]), specialist]}

    model = ScriptedModel().call("delegate", specialist="billing", task="refund order B2")
    model.call("refund", order_id="B2").text("refunded B2").text("Your refund is done.")
    async with traced(database_url, model, agents) as (svc, _):
        supervisor = svc.container.catalog.definition("customer")
        assert "- billing: Refunds and invoices." in supervisor.instructions
        conversation = await svc.start_conversation("customer")
        await svc.send(conversation.id, "refund B2 please")
        await svc.run_until_idle()
        [call] = await expect_pending(svc, tool_name="refund")
        assert (call.agent, call.agent_path) == ("billing", "customer/billing")
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "Your refund is done.")
    assert [order for _, order in REFUNDS] == ["B2"]
    delegate_schema = str(model.requests[0])
    assert "billing" in delegate_schema


async def test_a_denied_inner_call_reaches_the_inner_agent_and_nothing_runs(database_url: str) -> None:
    async with concierge_refund(
        database_url, "C3", "billing: not refunded", "Not refunded.", "refund C3"
    ) as turn:
        model = turn.model
        view = await resolve_and_settle(turn.service, turn.call, "deny", reason="no receipt")
        assert (view.run.status, view.run.output) == ("completed", "Not refunded.")
    assert REFUNDS == []
    inner_request = str([m.parts for m in model.requests[2]])
    assert "APPROVAL_DENIED" in inner_request and "no receipt" in inner_request


async def test_running_an_agent_the_service_does_not_serve_is_a_tool_error_not_a_crash(
    database_url: str,
) -> None:
    stranger: Agent[Any, str] = Agent(name="stranger")
    caller: Agent[Any, str] = Agent(name="caller")

    @caller.tool
    async def ask_stranger(ctx: RunContext[Any], request: str) -> str:
        """Ask an agent nobody serves."""
        output: str = await run_agent(ctx, stranger, request)
        return output

    model = ScriptedModel().call("ask_stranger", request="hi").text("Could not ask.")
    async with traced(database_url, model, lambda _: {"caller": adopt(caller)}) as (svc, _):
        conversation = await svc.start_conversation("caller")
        run = await svc.send(conversation.id, "ask")
        view = await settle(svc, run.id)
        assert (view.run.status, view.run.output) == ("completed", "Could not ask.")
    seen = " ".join(str(getattr(p, "content", "")) for m in model.requests[-1] for p in m.parts)
    assert "ToolTerminalError" in seen and "'stranger' is not served" in seen


async def test_chains_nest_and_resume_inside_the_innermost_agent(database_url: str) -> None:
    REFUNDS.clear()
    billing = billing_agent()
    concierge = concierge_agent(billing)
    front: Agent[Any, str] = Agent(name="front", instructions="Send everything to the concierge.")

    @front.tool
    async def ask_concierge(ctx: RunContext[Any], request: str) -> str:
        """Ask the concierge."""
        output: str = await run_agent(ctx, concierge, request)
        return output

    definitions = [adopt(front), adopt(concierge, conversational=False), adopt(billing, conversational=False)]
    model = ScriptedModel().call("ask_concierge", request="refund D4")
    model.call("ask_billing", request="refund D4").call("refund", order_id="D4")
    model.text("billing: refunded D4").text("concierge: done").text("All set.")
    async with traced(database_url, model, lambda _: {d.name: d for d in definitions}) as (svc, _):
        conversation = await svc.start_conversation("front")
        run = await svc.send(conversation.id, "refund D4")
        await svc.run_until_idle()
        [call] = await expect_pending(svc, tool_name="refund")
        assert (call.agent, call.agent_path) == ("billing", "front/concierge/billing")
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "All set.")
        assert view.run.usage.requests == 6
        records = await svc.container.runs.list_tool_calls(svc.principal, run.id)
        assert sorted(r.metadata.tool_name for r in records) == ["ask_billing", "ask_concierge", "refund"]
    assert [order for _, order in REFUNDS] == ["D4"]


@dataclass
class Ledger:
    """An agent's own deps: told which agent they serve, closed after the step."""

    agent: str
    workspace: str
    closed: bool = False


OPENED: list[Ledger] = []


@contextmanager
def ledger_scope(info: RunInfo) -> Iterator[Ledger]:
    book = Ledger(info.agent, info.workspace)
    OPENED.append(book)
    yield book
    book.closed = True


async def test_an_agent_another_agent_runs_gets_its_own_deps(database_url: str) -> None:
    """Each agent of the chain gets the deps its own factory builds, told which agent they serve;
    the inner agent's deps are closed once its step is done."""
    OPENED.clear()
    seen: list[tuple[str, str]] = []
    billing: Agent[Ledger, str] = Agent(name="billing", deps_type=Ledger)

    @billing.tool
    def balance(ctx: RunContext[Ledger], account: str) -> str:
        """An account's balance."""
        seen.append(("billing", ctx.deps.agent))
        return f"{account}: 10"

    concierge: Agent[Ledger, str] = Agent(name="concierge", deps_type=Ledger)

    @concierge.tool
    async def ask_billing(ctx: RunContext[Ledger], request: str) -> str:
        """Ask billing."""
        seen.append(("concierge", ctx.deps.agent))
        output: str = await run_agent(ctx, "billing", request)
        return output

    definitions = [
        adopt(concierge, deps=ledger_scope),
        adopt(billing, deps=ledger_scope, conversational=False),
    ]
    model = ScriptedModel().call("ask_billing", request="balance of A").call("balance", account="A")
    model.text("A: 10").text("Your balance is 10.")
    async with traced(database_url, model, lambda _: {d.name: d for d in definitions}) as (svc, _):
        conversation = await svc.start_conversation("concierge")
        view = await settle(svc, (await svc.send(conversation.id, "balance?")).id)
        assert (view.run.status, view.run.output) == ("completed", "Your balance is 10.")
    assert seen == [("concierge", "concierge"), ("billing", "billing")]
    assert [(b.agent, b.workspace, b.closed) for b in OPENED] == [
        ("concierge", "default", True),
        ("billing", "default", True),
    ]
