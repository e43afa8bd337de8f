"""`pydantic_ai_examples.sql_gen`: its deps from the example's own `database_connect` (PostgreSQL,
`SQL_GEN_SERVER_DSN` and `SQL_GEN_DATABASE`), its output validator checking each query with
`EXPLAIN`. The example has no tool: the team serving it adds one that runs the generated query, gated."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai_examples import sql_gen as example

from sursis import RunInfo, ToolOptions, adopt


@asynccontextmanager
async def sql_deps(info: RunInfo) -> AsyncIterator[example.Deps]:
    async with example.database_connect(
        os.environ["SQL_GEN_SERVER_DSN"], os.environ["SQL_GEN_DATABASE"]
    ) as conn:
        yield example.Deps(conn)


@example.agent.tool
async def run_query(ctx: RunContext[example.Deps], sql_query: str) -> list[dict[str, Any]]:
    """Run a SELECT query on the records table and return its rows."""
    return [dict(row) for row in await ctx.deps.conn.fetch(sql_query)]


AGENT = adopt(
    example.agent,
    name="sql-gen",
    model="scripted",
    deps=sql_deps,
    tools={"run_query": ToolOptions(approval="requires_approval", idempotent=True, effect="Run {sql_query}")},
)
