"""The agent catalog: the agents a key may use and their tools."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from sursis.domain.agents.agents import AgentInfo, ToolListing
from sursis.domain.tools import Approval, Category, Executor


class ToolOut(BaseModel):
    name: str
    description: str | None
    category: Category
    executor: Executor
    approval: Approval
    effect: str | None = Field(description="The template of what a call changes, e.g. `Refund {amount}`")
    default_timeout_seconds: float | None = Field(
        description="How long a call's first suspension (the approval, else the answer) waits before it "
        "expires; null for a tool that never waits"
    )
    input_schema: dict[str, Any] | None = Field(
        default=None, description="The JSON schema of the tool's arguments, as the model is shown it"
    )
    server: str | None = Field(default=None, description="The MCP server that provides the tool")
    capability: str | None = Field(
        default=None, description="The pydantic-ai capability that brings the tool (its id or class name)"
    )
    annotations: dict[str, Any] | None = Field(
        default=None, description="What the MCP server says of the tool (readOnlyHint, destructiveHint, ...)"
    )
    schema_digest: str | None = Field(
        default=None,
        description="sha256 of the canonical JSON of the MCP tool's description and input schema",
    )
    after_crash: Literal["at_most_once", "may_repeat"] = Field(
        default="at_most_once",
        description="What a call whose worker died while the tool ran becomes: `may_repeat`, run again "
        "under the same call id (a tool declared `read` or idempotent); `at_most_once`, never started "
        'twice (a person is asked what happened: "outcome unknown")',
    )


class AgentOut(BaseModel):
    name: str = Field(description="What `POST /v1/conversations` takes as `agent`")
    description: str | None
    model: str | None = Field(description="The model the agent runs on")
    tools: list[ToolOut]


def agent_out(agent: AgentInfo, tools: list[ToolListing]) -> AgentOut:
    return AgentOut(
        name=agent.name,
        description=agent.description,
        model=agent.model,
        tools=[
            ToolOut(
                name=t.info.spec.name,
                description=t.info.description,
                category=t.info.spec.category,
                executor=t.info.spec.executor,
                approval=Approval.REQUIRES_APPROVAL if t.info.spec.gated else Approval.AUTO,
                effect=t.info.spec.effect,
                default_timeout_seconds=t.default_timeout.total_seconds() if t.default_timeout else None,
                input_schema=dict(t.info.input_schema) if t.info.input_schema is not None else None,
                server=t.info.spec.server,
                capability=t.info.spec.capability,
                annotations=dict(t.info.annotations) if t.info.annotations is not None else None,
                schema_digest=t.info.spec.schema_digest,
                after_crash="may_repeat" if t.info.may_repeat else "at_most_once",
            )
            for t in tools
        ],
    )
