"""The models the service builds from names (`SURSIS_MODEL`, an agent's `model="openai:..."`, a
reviewer's) are closed with the service: once it stops, no connection from this process to the
model's server is left open for the collector to find. On SQLite and PostgreSQL, against a local
chat-completions server that keeps its connections alive, as real ones do."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent, models

from sursis import Service
from tests.fakes.model_servers import FakeModelServer

ESTABLISHED = "01"


def open_connections_to(port: int) -> int:
    """Connections of this machine to 127.0.0.1:`port` that are open (`/proc/net/tcp`: the
    client's end of each, in the state ESTABLISHED)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        if int(remote.split(":")[1], 16) == port and state == ESTABLISHED:
            count += 1
    return count


async def test_a_model_the_service_built_leaves_no_connection_open_once_it_stops(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)  # to a server on this machine only
    with FakeModelServer(apis=("chat",)) as server:
        port = int(server.url.rsplit(":", 1)[1])
        helper = Agent(name="helper", instructions="Be brief.")  # no model: the service's
        async with Service.open(
            database_url,
            agents=[helper],
            model="openai:fake-model",
            openai_base_url=f"{server.url}/v1",
            openai_api_key="not-needed",
        ) as svc:
            conversation = await svc.start_conversation("helper")
            run = await svc.send(conversation.id, "hello")
            await svc.run_until_idle()
            view = await svc.get_run(run.id)
            assert view.run.status == "completed", view.run.error
            assert view.run.output == "fake answer"
            # The client keeps its connection for the next request while the service runs.
            assert open_connections_to(port) == 1
        assert open_connections_to(port) == 0
        assert len(server.of("chat")) == 1
