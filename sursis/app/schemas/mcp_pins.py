"""The pinned descriptions of MCP tools, as admins list and accept them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sursis.domain.agents.mcp_pins import McpPin

Digest = str


class McpPinOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    agent: str
    tool: str
    server: str = Field(description="The MCP server that describes the tool")
    digest: Digest = Field(description="sha256 of everything the server said in the accepted description")
    description: dict[str, Any] = Field(
        description="The accepted description: name, title, description, input and output schema, annotations"
    )
    accepted_by: str = Field(description="The key that accepted it, or `first-seen`")
    accepted_at: datetime
    changed: bool = Field(description="Whether a process saw another description: its calls are asked")
    changed_digest: Digest | None = None
    changed_description: dict[str, Any] | None = None
    changed_at: datetime | None = None

    @classmethod
    def of(cls, pin: McpPin) -> McpPinOut:
        return cls.model_validate(pin)


class AcceptPinIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    digest: Digest = Field(
        min_length=64, max_length=64, pattern=r"^[0-9a-f]{64}$", description="The `changed_digest` accepted"
    )
