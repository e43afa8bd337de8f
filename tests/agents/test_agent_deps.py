"""An adopted agent's own deps (`adopt(agent, deps=factory)`), on SQLite and PostgreSQL: built per
segment from the run's context, closed after it (also when it fails), the service's context still
reachable with `run_deps(ctx)`; a factory that fails fails the run with an error naming it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from structlog.testing import capture_logs

from sursis import Service, adopt, run_deps
from sursis.domain.errors import ToolDeclarationError
from sursis.infra.agents.agent_deps import RunInfo
from sursis.testing import expect_pending, resolve_and_settle


@dataclass
class Shop:
    """What a real agent keeps in its deps: a client, the current customer, a log of its own."""

    customer: str
    info: RunInfo
    orders: dict[str, int]
    log: list[str] = field(default_factory=list)


OPENED: list[str] = []
CLOSED: list[tuple[str, str | None]] = []


@asynccontextmanager
async def shop_deps(info: RunInfo) -> AsyncIterator[Shop]:
    OPENED.append(str(info.run_id))
    error: str | None = None
    try:
        yield Shop(customer=f"customer-of-{info.workspace}", info=info, orders={"A1": 40})
    except BaseException as exc:
        error = type(exc).__name__
        raise
    finally:
        CLOSED.append((str(info.run_id), error))


def shop_agent(model: FunctionModel) -> Agent[Shop, str]:
    agent: Agent[Shop, str] = Agent(model, name="shop", deps_type=Shop)

    @agent.tool
    def order_total(ctx: RunContext[Shop], order_id: str) -> dict[str, Any]:
        """An order's total, for the current customer."""
        service = run_deps(ctx)
        ctx.deps.log.append(f"{order_id}@{service.workspace}/{service.run_id}")
        return {"customer": ctx.deps.customer, "total": ctx.deps.orders[order_id]}

    @agent.tool(requires_approval=True)
    def refund(ctx: RunContext[Shop], order_id: str, amount: int) -> str:
        """Refund part of an order."""
        if amount > ctx.deps.orders[order_id]:
            raise RuntimeError("more than the order")  # an unexpected error inside the tool
        return f"refunded {amount} of {order_id} for {ctx.deps.customer}"

    return agent


def scripted(*steps: Any) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """A `FunctionModel` without a stream function playing `steps` (a list of calls, or text)."""
    seen: list[list[ModelMessage]] = []
    remaining = list(steps)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        step = remaining.pop(0) if remaining else "done"
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in step])

    return FunctionModel(answer), seen


def returned(messages: list[ModelMessage], tool_name: str) -> list[Any]:
    return [
        p.content
        for m in messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == tool_name
    ]


async def test_tools_get_the_agents_own_deps_built_once_per_segment(database_url: str) -> None:
    OPENED.clear()
    CLOSED.clear()
    model, seen = scripted(
        [("order_total", {"order_id": "A1"})], [("refund", {"order_id": "A1", "amount": 5})], "Refunded."
    )
    definition = adopt(shop_agent(model), deps=shop_deps)
    async with Service.open(database_url, agents=[definition]) as svc:
        conversation = await svc.start_conversation("shop", workspace="acme")
        run = await svc.send(conversation.id, "refund A1")
        [call] = await expect_pending(svc, tool_name="refund")
        # The first segment opened the deps once and closed them when it suspended.
        assert [str(run.id)] == OPENED and [(str(run.id), None)] == CLOSED
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "Refunded.")
    assert [str(run.id)] * 2 == OPENED
    assert [(str(run.id), None)] * 2 == CLOSED
    # The tool's result reached the model as the tool returned it, with the agent's own deps in it.
    assert returned(seen[-1], "order_total") == [{"customer": "customer-of-acme", "total": 40}]
    assert returned(seen[-1], "refund") == ["refunded 5 of A1 for customer-of-acme"]


async def test_the_factory_is_told_the_runs_context(database_url: str) -> None:
    told: list[RunInfo] = []

    def plain_factory(info: RunInfo) -> Shop:
        told.append(info)
        return Shop(customer="c", info=info, orders={"A1": 1})

    model, _ = scripted([("order_total", {"order_id": "A1"})], "ok")
    async with Service.open(database_url, agents=[adopt(shop_agent(model), deps=plain_factory)]) as svc:
        conversation = await svc.start_conversation("shop", workspace="acme")
        run = await svc.send(conversation.id, "total?")
        await svc.run_until_idle()
        assert (await svc.get_run(run.id)).run.status == "completed"
    [info] = told
    assert (info.workspace, info.conversation_id, info.run_id, info.agent, info.channel) == (
        "acme",
        conversation.id,
        run.id,
        "shop",
        "web",
    )
    # The embedded service acts as an admin named `embedded`; over HTTP it is the key that posted.
    assert (info.key_id, info.role, info.segment) == ("embedded", "admin", 1)


