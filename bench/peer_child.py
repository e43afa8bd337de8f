"""The child end of a peer that runs in a venv of its own (`turn_pgtask.py`, `turn_absurd.py`):
JSON lines on stdin and stdout, one answer per request, driven by `peer_process.py` from the
service's venv. Imports only the standard library and pydantic-ai, which every peer venv has.

Requests (`op`): `open`; `new_conversation`; `turn` (one approval turn, timed here, with this
process's CPU: every thread of it, the engine's worker included); `warm` (two turns on each of
`concurrency` conversations at once); `throughput` (`concurrency`
conversations at once, `turns` each, none started after `seconds`); `close`. Logs go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from scripted_model import scripted

PROMPT = "please replay evt_1001"


def ms(seconds: float) -> float:
    return seconds * 1000


def build_agent(capability: Any) -> Agent[None, str | DeferredToolRequests]:
    """The agent of `turn_dbos.py`, durable through `capability`."""
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(scripted, model_name="scripted"),
        name="bench_ops",
        instructions="You operate the outbox.",
        output_type=[str, DeferredToolRequests],
        capabilities=[capability],
    )

    @agent.tool_plain(requires_approval=True)
    def replay_dlq_event(event_id: str, reason: str) -> dict[str, Any]:
        """Put a dead-lettered event back on the outbox for delivery."""
        return {"replayed": True, "event_id": event_id, "reason": reason}

    return agent


async def approval_turn(
    agent: Agent[None, str | DeferredToolRequests],
    payload: Any,
    wait_for_decision: Any,
) -> dict[str, Any]:
    """The task's body on both engines: run until the gated call is deferred, wait for the human's
    decision (`wait_for_decision()`, the engine's durable wait), resume with it, finish."""
    messages = ModelMessagesTypeAdapter.validate_python(payload["history"])
    first = await agent.run(payload["prompt"], message_history=messages)
    if not isinstance(first.output, DeferredToolRequests):
        raise RuntimeError("the agent did not defer the call")
    call_ids = [call.tool_call_id for call in first.output.approvals]
    decision = await wait_for_decision()
    approvals = DeferredToolResults(approvals=dict.fromkeys(call_ids, decision == "approve"))
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=approvals)
    return {
        "output": second.output,
        "messages": ModelMessagesTypeAdapter.dump_python(second.all_messages(), mode="json"),
    }


class Engine(Protocol):
    """One engine's side of a turn: start the task, see it wait, send the decision, get the result."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def start(self, history: list[Any]) -> Any: ...
    async def until_waiting(self, task: Any) -> None: ...
    async def decide(self, task: Any, decision: str) -> None: ...
    async def result(self, task: Any) -> dict[str, Any]: ...


@dataclass
class Turns:
    """Approval turns over an `Engine`; a conversation's history is the next task's input."""

    engine: Engine
    histories: dict[int, list[Any]] = field(default_factory=dict)

    def new_conversation(self) -> int:
        key = len(self.histories)
        self.histories[key] = []
        return key

    async def turn(self, conversation: int) -> tuple[float, float, float]:
        """(message -> the task waits for the decision, the decision sent, decision -> answer) in ms."""
        started = time.perf_counter()
        task = await self.engine.start(self.histories[conversation])
        await self.engine.until_waiting(task)
        suspended = time.perf_counter()
        await self.engine.decide(task, "approve")
        answered = time.perf_counter()
        result = await self.engine.result(task)
        completed = time.perf_counter()
        if result.get("output") != "replayed":
            raise RuntimeError(f"unexpected result {result!r}")
        self.histories[conversation] = result["messages"]
        return ms(suspended - started), ms(answered - suspended), ms(completed - suspended)

    async def warm(self, concurrency: int) -> None:
        warm = [self.new_conversation() for _ in range(concurrency)]
        for _ in range(2):
            await asyncio.gather(*(self.turn(c) for c in warm))

    async def throughput(self, concurrency: int, turns: int, seconds: float) -> dict[str, Any]:
        conversations = [self.new_conversation() for _ in range(concurrency)]
        latencies: list[float] = []
        started = time.perf_counter()

        async def loop(conversation: int) -> None:
            for _ in range(turns):
                if time.perf_counter() >= started + seconds:
                    return
                suspend, _, resume = await self.turn(conversation)
                latencies.append(suspend + resume)

        await asyncio.gather(*(loop(c) for c in conversations))
        return {"latencies": latencies, "elapsed": time.perf_counter() - started}


async def answer(turns: Turns, request: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op == "open":
        await turns.engine.open()
        return {}
    if op == "new_conversation":
        return {"conversation": turns.new_conversation()}
    if op == "turn":
        cpu = time.process_time()
        times = await turns.turn(request["conversation"])
        return {"times": times, "cpu_ms": ms(time.process_time() - cpu)}
    if op == "warm":  # its own request, so the parent's CPU meter starts after it
        await turns.warm(request["concurrency"])
        return {}
    if op == "throughput":
        return await turns.throughput(request["concurrency"], request["turns"], request["seconds"])
    if op == "close":
        await turns.engine.close()
        return {}
    raise ValueError(f"unknown op {op!r}")


async def serve(engine: Engine) -> None:
    """Answers requests from stdin until `close` or end of input."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    turns = Turns(engine)
    while line := await reader.readline():
        request = json.loads(line)
        try:
            reply: dict[str, Any] = {"ok": True, **await answer(turns, request)}
        except Exception as exc:  # the parent reports it and stops the side
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        if request["op"] == "close":
            return
