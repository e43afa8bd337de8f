"""The calls of one response run concurrently: the response is stored once, before either acts."""

from __future__ import annotations

from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.records import Principal
from sursis.domain.states import RunStatus
from tests.conftest import call, script

ADMIN = Principal(id="admin:test", role=Role.ADMIN, workspace=None)
TWO_AT_ONCE = script(
    [call("list_dlq_events"), call("list_failure_clusters"), call("list_dlq_events", status="dead")],
    "listed",
)


async def test_calls_of_one_response_store_it_once(container: Container) -> None:
    conversation = await container.conversations.create_conversation(ADMIN, "ops", "default")
    for _ in range(3):
        run = await container.conversations.post_message(ADMIN, conversation.id, TWO_AT_ONCE)
        assert await container.worker.run_once()
        view = await container.runs.get_run(ADMIN, run.id)
        assert view.run.status is RunStatus.COMPLETED, view.run.error
        assert view.run.output == "listed"

    async with container.uow() as uow:
        stored = await uow.messages.read(conversation.id)
        calls = await uow.tool_calls.for_run(run.id)
    assert [m.seq for m in stored] == list(range(1, len(stored) + 1))
    assert len(stored) == 3 * 4, "per turn: the prompt, the calls, their results, the answer"
    assert sorted(c.metadata.tool_name for c in calls) == [
        "list_dlq_events",
        "list_dlq_events",
        "list_failure_clusters",
    ]
