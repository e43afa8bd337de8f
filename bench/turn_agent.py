"""The agent loop alone: the approval turn through a bare pydantic-ai agent, nothing stored.

The floor under Sursis's turn: the same shape of agent the service runs (output `str` or
`DeferredToolRequests`, the gated tool declared with `requires_approval`, pydantic-ai's
instrumentation capability on an OpenTelemetry SDK tracer provider with no exporter, as a service
without `OTEL_EXPORTER_OTLP_ENDPOINT` runs it), a zero-latency model, and the message history kept
in a Python list. Whatever a turn costs here, a service that runs its turns on pydantic-ai pays too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from scripted_model import scripted


def ms(seconds: float) -> float:
    return seconds * 1000


def build_agent(instrumented: bool) -> Agent[None, str | DeferredToolRequests]:
    capabilities: list[Any] = []
    if instrumented:
        capabilities.append(
            Instrumentation(settings=InstrumentationSettings(tracer_provider=TracerProvider()))
        )
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(scripted),
        instructions="You operate the outbox.",
        output_type=[str, DeferredToolRequests],
        capabilities=capabilities,
    )

    @agent.tool_plain(requires_approval=True)
    def replay_dlq_event(event_id: str, reason: str) -> dict[str, Any]:
        """Put a dead-lettered event back on the outbox for delivery."""
        return {"replayed": True, "event_id": event_id, "reason": reason}

    return agent


@dataclass
class AgentOnlySide:
    """One process, no storage: each conversation is a list of messages."""

    instrumented: bool = True
    agent: Agent[None, str | DeferredToolRequests] | None = None
    histories: dict[int, list[ModelMessage]] = field(default_factory=dict)

    async def open(self) -> None:
        self.agent = build_agent(self.instrumented)

    async def close(self) -> None:
        self.agent = None

    async def new_conversation(self) -> int:
        key = len(self.histories)
        self.histories[key] = []
        return key

    async def suspend_only(self, conversation: int) -> DeferredToolRequests:
        assert self.agent is not None
        result = await self.agent.run("please replay evt_1001", message_history=self.histories[conversation])
        if not isinstance(result.output, DeferredToolRequests):
            raise RuntimeError("the agent did not defer the call")
        self.histories[conversation] = result.all_messages()
        return result.output

    async def turn(self, conversation: int) -> tuple[float, float, float]:
        """(message -> deferred, 0 (no separate resolve), approval -> final answer) in ms."""
        assert self.agent is not None
        started = time.perf_counter()
        requests = await self.suspend_only(conversation)
        suspended = time.perf_counter()
        approvals = DeferredToolResults(approvals={call.tool_call_id: True for call in requests.approvals})
        result = await self.agent.run(
            message_history=self.histories[conversation], deferred_tool_results=approvals
        )
        completed = time.perf_counter()
        if result.output != "replayed":
            raise RuntimeError(f"unexpected answer {result.output!r}")
        self.histories[conversation] = result.all_messages()
        return ms(suspended - started), 0.0, ms(completed - suspended)

    @staticmethod
    def statements() -> int:
        return 0
