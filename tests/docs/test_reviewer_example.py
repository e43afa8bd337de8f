"""The reviewer example of docs/reviewer.md (```json policy-example shell```), as written: stored with
`PUT /v1/policies` over the real app, its reviewer `openai:gpt-4.1-mini` served by a local
OpenAI-compatible server that answers like a careful reviewer would; a routine read is approved by
the reviewer, a command that writes goes to two engineers, and the simulation of the period counts
what the reviewer took. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from pydantic_ai import Agent, RunContext, models

from sursis.app.main import create_app
from sursis.infra.agents.adopted import adopt
from sursis.infra.agents.declarations import AgentDefinition
from sursis.testing import ScriptedModel
from tests.conftest import KeyMaker, bearer, eventually, make_settings
from tests.docs.test_approval_examples import EXAMPLES
from tests.fakes.model_servers import FakeModelServer, Request, Step, Text

READS = re.compile(r"^(ls|cat|grep|head|tail|git (status|log|diff))\b")
RAN: list[str] = []


def shell_agent() -> AgentDefinition:
    agent: Agent[None, str] = Agent(name="ops-shell", instructions="Run shell commands.")

    @agent.tool(requires_approval=True)
    def shell(ctx: RunContext[Any], command: str) -> str:
        """Run a shell command."""
        RAN.append(command)
        return f"ran {command}"

    return adopt(agent)


def careful_reviewer(request: Request) -> Step:
    """Reads the call from between the markers and answers the question about it."""
    prompt = request.body["messages"][-1]["content"]
    data = json.loads(re.search(r"<<<CALL-(\w+)\n(.*)\nCALL-\1>>>", prompt, re.DOTALL).group(2))  # type: ignore[union-attr]
    command = data["arguments"]["command"]
    if READS.match(command) and not re.search(r"[>|;&]", command):
        return Text(json.dumps({"verdict": "no", "reason": "a read-only command"}))
    return Text(json.dumps({"verdict": "yes", "reason": "it may change files"}))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)  # to a server on this machine only
    with FakeModelServer(respond=careful_reviewer, apis=("chat",), keep_alive=False) as running:
        yield running


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def ops(
    database_url: str, keys: KeyMaker, model: ScriptedModel, server: FakeModelServer
) -> AsyncIterator[tuple[AsyncTestClient[Any], dict[str, str]]]:
    from sursis.app.container import build_container

    settings = make_settings(
        database_url, openai_base_url=server.url + "/v1", openai_api_key="test", reviewer_poll_seconds=0.1
    )
    container = build_container(settings, agents=lambda _uow: {"ops-shell": shell_agent()}, model=model.model)
    engineers = {name: await keys.issue("operator", "default", name) for name in ("eng1", "eng2")}
    async with AsyncTestClient(app=create_app(settings, container=container)) as client:
        client.headers.update(bearer(await keys.make("admin", "default")))
        group = {
            "workspace": "default",
            "name": "engineers",
            "members": [str(k.key.id) for k in engineers.values()],
        }
        assert (await client.post("/v1/groups", json=group)).status_code == 201
        yield client, {name: k.secret for name, k in engineers.items()}


async def run_command(client: AsyncTestClient[Any], model: ScriptedModel, command: str) -> dict[str, Any]:
    """Starts a conversation whose model asks for `command`; answers with the pending call and its run's
    id (under `run_id`). The scripted model is shared: wait for the run to end (`finished`) before the
    next one starts."""
    model.calls(("shell", {"command": command})).text("done")
    conversation = (await client.post("/v1/conversations", json={"agent": "ops-shell"})).json()["id"]
    posted = await client.post(
        f"/v1/conversations/{conversation}/messages", params={"wait": 10}, json={"content": "go"}
    )
    assert posted.status_code in (200, 202), posted.text
    run = posted.json()
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    return dict(pending, run_id=run["id"])


async def finished(client: AsyncTestClient[Any], run_id: str) -> dict[str, Any]:
    """The run once it completed, so that the next run cannot take this one's scripted reply."""

    async def completed() -> dict[str, Any] | None:
        run: dict[str, Any] = (await client.get(f"/v1/runs/{run_id}", params={"wait": 1})).json()
        return run if run["status"] == "completed" else None

    found: dict[str, Any] = await eventually(completed, limit=30)
    return found


async def reviewed(client: AsyncTestClient[Any], pending: dict[str, Any]) -> dict[str, Any]:
    async def verdict() -> dict[str, Any] | None:
        shown = (await client.get(f"/v1/pending/{pending['correlation_id']}")).json()
        review = shown.get("review") or {}
        return shown if review.get("effect") else None

    found: dict[str, Any] = await eventually(verdict, limit=30)
    return found


async def test_the_shell_example(
    ops: tuple[AsyncTestClient[Any], dict[str, str]], model: ScriptedModel, server: FakeModelServer
) -> None:
    client, engineers = ops
    since = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    RAN.clear()
    stored = await client.put("/v1/policies", json=EXAMPLES["shell"])
    assert stored.status_code == 200, stored.text
    assert stored.json()["rules"][0]["route"]["reviewer"]["model"] == "openai:gpt-4.1-mini"

    asked = await run_command(client, model, "ls -la /var/log")
    read = await reviewed(client, asked)
    assert (read["status"], read["resolved_by"]) == ("approved", "reviewer:openai:gpt-4.1-mini")
    assert read["review"]["verdict"] == "no" and read["review"]["reason"] == "a read-only command"
    assert read["review"]["question"].startswith("Could this command change anything")
    assert (await finished(client, asked["run_id"]))["output"] == "done"
    assert RAN == ["ls -la /var/log"]

    write = await reviewed(client, await run_command(client, model, "rm -rf build"))
    assert write["status"] == "awaiting"
    assert (write["review"]["verdict"], write["review"]["effect"]) == ("yes", "left_to_people")
    assert (write["quorum"], write["still_needed"]) == (2, 2)
    for name in ("eng1", "eng2"):
        decided = await client.post(
            f"/v1/pending/{write['correlation_id']}/resolve",
            json={"decision": "approve"},
            headers=bearer(engineers[name]),
        )
        assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "approved"

    async def both_ran() -> bool:
        return sorted(RAN) == ["ls -la /var/log", "rm -rf build"]

    await eventually(both_ran, limit=30)
    audit = (await client.get("/v1/audit", params={"correlation_id": read["correlation_id"]})).json()
    rows = audit["items"] if isinstance(audit, dict) else audit
    reviewed_row = next(r for r in rows if r["action"] == "pending.reviewed")
    assert reviewed_row["actor"] == "reviewer:openai:gpt-4.1-mini"
    assert reviewed_row["details"]["model"] == "openai:gpt-4.1-mini"
    assert (
        reviewed_row["details"]["question"] == EXAMPLES["shell"]["rules"][0]["route"]["reviewer"]["question"]
    )
    # The reviewer saw the call between markers, never as instructions.
    assert all("<<<CALL-" in r.body["messages"][-1]["content"] for r in server.requests)

    simulated = await client.post(
        "/v1/policies/simulate", json={"rules": EXAMPLES["shell"]["rules"], "since": since}
    )
    assert simulated.status_code == 200, simulated.text
    tally = simulated.json()["reviewer"]
    assert (tally["reviewed"], tally["would_approve"], tally["left_to_people"]) == (2, 1, 1)
    assert tally["verdicts"] == {"no": 1, "yes": 1}
