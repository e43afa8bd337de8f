"""One approval turn through pydantic-ai on DBOS: the same agent as `turn_agent.py` with pydantic-ai's
`DBOSDurability` capability, run inside a `@DBOS.workflow` on PostgreSQL; for `peers.py`. Needs
the `peers` extra.

The workflow runs the agent until it defers the gated call, publishes the approval request with
`DBOS.set_event` and waits for the decision with `DBOS.recv`, as pydantic-ai's own DBOS approval
test does; the operator's side reads the event (`get_event`) and answers with `DBOS.send`. The
workflow then resumes the agent with the decision and returns the final answer and the messages.
A conversation's history is the workflow's input (DBOS stores it with the workflow), so every turn
is one workflow. DBOS is one per process: `DbosSide.open` launches it once.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from common import DatabaseCounter
from dbos import DBOS, DBOSConfig
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from scripted_model import scripted

REQUESTS = "approval_requests"
DECISION = "decision"


def ms(seconds: float) -> float:
    return seconds * 1000


def build_agent() -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(scripted, model_name="scripted"),
        name="bench_ops",
        instructions="You operate the outbox.",
        output_type=[str, DeferredToolRequests],
        capabilities=[DBOSDurability()],
    )

    @agent.tool_plain(requires_approval=True)
    def replay_dlq_event(event_id: str, reason: str) -> dict[str, Any]:
        """Put a dead-lettered event back on the outbox for delivery."""
        return {"replayed": True, "event_id": event_id, "reason": reason}

    return agent


AGENT = build_agent()


@DBOS.workflow()
async def approval_turn(prompt: str, history: list[Any]) -> dict[str, Any]:
    """One turn: run until the gated call is deferred, publish it, wait for the decision, finish."""
    messages = ModelMessagesTypeAdapter.validate_python(history)
    first = await AGENT.run(prompt, message_history=messages)
    if not isinstance(first.output, DeferredToolRequests):
        raise RuntimeError("the agent did not defer the call")
    call_ids = [call.tool_call_id for call in first.output.approvals]
    await DBOS.set_event_async(REQUESTS, call_ids)
    decision = await DBOS.recv_async(DECISION, timeout_seconds=60)
    approvals = DeferredToolResults(approvals=dict.fromkeys(call_ids, decision == "approve"))
    second = await AGENT.run(message_history=first.all_messages(), deferred_tool_results=approvals)
    return {
        "output": second.output,
        "messages": ModelMessagesTypeAdapter.dump_python(second.all_messages(), mode="json"),
    }


_launched: str | None = None


@dataclass
class DbosSide:
    """pydantic-ai + DBOS in this process, on `url` (DBOS's system database)."""

    url: str
    histories: dict[int, list[Any]] = field(default_factory=dict)
    counter: DatabaseCounter | None = None

    async def open(self) -> None:
        global _launched
        if _launched is None:
            config: DBOSConfig = {"name": "bench-dbos", "system_database_url": self.url}
            DBOS(config=config)
            DBOS.launch()
            _launched = self.url
        if self.counter is None:
            self.counter = DatabaseCounter(sa.engine.make_url(self.url).database).install()
        elif _launched != self.url:
            raise RuntimeError("DBOS is launched once per process")

    async def close(self) -> None:
        """DBOS stays up for the process (it cannot be launched twice)."""
        if self.counter is not None:
            self.counter.remove()
            self.counter = None

    @staticmethod
    def shutdown() -> None:
        """Stops DBOS; the event loop gets a thread pool again (DBOS put its own in and shut it)."""
        global _launched
        if _launched is not None:
            DBOS.destroy()
            _launched = None
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())

    async def new_conversation(self) -> int:
        key = len(self.histories)
        self.histories[key] = []
        return key

    async def _suspend(self, conversation: int) -> Any:
        handle = await DBOS.start_workflow_async(
            approval_turn, "please replay evt_1001", self.histories[conversation]
        )
        requests = await DBOS.get_event_async(handle.get_workflow_id(), REQUESTS, timeout_seconds=60)
        if not requests:
            raise RuntimeError("the workflow published no approval request")
        return handle

    async def turn(self, conversation: int) -> tuple[float, float, float]:
        """(message -> approval requested, the decision sent, decision -> final answer) in ms."""
        started = time.perf_counter()
        handle = await self._suspend(conversation)
        suspended = time.perf_counter()
        await DBOS.send_async(handle.get_workflow_id(), "approve", DECISION)
        answered = time.perf_counter()
        result = await handle.get_result()
        completed = time.perf_counter()
        if result["output"] != "replayed":
            raise RuntimeError(f"unexpected answer {result['output']!r}")
        self.histories[conversation] = result["messages"]
        return ms(suspended - started), ms(answered - suspended), ms(completed - suspended)

    async def suspend_only(self, conversation: int) -> None:
        """Leaves the workflow waiting; it is answered (and finished) so nothing lingers."""
        handle = await self._suspend(conversation)
        await DBOS.send_async(handle.get_workflow_id(), "approve", DECISION)
        result = await handle.get_result()
        self.histories[conversation] = result["messages"]

    def statements(self) -> int:
        """Statements DBOS sent to its system database (its SQLAlchemy engine) from this process."""
        return self.counter.statements if self.counter is not None else 0
