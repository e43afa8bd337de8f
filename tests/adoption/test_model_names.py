"""An agent's own model, visibly: pydantic-ai builds `Agent("openai:NAME")` as a Responses-API model,
while the service's own `openai:` names (`SURSIS_MODEL`, `adopt(model=...)`) are chat completions.
The banner and the catalog say which (`openai-responses:` / `openai-chat:`), and an agent whose
Responses-API model meets a chat-only OpenAI-compatible server fails with one line naming the fix.
On SQLite and PostgreSQL, against a local fake server that speaks chat completions only."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from pydantic_ai import Agent, models
from structlog.testing import capture_logs

from sursis import Service, adopt
from sursis.app.agent_loading import AgentSelection, served_models
from sursis.app.main import create_app
from sursis.app.model_check import models_banner
from sursis.domain.access import Role
from sursis.infra.agents.models import build_model, model_label
from tests.conftest import KeyMaker, bearer, make_settings
from tests.fakes.model_servers import FakeModelServer, Text


@pytest.fixture
def chat_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    """A chat-only OpenAI-compatible server (vLLM, Ollama, LiteLLM), named by `OPENAI_BASE_URL` as a
    user would set it; pydantic-ai's own providers read it when an agent is made."""
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)  # to a server on this machine only
    with FakeModelServer(apis=("chat",), keep_alive=False) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
        yield server
    # The service closes the models it built from names; the OpenAI clients of the adopted agents' own
    # models are their authors' to close (a served model lives as long as its process): collected
    # here, not in whichever test runs next.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def upstream_agent() -> Agent[None, str]:
    """An agent as pydantic-ai's examples write it: its model named `openai:`."""
    return Agent("openai:gpt-5.2", name="helper", instructions="Be brief.")


async def test_an_openai_agent_against_a_chat_only_server_fails_with_the_fix_in_one_line(
    database_url: str, chat_only: FakeModelServer
) -> None:
    async with Service.open(database_url, agents=[upstream_agent()]) as svc:
        conversation = await svc.start_conversation("helper")
        with capture_logs() as logs:
            run = await svc.send(conversation.id, "hello")
            await svc.run_until_idle()
        view = await svc.get_run(run.id)
    assert view.run.status == "failed"
    assert view.run.error is not None and view.run.error.code == "model_error"
    message = view.run.error.message
    assert "\n" not in message
    assert "no Responses API (HTTP 404 from /v1/responses)" in message, message
    assert "openai-chat:gpt-5.2" in message and "adopt(agent, model='openai-chat:gpt-5.2')" in message
    # The log line says the same.
    [logged] = [e for e in logs if e["event"] == "run.segment_error"]
    assert "openai-chat:gpt-5.2" in logged["error"]
    assert [r.api for r in chat_only.requests] == [], "the chat endpoint was never asked"


async def test_the_fix_the_line_names_makes_the_same_agent_run(
    database_url: str, chat_only: FakeModelServer
) -> None:
    chat_only.then(Text("hi from chat completions"))
    agent = adopt(upstream_agent(), model="openai-chat:gpt-5.2")
    async with Service.open(database_url, agents=[agent], openai_base_url=f"{chat_only.url}/v1") as svc:
        conversation = await svc.start_conversation("helper")
        run = await svc.send(conversation.id, "hello")
        await svc.run_until_idle()
        view = await svc.get_run(run.id)
    assert view.run.status == "completed", view.run.error
    assert view.run.output == "hi from chat completions"
    assert [r.api for r in chat_only.requests] == ["chat"]


async def test_the_catalog_names_provider_and_api(
    database_url: str, keys: KeyMaker, chat_only: FakeModelServer
) -> None:
    own = upstream_agent()
    chat = Agent("openai-chat:gpt-4.1-mini", name="chatty")
    renamed = adopt(Agent(name="renamed"), model="openai:gpt-4.1-mini")
    plain = Agent(name="plain")
    settings = make_settings(database_url, agents=["assistant"], model="openai:gpt-4.1-nano")
    service = Service.from_settings(settings, agents=[own, chat, renamed, plain])
    async with AsyncTestClient(app=create_app(settings, service=service)) as http:
        listed = await http.get("/v1/agents", headers=bearer(await keys.make(Role.OPERATOR)))
    models: dict[str, Any] = {a["name"]: a["model"] for a in listed.json()}
    assert models == {
        "helper": "openai-responses:gpt-5.2",
        "chatty": "openai-chat:gpt-4.1-mini",
        "renamed": "openai-chat:gpt-4.1-mini",
        "plain": "openai-chat:gpt-4.1-nano",
    }


def test_the_banner_names_provider_and_api(chat_only: FakeModelServer) -> None:
    own = adopt(upstream_agent())
    renamed = adopt(Agent(name="renamed"), model="openai:gpt-4.1-mini")
    plain = adopt(Agent(name="plain"))
    selection = AgentSelection(frozenset({"assistant"}), (own, renamed, plain))
    models = served_models("openai:gpt-4.1-nano", selection)
    assert models_banner(models) == (
        "models: assistant=openai-chat:gpt-4.1-nano, helper=openai-responses:gpt-5.2, "
        "renamed=openai-chat:gpt-4.1-mini, plain=openai-chat:gpt-4.1-nano"
    )
    assert models_banner(served_models("scripted", AgentSelection(frozenset({"ops"}), ()))) == (
        "model: scripted"
    )


def test_the_services_names_build_the_api_they_name() -> None:
    for name, label in [
        ("openai:m", "openai-chat:m"),
        ("openai-chat:m", "openai-chat:m"),
        ("openai-responses:m", "openai-responses:m"),
    ]:
        model = build_model(name, openai_base_url="http://127.0.0.1:9/v1")
        assert model_label(model) == label == model_label(name), name
        assert str(getattr(model, "base_url", "")).startswith("http://127.0.0.1:9/v1")
