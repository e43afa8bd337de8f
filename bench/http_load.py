"""Approval turns over HTTP against real `sursis serve` / `sursis worker` processes: one turn,
the layouts, and throughput (many conversations at once) with the CPU each turn costs.

For `bench.py` (per turn, resolve latency, throughput) and `peers_throughput.py` (side by side with
LangGraph). CPU is read from `/proc/<pid>/stat` (user + system time) of the service's processes and
of the PostgreSQL backends connected to the bench's database (`pg_stat_activity`), when the server
runs on this machine; a backend that connects and exits within a run is missed.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import sqlalchemy as sa
from bench_agent import AGENT_NAME as BENCH_AGENT
from common import (
    GATED_TURN,
    UNAVAILABLE,
    Processes,
    call,
    engine_for,
    fresh_database,
    is_sqlite,
    peak_rss_mib,
    percentile,
    script,
    send,
    settle,
)
from sqlalchemy.dialects import postgresql


def ms(seconds: float) -> float:
    return seconds * 1000


def p50(values: Sequence[float]) -> float:
    return round(percentile(list(values), 0.5), 2)


def p95(values: Sequence[float]) -> float:
    return round(percentile(list(values), 0.95), 2)


def p99(values: Sequence[float]) -> float:
    return round(percentile(list(values), 0.99), 2)


async def http_turn(
    client: httpx.AsyncClient,
    base: str,
    conversation_id: str,
    content: str = GATED_TURN,
    *,
    wait_on_resolve: bool = True,
) -> tuple[float, float, float]:
    """One approval turn over HTTP: (message -> suspended, resolve, resolve -> completed) in ms.

    By default the resolve waits for the run (`?wait=`), so the turn is two requests and "resolve"
    is the whole resumption; `wait_on_resolve=False` answers the resolve once the decision is
    committed (what the resolve latency measures) and long-polls the run after it."""
    started = time.perf_counter()
    posted = await send(
        client,
        "POST",
        f"{base}/v1/conversations/{conversation_id}/messages",
        params={"wait": 30},
        # The client reads the outcome, not the text as it arrives (as the peers' `runs/wait`).
        json={"content": content, "stream": False},
    )
    run = posted.json()
    if run["status"] != "suspended":
        run = await settle(client, base, run["id"], "suspended")
    suspended = time.perf_counter()
    [pending] = run["pending"]
    decided = await send(
        client,
        "POST",
        f"{base}/v1/pending/{pending['correlation_id']}/resolve",
        params={"wait": 30} if wait_on_resolve else None,
        json={"decision": "approve"},
    )
    answered = time.perf_counter()
    # The resolve waits for the run (one request); a service without `?wait=` on resolve answers
    # with no `run`, and the turn then long-polls the run as before.
    if (decided.json().get("run") or {}).get("status") != "completed":
        await settle(client, base, run["id"], "completed")
    completed = time.perf_counter()
    return ms(suspended - started), ms(answered - suspended), ms(completed - suspended)


async def new_conversation(client: httpx.AsyncClient, base: str) -> str:
    response = await send(client, "POST", f"{base}/v1/conversations", json={"agent": BENCH_AGENT})
    conversation_id: str = response.json()["id"]
    return conversation_id


@dataclass
class Layout:
    """The service's processes: API processes (their base URLs) and worker processes."""

    api_pids: list[int]
    bases: list[str]
    worker_pids: list[int]
    embedded: bool

    @property
    def pids(self) -> list[int]:
        return [*self.api_pids, *self.worker_pids]

    def describe(self) -> str:
        if self.embedded:
            if len(self.api_pids) == 1:
                return "1 `sursis serve` with its worker"
            return f"{len(self.api_pids)} `sursis serve`, each with its worker"
        return f"{len(self.api_pids)} `sursis serve --no-worker` + {len(self.worker_pids)} `sursis worker`"


async def start_service(
    processes: Processes, url: str, workers: int, apis: int = 1, *, embedded: bool = False
) -> Layout:
    """Embedded SQLite: one `serve` with its worker. PostgreSQL: `apis` x `serve --no-worker` +
    `workers` x `worker`, or with `embedded` `apis` x `serve`, each running its worker (`workers`
    unused)."""
    if is_sqlite(url):
        server, base = await processes.serve(worker=True)
        return Layout([server.pid], [base], [], embedded=True)
    if embedded:
        servers = [await processes.serve(worker=True) for _ in range(apis)]
        return Layout([p.pid for p, _ in servers], [b for _, b in servers], [], embedded=True)
    servers = [await processes.serve(worker=False) for _ in range(apis)]
    worker_pids = [processes.worker().pid for _ in range(workers)]
    return Layout([p.pid for p, _ in servers], [b for _, b in servers], worker_pids, embedded=False)


