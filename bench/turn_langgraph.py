"""One approval turn through LangGraph: a tool-calling graph (model node + `ToolNode`) whose tool
calls `interrupt()`, resumed with `Command(resume=...)`, checkpointed by `AsyncPostgresSaver`; for
the side-by-side benches (`peers.py`, `peers_throughput.py`). Needs the `peers` extra.

The checkpointer gets one connection (what `AsyncPostgresSaver.from_conn_string` sets up) or, for
concurrent threads, a `psycopg_pool.AsyncConnectionPool` (the saver takes either); both with the
settings the saver requires (autocommit, no prepared statements, dict rows).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Command
from langgraph_graph import build_graph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool


def ms(seconds: float) -> float:
    return seconds * 1000


class CountingCursor(psycopg.AsyncCursor[Any]):
    """Counts the statements the checkpointer sends (one per `execute`, one per `executemany` row)."""

    statements = 0

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        CountingCursor.statements += 1
        return await super().execute(query, params, **kwargs)

    async def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        rows = list(params_seq)
        CountingCursor.statements += len(rows)
        await super().executemany(query, rows, **kwargs)


CONNECTION_SETTINGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": 0,
    "row_factory": dict_row,
    "cursor_factory": CountingCursor,
}
"""What `AsyncPostgresSaver.from_conn_string` sets on its connection, plus a cursor that counts."""


@dataclass
class LangGraphSide:
    url: str
    durability: str | None
    pool_size: int = 0
    """0: one connection for every thread (turns through it take turns); n: a pool of n connections."""
    conn: psycopg.AsyncConnection[Any] | None = None
    pool: AsyncConnectionPool[Any] | None = None
    graph: Any = None
    threads: int = 0

    async def open(self) -> None:
        if self.pool_size:
            self.pool = AsyncConnectionPool(
                self.url,
                min_size=self.pool_size,
                max_size=self.pool_size,
                kwargs=CONNECTION_SETTINGS,
                open=False,
            )
            await self.pool.open(wait=True)
            saver = AsyncPostgresSaver(conn=self.pool)
        else:
            self.conn = await psycopg.AsyncConnection.connect(self.url, **CONNECTION_SETTINGS)
            saver = AsyncPostgresSaver(conn=self.conn)
        await saver.setup()
        self.graph = build_graph(saver)

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def new_conversation(self) -> dict[str, Any]:
        self.threads += 1
        return {"configurable": {"thread_id": f"bench-{os.getpid()}-{time.time_ns()}-{self.threads}"}}

    async def turn(self, config: dict[str, Any]) -> tuple[float, float, float]:
        """(message -> interrupted, 0 (no separate resolve), resume -> final answer) in ms."""
        kwargs = {} if self.durability is None else {"durability": self.durability}
        started = time.perf_counter()
        out = await self.graph.ainvoke(
            {"messages": [HumanMessage("please replay evt_1001")]}, config, **kwargs
        )
        if "__interrupt__" not in out:
            raise RuntimeError("the graph did not interrupt")
        suspended = time.perf_counter()
        out = await self.graph.ainvoke(Command(resume="approve"), config, **kwargs)
        completed = time.perf_counter()
        if out["messages"][-1].content != "replayed":
            raise RuntimeError(f"unexpected answer {out['messages'][-1]!r}")
        return ms(suspended - started), 0.0, ms(completed - suspended)

    async def suspend_only(self, config: dict[str, Any]) -> None:
        kwargs = {} if self.durability is None else {"durability": self.durability}
        out = await self.graph.ainvoke(
            {"messages": [HumanMessage("please replay evt_1001")]}, config, **kwargs
        )
        if "__interrupt__" not in out:
            raise RuntimeError("the graph did not interrupt")

    @staticmethod
    def statements() -> int:
        return CountingCursor.statements
