"""What an MCP server said about each tool when it was accepted, kept in the database.

A server's description of a tool (name, title, description, input and output schema, annotations)
is what the model is told and what decides whether a call is asked (`readOnlyHint`). The first
description a process sees is pinned: its digest is stored. A later description with another digest,
seen by any process, is recorded beside the pin as a change, and every call of the tool is asked,
in every process and after restarts, until an admin accepts the new description (an audited row
naming who accepted which digest); the accepted description then decides again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sursis.domain.access import Permission
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import NotFound, Stale
from sursis.domain.records import Principal

FIRST_SEEN = "first-seen"
"""`accepted_by` of a pin nobody accepted: the first description a process saw."""
ACCEPTED = "mcp.pin_accepted"
"""Audit action of an admin accepting a changed description."""


@dataclass(frozen=True, slots=True)
class McpPin:
    """One MCP tool's accepted description, and the changed one waiting for an admin, if any."""

    agent: str
    tool: str
    server: str
    digest: str
    description: Mapping[str, Any]
    accepted_by: str
    accepted_at: datetime
    changed_digest: str | None = None
    changed_description: Mapping[str, Any] | None = None
    changed_at: datetime | None = None

    @property
    def changed(self) -> bool:
        return self.changed_digest is not None


@dataclass(frozen=True, slots=True)
class PinCheck:
    """What a process learnt comparing the description it sees with the stored pin."""

    accepted: bool
    pin: McpPin | None = field(default=None, compare=False)


class McpPinStore(Protocol):
    """The pins in storage as admins list and accept them (`sursis.infra.db.mcp_pins`, which also
    checks each description a process sees against its pin: `SqlMcpPinStore.check`)."""

    async def pins(self, *, changed_only: bool) -> list[McpPin]: ...

    async def accept(self, agent: str, tool: str, digest: str, by: Principal, now: datetime) -> McpPin | None:
        """Make the recorded change `digest` the accepted description, with its audit row, in one
        transaction; None when the tool has no such change (anymore)."""
        ...


class McpPinService:
    """The admin's side of the pins: list them, accept a changed description."""

    def __init__(self, store: McpPinStore, clock: Clock = utcnow) -> None:
        self._store = store
        self._clock = clock

    async def pins(self, principal: Principal, *, changed_only: bool = False) -> Sequence[McpPin]:
        principal.require(Permission.MANAGE_POLICIES)
        principal.require(Permission.ALL_WORKSPACES)
        return await self._store.pins(changed_only=changed_only)

    async def accept(self, principal: Principal, agent: str, tool: str, digest: str) -> McpPin:
        """Accept the changed description of `agent`'s `tool` whose digest is `digest` (the one the
        admin saw): `Stale` when the tool's change is another one by now, `NotFound` without pin."""
        principal.require(Permission.MANAGE_POLICIES)
        principal.require(Permission.ALL_WORKSPACES)
        accepted = await self._store.accept(agent, tool, digest, principal, self._clock())
        if accepted is not None:
            return accepted
        known = [p for p in await self._store.pins(changed_only=False) if (p.agent, p.tool) == (agent, tool)]
        if not known:
            raise NotFound(f"no MCP tool {tool!r} of agent {agent!r} is pinned")
        raise Stale(
            f"the MCP tool {tool!r} of agent {agent!r} has no change with digest {digest[:12]}...",
            extra={"changed_digest": known[0].changed_digest},
        )
