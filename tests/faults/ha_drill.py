"""The high-availability drill (`make ha-drill`): approval turns under load while the database fails.

Scenarios (all by default, or `--scenario NAME` repeated):

- `failover`: a Patroni cluster (etcd, two PostgreSQL 15 nodes, synchronous replication); the
  service's URL names both nodes with `target_session_attrs=read-write`. The primary's postmaster is
  SIGKILLed mid-load and Patroni promotes the standby.
- `failover-pgbouncer`: the same, the service behind PgBouncer in transaction mode (moved to the new
  primary by Patroni's `on_role_change` hook, as a production hook does); LISTEN straight to the
  nodes (`SURSIS_DATABASE_LISTEN_URL`).
- `restart`: one PostgreSQL 15 of the drill's own, stopped (`-m fast`) and started again 2 s later.

Two API processes and two worker processes (the service's default 30 s lease) serve `--clients`
clients (drill_clients.py). Afterwards the database is read: every acknowledged decision is there,
approved, decided once; every approved call's effect happened once; no run is left queued, running
or suspended without an awaiting call. A table, then one JSON line per scenario and a last JSON line
with `acknowledged`, `lost_acknowledged`, `doubled_effects`, `stuck_runs`, `recovery_seconds` (the
worst scenario's).

    .venv/bin/python -m tests.faults.ha_drill [--scenario failover] [--clients 4] [--before 8] [--after 25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import sqlalchemy as sa

from sursis.infra.db.engine import create_engine
from tests.faults.drill_clients import DrillClient, Tally
from tests.faults.patroni_cluster import PatroniCluster
from tests.faults.processes import ROOT, Cluster
from tests.pg_servers import LocalPostgres, PgBouncer

DATABASE = "sursis_drill"
SCENARIOS = ("failover", "failover-pgbouncer", "restart")
SETTINGS = {
    "SURSIS_LEASE_SECONDS": "30",
    "SURSIS_SWEEP_SECONDS": "1",
    "SURSIS_WORKER_POLL_SECONDS": "0.5",
    "SURSIS_DB_POOL_SIZE": "5",
    "SURSIS_DB_POOL_OVERFLOW": "5",
}
"""The service's own lease (30 s): a blip must cost seconds, not the lease."""

HOOK = """#!/bin/sh
# Patroni's on_role_change: <port of this node> on_role_change <role> <scope>
case "$3" in master|primary|leader) ;; *) exit 0 ;; esac
sed -i "s/^{database} = .*/{database} = host=127.0.0.1 port=$1/" {ini}
kill -HUP "$(cat {pid})"
"""


