"""One segment of a claimed run: what it starts from, what it holds back, what it tells."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span
from pydantic_ai import AgentRun
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_core import to_json

from sursis.domain.records import JsonText, PendingCall, Run, ToolCallRecord, Usage
from sursis.infra.agents.agent_deps import RunInfo
from sursis.infra.runner.agents import ServedAgent
from sursis.infra.runner.events import Announced


def is_final_answer(message: ModelMessage) -> bool:
    """A response that calls no tool: nothing runs after it, so the end of the run stores it.

    Messages are persisted before anything acts on them (a tool's effect must find its call in
    the log: `RunDeps.before_effect` stores them as a tool is about to run), and otherwise with
    the suspension or the end of the run, in its transaction. A crash before then loses them, and
    the run is claimed again and asks the model again, as after a crash during the request.
    """
    return isinstance(message, ModelResponse) and not any(isinstance(p, ToolCallPart) for p in message.parts)


@dataclass(frozen=True, slots=True)
class SegmentStart:
    """What a segment starts from: the log as the model is shown it, and the state of the calls
    its last response left unanswered."""

    last_seq: int
    started: bool
    """The run's prompt is in the log already (a resumed or retried run)."""
    history: list[ModelMessage]
    tail: list[ToolCallPart]
    """The last response's calls that have no result in the log."""
    pending: list[PendingCall]
    recorded: dict[str, ToolCallRecord]
    """The stored outcomes of `tail`'s calls that already ran, by tool call id."""
    producer: Run | None
    """The earlier run whose response left `tail`, if it was not this run."""


@dataclass(slots=True, eq=False)
class Held:
    """A segment's agent run and how much of it is stored: its messages are held back until a tool
    is about to act on them (`before_effect`), the suspension or the end of the run."""

    usage: Usage
    """The run's usage with the segment's: as of the last store, then of the agent run's end."""
    agent_run: AgentRun[Any, Any] | None = None
    persisted: int = 0
    """How many of the agent run's new messages are stored."""
    cancel_seen: bool = False
    persisting: asyncio.Lock = field(default_factory=asyncio.Lock)

    def unsaved(self) -> list[ModelMessage]:
        return self.agent_run.new_messages()[self.persisted :] if self.agent_run else []


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment of a claimed run, as its steps share it."""

    run: Run
    owner: str
    span: Span
    stopping: asyncio.Event
    start: SegmentStart
    served: ServedAgent
    announced: Announced
    held: Held


def output_text(output: Any) -> str:
    """A run's output as stored: the text answer, or an agent's structured output as JSON (marked
    `JsonText`, so that it is shown as JSON)."""
    return output if isinstance(output, str) else JsonText(to_json(output).decode())


def run_info(run: Run) -> RunInfo:
    """What an agent's deps factory is told of the run."""
    return RunInfo(
        workspace=run.workspace,
        conversation_id=run.conversation_id,
        run_id=run.id,
        agent=run.agent,
        channel=run.channel,
        key_id=run.started_by,
        role=run.started_role,
        segment=run.segment,
    )
