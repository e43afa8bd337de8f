"""A server side's CPU, split three ways: its own processes, the PostgreSQL backends serving its
database, and side services (Redis for the Agent Server).

User + system time from `/proc/<pid>/stat` (a process's line covers all its threads). Backends
are the client backends whose `pg_stat_activity.datname` is the side's database, listed over one
connection to the `postgres` database (so the listing's own backend is never counted) at each
sample; a backend that appears between two samples counts from zero (its start-up is the side's
cost), one that exits between them is missed (the sides keep pooled connections, so few do). When
the PostgreSQL server's processes are not visible here (another machine or PID namespace), the
backends' share is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
from http_load import cpu_seconds, is_local_postgres

BACKENDS = "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'"


@dataclass(frozen=True)
class CpuSplit:
    """CPU seconds of a side: its processes, its database's backends (None: not visible), Redis."""

    processes: float
    backends: float | None
    side: float = 0.0

    @property
    def total(self) -> float:
        return self.processes + (self.backends or 0.0) + self.side

    def __add__(self, other: CpuSplit) -> CpuSplit:
        backends = None if self.backends is None or other.backends is None else self.backends + other.backends
        return CpuSplit(self.processes + other.processes, backends, self.side + other.side)

    def per_turn_ms(self, turns: int) -> dict[str, float | None]:
        def ms(seconds: float | None) -> float | None:
            return None if seconds is None else round(seconds * 1000 / max(turns, 1), 2)

        return {
            "total": ms(self.total),
            "processes": ms(self.processes),
            "postgres": ms(self.backends),
            "redis": ms(self.side),
        }


ZERO = CpuSplit(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Sample:
    processes: dict[int, float]
    backends: dict[int, float] | None
    side: dict[int, float]


def read(pids: Sequence[int]) -> dict[int, float]:
    return {pid: cpu for pid in pids if (cpu := cpu_seconds(pid)) is not None}


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


class BackendLister:
    """One connection to the `postgres` database of the server at `url`, listing backends."""

    def __init__(self, url: str) -> None:
        self.admin = url.replace("+asyncpg", "").rsplit("/", 1)[0] + "/postgres"
        self.conn: asyncpg.Connection | None = None
        self.local = False

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.admin)
        self.local = is_local_postgres(self.conn.get_server_pid())

    async def pids(self, database: str) -> list[int] | None:
        if not self.local or self.conn is None:
            return None
        return [int(r["pid"]) for r in await self.conn.fetch(BACKENDS, database)]

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


@dataclass
class ServerCpu:
    """The CPU of one side: `processes`, the backends of `database`, `side_pids` (Redis)."""

    lister: BackendLister
    processes: Sequence[int]
    database: str
    side_pids: Sequence[int] = ()

    async def sample(self) -> Sample:
        backends = await self.lister.pids(self.database)
        return Sample(
            read(self.processes), None if backends is None else read(backends), read(self.side_pids)
        )

    @staticmethod
    def between(before: Sample, after: Sample) -> CpuSplit:
        backends = None
        if before.backends is not None and after.backends is not None:
            backends = spent(before.backends, after.backends)
        return CpuSplit(spent(before.processes, after.processes), backends, spent(before.side, after.side))
