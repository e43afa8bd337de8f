"""One approval turn through pydantic-ai on pgtask: the agent of `turn_dbos.py` with
pydantic-ai-harness's `PGTaskDurability`, run inside a pgtask task; for `peers.py`, in a venv of its
own (`.venv-pgtask`, from `pgtask-requirements.txt`; `make bench-peers` makes it), driven over
stdin/stdout (`peer_child.py`, `peer_process.py`).

The task runs the agent until it defers the gated call, then waits for the human's decision with
pgtask's durable wait (`task.wait_for_signal`: the task releases its lease and goes `waiting`; the
signal makes it `pending` again and wakes a worker through LISTEN/NOTIFY; the handler runs again from
the top, its finished model request served from its checkpoint), resumes the agent with the decision
and returns the answer and the messages. The operator's side sees the task `waiting` (pgtask has no
notification for that: the state is polled, `--poll-ms`), sends the decision with
`TaskHandle.signal` and waits for the result with `TaskHandle.result` (notification-driven). The
client and a `Worker` (concurrency 10, its defaults otherwise) run in this process.

    .venv-pgtask/bin/python bench/turn_pgtask.py postgresql://.../peers_pgtask [--poll-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

import psycopg
from peer_child import PROMPT, approval_turn, build_agent, serve
from pgtask import Client, Task, TaskHandle, TaskRegistry, Worker
from pydantic_ai_harness.pgtask import PGTaskDurability

QUEUE = "bench"
TASKS = TaskRegistry(queue_name=QUEUE)
AGENT = build_agent(PGTaskDurability())


@TASKS.task("approval_turn")
async def approval_task(task: Task, payload: Any) -> dict[str, Any]:
    async def wait_for_decision() -> Any:
        return await task.wait_for_signal("await-decision", "decision", timeout=60)

    return await approval_turn(AGENT, payload, wait_for_decision)


async def fresh_schema(url: str) -> None:
    """pgtask's tables made anew in `url`'s database (a previous run's rows dropped): its schema and
    the record of its applied migrations (sqlx's `_sqlx_migrations`, in `public`)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("DROP SCHEMA IF EXISTS pgtask CASCADE")
        await conn.execute("DROP TABLE IF EXISTS public._sqlx_migrations")


@dataclass
class PgtaskEngine:
    url: str
    poll_seconds: float
    client: Client | None = None
    worker: Worker | None = None
    running: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await fresh_schema(self.url)
        self.client = await Client.connect(self.url)
        await self.client.migrate()
        self.worker = Worker(self.url, TASKS, concurrency=10)
        self.running = asyncio.create_task(self.worker.run())

    async def close(self) -> None:
        if self.worker is not None and self.running is not None:
            self.worker.shutdown()
            await self.running

    async def start(self, history: list[Any]) -> TaskHandle[Any]:
        assert self.client is not None
        return await self.client.enqueue(
            approval_task.request({"prompt": PROMPT, "history": history}, max_attempts=3)
        )

    async def until_waiting(self, task: TaskHandle[Any]) -> None:
        for _ in range(round(60 / self.poll_seconds)):
            state = await task.inspect()
            if state is not None and state.state == "waiting":
                return
            if state is not None and state.state in ("failed", "cancelled"):
                raise RuntimeError(f"the task ended {state.state}: {state.error!r}")
            await asyncio.sleep(self.poll_seconds)
        raise RuntimeError("the task did not wait for the decision within 60 s")

    async def decide(self, task: TaskHandle[Any], decision: str) -> None:
        await task.signal("decision", decision)

    async def result(self, task: TaskHandle[Any]) -> dict[str, Any]:
        done = await task.result(timeout=60)
        if done is None or done.state != "succeeded" or not isinstance(done.result, dict):
            raise RuntimeError(f"the task did not succeed: {done!r}")
        return done.result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--poll-ms", type=float, default=5.0, help="how often the task's state is read")
    args = parser.parse_args()
    asyncio.run(serve(PgtaskEngine(args.url, args.poll_ms / 1000)))


if __name__ == "__main__":
    main()