def sursis(url: str, *args: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sursis.app.cli", *args],
        cwd=ROOT,
        env={**Cluster(url, Path()).env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"sursis {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


async def create_database(port: int) -> None:
    connection = await asyncpg.connect(host="127.0.0.1", port=port, user="postgres", database="postgres")
    try:
        await connection.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await connection.close()


class Topology:
    """Where the database runs, how the service reaches it, and how it fails."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.cluster: PatroniCluster | None = None
        self.single: LocalPostgres | None = None
        self.bouncer: PgBouncer | None = None
        self.listen_url: str | None = None

    def start(self) -> None:
        if self.scenario == "restart":
            self.single = LocalPostgres().init().start()
            asyncio.run(create_database(self.single.port))
            self.url = self.direct = self.single.url(DATABASE)
            return
        hook = None
        if self.scenario == "failover-pgbouncer":
            self.bouncer = PgBouncer(0, database=DATABASE)
            hook = self.bouncer.folder / "on-role-change.sh"
            hook.write_text(
                HOOK.format(
                    database=DATABASE, ini=self.bouncer.ini, pid=self.bouncer.folder / "pgbouncer.pid"
                )
            )
            hook.chmod(0o755)
        self.cluster = PatroniCluster(on_role_change=hook).start()
        asyncio.run(create_database(self.cluster.primary().pg_port))
        self.url = self.direct = self.cluster.url(DATABASE)
        if self.bouncer is not None:
            self.bouncer.target = ("127.0.0.1", self.cluster.primary().pg_port)
            self.bouncer.start()
            self.url = self.bouncer.url(DATABASE)
            self.listen_url = self.direct

    def fail(self) -> None:
        """Kill the primary's postmaster (Patroni promotes), or stop the single server."""
        if self.cluster is not None:
            self.cluster.kill_primary_postmaster()
        elif self.single is not None:
            self.single.stop("fast")

    def recover(self) -> float:
        """Wait until the database takes writes again; the moment it did (monotonic)."""
        if self.single is not None:
            time.sleep(2)
            self.single.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if asyncio.run(takes_writes(self.direct)):
                return time.monotonic()
            time.sleep(0.1)
        raise RuntimeError("the database did not come back in 90 s")

    def stop(self) -> None:
        if self.bouncer is not None:
            self.bouncer.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if self.single is not None:
            self.single.remove()


async def takes_writes(url: str) -> bool:
    from sursis.infra.db.urls import asyncpg_connect_kwargs

    try:
        connection = await asyncpg.connect(**asyncpg_connect_kwargs(url), timeout=2)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        return False
    try:
        return not await connection.fetchval("SELECT pg_is_in_recovery()")
    finally:
        await connection.close()


@contextmanager
def service(topology: Topology, logs: Path) -> Iterator[tuple[Cluster, list[str]]]:
    settings = dict(SETTINGS)
    if topology.listen_url is not None:
        settings["SURSIS_DATABASE_LISTEN_URL"] = topology.listen_url
    processes = Cluster(topology.url, logs, settings=settings)
    try:
        workers = [processes.worker(concurrency=2) for _ in range(2)]
        bases = [asyncio.run(processes.api())[1] for _ in range(2)]
        # Each process listens on one connection: all up, all serving.
        asyncio.run(wait_listening(topology.direct, len(bases) + len(workers), workers))
        yield processes, bases
    finally:
        processes.stop_all()


async def wait_listening(url: str, sessions: int, processes: list[subprocess.Popen[bytes]]) -> None:
    engine = create_engine(url)
    deadline = time.monotonic() + 90
    try:
        while True:
            async with engine.connect() as conn:
                found = (
                    await conn.execute(
                        sa.text("SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'")
                    )
                ).scalar_one()
            if found >= sessions:
                return
            if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
                raise RuntimeError(f"{found} of {sessions} processes listen; see the logs")
            await asyncio.sleep(0.2)
    finally:
        await engine.dispose()


async def drive(topology: Topology, bases: list[str], headers: dict[str, str], key_id: str, args: Any) -> Any:
    tally = Tally()
    stop = asyncio.Event()
    clients = [DrillClient(bases, headers, tally, key_id, number) for number in range(args.clients)]
    tasks = [asyncio.create_task(c.run_until(stop)) for c in clients]
    await asyncio.sleep(args.before)
    failed_at = time.monotonic()
    in_flight = [t for t in tally.turns if t.ended is None]
    await asyncio.to_thread(topology.fail)
    back_at = await asyncio.to_thread(topology.recover)
    await asyncio.sleep(max(0.0, args.after - (time.monotonic() - failed_at)))
    stop.set()
    done, pending = await asyncio.wait(tasks, timeout=120)
    if pending:
        raise RuntimeError(f"{len(pending)} clients did not finish their turn in 120 s: {tally.statuses}")
    for task in done:
        task.result()
    for client in clients:
        await client.close()
    return tally, failed_at, back_at, in_flight


async def check(url: str, tally: Tally) -> dict[str, int]:
    """What the database holds, against what the clients were told."""
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:

            async def scalar(sql: str, **params: Any) -> int:
                return int((await conn.execute(sa.text(sql), params)).scalar_one())

            acknowledged = sorted(set(tally.acknowledged))
            present = await scalar(
                "SELECT COUNT(*) FROM pending_calls WHERE status = 'approved' "
                "AND CAST(correlation_id AS text) = ANY(:ids)",
                ids=acknowledged,
            )
            decided_twice = await scalar(
                "SELECT COUNT(*) FROM (SELECT correlation_id FROM audit_log WHERE action = 'pending.approved' "
                "GROUP BY correlation_id HAVING COUNT(*) > 1) twice"
            )
            approved = await scalar("SELECT COUNT(*) FROM pending_calls WHERE status = 'approved'")
            executed = await scalar(
                "SELECT COUNT(*) FROM tool_calls WHERE tool_name = 'replay_dlq_event' AND ok"
            )
            effects = await scalar("SELECT COUNT(*) FROM outbox WHERE source_event_id = 'evt_1001'")
            replays = await scalar("SELECT replay_count FROM dead_letters WHERE id = 'evt_1001'")
            stuck = await scalar(
                "SELECT COUNT(*) FROM runs r WHERE r.status IN ('queued', 'running') OR (r.status = 'suspended' "
                "AND NOT EXISTS (SELECT 1 FROM pending_calls p WHERE p.run_id = r.id AND p.status = 'awaiting'))"
            )
            failed = await scalar("SELECT COUNT(*) FROM runs WHERE status = 'failed'")
    finally:
        await engine.dispose()
    return {
        "acknowledged": len(acknowledged),
        "lost_acknowledged": len(acknowledged) - present,
        "decided_twice": decided_twice,
        "doubled_effects": max(0, effects - executed) + max(0, executed - approved) + abs(replays - effects),
        "stuck_runs": stuck,
        "failed_runs": failed,
    }


async def wait_settled(url: str, seconds: float) -> None:
    """Until no run is queued or running (a run given back after the outage finishes first)."""
    engine = create_engine(url)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            async with engine.connect() as conn:
                busy = (
                    await conn.execute(
                        sa.text("SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')")
                    )
                ).scalar_one()
            if busy == 0:
                return
            await asyncio.sleep(0.5)
    finally:
        await engine.dispose()


def scenario(name: str, args: Any) -> dict[str, Any]:
    topology = Topology(name)
    started = time.monotonic()
    try:
        topology.start()
        sursis(topology.url, "migrate")
        sursis(topology.url, "demo", "seed")
        made = sursis(
            topology.url, "keys", "create", "--role", "admin", "--workspace", "default"
        ).splitlines()
        secret, key_id = made[1].strip(), made[2].split()[1]
        logs = Path(tempfile.mkdtemp(prefix="sursis-drill-"))
        try:
            with service(topology, logs) as (_, bases):
                headers = {"Authorization": f"Bearer {secret}"}
                tally, failed_at, back_at, in_flight = asyncio.run(
                    drive(topology, bases, headers, key_id, args)
                )
        except BaseException:
            print(f"{name}: the processes' logs are kept in {logs}", file=sys.stderr)
            raise
        shutil.rmtree(logs, ignore_errors=True)
        asyncio.run(wait_settled(topology.direct, 45))
        figures = asyncio.run(check(topology.direct, tally))
    finally:
        topology.stop()
    completed = tally.completed()
    # Every client completed a turn it started after the failure: the time until the last did.
    firsts = [
        min((t.ended for t in completed if t.client == c and t.started > failed_at and t.ended), default=None)
        for c in range(args.clients)
    ]
    after = [] if None in firsts else [f for f in firsts if f is not None]
    in_flight_done = [t.ended - back_at for t in in_flight if t.ended is not None]
    return {
        "scenario": name,
        **figures,
        "recovery_seconds": round(max(after) - failed_at, 2) if after else None,
        "database_back_seconds": round(back_at - failed_at, 2),
        "in_flight_done_after_back_seconds": round(max(in_flight_done), 2) if in_flight_done else 0.0,
        "in_flight_turns": len(in_flight),
        "turns_completed": len(completed),
        "confirmed_after_retry": len(tally.confirmed_after_retry),
        "http_503": tally.statuses[503],
        "http_5xx_other": sum(n for s, n in tally.statuses.items() if s >= 500 and s != 503),
        "retry_after_missing": tally.retry_after_missing,
        "seconds": round(time.monotonic() - started, 1),
    }


COLUMNS = [
    ("scenario", 19),
    ("acknowledged", 12),
    ("lost_acknowledged", 17),
    ("doubled_effects", 15),
    ("stuck_runs", 10),
    ("failed_runs", 11),
    ("recovery_seconds", 16),
    ("database_back_seconds", 21),
    ("in_flight_done_after_back_seconds", 33),
    ("http_503", 8),
    ("http_5xx_other", 14),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--before", type=float, default=8.0, help="seconds of load before the failure")
    parser.add_argument("--after", type=float, default=25.0, help="seconds of load after the failure")
    args = parser.parse_args()
    rows = [scenario(name, args) for name in args.scenario or SCENARIOS]
    print("  ".join(f"{name:>{width}}" for name, width in COLUMNS))
    for row in rows:
        print("  ".join(f"{row[name]!s:>{width}}" for name, width in COLUMNS))
    for row in rows:
        print(json.dumps(row))
    recoveries = [r["recovery_seconds"] for r in rows]
    print(
        json.dumps(
            {
                "acknowledged": sum(r["acknowledged"] for r in rows),
                "lost_acknowledged": sum(r["lost_acknowledged"] for r in rows),
                "doubled_effects": sum(r["doubled_effects"] for r in rows),
                "stuck_runs": sum(r["stuck_runs"] for r in rows),
                "recovery_seconds": None if None in recoveries else max(recoveries),
                "scenarios": [r["scenario"] for r in rows],
            }
        )
    )


if __name__ == "__main__":
    main()
