"""`make soak`: a thousand SIGKILLs of worker processes, at every fault point, on PostgreSQL.

Conversations loop through turns whose gated tool (`replay_dlq_event`) waits for an approval;
each approval is sent twice at once (a race: one 200, one 409). A quarter of the conversations ask
approver groups instead (`soak_routed`): racing quorum votes with the requester and a repeated vote
among them, votes of a group reached by escalation, denials, and calls nobody decides until their
route's timeout denies them. Meanwhile 2+ worker processes,
forked from `tests/faults/zygote.py`, each carry `SURSIS_CRASH_AT=<point>#<n>` and SIGKILL
themselves at that point; the driver also kills workers from outside at random moments. Every
delivery to a local webhook receiver is counted. Every process holds the same keyring (a fresh one
per soak), so content is encrypted and every decision is sealed. When the kills are done the
workers drain and the database is checked: first "no tool ran without a valid decision seal"
(`soak_seals`: each gated call that ran belongs to an approved pending call whose seals check as
the worker checks them, or to a pre-approval's sealed lift), then the invariants of `check` and
`soak_routed.check_routed`. Prints a report; exits 1 if one fails.

    python -m tests.faults.soak --kills 1000 --database-url postgresql+asyncpg://…/soak
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from sursis.domain.clock import utcnow
from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import upgrade
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from tests.api.live import serve
from tests.conftest import _reset_pg_schema, admin_headers, call, script
from tests.faults import soak_hand_off as hand_off
from tests.faults import soak_routed as routed
from tests.faults import soak_seals as seals
from tests.faults.processes import ROOT, Cluster
from tests.fresh_database import ensure_database

# Where a worker kills itself: in a gated tool before its side effect, after the effect but
# before its record commits, after the commit before the result reaches the message log; in a
# resumed segment; after a model response; around a webhook (outbox) delivery. `external`: the
# driver's own SIGKILL at a random moment.
POINTS = (
    "tool_started:replay_dlq_event",
    "tool_effect_uncommitted:replay_dlq_event",
    "tool_effect_committed:replay_dlq_event",
    "tool_started:list_dlq_events",
    "segment_resumed",
    "model_response_persisted",
    "webhook_claimed",
    "webhook_posted",
)
EXTERNAL = "external"
HANDED_CONVERSATIONS = 3
"""Conversations through a `serve` with its worker, killed at the hand-off's points (`soak_hand_off`)."""
EVENTS = ("evt_1001", "evt_1002", "evt_1003", "evt_1004")


@dataclass
class Tally:
    kills: collections.Counter[str] = field(default_factory=collections.Counter)
    runs: int = 0
    approvals: int = 0
    denials: int = 0
    races: int = 0
    race_outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    receipts: collections.Counter[str] = field(default_factory=collections.Counter)
    """Webhook deliveries received, by delivery (outbox row) id."""

    @property
    def total_kills(self) -> int:
        return sum(self.kills.values())


