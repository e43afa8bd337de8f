"""Helpers for tests of agents run by a `Service`: run to rest, expect pending calls, resolve them."""

from __future__ import annotations

import uuid
from typing import Any

from sursis.app.service import Service
from sursis.domain.records import PendingCall
from sursis.domain.runs.runs import RunView
from sursis.domain.states import Decision


async def expect_pending(
    service: Service,
    *,
    tool_name: str | None = None,
    conversation_id: uuid.UUID | str | None = None,
    count: int = 1,
) -> list[PendingCall]:
    """Run queued work to rest, then assert that exactly `count` calls await a decision (of
    `tool_name`, in `conversation_id`, when given) and return them, oldest first."""
    await service.run_until_idle()
    calls = await service.pending(conversation_id=conversation_id, tool_name=tool_name)
    if len(calls) != count:
        seen = [(c.tool_name, c.args) for c in await service.pending(conversation_id=conversation_id)]
        raise AssertionError(
            f"expected {count} awaiting call(s){f' of {tool_name!r}' if tool_name else ''}, "
            f"found {len(calls)}; awaiting: {seen}{await _last_run(service)}"
        )
    return calls


async def _last_run(service: Service) -> str:
    """What the last run sent through `service` came to: status, error and the model's last text."""
    run_id = service.last_run_id
    if run_id is None:
        return "; no message was sent through this service"
    view = await service.get_run(run_id)
    run = view.run
    error = f"{run.error.code}: {run.error.message}" if run.error else None
    return f"; last run {run.id}: status {run.status.value}, error {error}, last model text {run.output!r}"


async def settle(service: Service, run_id: uuid.UUID | str) -> RunView:
    """Run queued work to rest and return the run, which must be settled by then."""
    await service.run_until_idle()
    view = await service.get_run(run_id)
    if not view.run.status.settled:
        raise AssertionError(
            f"run {view.run.id} is {view.run.status.value} after running to rest; "
            f"awaiting: {[(c.tool_name, c.args) for c in view.pending]}"
        )
    return view


async def resolve_and_settle(
    service: Service, call: PendingCall, decision: Decision | str, **resolution: Any
) -> RunView:
    """Decide `call` (`reason=`, `args=`, `result=` as `Service.resolve` takes them), run the
    resumed work to rest and return the call's run."""
    await service.resolve(call.correlation_id, decision, **resolution)
    return await settle(service, call.run_id)
