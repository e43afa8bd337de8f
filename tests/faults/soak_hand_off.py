"""The soak's hand-off traffic: a `serve` process with its worker (the layout where a message's or a
decision's transaction leases its run to a free slot of the same process), SIGKILLed at the
hand-off's fault points and started again on the same port, with conversations that talk to it as
a client would: a request that dies with its process is checked (was the message taken, was the
decision recorded?) and sent again if it was not.

The traffic runs on a database of its own, where that process is the only worker: on the soak's
main database the worker processes keep every slot busy, and a process hands off only from a free
slot. After a kill the next process finds the dead one's leased runs re-queued by its sweeper.
"""

from __future__ import annotations

import asyncio
import collections
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from sursis.domain.clock import utcnow
from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import upgrade
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from tests.conftest import _reset_pg_schema, admin_headers, call, script
from tests.faults.processes import ROOT, Cluster, free_port, wait_ready
from tests.fresh_database import ensure_database

POINTS = ("run_leased", "run_handed_off", "handed_run_started")
"""Inside the leasing transaction (a message's or a decision's), after its commit before the slot
took the run, and as the slot starts the segment."""
SendFunction = Callable[..., Any]


class EmbeddedApi:
    """`serve` with its worker on one port; each process dies at its fault point and is replaced."""

    def __init__(self, cluster: Cluster, kills: collections.Counter[str], rng: random.Random) -> None:
        self._cluster = cluster
        self._kills = kills
        self._rng = rng
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.crash = True
        self.unexpected_exits: list[tuple[str, int]] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._point = "-"
        self.up = asyncio.Event()

    async def start(self) -> None:
        least = min(self._kills[p] for p in POINTS)
        self._point = self._rng.choice([p for p in POINTS if self._kills[p] == least]) if self.crash else "-"
        env = self._cluster.env(
            f"{self._point}#{self._rng.randint(1, 3)}" if self.crash else None,
            SURSIS_WORKER_CONCURRENCY="2",
            SURSIS_WORKER_POLL_SECONDS="0.2",
            SURSIS_DB_POOL_SIZE="4",
            SURSIS_MAX_SEGMENT_ATTEMPTS="1000",
        )
        self._process = self._launch(env)
        await wait_ready(self._process, self.base, seconds=60)
        self.up.set()

    def _launch(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self._cluster.log_dir / "embedded.log").open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "sursis.app.cli", "serve", "--port", str(self.port)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=log,
            )

    async def supervise(self, stop: asyncio.Event) -> None:
        """Count each death at its point and start the next process."""
        while not stop.is_set():
            await asyncio.sleep(0.1)
            process = self._process
            if process is None or process.poll() is None:
                continue
            self.up.clear()
            if process.returncode == -9:
                self._kills[self._point] += 1
            else:
                self.unexpected_exits.append((self._point, process.returncode))
            await self.start()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


async def _attempt(
    http: httpx.AsyncClient, api: EmbeddedApi, send: SendFunction, method: str, path: str, **kw: Any
) -> Any:
    """The response, or None when the process died under the request (its outcome unknown)."""
    try:
        return await send(http, method, f"{api.base}{path}", **kw)
    except httpx.TransportError:
        await asyncio.sleep(0.1)
        await asyncio.wait_for(api.up.wait(), 120)
        return None


