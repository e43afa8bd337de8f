"""`POST /v1/agents/{name}/ag-ui`: a hosted agent as an AG-UI 1.0 agent (server-sent events).

AG-UI's types (`ag_ui.core`, pydantic models of every event) load at the first run, not when the app
is built: a service no AG-UI front end talks to does not hold them (about 3 MiB). The body is read as
a JSON object and validated as a `RunAgentInput` in the handler, with the same 422 problem a body
model gives; the OpenAPI document still names `RunAgentInput` (`REQUEST_MODEL` in the handler's
`opt`, read by `sursis.app.openapi_contract` when the document is built)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from litestar import post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.response import Stream

from sursis.app.auth import requires
from sursis.app.container import Container
from sursis.app.openapi_contract import REQUEST_MODEL
from sursis.app.routes.events import STREAM
from sursis.domain.access import Permission
from sursis.domain.errors import NotFound
from sursis.domain.records import Principal


@post(
    "/v1/agents/{name:str}/ag-ui",
    tags=["agents"],
    media_type=STREAM,
    status_code=200,
    guards=[requires(Permission.CONVERSE)],
    opt={REQUEST_MODEL: "ag_ui.core:RunAgentInput"},
)
async def ag_ui_run(
    name: FromPath[str],
    data: JSONBody[dict[str, Any]],
    state: State,
    principal: NamedDependency[Principal],
) -> Stream:
    """Run one turn of the agent for an AG-UI front end (CopilotKit, `@ag-ui/client`).

    The `threadId` is a conversation of the agent in the caller's workspace, opened on first use;
    the last user message is the turn's message. The answer streams the turn's text and tool
    calls and ends in `RUN_FINISHED`: `outcome.type` `interrupt` lists the calls waiting for a
    decision (interrupt id = correlation id, `expiresAt` = the call's deadline). The next input
    answers them with `resume: [{interruptId, status, payload: {approved, editedArgs?, reason?}}]`,
    decided like `POST /v1/pending/{id}/resolve`. A resume that lost a race, came after the
    deadline or names no open interrupt, and new input while interrupts are open, end the stream
    in `RUN_ERROR` with a `code`. Permissions are those of posting a message and resolving a call.
    """
    from sursis.app.ag_ui import AgUiRun, check_input, run_input

    container: Container = state.container
    turn_input = run_input(data)
    if name not in container.catalog.agent_names():
        raise NotFound(f"unknown agent {name!r}")
    check_input(turn_input)
    container.listen_for_events()
    run = AgUiRun(
        conversations=container.conversations,
        pending_calls=container.pending_calls,
        runs=container.runs,
        events=container.events,
        notifier=container.notifier,
        poll_seconds=container.settings.events_poll_seconds,
        principal=principal,
        agent=name,
        data=turn_input,
    )

    async def body() -> AsyncIterator[str]:
        async for chunk in run.stream():
            yield chunk

    return Stream(body(), media_type=STREAM, headers={"Cache-Control": "no-cache"})
