"""Which runs ask their model for streamed responses: `web` runs unless their message says
`stream=False`; Slack, email and platform-event runs never (nobody watches them token by token)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sursis import AgentDefinition, Service
from sursis.domain.records import Run


def recording_model(asked: list[str]) -> FunctionModel:
    """A model that answers whole or streamed and notes which way it was asked."""

    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append("whole")
        return ModelResponse(parts=[TextPart("one two three")])

    async def streamed(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        asked.append("streamed")
        for word in ("one ", "two ", "three"):
            yield word

    return FunctionModel(whole, stream_function=streamed)


async def test_a_web_run_streams_unless_its_message_says_not_and_a_channel_run_never_does(
    tmp_path: Path,
) -> None:
    asked: list[str] = []
    agents = [AgentDefinition("talker", "Answer.", ())]
    url = f"sqlite+aiosqlite:///{tmp_path / 'stream.db'}"
    async with Service.open(url, agents=agents, model=recording_model(asked), migrate=True) as svc:
        conversation = await svc.start_conversation("talker", workspace="team")
        outputs = []
        for send in (
            lambda: svc.send(conversation.id, "hello"),
            lambda: svc.send(conversation.id, "hello", stream=False),
            lambda: svc.container.conversations.post_message(svc.principal, conversation.id, "hi", "slack"),
            lambda: svc.container.conversations.post_message(svc.principal, conversation.id, "hi", "email"),
            lambda: svc.container.conversations.post_message(
                svc.principal, conversation.id, "hi", "slack", stream=True
            ),
        ):
            run = await send()
            await svc.run_until_idle()
            outputs.append((await svc.get_run(run.id)).run.output)
    assert asked == ["streamed", "whole", "whole", "whole", "streamed"]
    assert outputs == ["one two three"] * 5


def test_a_queued_run_streams_by_default_only_from_the_web() -> None:
    now = datetime.now(UTC)
    made = {
        channel: Run.queued(uuid.uuid4(), "team", "ops", "hi", now, channel=channel).stream
        for channel in ("web", "slack", "email", "system")
    }
    assert made == {"web": True, "slack": False, "email": False, "system": False}
    assert Run.queued(uuid.uuid4(), "team", "ops", "hi", now, stream=False).stream is False