class Workers:
    """Worker processes forked by the zygote; each one dies at its fault point or by our hand."""

    def __init__(self, cluster: Cluster, tally: Tally, count: int, rng: random.Random) -> None:
        self._cluster = cluster
        self._tally = tally
        self._count = count
        self._rng = rng
        self._zygote: subprocess.Popen[bytes] | None = None
        self._alive: dict[int, tuple[str, float]] = {}
        self._killed_by_us: set[int] = set()
        self._pids: asyncio.Queue[int] = asyncio.Queue()
        self._exits: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self.unexpected_exits: list[tuple[str, int]] = []
        self.crash = True

    def _next_point(self) -> str:
        # The point with the fewest kills so far, ties broken at random: every point gets its share.
        least = min(self._tally.kills[p] for p in POINTS)
        return self._rng.choice([p for p in POINTS if self._tally.kills[p] == least])

    async def start(self) -> None:
        env = self._cluster.env(
            SURSIS_WEBHOOK_POLL_SECONDS="0.2",
            SURSIS_WEBHOOK_BACKOFF_SECONDS="0.2",
            SURSIS_WEBHOOK_BACKOFF_MAX_SECONDS="1",
            SURSIS_WEBHOOK_MAX_ATTEMPTS="1000",
            SURSIS_WORKER_POLL_SECONDS="0.2",
            SURSIS_DB_POOL_SIZE="3",
            SURSIS_LEASE_SECONDS="2",
            SURSIS_SWEEP_SECONDS="0.2",
            SURSIS_MAX_SEGMENT_ATTEMPTS="1000",
            SURSIS_SHUTDOWN_GRACE_SECONDS="1",
        )
        self._zygote = self._launch(env)
        loop = asyncio.get_running_loop()
        loop.run_in_executor(None, self._read_zygote, loop)
        for _ in range(self._count):
            await self._spawn()

    @staticmethod
    def _launch(env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.faults.zygote"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def _read_zygote(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self._zygote is not None and self._zygote.stdout is not None
        for raw in self._zygote.stdout:
            kind, *values = raw.decode().split()
            if kind == "pid":
                loop.call_soon_threadsafe(self._pids.put_nowait, int(values[0]))
            elif kind == "exit":
                loop.call_soon_threadsafe(self._exits.put_nowait, (int(values[0]), int(values[1])))

    async def _spawn(self) -> None:
        assert self._zygote is not None and self._zygote.stdin is not None
        point = self._next_point() if self.crash else "-"
        crash_at = f"{point}#1" if self.crash else "-"
        log = self._cluster.log_dir / "workers.log"
        self._zygote.stdin.write(f"spawn {crash_at} 3 {log}\n".encode())
        self._zygote.stdin.flush()
        pid = await self._pids.get()
        self._alive[pid] = (point, time.monotonic())

    async def supervise(self, target: int, stop: asyncio.Event) -> None:
        """Respawn each dead worker; kill from outside now and then, and any worker stuck too long."""
        while not stop.is_set():
            try:
                pid, code = await asyncio.wait_for(self._exits.get(), 0.2)
            except TimeoutError:
                pid, code = 0, 0
            if pid:
                point, _ = self._alive.pop(pid, ("?", 0.0))
                if pid in self._killed_by_us:
                    self._tally.kills[EXTERNAL] += 1
                elif code == -9:
                    self._tally.kills[point] += 1
                else:
                    self.unexpected_exits.append((point, code))
                if self._tally.total_kills >= target:
                    self.crash = False
                await self._spawn()
            now = time.monotonic()
            for victim, (_, born) in list(self._alive.items()):
                stuck = now - born > 8
                if self.crash and victim not in self._killed_by_us and (stuck or self._rng.random() < 0.003):
                    self._killed_by_us.add(victim)
                    # It may have died at its own fault point a moment ago (its exit still on
                    # its way from the zygote): then there is nothing left to kill.
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(victim, 9)

    async def stop(self) -> None:
        for pid in list(self._alive):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
        deadline = time.monotonic() + 15
        while self._alive and time.monotonic() < deadline:
            try:
                pid, _ = await asyncio.wait_for(self._exits.get(), 0.5)
                self._alive.pop(pid, None)
            except TimeoutError:
                continue
        for pid in list(self._alive):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        if self._zygote is not None:
            self._zygote.kill()
            self._zygote.wait()


async def receiver(tally: Tally) -> Any:
    """A webhook receiver counting deliveries by their id; always 200."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = dict(scope["headers"])
        tally.receipts[headers.get(b"sursis-delivery-id", b"?").decode()] += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return serve(app, lifespan="off")


async def send(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A request as a client would send it: a 503 (the database is busy) is retried after a pause."""
    for _ in range(30):
        response = await http.request(method, url, **kwargs)
        if response.status_code != 503:
            return response
        await asyncio.sleep(0.5)
    raise AssertionError(f"{method} {url}: still 503 after 30 attempts")


async def conversation_loop(
    http: httpx.AsyncClient, base: str, tally: Tally, rng: random.Random, stop: asyncio.Event
) -> None:
    cid = (await send(http, "POST", f"{base}/v1/conversations", json={"agent": "ops"})).json()["id"]
    while not stop.is_set():
        event_id = rng.choice(EVENTS)
        turn = script(
            [call("list_dlq_events")], [call("replay_dlq_event", event_id=event_id, reason="r")], "done"
        )
        posted = await send(http, "POST", f"{base}/v1/conversations/{cid}/messages", json={"content": turn})
        if posted.status_code not in (200, 202):
            raise AssertionError(f"message refused: {posted.status_code} {posted.text}")
        run_id = posted.json()["id"]
        tally.runs += 1
        run = await settle(http, base, run_id, stop)
        if run is None:
            return
        while run["status"] == "suspended":
            correlation_id = run["pending"][0]["correlation_id"]
            decision = "deny" if rng.random() < 0.1 else "approve"
            body = {"decision": decision, "reason": "soak"}
            url = f"{base}/v1/pending/{correlation_id}/resolve"
            first, second = await asyncio.gather(
                send(http, "POST", url, json=body), send(http, "POST", url, json=body)
            )
            outcome = "/".join(sorted(str(r.status_code) for r in (first, second)))
            tally.races += 1
            tally.race_outcomes[outcome] += 1
            if decision == "approve":
                tally.approvals += 1
            else:
                tally.denials += 1
            run = await settle(http, base, run_id, stop)
            if run is None:
                return


async def settle(http: httpx.AsyncClient, base: str, run_id: str, stop: asyncio.Event) -> Any:
    """The run once it is suspended or finished; None if the soak is over first."""
    while True:
        run = (await send(http, "GET", f"{base}/v1/runs/{run_id}", params={"wait": 2})).json()
        waiting = run["status"] == "suspended" and run["pending"]
        if waiting or run["status"] in ("completed", "failed", "cancelled"):
            return run
        if stop.is_set():
            return None


async def finished(what: str, waiting: Awaitable[Any], seconds: float = 240) -> None:
    """`waiting` done within `seconds` of the traffic's end; else every task still pending is
    printed with where it waits, and the soak fails there instead of hanging."""
    try:
        await asyncio.wait_for(asyncio.shield(waiting), seconds)
    except TimeoutError:
        current = asyncio.current_task()
        for task in asyncio.all_tasks():
            if task is not current and not task.done():
                task.print_stack(limit=12)
        raise AssertionError(f"{what} did not end within {seconds:.0f} s of the traffic's end") from None


async def drain(database_url: str, seconds: float) -> None:
    """No more kills: wait until no run is queued or running and every webhook row is delivered."""
    engine = create_engine(database_url)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            async with engine.connect() as conn:
                active = (
                    await conn.execute(
                        sa.text("SELECT COUNT(*) FROM runs WHERE status IN ('queued','running')")
                    )
                ).scalar_one()
                undelivered = (
                    await conn.execute(
                        sa.text(
                            "SELECT COUNT(*) FROM outbox WHERE topic LIKE 'webhook:%' AND status <> 'delivered'"
                        )
                    )
                ).scalar_one()
            if active == 0 and undelivered == 0:
                return
            await asyncio.sleep(0.5)
    finally:
        await engine.dispose()
    raise AssertionError(
        f"not drained in {seconds}s: {active} active runs, {undelivered} undelivered webhooks"
    )


async def check(database_url: str, tally: Tally) -> list[str]:
    """The invariants, read straight from the database; returns their names (an error if one fails)."""
    checked: list[str] = []
    engine = create_engine(database_url)

    async def none(name: str, sql: str) -> None:
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.text(sql))).all()
        assert rows == [], f"{name}: {rows[:5]}"
        checked.append(name)

    try:
        await none(
            "no call resolved twice (one resolution audit row per decided call)",
            "SELECT correlation_id, COUNT(*) FROM audit_log WHERE action IN "
            "('pending.approved','pending.denied','pending.revision_requested','pending.answered') "
            "GROUP BY correlation_id HAVING COUNT(*) > 1",
        )
        await none(
            "every decided call has its resolution audit row",
            "SELECT p.correlation_id FROM pending_calls p WHERE p.status IN ('approved','denied') "
            "AND NOT EXISTS (SELECT 1 FROM audit_log a WHERE a.correlation_id = p.correlation_id "
            "AND a.action IN ('pending.approved','pending.denied','pending.timed_out'))",
        )
        await none(
            "no side effect twice: one replay per recorded replay_dlq_event call",
            "SELECT source_event_id, COUNT(*) FROM outbox WHERE topic NOT LIKE 'webhook:%' "
            "GROUP BY source_event_id HAVING COUNT(*) <> (SELECT COUNT(*) FROM tool_calls t "
            "WHERE t.tool_name = 'replay_dlq_event' AND t.ok "
            "AND t.result->'result'->>'event_id' = outbox.source_event_id)",
        )
        await none(
            "no side effect lost: every approved replay of a completed run was performed once",
            "SELECT p.correlation_id FROM pending_calls p JOIN runs r ON r.id = p.run_id "
            "WHERE p.tool_name = 'replay_dlq_event' AND p.status = 'approved' AND r.status = 'completed' "
            "AND (SELECT COUNT(*) FROM tool_calls t WHERE t.conversation_id = p.conversation_id "
            "AND t.tool_call_id = p.tool_call_id AND t.ok) <> 1",
        )
        await none(
            "no tool ran with arguments other than approved: each approved replay replayed the event "
            "its deciders approved",
            "SELECT t.tool_call_id FROM tool_calls t JOIN pending_calls p ON p.conversation_id = "
            "t.conversation_id AND p.tool_call_id = t.tool_call_id AND p.kind = 'approval' "
            "AND p.status = 'approved' WHERE t.tool_name = 'replay_dlq_event' AND t.ok "
            "AND (t.result->'result'->>'event_id') IS DISTINCT FROM "
            "COALESCE(p.resolution->'args'->>'event_id', p.args->>'event_id')",
        )
        await none(
            "no approved call refused as changed: no integrity finding where nothing was tampered with",
            "SELECT id, action FROM audit_log WHERE action LIKE 'integrity.%'",
        )
        await none(
            "replays on the outbox match the dead letters' replay counts",
            "SELECT d.id FROM dead_letters d WHERE d.replay_count <> (SELECT COUNT(*) FROM outbox o "
            "WHERE o.source_event_id = d.id AND o.topic NOT LIKE 'webhook:%')",
        )
        await none(
            "replays on the outbox match the recorded replay_dlq_event calls",
            "SELECT 1 WHERE (SELECT COUNT(*) FROM outbox WHERE topic NOT LIKE 'webhook:%' "
            "AND source_event_id IS NOT NULL) <> (SELECT COUNT(*) FROM tool_calls "
            "WHERE tool_name = 'replay_dlq_event' AND ok)",
        )
        await none(
            "every run terminal or legitimately waiting (suspended with an awaiting call)",
            "SELECT r.id, r.status FROM runs r WHERE r.status NOT IN ('completed','failed','cancelled') "
            "AND NOT (r.status = 'suspended' AND EXISTS (SELECT 1 FROM pending_calls p "
            "WHERE p.run_id = r.id AND p.status = 'awaiting'))",
        )
        await none(
            "no awaiting call of a run that is not suspended",
            "SELECT p.correlation_id FROM pending_calls p JOIN runs r ON r.id = p.run_id "
            "WHERE p.status = 'awaiting' AND r.status <> 'suspended'",
        )
        await none(
            "message logs without gaps",
            "SELECT conversation_id FROM messages GROUP BY conversation_id "
            "HAVING MAX(seq) <> COUNT(*) OR MIN(seq) <> 1",
        )
        async with engine.connect() as conn:
            delivered = [
                str(r[0])
                for r in (
                    await conn.execute(
                        sa.text("SELECT id FROM outbox WHERE topic LIKE 'webhook:%' AND status = 'delivered'")
                    )
                ).all()
            ]
        lost = [d for d in delivered if tally.receipts[d] == 0]
        assert not lost, f"webhook deliveries marked delivered but never received: {lost[:5]}"
        checked.append("no webhook delivery lost (every delivered row was received at least once)")
        races = {k: v for k, v in tally.race_outcomes.items() if k != "200/409"}
        assert not races, f"double approvals not answered 200 + 409: {races}"
        checked.append("every racing double approval: exactly one 200 and one 409")
    finally:
        await engine.dispose()
    return checked