async def _persist(
    http: httpx.AsyncClient, api: EmbeddedApi, send: SendFunction, method: str, path: str, **kw: Any
) -> Any:
    """A read (or an idempotent request) sent until a process answers it."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        response = await _attempt(http, api, send, method, path, **kw)
        if response is not None:
            return response
    raise AssertionError(f"{method} {path}: no process answered for 300 s")


async def handed_loop(
    http: httpx.AsyncClient,
    api: EmbeddedApi,
    tally: Any,
    rng: random.Random,
    stop: asyncio.Event,
    send: SendFunction,
) -> None:
    """Turns through the embedded process: message, racing approvals (or a denial), the end."""
    conversation = await _persist(http, api, send, "POST", "/v1/conversations", json={"agent": "ops"})
    cid = conversation.json()["id"]
    while not stop.is_set():
        turn = script(
            [call("list_dlq_events")],
            [call("replay_dlq_event", event_id=rng.choice(("evt_1001", "evt_1002")), reason="r")],
            "done",
        )
        posted = await _attempt(
            http, api, send, "POST", f"/v1/conversations/{cid}/messages", json={"content": turn}
        )
        if posted is None or posted.status_code == 409:
            # Died with the message (taken if the conversation has an active run now), or an
            # earlier unanswered message was taken after all: follow the active run.
            detail = (await _persist(http, api, send, "GET", f"/v1/conversations/{cid}")).json()
            if detail["active_run"] is None:
                continue
            run_id = detail["active_run"]["id"]
        else:
            assert posted.status_code in (200, 202), posted.text
            run_id = posted.json()["id"]
        tally.runs += 1
        run = await _settle(http, api, send, run_id, stop)
        while run is not None and run["status"] == "suspended":
            correlation_id = run["pending"][0]["correlation_id"]
            decision = "deny" if rng.random() < 0.1 else "approve"
            path = f"/v1/pending/{correlation_id}/resolve"
            body = {"decision": decision, "reason": "soak"}
            answers = await asyncio.gather(
                _attempt(http, api, send, "POST", path, json=body),
                _attempt(http, api, send, "POST", path, json=body),
            )
            if all(a is not None for a in answers):
                tally.races += 1
                tally.race_outcomes["/".join(sorted(str(a.status_code) for a in answers))] += 1
            pending = (await _persist(http, api, send, "GET", f"/v1/pending/{correlation_id}")).json()
            if pending["status"] == "awaiting":
                continue  # neither decision was recorded: decide again
            if decision == "approve":
                tally.approvals += 1
            else:
                tally.denials += 1
            run = await _settle(http, api, send, run_id, stop)
        if run is None:
            return


async def _settle(
    http: httpx.AsyncClient, api: EmbeddedApi, send: SendFunction, run_id: str, stop: asyncio.Event
) -> Any:
    while True:
        run = (await _persist(http, api, send, "GET", f"/v1/runs/{run_id}", params={"wait": 2})).json()
        if (run["status"] == "suspended" and run["pending"]) or run["status"] in (
            "completed",
            "failed",
            "cancelled",
        ):
            return run
        if stop.is_set():
            return None


class HandOffSoak:
    """The embedded process, its conversations and its own database, beside the soak's main traffic."""

    def __init__(
        self,
        database_url: str,
        logs: Any,
        kills: collections.Counter[str],
        tally: Any,
        seed: int,
        conversations: int,
        keyring: str,
    ) -> None:
        self.database_url = database_url
        self.keyring = keyring
        self._logs = logs
        self._kills = kills
        self.tally = tally
        self._seed = seed
        self._conversations = conversations
        self.api: EmbeddedApi | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self._http: httpx.AsyncClient | None = None

    async def start(self, stop: asyncio.Event, traffic_stop: asyncio.Event, send: SendFunction) -> None:
        await ensure_database(self.database_url)
        await _reset_pg_schema(self.database_url)
        upgrade(self.database_url)
        engine = create_engine(self.database_url)
        await seed_demo(SqlUnitOfWorkFactory(engine), "default", utcnow())
        await engine.dispose()
        cluster = Cluster(
            self.database_url,
            self._logs,
            headers=await admin_headers(self.database_url),
            settings={"SURSIS_ENCRYPTION_KEYS": self.keyring},
        )
        self.api = EmbeddedApi(cluster, self._kills, random.Random(self._seed))
        await self.api.start()
        self._http = httpx.AsyncClient(
            timeout=60, headers=cluster.headers, limits=httpx.Limits(keepalive_expiry=2.0)
        )
        self.tasks = [asyncio.create_task(self.api.supervise(stop))] + [
            asyncio.create_task(
                handed_loop(
                    self._http, self.api, self.tally, random.Random(self._seed + i), traffic_stop, send
                )
            )
            for i in range(self._conversations)
        ]

    def stop_crashing(self) -> None:
        if self.api is not None:
            self.api.crash = False

    async def traffic_done(self) -> None:
        await asyncio.gather(*self.tasks[1:])

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
        if self.api is not None:
            self.api.stop()
