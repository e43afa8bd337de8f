"""The agent runner: one claimed run, one segment of pydantic-ai, persisted as it goes.

One concern per module, each a collaborator the driver (`drive.AgentRunner`) builds and calls by
name: `events` (`EventPublisher`: what is published), `stream` (`ResponseStreamer`), `leases`
(`LeaseKeeper`: persistence points and the lease), `suspend` (`Suspender`: pending calls), `finish`
(`Finisher`: the run's end); they share `base.RunnerParts`. Beside them: `segment` (what a segment
starts from and holds back), `failures` (classification), `usage`. What a resumed segment tells the
model is in `sursis.infra.agents.resumed`, which a delegated inner agent's run uses too.
"""

from sursis.infra.agents.resumed import NotReady, denial_for, unanswered_tool_calls
from sursis.infra.runner.agents import build_agent, supported_provider_tools
from sursis.infra.runner.base import ACTOR, Timeouts
from sursis.infra.runner.drive import AgentRunner
from sursis.infra.runner.events import dumps, message_events
from sursis.infra.runner.failures import is_transient_database_error, run_failure
from sursis.infra.runner.leases import Interrupted, LeaseLost

__all__ = [
    "ACTOR",
    "AgentRunner",
    "Interrupted",
    "LeaseLost",
    "NotReady",
    "Timeouts",
    "build_agent",
    "denial_for",
    "dumps",
    "is_transient_database_error",
    "message_events",
    "run_failure",
    "supported_provider_tools",
    "unanswered_tool_calls",
]
