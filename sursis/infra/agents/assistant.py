"""The `assistant` reference agent: every executor in one place.

* `get_browser_location` — `client`: the user's browser runs it and answers with the result;
* `open_link_in_browser` — `client`, gated: an operator approves first, then the browser runs it;
* `web_search` — `provider`: hosted by the model provider, passed through untouched;
* `summarize_activity` — `server`, `streaming`: reports progress while it reads the audit log.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import RunContext
from pydantic_ai.native_tools import WebSearchTool

from sursis.domain.errors import ToolTerminalError, ToolUserError
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records import AuditQuery
from sursis.domain.tools import Category, Executor, ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredProviderTool, DeclaredTool
from sursis.infra.agents.progress import report_progress
from sursis.infra.agents.run_deps import RunDeps

INSTRUCTIONS = """You help the user of a web application. You can ask the user's browser where it is,
open a link in the user's browser (an operator approves that first), search the web, and summarize
what happened in this workspace recently. If a browser tool fails because no client is connected,
say so and carry on without it."""

ACTIVITY_PAGE = 200


class BrowserLocation(BaseModel):
    """What the browser reports for `get_browser_location`."""

    latitude: float = Field(ge=-90, le=90)
    longitude: float = Field(ge=-180, le=180)
    accuracy_m: float = Field(ge=0)


class LinkOpened(BaseModel):
    """What the browser reports for `open_link_in_browser`."""

    opened: bool
    note: str | None = Field(default=None, max_length=500)


def _client_only(name: str) -> ToolTerminalError:
    return ToolTerminalError(f"{name} runs in the user's browser, never in the service")


def assistant_agent(uow: UnitOfWorkFactory) -> AgentDefinition:
    """Build the `assistant` agent's tools over a unit-of-work factory (the closed-over dependency)."""

    async def get_browser_location() -> BrowserLocation:
        """Ask the user's browser for its current location."""
        raise _client_only("get_browser_location")

    async def open_link_in_browser(url: str, reason: str) -> LinkOpened:
        """Open a page in the user's browser.

        Args:
            url: The page to open (http or https).
            reason: Why the user should see it.
        """
        raise _client_only("open_link_in_browser")

    async def summarize_activity(ctx: RunContext[RunDeps], hours: int = 24) -> dict[str, Any]:
        """Count what happened in this workspace recently, by kind of action.

        Args:
            hours: How far back to look (1-168).
        """
        if not 1 <= hours <= 168:
            raise ToolUserError("hours must be between 1 and 168")
        since = ctx.deps.clock() - timedelta(hours=hours)
        counts: Counter[str] = Counter()
        after_id: int | None = None
        while True:
            async with uow() as u:
                query = AuditQuery(since=since, after_id=after_id, limit=ACTIVITY_PAGE)
                page = await u.audit.search(ctx.deps.workspace, query)
            counts.update(entry.action for entry in page)
            await report_progress(ctx, {"entries_read": sum(counts.values())})
            if len(page) < ACTIVITY_PAGE:
                break
            after_id = page[-1].id
        return {"hours": hours, "entries": sum(counts.values()), "by_action": dict(sorted(counts.items()))}

    return AgentDefinition(
        name="assistant",
        instructions=INSTRUCTIONS,
        tools=(
            DeclaredTool.declare(
                get_browser_location,
                ToolSpec(
                    "get_browser_location", executor=Executor.CLIENT, effect="Read the browser's location"
                ),
            ),
            DeclaredTool.declare(
                open_link_in_browser,
                ToolSpec(
                    "open_link_in_browser",
                    executor=Executor.CLIENT,
                    category=Category.MUTATE,
                    effect="Open {url} in the user's browser",
                ),
            ),
            DeclaredTool.declare(summarize_activity, ToolSpec("summarize_activity", streaming=True)),
        ),
        provider_tools=(DeclaredProviderTool.declare(WebSearchTool()),),
    )
