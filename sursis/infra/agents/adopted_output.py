"""An adopted agent's output as it declared it, with deferred calls as a further output.

A run that suspends ends with `DeferredToolRequests`, which pydantic-ai returns only when the run's
output types include it. Passing `output_type=[..., DeferredToolRequests]` to each run would do, but
pydantic-ai refuses a run's `output_type` on an agent with output validators, and it rebuilds the
output schema on every run. So the agent is served as a sibling built once, when the service starts:
the same agent (its tools, toolsets, capabilities, instructions, validators and output functions
shared, not copied) whose output schema is the one pydantic-ai builds for the declared outputs plus
`DeferredToolRequests`. The user's `Agent` object itself is left as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.agent import AbstractAgent, WrapperAgent
from pydantic_ai.tools import DeferredToolRequests

from sursis.domain.errors import ToolDeclarationError


def with_deferred(output_type: Any) -> list[Any]:
    """The output types `output_type` declares, and `DeferredToolRequests`."""
    outputs = (
        list(output_type)
        if isinstance(output_type, Sequence) and not isinstance(output_type, str)
        else [output_type]
    )
    if DeferredToolRequests not in outputs:
        outputs.append(DeferredToolRequests)
    return outputs


def deferring(agent: AbstractAgent[Any, Any], name: str) -> tuple[AbstractAgent[Any, Any], bool]:
    """`agent` as a run of it may end with deferred calls, and whether each run must still be given
    `output_type` (an agent this cannot rebuild, whose output schema does not allow them yet)."""
    if isinstance(agent, Agent) and getattr(agent, "_output_schema", None) is not None:
        return (agent if agent._output_schema.allows_deferred_tools else _sibling(agent)), False
    inner = agent
    while isinstance(inner, WrapperAgent):
        inner = inner.wrapped
    schema = getattr(inner, "_output_schema", None)
    if schema is not None and schema.allows_deferred_tools:
        return agent, False
    if getattr(inner, "_output_validators", None):
        raise ToolDeclarationError(
            f"agent {name!r} ({type(agent).__name__}) wraps an agent with output validators, which "
            "pydantic-ai runs only with the agent's own output_type: add DeferredToolRequests to it, "
            "Agent(..., output_type=[YourOutput, DeferredToolRequests])"
        )
    return agent, True


def _sibling(agent: Agent[Any, Any]) -> Agent[Any, Any]:
    from pydantic_ai._output import OutputSchema  # the schema pydantic-ai builds for a run's output_type

    outputs = with_deferred(agent.output_type)
    schema = OutputSchema.build(outputs)
    sibling = copy.copy(agent)
    sibling._output_type = outputs
    sibling._output_schema = schema
    toolset = schema.toolset
    if toolset is not None and toolset.max_retries is None:
        toolset.max_retries = agent._max_output_retries
    sibling._output_toolset = toolset
    return sibling
