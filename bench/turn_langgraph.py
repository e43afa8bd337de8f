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
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool


def ms(seconds: float) -> float:
    return seconds * 1000


@tool
def replay_dlq_event(event_id: str, reason: str) -> dict[str, Any]:
    """Put a dead-lettered event back on the outbox for delivery."""
    decision = interrupt({"tool": "replay_dlq_event", "event_id": event_id, "reason": reason})
    if decision != "approve":
        return {"replayed": False, "event_id": event_id}
    return {"replayed": True, "event_id": event_id, "reason": reason}


def scripted_model(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """A zero-latency model: proposes the gated replay for a user message, answers after the tool."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(content="replayed")]}
    turn = sum(isinstance(m, HumanMessage) for m in state["messages"])
    call = {
        "name": "replay_dlq_event",
        "args": {"event_id": "evt_1001", "reason": "bench"},
        "id": f"call_{turn}",
        "type": "tool_call",
    }
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def build_graph(saver: AsyncPostgresSaver) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", scripted_model)
    graph.add_node("tools", ToolNode([replay_dlq_event]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    graph.add_edge("model", END)
    return graph.compile(checkpointer=saver)


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
