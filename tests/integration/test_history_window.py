"""What the model is shown of a long conversation, on real SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sursis.app.container import Container, build_container
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.records import Principal
from sursis.domain.states import Decision, PendingStatus, RunStatus
from sursis.infra.db.tables import outbox, tool_calls
from tests.conftest import call, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)


def prompts_of(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


@pytest.fixture
async def built(seeded: str, settings_factory: Callable[..., Settings]) -> AsyncIterator[Callable[..., Any]]:
    containers: list[Container] = []

    def build(**overrides: Any) -> Container:
        model = overrides.pop("model", None)
        container = build_container(settings_factory(**overrides), model=model)
        containers.append(container)
        return container

    yield build
    for container in containers:
        await container.close()


async def converse(container: Container, contents: list[str]) -> list[str]:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
    outputs = []
    for content in contents:
        run = await container.conversations.post_message(ADMIN, conversation.id, content)
        assert await container.worker.run_once()
        view = await container.runs.get_run(ADMIN, run.id)
        assert view.run.status is RunStatus.COMPLETED
        outputs.append(view.run.output or "")
    return outputs


@pytest.mark.parametrize(("turns", "expected"), [(2, ["m2", "m3", "m4"]), (0, ["m1", "m2", "m3", "m4"])])
async def test_the_model_sees_the_current_turn_and_the_configured_earlier_ones(
    built: Callable[..., Container], turns: int, expected: list[str]
) -> None:
    seen: list[list[str]] = []

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append(prompts_of(messages))
        yield "ok"

    container = built(history_turns=turns, model=FunctionModel(stream_function=answer))
    await converse(container, ["m1", "m2", "m3", "m4"])
    assert seen[-1] == expected
    assert seen[0] == ["m1"]


async def test_the_window_of_a_resumed_segment_still_holds_its_own_turn(
    built: Callable[..., Container],
) -> None:
    """The scripted model follows the SCRIPT of the current turn's prompt: the resumed segment
    answers from the script only if that prompt is still in what it is shown."""
    container = built(history_turns=1)
    gated = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "replayed")
    conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
    await converse_on(container, conversation.id, ["one", "two"])
    run = await container.conversations.post_message(ADMIN, conversation.id, gated)
    assert await container.worker.run_once()
    view = await container.runs.get_run(ADMIN, run.id)
    assert view.run.status is RunStatus.SUSPENDED
    [pending] = view.pending
    await container.pending_calls.resolve_pending(ADMIN, pending.correlation_id, Resolution(Decision.APPROVE))
    assert await container.worker.run_once()
    view = await container.runs.get_run(ADMIN, run.id)
    assert view.run.status is RunStatus.COMPLETED
    assert view.run.output == "replayed"


async def converse_on(container: Container, conversation_id: Any, contents: list[str]) -> None:
    for content in contents:
        run = await container.conversations.post_message(ADMIN, conversation_id, content)
        assert await container.worker.run_once()
        assert (await container.runs.get_run(ADMIN, run.id)).run.status is RunStatus.COMPLETED


async def test_tool_calls_beyond_the_window_are_each_executed_once(built: Callable[..., Container]) -> None:
    """Tool call ids stay unique in the conversation although the model sees only one turn back:
    every approved replay runs (none is mistaken for an earlier call with the same id)."""
    container = built(history_turns=1)
    conversation = await container.conversations.create_conversation(ADMIN, "ops", None)
    gated = script([call("replay_dlq_event", event_id="evt_1002", reason="retry")], "replayed")
    for _ in range(5):
        run = await container.conversations.post_message(ADMIN, conversation.id, gated)
        assert await container.worker.run_once()
        async with container.uow() as uow:
            [pending] = await uow.pending.for_run(run.id, PendingStatus.AWAITING)
        await container.pending_calls.resolve_pending(
            ADMIN, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        assert await container.worker.run_once()
        assert (await container.runs.get_run(ADMIN, run.id)).run.status is RunStatus.COMPLETED
    async with container.uow() as uow:
        ids = (
            await uow.session.execute(
                sa.select(tool_calls.c.tool_call_id).where(tool_calls.c.conversation_id == conversation.id)
            )
        ).scalars()
        replays = await uow.session.scalar(
            sa.select(sa.func.count()).select_from(outbox).where(outbox.c.source_event_id == "evt_1002")
        )
    assert len(set(ids)) == 5
    assert replays == 5
