"""The approval turn's agent as the peers declare it (`peer_child.py`, `turn_dbos.py`,
`langgraph_graph.py`): one gated tool that returns what it was asked to do and touches nothing.

Sursis serves it as a user's pydantic-ai `Agent` (`--agents bench.bench_agent:AGENTS`, or
`Service.open(agents=AGENTS)`), so every side of a side-by-side bench runs the same tool. The
built-in `ops` agent's `replay_dlq_event` does real work (it reads the dead letter and puts it
back on the outbox in the run's transaction); `bench/calls.py --sides ops` still counts that turn.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent

AGENT_NAME = "bench_ops"

agent: Agent[None, str] = Agent(name=AGENT_NAME, instructions="You operate the outbox.")


@agent.tool_plain(requires_approval=True)
def replay_dlq_event(event_id: str, reason: str) -> dict[str, Any]:
    """Put a dead-lettered event back on the outbox for delivery."""
    return {"replayed": True, "event_id": event_id, "reason": reason}


AGENTS = [agent]
"""What `sursis serve --agents bench.bench_agent:AGENTS` serves beside the built-in agents."""
