"""What MCP servers said about their tools (admins): the pins, and accepting a changed description."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, Parameter, QueryParameter
from litestar.status_codes import HTTP_200_OK

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas.mcp_pins import AcceptPinIn, McpPinOut
from sursis.domain.access import Permission
from sursis.domain.agents.mcp_pins import McpPinService
from sursis.domain.records import Principal

Name = Annotated[str, Parameter(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")]


class McpPinController(Controller):
    path = "/v1/mcp/pins"
    tags = ["mcp"]
    dependencies = services("mcp_pins")
    guards = [requires(Permission.MANAGE_POLICIES)]

    @get("/")
    async def list_pins(
        self,
        mcp_pins: NamedDependency[McpPinService],
        principal: NamedDependency[Principal],
        changed: Annotated[
            bool, QueryParameter(description="Only tools whose server now says something else")
        ] = False,
    ) -> list[McpPinOut]:
        """Each MCP tool's accepted description, and the changed one a process saw, if any (its
        calls are asked until an admin accepts it)."""
        return [McpPinOut.of(p) for p in await mcp_pins.pins(principal, changed_only=changed)]

    @post("/{agent:str}/{tool:str}/accept", status_code=HTTP_200_OK)
    async def accept(
        self,
        agent: Name,
        tool: Name,
        data: JSONBody[AcceptPinIn],
        mcp_pins: NamedDependency[McpPinService],
        principal: NamedDependency[Principal],
    ) -> McpPinOut:
        """Accept the changed description whose digest is given (409 `stale` if the server has
        changed it again since): its calls follow what it says from then on. Audited."""
        return McpPinOut.of(await mcp_pins.accept(principal, agent, tool, data.digest))


def mcp_route_handlers() -> list[Any]:
    return [McpPinController]
