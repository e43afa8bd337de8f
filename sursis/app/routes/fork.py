"""`POST /v1/conversations/{id}/fork`: a new conversation holding the history up to a turn, run from there."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_201_CREATED

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas.conversations import conversation_out
from sursis.app.schemas.forks import ForkBody, ForkedOut
from sursis.app.schemas.runs import run_out
from sursis.domain.access import Permission
from sursis.domain.conversations.fork_service import ForkService
from sursis.domain.records import Principal
from sursis.domain.runs.runs import RunService

Wait = Annotated[float, QueryParameter(ge=0, le=3600, description="Long-poll up to this many seconds")]


@post(
    "/v1/conversations/{conversation_id:uuid}/fork",
    status_code=HTTP_201_CREATED,
    tags=["conversations"],
    guards=[requires(Permission.CONVERSE)],
    dependencies=services("forks", "runs"),
)
async def fork_conversation(
    conversation_id: FromPath[uuid.UUID],
    data: JSONBody[ForkBody],
    forks: NamedDependency[ForkService],
    runs: NamedDependency[RunService],
    principal: NamedDependency[Principal],
    wait: Wait = 0,
) -> ForkedOut:
    """Fork the conversation at the user message of seq `at`: a new conversation of the same
    workspace holds every message before it and runs `message` (or the original's message) there.

    Nothing is replayed: the copied tool results are history, and every call of the fork's run is a
    new call through the policy. A user key forks only the conversations it created. `?wait=`
    long-polls until the fork's run settles; the answer is 201 either way.
    """
    forked = await forks.fork(principal, conversation_id, data.at, data.message)
    view = await runs.wait_after_queueing(principal, forked.run, wait)
    return ForkedOut(conversation=conversation_out(forked.conversation), run=run_out(view, principal))


def fork_route_handlers() -> list[Any]:
    return [fork_conversation]
