"""`Service`'s stepping and administration methods: `run_once`, `create_api_key`, `seed_demo`,
`recall_memory`, and `sursis.configure_logging`; on SQLite and PostgreSQL through the migrations."""

from __future__ import annotations

import io
import json
import logging
import uuid

import pytest
import structlog
from litestar.testing import AsyncTestClient

import sursis
from sursis import Role, Service
from sursis.app.main import create_app
from sursis.domain.worlds.memory import MemoryKind, MemoryTier
from sursis.infra.worlds.memory import MemoryScope

REPLAY = 'replay it\nSCRIPT: [[{"tool": "replay_dlq_event", "args": {"event_id": "evt_1001", "reason": "t"}}], "replayed"]'


async def test_run_once_drives_one_queued_run_and_seed_demo_gives_the_ops_agent_its_letters(
    database_url: str,
) -> None:
    async with Service.open(database_url, model="scripted") as svc:
        assert await svc.run_once() is False
        added = await svc.seed_demo()
        assert added > 0
        assert await svc.seed_demo() == 0
        conversation = await svc.start_conversation("ops")
        run = await svc.send(conversation.id, REPLAY)
        assert await svc.run_once() is True
        view = await svc.get_run(run.id)
        [call] = view.pending
        assert (view.run.status, call.tool_name) == ("suspended", "replay_dlq_event")
        assert await svc.run_once() is False
        await svc.resolve(call.correlation_id, "approve")
        assert await svc.run_once() is True
        view = await svc.get_run(run.id)
        assert (view.run.status, view.run.output) == ("completed", "replayed")
        async with svc.container.uow() as uow:
            [letter] = await uow.ops.list_dead_letters("default", "replayed", 10)
        assert letter["event_id"] == "evt_1001"


async def test_create_api_key_makes_a_key_the_http_api_accepts_for_its_role(database_url: str) -> None:
    async with Service.open(database_url, model="scripted") as svc:
        system = await svc.create_api_key("system", workspace="default")
        operator = await svc.create_api_key(Role.OPERATOR, workspace="default", name="night shift")
        assert (system.key.role, operator.key.name, operator.key.workspace) == (
            Role.SYSTEM,
            "night shift",
            "default",
        )
        with pytest.raises(sursis.ValidationFailed):
            await svc.create_api_key("operator", workspace=None)
        with pytest.raises(sursis.ValidationFailed):
            await svc.create_api_key("superuser", workspace="default")
    # The app starts (and stops) the service it is given in its own event loop.
    served = Service.from_settings(svc.settings)
    async with AsyncTestClient(app=create_app(served.settings, service=served)) as client:
        as_operator = {"Authorization": f"Bearer {operator.secret}"}
        as_system = {"Authorization": f"Bearer {system.secret}"}
        created = await client.post("/v1/conversations", json={"agent": "ops"}, headers=as_operator)
        assert created.status_code == 201, created.text
        refused = await client.get("/v1/conversations", headers=as_system)
        assert refused.status_code == 403, refused.text
        event = {
            "id": "e-1",
            "type": "anomaly.detected",
            "data": {"kind": "cost_spike", "metric": "m", "baseline": 1.0, "observed": 9.0},
        }
        accepted = await client.post("/v1/events", json=event, headers=as_system)
        assert accepted.status_code in (200, 201, 202), accepted.text


async def test_recall_memory_finds_an_agents_persistent_memories_of_one_world_or_none(
    database_url: str,
) -> None:
    world = uuid.uuid4()
    async with Service.open(database_url, model="scripted") as svc:
        gateway = svc.container.worlds.memory
        scope = MemoryScope("team", "ops", None, uuid.uuid4(), uuid.uuid4())
        for text in ("the operator prefers replays after midnight", "invoices from acme are always late"):
            await gateway.remember(scope, text, MemoryTier.PERSISTENT, MemoryKind.OBSERVATION, [])
        await gateway.remember(
            scope, "session notes about replays", MemoryTier.SESSION, MemoryKind.OBSERVATION, []
        )
        found = await svc.recall_memory("ops", "replays midnight", workspace="team")
        assert [m["text"] for m in found] == ["the operator prefers replays after midnight"]
        assert set(found[0]) == {"id", "tier", "kind", "text", "score"}
        assert await svc.recall_memory("ops", "replays midnight", workspace="other") == []
        assert await svc.recall_memory("ops", "replays midnight", workspace="team", world_id=world) == []
        assert await svc.recall_memory("assistant", "replays midnight", workspace="team") == []


def test_configure_logging_writes_json_lines_to_the_stream_given() -> None:
    root = logging.getLogger()
    handlers, level, config = root.handlers[:], root.level, structlog.get_config()
    stream = io.StringIO()
    try:
        sursis.configure_logging("INFO", json_logs=True, stream=stream)
        structlog.get_logger("bench").info("turn.done", run_id="r1")
        logging.getLogger("library").warning("plain %s", "record")
    finally:
        root.handlers, root.level = handlers, level
        structlog.configure(**config)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["event"], line["level"]) for line in lines] == [
        ("turn.done", "info"),
        ("plain record", "warning"),
    ]
    assert lines[0]["run_id"] == "r1"
