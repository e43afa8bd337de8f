"""Interleaved rounds of approval turns for `peers.py`: each side's turns one by one, alternating,
with each turn's time, statements, CPU of the process that ran it and CPU of its database's
PostgreSQL backends."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from peer_process import BackendSampler, PeerProcess, mean

Side = Any


@dataclass
class Samples:
    suspend: list[float] = field(default_factory=list)
    resolve: list[float] = field(default_factory=list)
    resume: list[float] = field(default_factory=list)
    statements: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """Process CPU ms of each turn (every thread of this process: DBOS's included; for a peer in a
    child process, the child's)."""
    postgres: list[float] = field(default_factory=list)
    """CPU ms of the side's database's PostgreSQL backends over each turn (empty: not visible)."""

    @property
    def turn(self) -> list[float]:
        return [s + r for s, r in zip(self.suspend, self.resume, strict=True)]


def p50(values: Sequence[float]) -> float:
    return round(statistics.median(values), 2) if values else float("nan")


async def measured_turn(
    side: Side, conversation: Any, into: Samples, backends: tuple[BackendSampler, str | None] | None = None
) -> None:
    """One turn; with `backends` (a sampler, the side's database) its backends' CPU too, read
    outside the turn's own CPU and time."""
    sampler, database = backends or (None, None)
    backends_before = await sampler.read(database) if sampler and database else None
    before = side.statements()
    cpu = time.process_time()
    suspend, resolve, resume = await side.turn(conversation)
    cpu = (time.process_time() - cpu) * 1000
    into.cpu.append(side.last_cpu_ms if isinstance(side, PeerProcess) else cpu)
    if before is not None:
        into.statements.append(side.statements() - before)
    if sampler and database:
        spent = BackendSampler.spent_ms(backends_before, await sampler.read(database))
        if spent is not None:
            into.postgres.append(spent)
    into.suspend.append(suspend)
    into.resolve.append(resolve)
    into.resume.append(resume)


async def interleaved(
    sides: dict[str, Side],
    conversations: dict[str, Any] | None,
    window: int,
    first: str,
    backends: tuple[BackendSampler, dict[str, str]] | None = None,
) -> dict[str, Samples]:
    """`window` turns on each side, alternating turn by turn; fresh conversations unless given;
    with `backends` (a sampler, each side's database) the backends' CPU of each turn."""
    order = [first, *(n for n in sides if n != first)]
    convs = conversations or {n: await sides[n].new_conversation() for n in order}
    samples = {n: Samples() for n in order}
    for _ in range(window):
        for name in order:
            sampled = (backends[0], backends[1].get(name)) if backends else None
            await measured_turn(sides[name], convs[name], samples[name], sampled)
    return samples


def row(name: str, s: Samples) -> str:
    statements = statistics.median(s.statements) if s.statements else "-"
    postgres = mean(s.postgres)
    return (
        f"  {name:<10} {p50(s.suspend):>9} {p50(s.resolve):>9} {p50(s.resume):>9} {p50(s.turn):>9} "
        f"{statements:>11} {p50(s.cpu):>8} {'-' if postgres is None else postgres:>8}"
    )


HEADER = (
    f"  {'':<10} {'suspend':>9} {'resolve':>9} {'resume':>9} {'turn':>9} {'statements':>11} {'cpu ms':>8}"
    f" {'pg ms':>8}"
)
ATTRS = ("suspend", "resolve", "resume", "statements", "cpu", "postgres")