async def soak(database_url: str, kills: int, workers: int, conversations: int, seed: int, logs: Path) -> int:
    rng = random.Random(seed)
    await ensure_database(database_url)
    await _reset_pg_schema(database_url)
    upgrade(database_url)
    engine = create_engine(database_url)
    await seed_demo(SqlUnitOfWorkFactory(engine), "default", utcnow())
    await engine.dispose()
    tally = Tally()
    routed_tally = routed.RoutedTally()
    keyring = seals.soak_keyring()
    cluster = Cluster(
        database_url,
        logs,
        headers=await admin_headers(database_url),
        settings={
            "SURSIS_WEBHOOK_ALLOW_PRIVATE_HOSTS": "true",
            "SURSIS_DB_POOL_SIZE": "6",
            "SURSIS_AGENTS": f"ops,{routed.AGENT_SPEC}",
            "SURSIS_ENCRYPTION_KEYS": keyring,
        },
    )
    started = time.monotonic()
    pool = Workers(cluster, tally, workers, rng)
    handed_tally = Tally()
    handed = hand_off.HandOffSoak(
        f"{database_url}_hand_off",
        logs,
        tally.kills,
        handed_tally,
        seed + 2000,
        HANDED_CONVERSATIONS,
        keyring,
    )
    try:
        async with await receiver(tally) as hook_url:
            _, base = await cluster.api()
            headers = cluster.headers
            # Idle connections are dropped before uvicorn's keep-alive (5 s) closes them, so that a
            # request never goes out on a connection the server is closing at that moment.
            limits = httpx.Limits(max_connections=2 * conversations + 10, keepalive_expiry=2.0)
            async with httpx.AsyncClient(timeout=60, headers=headers, limits=limits) as http:
                hook = await http.post(
                    f"{base}/v1/webhooks",
                    json={"url": f"{hook_url}/hook", "events": ["run.completed", "pending.created"]},
                )
                assert hook.status_code == 201, hook.text
                people = await routed.make_approvers(http, base)
                await pool.start()
                stop, traffic_stop = asyncio.Event(), asyncio.Event()
                supervisor = asyncio.create_task(pool.supervise(kills, stop))
                await handed.start(stop, traffic_stop, send)
                loops = [
                    asyncio.create_task(
                        conversation_loop(http, base, tally, random.Random(seed + i), traffic_stop)
                    )
                    for i in range(conversations - conversations // 4)
                ] + [
                    asyncio.create_task(
                        routed.routed_loop(
                            http,
                            base,
                            people,
                            routed_tally,
                            random.Random(seed + 1000 + i),
                            traffic_stop,
                            send,
                            settle,
                        )
                    )
                    for i in range(max(conversations // 4, 1))
                ]
                while tally.total_kills < kills:
                    await asyncio.sleep(1)
                    for task in (*loops, supervisor, *handed.tasks):
                        if task.done():
                            task.result()
                    print(f"  {time.monotonic() - started:6.0f}s  kills {tally.total_kills}", flush=True)
                handed.stop_crashing()
                traffic_stop.set()
                await finished("the conversations' loops", asyncio.gather(*loops))
                await finished("the hand-off loops", handed.traffic_done())
                await drain(database_url, 120)
                await drain(handed.database_url, 120)
                stop.set()
                await supervisor
        elapsed = time.monotonic() - started
        checked = await seals.check_sealed(database_url, keyring)
        await seals.open_in_place(database_url, keyring)
        checked += await check(database_url, tally)
        checked += await routed.check_routed(database_url, routed_tally)
        handed_checked = await seals.check_sealed(handed.database_url, keyring)
        await seals.open_in_place(handed.database_url, keyring)
        handed_checked += await check(handed.database_url, handed_tally)
        checked += [f"hand-off database: {name}" for name in handed_checked]
    finally:
        await pool.stop()
        await handed.close()
        cluster.stop_all()
    unexpected = [*pool.unexpected_exits, *(handed.api.unexpected_exits if handed.api else [])]
    report(tally, checked, elapsed, unexpected, workers)
    print(
        f"hand-off turns: runs {handed_tally.runs}  approvals {handed_tally.approvals}  "
        f"denials {handed_tally.denials}  races {dict(handed_tally.race_outcomes)}"
    )
    print(
        f"routed turns {dict(routed_tally.turns)}  vote rounds {dict(routed_tally.vote_outcomes)}  "
        f"votes after an escalation {routed_tally.escalated_votes}"
    )
    return 0 if not unexpected else 1


def report(tally: Tally, checked: list[str], elapsed: float, unexpected: list[Any], workers: int) -> None:
    print(f"\nsoak: {tally.total_kills} SIGKILLs in {elapsed:.0f}s, {workers} worker processes (PostgreSQL)")
    print("kills per point:")
    for point in (*POINTS, *hand_off.POINTS, EXTERNAL):
        print(f"  {point:42} {tally.kills[point]:5}")
    duplicates = sum(n - 1 for n in tally.receipts.values() if n > 1)
    print(
        f"runs {tally.runs}  approvals {tally.approvals}  denials {tally.denials}  "
        f"races {tally.races} {dict(tally.race_outcomes)}  webhook receipts {sum(tally.receipts.values())} "
        f"({duplicates} repeated after a crash)"
    )
    print("invariants held:")
    for name in checked:
        print(f"  ok  {name}")
    if unexpected:
        print(f"unexpected worker exits: {unexpected}")
    print(
        json.dumps(
            {
                "kills": tally.total_kills,
                "per_point": dict(tally.kills),
                "runs": tally.runs,
                "approvals": tally.approvals,
                "races": tally.races,
                "seconds": round(elapsed),
            }
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("SURSIS_SOAK_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/soak"),
    )
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--conversations", type=int, default=32)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--logs", type=Path, default=Path(".soak"))
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    return asyncio.run(
        soak(args.database_url, args.kills, args.workers, args.conversations, args.seed, args.logs)
    )


if __name__ == "__main__":
    sys.exit(main())
