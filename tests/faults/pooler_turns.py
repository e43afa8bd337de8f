"""The service behind PgBouncer in transaction mode, end to end with real processes.

A PostgreSQL 15 of its own, Debian's PgBouncer in front of it (transaction mode, four server
connections); through the pooler: `sursis migrate`, `sursis db-check` twice, `sursis serve --workers 2`
(each process with its in-process worker; LISTEN straight to PostgreSQL), then `--clients` clients
each making `--turns` approval turns. Prints a table and a last JSON line: turns completed per
client, HTTP statuses, 5xx answers.

    .venv/bin/python -m tests.faults.pooler_turns [--clients 3] [--turns 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.faults.drill_clients import DrillClient, Tally
from tests.faults.ha_drill import DATABASE, create_database, sursis
from tests.faults.processes import ROOT, Cluster, wait_ready
from tests.pg_servers import LocalPostgres, PgBouncer, free_port


async def turns(
    bases: list[str], headers: dict[str, str], key_id: str, clients: int, each: int
) -> list[Tally]:
    tallies = [Tally() for _ in range(clients)]
    drivers = [DrillClient(bases, headers, tally, key_id) for tally in tallies]
    await asyncio.gather(*(d.run_until(asyncio.Event(), turns=each) for d in drivers))
    for driver in drivers:
        await driver.close()
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    database = LocalPostgres().init().start()
    bouncer = PgBouncer(database.port, pool_size=4)
    server: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    try:
        asyncio.run(create_database(database.port))
        bouncer.start()
        url = bouncer.url(DATABASE)
        sursis(url, "migrate")
        checks = [sursis(url, "db-check").strip() for _ in range(2)]
        sursis(url, "demo", "seed")
        made = sursis(url, "keys", "create", "--role", "admin", "--workspace", "default").splitlines()
        secret, key_id = made[1].strip(), made[2].split()[1]
        port = free_port()
        env = Cluster(url, Path()).env()
        env.update(SURSIS_DATABASE_LISTEN_URL=database.url(DATABASE), SURSIS_LEASE_SECONDS="30")
        with tempfile.TemporaryFile() as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "sursis.app.cli", "serve", "--workers", "2", "--port", str(port)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=log,
            )
            base = f"http://127.0.0.1:{port}"
            asyncio.run(wait_ready(server, base, 90))
            headers = {"Authorization": f"Bearer {secret}"}
            tallies = asyncio.run(turns([base], headers, key_id, args.clients, args.turns))
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(timeout=30)
        bouncer.stop()
        database.remove()
    statuses: dict[int, int] = {}
    for tally in tallies:
        for status, count in tally.statuses.items():
            statuses[status] = statuses.get(status, 0) + count
    completed = [len(t.completed()) for t in tallies]
    row = {
        "db_check_twice": all("is at the migrations' head" in c for c in checks),
        "completed_per_client": completed,
        "turns_per_client": args.turns,
        "acknowledged": sum(len(t.acknowledged) for t in tallies),
        "http_5xx": sum(n for s, n in statuses.items() if s >= 500),
        "statuses": dict(sorted(statuses.items())),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(f"{'db-check x2':>12}  {'completed per client':>22}  {'acknowledged':>12}  {'5xx':>4}")
    print(
        f"{row['db_check_twice']!s:>12}  {'/'.join(map(str, completed)) + ' of ' + str(args.turns):>22}  "
        f"{row['acknowledged']:>12}  {row['http_5xx']:>4}"
    )
    print(json.dumps(row))


if __name__ == "__main__":
    main()
