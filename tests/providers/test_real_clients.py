"""The real client libraries (openai, anthropic) through pydantic-ai against local fake servers that
speak their wire formats: OpenAI chat completions, the OpenAI Responses API and Anthropic Messages,
each streamed, with a gated tool call, a 429 with `retry-after`, a 5xx and a broken stream.

What the service does in each case (docs/agents.md, "Model providers"): the client library retries
a 429 (after its `retry-after`) and a 5xx (twice, with backoff) itself; a 5xx that outlasts those
retries and a stream cut midway fail the run with code `model_error` (never a traceback, the
provider's text only in the logs), and the conversation stays usable.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic_ai import Agent, models
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from sursis import Service
from sursis.testing import expect_pending, resolve_and_settle
from tests.fakes.model_servers import Broken, Fail, FakeModelServer, Text, call_then_answer

REFUNDS: list[tuple[str, int]] = []


def _chat(url: str, http: httpx2.AsyncClient) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=f"{url}/v1", api_key="sk-fake", http_client=http)
    return OpenAIChatModel("gpt-4.1-mini", provider=provider)


def _responses(url: str, http: httpx2.AsyncClient) -> Model:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=f"{url}/v1", api_key="sk-fake", http_client=http)
    return OpenAIResponsesModel("gpt-4.1-mini", provider=provider)


def _anthropic(url: str, http: httpx2.AsyncClient) -> Model:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_key="sk-ant-fake", base_url=url, http_client=http)
    return AnthropicModel("claude-sonnet-4-0", provider=provider)


APIS: dict[str, tuple[str, Callable[[str, httpx2.AsyncClient], Model]]] = {
    "openai-chat": ("chat", _chat),
    "openai-responses": ("responses", _responses),
    "anthropic": ("messages", _anthropic),
}


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A migrated SQLite file: what is tested here is the model's side, not the storage's."""
    target = tmp_path / "sursis.db"
    shutil.copy(sqlite_template, target)
    return f"sqlite+aiosqlite:///{target}"


@pytest.fixture(params=sorted(APIS))
async def provider(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[FakeModelServer, str, Model]]:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)  # to servers on this machine only
    api, make = APIS[request.param]
    with FakeModelServer() as server:
        async with httpx2.AsyncClient() as http:
            yield server, api, make(server.url, http)


def desk(model: Model) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, name="desk", instructions="Help with orders.")

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refund part of an order."""
        REFUNDS.append((order_id, amount))
        return f"refunded {amount} on {order_id}"

    return agent


async def _turn(svc: Service, content: str = "refund A1") -> Any:
    conversation = await svc.start_conversation("desk")
    run = await svc.send(conversation.id, content)
    await svc.run_until_idle()
    return conversation, (await svc.get_run(run.id)).run


async def test_a_streamed_gated_call_is_approved_and_answered(
    sqlite_url: str, provider: tuple[FakeModelServer, str, Model]
) -> None:
    server, api, model = provider
    REFUNDS.clear()
    server.respond = call_then_answer("refund", {"order_id": "A1", "amount": 5}, "Refunded 5 on A1.")
    async with Service.open(sqlite_url, agents=[desk(model)]) as svc:
        conversation, _ = await _turn(svc)
        [call] = await expect_pending(svc, tool_name="refund")
        assert call.args == {"order_id": "A1", "amount": 5}
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output) == ("completed", "Refunded 5 on A1."), view.run.error
        deltas = [
            e.data["text"]
            async for e in svc.events(conversation.id, follow=False)
            if e.type == "message.delta"
        ]
    assert "".join(deltas) == "Refunded 5 on A1."
    assert REFUNDS == [("A1", 5)]
    sent = server.of(api)
    assert len(sent) == 2 and all(r.streamed for r in sent)
    assert sent[-1].has_tool_result(), "the tool's result went back to the model"
    assert view.run.usage.requests == 2 and view.run.usage.input_tokens == 22


async def test_a_429_with_retry_after_is_retried_by_the_client(
    sqlite_url: str, provider: tuple[FakeModelServer, str, Model]
) -> None:
    server, api, model = provider
    server.then(Fail(429, retry_after="1", message="slow down"), Text("Hello."))
    async with Service.open(sqlite_url, agents=[desk(model)]) as svc:
        _, run = await _turn(svc, "hello")
    assert (run.status, run.output) == ("completed", "Hello."), run.error
    assert len(server.of(api)) == 2


async def test_a_5xx_that_outlasts_the_clients_retries_fails_the_run_with_model_error(
    sqlite_url: str, provider: tuple[FakeModelServer, str, Model]
) -> None:
    server, api, model = provider
    server.then(*[Fail(503, message="upstream secret detail")] * 3, Text("Back again."))
    async with Service.open(sqlite_url, agents=[desk(model)]) as svc:
        _, run = await _turn(svc, "hello")
        assert run.status == "failed"
        assert run.error is not None and run.error.code == "model_error"
        assert "503" in run.error.message and "secret" not in run.error.message
        assert len(server.of(api)) == 3, "one request and the client's two retries"
        # The conversation stays usable: the next message is answered.
        _, again = await _turn(svc, "hello again")
        assert (again.status, again.output) == ("completed", "Back again.")


async def test_a_broken_stream_fails_the_run_with_model_error(
    sqlite_url: str, provider: tuple[FakeModelServer, str, Model]
) -> None:
    server, api, model = provider
    server.then(Broken("this answer is cut off midway through"))
    async with Service.open(sqlite_url, agents=[desk(model)]) as svc:
        _, run = await _turn(svc, "hello")
    assert run.status == "failed", run.output
    assert run.error is not None and run.error.code == "model_error", run.error
    assert len(server.of(api)) == 1, "a stream is not retried once it has begun"


async def test_whole_answers_too(provider: tuple[FakeModelServer, str, Model]) -> None:
    """The same model asked without streaming (pydantic-ai's `agent.run`): the formats' whole answers,
    a tool call (deferred for approval) and, once approved, text."""
    server, api, model = provider
    REFUNDS.clear()
    server.respond = call_then_answer("refund", {"order_id": "B2", "amount": 1}, "Refunded B2.")
    agent = desk(model)
    first = await agent.run("refund B2", output_type=[str, DeferredToolRequests])
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    assert (call.tool_name, call.args_as_dict()) == ("refund", {"order_id": "B2", "amount": 1})
    second = await agent.run(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True}),
        output_type=[str, DeferredToolRequests],
    )
    assert second.output == "Refunded B2." and REFUNDS == [("B2", 1)]
    assert [r.streamed for r in server.of(api)] == [False, False]
