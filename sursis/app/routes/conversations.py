"""Conversations over the API: start one, read it with its log, post a message (its run is queued)."""

from __future__ import annotations

import uuid

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_202_ACCEPTED

from sursis.app.routes.provide import services
from sursis.app.routes.queries import Wait
from sursis.app.schemas import (
    ConversationDetailOut,
    ConversationOut,
    CreateConversation,
    PostMessage,
    RunOut,
    conversation_detail_out,
    conversation_out,
    run_out,
)
from sursis.domain.conversations.conversations import ConversationService
from sursis.domain.records import Principal
from sursis.domain.runs.runs import RunService


class ConversationController(Controller):
    path = "/v1/conversations"
    tags = ["conversations"]
    dependencies = services("conversations", "runs")

    @post("/", status_code=HTTP_201_CREATED)
    async def create(
        self,
        data: JSONBody[CreateConversation],
        conversations: NamedDependency[ConversationService],
        principal: NamedDependency[Principal],
    ) -> ConversationOut:
        """Start a conversation with an agent."""
        conversation = await conversations.create_conversation(principal, data.agent, data.workspace)
        return conversation_out(conversation)

    @get("/{conversation_id:uuid}")
    async def detail(
        self,
        conversation_id: FromPath[uuid.UUID],
        conversations: NamedDependency[ConversationService],
        principal: NamedDependency[Principal],
    ) -> ConversationDetailOut:
        """The conversation, its message log and its active run."""
        detail = await conversations.conversation_detail(principal, conversation_id)
        return conversation_detail_out(detail, principal)

    @post(
        "/{conversation_id:uuid}/messages",
        status_code=HTTP_202_ACCEPTED,
        responses={HTTP_200_OK: ResponseSpec(RunOut, description="The run settled within `wait` seconds")},
    )
    async def post_message(
        self,
        conversation_id: FromPath[uuid.UUID],
        data: JSONBody[PostMessage],
        conversations: NamedDependency[ConversationService],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
        wait: Wait = 0,
    ) -> Response[RunOut]:
        """Post a user message; its run is queued. `?wait=` long-polls until the run settles.

        Once the message is committed the answer is never an error: if the database cannot be
        read while waiting (busy pool, outage), the queued run comes back with 202.
        """
        queued_since = runs.mark()
        run = await conversations.post_message(principal, conversation_id, data.content, stream=data.stream)
        view = await runs.wait_after_queueing(principal, run, wait, queued_since=queued_since)
        status = HTTP_200_OK if view.run.status.settled else HTTP_202_ACCEPTED
        return Response(run_out(view, principal), status_code=status)
