"""Runs over the API: read one (long-polling until it settles), its tool calls, cancel it."""

from __future__ import annotations

import uuid

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.status_codes import HTTP_200_OK

from sursis.app.routes.provide import services
from sursis.app.routes.queries import Wait
from sursis.app.schemas import RunOut, ToolCallOut, run_out, tool_call_out
from sursis.domain.records import Principal
from sursis.domain.runs.runs import RunService


class RunController(Controller):
    path = "/v1/runs"
    tags = ["runs"]
    dependencies = services("runs")

    @get("/{run_id:uuid}")
    async def detail(
        self,
        run_id: FromPath[uuid.UUID],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
        wait: Wait = 0,
    ) -> RunOut:
        """A run with its awaiting pending calls. `?wait=` long-polls until it settles."""
        return run_out(await runs.wait_for_run(principal, run_id, wait), principal)

    @get("/{run_id:uuid}/tool-calls")
    async def tool_calls(
        self,
        run_id: FromPath[uuid.UUID],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
    ) -> list[ToolCallOut]:
        """The executed tool calls of a run, with their metadata, in order."""
        return [tool_call_out(r) for r in await runs.list_tool_calls(principal, run_id)]

    @post("/{run_id:uuid}/cancel", status_code=HTTP_200_OK)
    async def cancel(
        self,
        run_id: FromPath[uuid.UUID],
        runs: NamedDependency[RunService],
        principal: NamedDependency[Principal],
    ) -> RunOut:
        """Cancel a run; its awaiting calls become `cancelled` and the conversation is free again."""
        return run_out(await runs.cancel_run(principal, run_id), principal)