async def test_an_async_factory_and_a_context_manager_closed_when_the_segment_fails(
    database_url: str,
) -> None:
    closed: list[str | None] = []

    @contextmanager
    def sync_deps(info: RunInfo) -> Iterator[Shop]:
        try:
            yield Shop(customer="c", info=info, orders={"A1": 1})
            closed.append(None)
        except BaseException as exc:
            closed.append(type(exc).__name__)
            raise

    async def async_deps(info: RunInfo) -> Shop:
        return Shop(customer="async", info=info, orders={"A1": 1})

    def failing(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("the model broke")

    async with Service.open(
        database_url,
        agents=[
            adopt(shop_agent(FunctionModel(failing)), deps=sync_deps),
            adopt(
                shop_agent(scripted([("order_total", {"order_id": "A1"})], "ok")[0]),
                name="shop2",
                deps=async_deps,
            ),
        ],
    ) as svc:
        broken = await svc.send((await svc.start_conversation("shop")).id, "hi")
        fine = await svc.send((await svc.start_conversation("shop2")).id, "hi")
        await svc.run_until_idle()
        assert (await svc.get_run(broken.id)).run.status == "failed"
        done = (await svc.get_run(fine.id)).run
        assert (done.status, done.output) == ("completed", "ok")
    assert closed == ["RuntimeError"]


async def test_a_failing_factory_fails_the_run_with_an_error_naming_it(database_url: str) -> None:
    def broken_factory(info: RunInfo) -> Shop:
        raise ConnectionError("the orders API is down")

    model, seen = scripted("never asked")
    async with Service.open(database_url, agents=[adopt(shop_agent(model), deps=broken_factory)]) as svc:
        conversation = await svc.start_conversation("shop")
        with capture_logs() as logs:
            run = await svc.send(conversation.id, "hi")
            await svc.run_until_idle()
        view = await svc.get_run(run.id)
        assert view.run.status == "failed"
        assert view.run.error is not None and view.run.error.code == "deps_failed"
        assert "broken_factory" in view.run.error.message and "shop" in view.run.error.message
        # The error's class; its text (a host, a credential) only in the logs.
        assert "(ConnectionError)" in view.run.error.message
        assert "the orders API is down" not in view.run.error.message
        # The conversation stays usable.
        assert (await svc.get_run(run.id)).run.finished_at is not None
    assert seen == [], "the model is not asked when the deps cannot be built"
    [failed] = [e for e in logs if e["event"] == "run.deps_failed"]
    assert failed["log_level"] == "error" and "broken_factory" in failed["error"]
    assert "ConnectionError: the orders API is down" in failed["error"]


def test_an_agent_declaring_deps_needs_a_factory() -> None:
    model, _ = scripted("x")
    with pytest.raises(ToolDeclarationError, match=r"deps_type=Shop: give the factory"):
        adopt(shop_agent(model))
    with pytest.raises(ToolDeclarationError, match="deps must be a factory"):
        adopt(shop_agent(model), deps="shop")  # type: ignore[arg-type]


async def test_an_edited_call_is_told_beside_the_raw_result(database_url: str) -> None:
    model, seen = scripted([("refund", {"order_id": "A1", "amount": 30})], "Refunded less.")
    definition = adopt(shop_agent(model), deps=shop_deps)
    async with Service.open(database_url, agents=[definition]) as svc:
        conversation = await svc.start_conversation("shop")
        await svc.send(conversation.id, "refund 30")
        [call] = await expect_pending(svc, tool_name="refund")
        view = await resolve_and_settle(svc, call, "approve", args={"order_id": "A1", "amount": 10})
        assert view.run.status == "completed"
    assert returned(seen[-1], "refund") == ["refunded 10 of A1 for customer-of-default"]
    told = [getattr(p, "content", None) for m in seen[-1] for p in m.parts]
    [note] = [t for t in told if isinstance(t, str) and t.startswith("An operator edited")]
    assert '"amount": 10' in note


async def test_a_failing_adopted_tool_is_an_error_tool_result_not_a_crash(database_url: str) -> None:
    model, seen = scripted([("refund", {"order_id": "A1", "amount": 99})], "Could not refund.")
    async with Service.open(database_url, agents=[adopt(shop_agent(model), deps=shop_deps)]) as svc:
        conversation = await svc.start_conversation("shop")
        await svc.send(conversation.id, "refund 99")
        [call] = await expect_pending(svc, tool_name="refund")
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "Could not refund.")
    told = json.dumps([getattr(p, "content", None) for m in seen[-1] for p in m.parts], default=str)
    assert "ToolTerminalError" in told and "more than the order" not in told


async def test_a_model_without_a_stream_function_runs_and_its_text_arrives_as_one_delta(
    database_url: str,
) -> None:
    model, seen = scripted([("order_total", {"order_id": "A1"})], "The total is 40.")
    agent: Agent[Shop, str] = shop_agent(model)
    # Passed to the service, like docs/embedding.md shows, and named by an agent of its own.
    async with Service.open(database_url, agents=[adopt(agent, deps=shop_deps)], model=model) as svc:
        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "total of A1?")
        await svc.run_until_idle()
        view = await svc.get_run(run.id)
        assert (view.run.status, view.run.output) == ("completed", "The total is 40."), view.run.error
        events = [e async for e in svc.events(conversation.id, follow=False)]
    deltas = [e.data["text"] for e in events if e.type == "message.delta"]
    assert deltas == ["The total is 40."]
    assert len(seen) == 2