# --- CPU -------------------------------------------------------------------------------------


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far; None if it is gone or not visible here."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def backends(url: str) -> dict[int, str] | None:
    """The PostgreSQL backends connected to `url`'s database (but this query's), each pid with its
    `backend_type`, if they are processes of this machine; else None."""
    engine = engine_for(url)
    try:
        async with engine.connect() as conn:
            query = (
                "SELECT pid, backend_type FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            found = {int(pid): str(kind) for pid, kind in (await conn.execute(sa.text(query))).all()}
            own = int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
            local = is_local_postgres(own)  # while this backend is still there
    finally:
        await engine.dispose()
    return found if local else None


def is_local_postgres(pid: int) -> bool:
    """Whether `pid` is a PostgreSQL process of this machine (not one in another PID namespace)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "postgres"
    except OSError:
        return False


@dataclass
class CpuMeter:
    """CPU seconds between `start` and `stop` of the given processes, of this process, and of the
    PostgreSQL backends of `url`'s database (None on SQLite or when the server is not local)."""

    pids: Sequence[int]
    url: str | None = None
    _start: dict[int, float] = field(default_factory=dict)
    _backends: dict[int, float] | None = None
    _own: float = 0.0
    load_start: float = 0.0

    async def _backend_cpu(self) -> dict[int, float] | None:
        if self.url is None or is_sqlite(self.url):
            return None
        found = await backends(self.url)
        if found is None:
            return None
        return {pid: cpu for pid in found if (cpu := cpu_seconds(pid)) is not None}

    async def start(self) -> None:
        self._backends = await self._backend_cpu()
        self._start = {pid: cpu for pid in self.pids if (cpu := cpu_seconds(pid)) is not None}
        self._own = time.process_time()
        self.load_start = os.getloadavg()[0]

    async def stop(self) -> tuple[float, float, float | None, float]:
        """(the processes' CPU s, this process's CPU s, PostgreSQL backends' CPU s or None, load)."""
        own = time.process_time() - self._own
        service = sum((cpu_seconds(pid) or start) - start for pid, start in self._start.items())
        postgres = None
        if self._backends is not None:
            now = await self._backend_cpu() or {}
            # A backend that connected during the run counts from zero.
            postgres = sum(cpu - self._backends.get(pid, 0.0) for pid, cpu in now.items())
        return service, own, postgres, os.getloadavg()[0]


# --- throughput ------------------------------------------------------------------------------


JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
DEAD_LETTERS = sa.table(
    "dead_letters",
    *(
        sa.column(name)
        for name in ("id", "workspace", "topic", "error", "attempts", "status", "replay_count")
    ),
    sa.column("payload", JSON),
    sa.column("failed_at", sa.DateTime(timezone=True)),
)


async def seed_letters(url: str, count: int) -> None:
    """One dead letter per concurrent conversation, so replays do not queue on one row."""
    now = datetime.now(UTC)
    if is_sqlite(url):
        now = now.replace(tzinfo=None)  # the service keeps UTC as naive text on SQLite
    rows = [
        {
            "id": f"evt_bench_{i}",
            "workspace": "default",
            "topic": "invoice.paid",
            "payload": {"invoice_id": f"inv_{i}", "amount_cents": 100 + i, "currency": "EUR"},
            "error": "ReadTimeout: the partner did not answer in 10 s",
            "attempts": 5,
            "status": "dead",
            "replay_count": 0,
            "failed_at": now,
        }
        for i in range(count)
    ]
    engine = engine_for(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(DEAD_LETTERS.insert(), rows)
    finally:
        await engine.dispose()


async def drive(
    client: httpx.AsyncClient,
    base: str,
    conversation_id: str,
    content: str,
    turns: int,
    into: list[float],
    deadline: float,
) -> None:
    """Up to `turns` approval turns, one after the other, on one conversation, none started after
    `deadline` (`time.perf_counter()`); whole-turn latencies `into`."""
    for _ in range(turns):
        if time.perf_counter() >= deadline:
            return
        suspend, _, resume = await http_turn(client, base, conversation_id, content)
        into.append(suspend + resume)


@dataclass
class ThroughputRow:
    mode: str
    concurrency: int
    turns: int
    seconds: float
    turns_per_s: float
    turn_p50_ms: float
    turn_p95_ms: float
    retried_503: int
    service_cpu_ms_per_turn: float
    """CPU of the service's processes (API and workers) per turn."""
    postgres_cpu_ms_per_turn: float | None
    """CPU of the PostgreSQL backends of the bench's database per turn (None: SQLite, not local)."""
    client_cpu_ms_per_turn: float | None
    """CPU of this process (the HTTP load) per turn (None: this process is the service)."""
    load_average: float
    """The 1-minute load average at the end of the run (the machine is shared)."""

    @classmethod
    def measured(
        cls,
        mode: str,
        concurrency: int,
        latencies: Sequence[float],
        elapsed: float,
        cpu: tuple[float | None, float | None, float | None],
        load: float,
        retried_503: int = 0,
    ) -> ThroughputRow:
        """A row from a run's turn latencies and its CPU seconds (service, PostgreSQL, client)."""
        done = len(latencies)
        service, postgres, client = (per_turn(seconds, done) for seconds in cpu)
        return cls(
            mode,
            concurrency,
            done,
            round(elapsed, 2),
            round(done / elapsed, 2),
            p50(latencies),
            p95(latencies),
            retried_503,
            service or 0.0,
            postgres,
            client,
            round(load, 2),
        )


def per_turn(cpu: float | None, turns: int) -> float | None:
    return None if cpu is None else round(ms(cpu) / max(turns, 1), 1)


async def throughput(
    url: str,
    mode: str,
    workers: int,
    plan: Sequence[tuple[int, int]],
    log_dir: Path,
    apis: int = 1,
    seconds: float = float("inf"),
) -> tuple[list[ThroughputRow], dict[str, float]]:
    """`plan`: (concurrent conversations, turns each); no turn starts after `seconds` of a step.
    Conversations go round-robin to the API processes. Returns the rows and the processes' peak RSS."""
    headers = await fresh_database(url)
    most = max(c for c, _ in plan)
    await seed_letters(url, most)
    processes = Processes(url, log_dir)
    rows: list[ThroughputRow] = []
    try:
        layout = await start_service(processes, url, workers, apis)
        bases = layout.bases
        limits = httpx.Limits(max_connections=most + 10, max_keepalive_connections=most + 10)
        async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as client:
            # Warm every process up: a conversation per API process and per worker, two turns each.
            warm = max(len(bases), len(layout.worker_pids), 1)
            warm_bases = [bases[i % len(bases)] for i in range(warm)]
            warm_ids = [await new_conversation(client, base) for base in warm_bases]
            for _ in range(2):
                await asyncio.gather(
                    *(http_turn(client, b, c) for b, c in zip(warm_bases, warm_ids, strict=True))
                )
            for concurrency, turns in plan:
                at = [bases[i % len(bases)] for i in range(concurrency)]
                conversations = [await new_conversation(client, base) for base in at]
                contents = [
                    script([call("replay_dlq_event", event_id=f"evt_bench_{i}", reason="bench")], "replayed")
                    for i in range(concurrency)
                ]
                latencies: list[float] = []
                unavailable = UNAVAILABLE[0]
                meter = CpuMeter(layout.pids, url)
                await meter.start()
                started = time.perf_counter()
                await asyncio.gather(
                    *(
                        drive(client, base, conversation_id, content, turns, latencies, started + seconds)
                        for base, conversation_id, content in zip(at, conversations, contents, strict=True)
                    )
                )
                elapsed = time.perf_counter() - started
                service, own, postgres, load = await meter.stop()
                rows.append(
                    ThroughputRow.measured(
                        mode,
                        concurrency,
                        latencies,
                        elapsed,
                        (service, postgres, own),
                        load,
                        UNAVAILABLE[0] - unavailable,
                    )
                )
                print(format_throughput(rows[-1]), flush=True)
        names = ["server"] if len(layout.api_pids) == 1 else [f"server{i + 1}" for i in range(len(bases))]
        rss = {name: peak_rss_mib(pid) for name, pid in zip(names, layout.api_pids, strict=True)}
        rss |= {f"worker{i + 1}": peak_rss_mib(pid) for i, pid in enumerate(layout.worker_pids)}
        rss = {k: round(v, 1) for k, v in rss.items()}
    finally:
        processes.stop_all()
    return rows, rss


THROUGHPUT_HEADER = (
    f"  {'mode':<18} {'conv':>5} {'turns':>6} {'seconds':>8} {'turns/s':>8} {'turn p50':>10} {'p95':>10} "
    f"{'503s':>5} {'cpu ms/turn: service':>21} {'postgres':>9} {'client':>7} {'load':>6}"
)


def format_throughput(row: ThroughputRow) -> str:
    postgres = "-" if row.postgres_cpu_ms_per_turn is None else row.postgres_cpu_ms_per_turn
    client = "-" if row.client_cpu_ms_per_turn is None else row.client_cpu_ms_per_turn
    return (
        f"  {row.mode:<18} {row.concurrency:>5} {row.turns:>6} {row.seconds:>8} {row.turns_per_s:>8} "
        f"{row.turn_p50_ms:>10} {row.turn_p95_ms:>10} {row.retried_503:>5} "
        f"{row.service_cpu_ms_per_turn:>21} {postgres:>9} {client:>7} "
        f"{row.load_average:>6}"
    )
