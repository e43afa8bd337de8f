"""One approval turn through pydantic-ai on Absurd: the agent of `turn_dbos.py` with
pydantic-ai-harness's `AbsurdDurability`, run inside an Absurd task; for `peers.py`, in a venv of its
own (`.venv-absurd`, from `absurd-requirements.txt`; `make bench-peers` makes it), driven over
stdin/stdout (`peer_child.py`, `peer_process.py`).

The task runs the agent until it defers the gated call, then waits for the human's decision with
Absurd's durable wait (`ctx.await_event`: the run suspends, `sleeping`; the event makes it claimable
again; the handler runs again from the top, its finished model request served from its checkpoint),
resumes the agent with the decision and returns the answer and the messages. The operator's side
sees the task `sleeping` (Absurd has no notification for that: the state is polled, `--poll-ms`),
emits the decision event (`AsyncAbsurd.emit_event`, named after the task) and waits for the result
with `AsyncAbsurd.await_task_result` (the SDK polls, 50 ms doubling to 1 s). A worker
(`start_worker`, concurrency 10, its 0.25 s poll) runs in this process on a connection of its own.

The schema: absurd-sdk 0.5.1 ships no SQL, in its wheel or its sdist. absurdctl 0.5.1, the same
release's command-line tool on PyPI, bundles `absurd.sql` of that release (`BUNDLED_SCHEMA_SQL`,
what `absurdctl init` applies); it is applied from there.

    .venv-absurd/bin/python bench/turn_absurd.py postgresql://.../peers_absurd [--poll-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

import psycopg
from absurd_sdk import AsyncAbsurd, AsyncTaskContext
from absurdctl import ABSURD_SCHEMA_TARGET_VERSION, BUNDLED_SCHEMA_SQL
from peer_child import PROMPT, approval_turn, build_agent, serve
from pydantic_ai_harness.absurd import AbsurdDurability

QUEUE = "bench"
AGENT = build_agent(AbsurdDurability())


def decision_event(task_id: str) -> str:
    return f"decision:{task_id}"


async def approval_task(params: Any, ctx: AsyncTaskContext) -> Any:
    async def wait_for_decision() -> Any:
        return await ctx.await_event(decision_event(str(ctx.task_id)), timeout=60)

    return await approval_turn(AGENT, params, wait_for_decision)


async def fresh_schema(url: str) -> None:
    """Absurd's schema (absurdctl's bundled `absurd.sql`) made anew in `url`'s database."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("DROP SCHEMA IF EXISTS absurd CASCADE")
        await conn.execute(BUNDLED_SCHEMA_SQL.encode())
        cur = await conn.execute("SELECT absurd.get_schema_version()")
        row = await cur.fetchone()
    if row is None or row[0] != ABSURD_SCHEMA_TARGET_VERSION:
        raise RuntimeError(f"unexpected Absurd schema version {row!r}")


@dataclass
class AbsurdEngine:
    url: str
    poll_seconds: float
    client: AsyncAbsurd | None = None
    worker: AsyncAbsurd | None = None
    running: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await fresh_schema(self.url)
        self.client = AsyncAbsurd(self.url, queue_name=QUEUE)
        await self.client.create_queue()
        self.worker = AsyncAbsurd(self.url, queue_name=QUEUE)
        self.worker.register_task(name="approval_turn")(approval_task)
        self.running = asyncio.create_task(self.worker.start_worker(concurrency=10))

    async def close(self) -> None:
        if self.worker is not None and self.running is not None:
            self.worker.stop_worker()
            await self.running
            await self.worker.close()
        if self.client is not None:
            await self.client.close()

    async def start(self, history: list[Any]) -> str:
        assert self.client is not None
        spawned = await self.client.spawn(
            "approval_turn", {"prompt": PROMPT, "history": history}, max_attempts=3, queue=QUEUE
        )
        return str(spawned["task_id"])

    async def until_waiting(self, task_id: str) -> None:
        assert self.client is not None
        for _ in range(round(60 / self.poll_seconds)):
            snapshot = await self.client.fetch_task_result(task_id)
            if snapshot is not None and snapshot.state == "sleeping":
                return
            if snapshot is not None and snapshot.state in ("failed", "cancelled"):
                raise RuntimeError(f"the task ended {snapshot.state}: {snapshot.failure!r}")
            await asyncio.sleep(self.poll_seconds)
        raise RuntimeError("the task did not wait for the decision within 60 s")

    async def decide(self, task_id: str, decision: str) -> None:
        assert self.client is not None
        await self.client.emit_event(decision_event(task_id), decision)

    async def result(self, task_id: str) -> dict[str, Any]:
        assert self.client is not None
        done = await self.client.await_task_result(task_id, timeout=60)
        if done.state != "completed" or not isinstance(done.result, dict):
            raise RuntimeError(f"the task did not complete: {done!r}")
        return done.result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--poll-ms", type=float, default=5.0, help="how often the task's state is read")
    args = parser.parse_args()
    asyncio.run(serve(AbsurdEngine(args.url, args.poll_ms / 1000)))


if __name__ == "__main__":
    main()
