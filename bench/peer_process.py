"""The PostgreSQL-native peers a pydantic-ai user picks first, each in a venv of its own, driven from
`peers.py` like its in-process sides: pydantic-ai-harness's `PGTaskDurability` on pgtask
(`turn_pgtask.py`, `.venv-pgtask`) and its `AbsurdDurability` on Absurd (`turn_absurd.py`,
`.venv-absurd`). `make bench-peers` makes the venvs from `pgtask-requirements.txt` and
`absurd-requirements.txt`; a peer whose venv is missing is left out, with a line saying so.

Each peer is a child process (its engine's client and worker both in it) answering JSON lines
(`peer_child.py`); a turn's time and CPU are measured in the child (`time.process_time`: every
thread of it). The PostgreSQL backends' CPU of each side's database is read from `/proc` around
each turn (`BackendSampler`), for every side alike. Databases: PGTASK_PG_URL (default
`peers_pgtask`) and ABSURD_PG_URL (default `peers_absurd`), their engine's schema made anew.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from http_load import CpuMeter, ThroughputRow, cpu_seconds
from server_cpu import BackendLister

BENCH = Path(__file__).resolve().parent
DEFAULT_PGTASK_URL = "postgresql://postgres@127.0.0.1:5432/peers_pgtask"
DEFAULT_ABSURD_URL = "postgresql://postgres@127.0.0.1:5432/peers_absurd"

TOOL_AFTER_CRASH = {
    "sursis": "exactly once (the call's record commits with its effect; fault tests in docs/durability.md)",
    "pgtask": "at least once (pgtask: at-least-once delivery; the harness: a tool that crashed after "
    "its effect, before its step was saved, runs again)",
    "absurd": "at least once (the harness: a crash between a tool's effect and its checkpoint re-runs "
    "the tool)",
}
"""What each side claims for a tool with an effect when the process dies after the effect."""


def asyncpg_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+asyncpg://", 1)


def mean(values: Sequence[float]) -> float | None:
    """A mean, not a median: backends' CPU comes in clock ticks (10 ms), most turns read 0."""
    return round(statistics.fmean(values), 2) if values else None


@dataclass(frozen=True)
class PeerSpec:
    name: str
    script: str
    venv: Path
    url: str

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def database(self) -> str:
        return self.url.rsplit("/", 1)[1]

    def side(self, log_dir: Path, poll_ms: float) -> PeerProcess:
        return PeerProcess(self, log_dir / f"{self.name}.log", poll_ms)


def peer_specs() -> list[PeerSpec]:
    """The peers whose venvs exist (a line for each that does not)."""
    root = BENCH.parent
    specs = [
        PeerSpec(
            "pgtask",
            "turn_pgtask.py",
            Path(os.environ.get("PGTASK_VENV", root / ".venv-pgtask")),
            os.environ.get("PGTASK_PG_URL", DEFAULT_PGTASK_URL),
        ),
        PeerSpec(
            "absurd",
            "turn_absurd.py",
            Path(os.environ.get("ABSURD_VENV", root / ".venv-absurd")),
            os.environ.get("ABSURD_PG_URL", DEFAULT_ABSURD_URL),
        ),
    ]
    found = [spec for spec in specs if spec.python.exists()]
    for spec in specs:
        if spec not in found:
            print(f"{spec.name}: no venv at {spec.venv} (make bench-peers makes it); left out", flush=True)
    return found


@dataclass
class PeerProcess:
    """One peer in its child process, with the interface of the in-process sides."""

    spec: PeerSpec
    log_path: Path
    poll_ms: float
    process: asyncio.subprocess.Process | None = None
    last_cpu_ms: float | None = None
    """The child's CPU over the last turn (the parent's own would measure only the pipe)."""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        process = self.process
        assert process is not None
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
        await process.stdin.drain()
        line = await process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.spec.name} exited ({process.returncode}); see {self.log_path}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.pop("ok"):
            raise RuntimeError(f"{self.spec.name}: {reply['error']} (log {self.log_path})")
        return reply

    async def open(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                str(self.spec.python),
                self.spec.script,
                self.spec.url,
                "--poll-ms",
                str(self.poll_ms),
                cwd=BENCH,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
            )
        await self.request("open")

    async def close(self) -> None:
        process = self.process
        if process is None:
            return
        try:
            if process.returncode is None:
                await asyncio.wait_for(self.request("close"), 30)
                await asyncio.wait_for(process.wait(), 30)
        except (RuntimeError, TimeoutError):
            process.kill()
            await process.wait()
        finally:
            self.process = None

    async def new_conversation(self) -> int:
        return int((await self.request("new_conversation"))["conversation"])

    async def turn(self, conversation: int) -> tuple[float, float, float]:
        reply = await self.request("turn", conversation=conversation)
        self.last_cpu_ms = float(reply["cpu_ms"])
        suspend, resolve, resume = reply["times"]
        return float(suspend), float(resolve), float(resume)

    async def suspend_only(self, conversation: int) -> None:
        await self.turn(conversation)

    @staticmethod
    def statements() -> None:
        """Not counted: the child's engines send them."""


@dataclass
class BackendSampler:
    """CPU ms of the PostgreSQL backends of a database around a turn, read from `/proc` (listed over
    a connection to `postgres`, whose backend is not counted). None when the server is not local."""

    lister: BackendLister
    _before: dict[int, float] = field(default_factory=dict)

    @classmethod
    async def open(cls, url: str) -> BackendSampler:
        lister = BackendLister(url)
        await lister.open()
        return cls(lister)

    async def read(self, database: str) -> dict[int, float] | None:
        pids = await self.lister.pids(database)
        if pids is None:
            return None
        return {pid: cpu for pid in pids if (cpu := cpu_seconds(pid)) is not None}

    @staticmethod
    def spent_ms(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
        if before is None or after is None:
            return None
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()) * 1000

    async def close(self) -> None:
        await self.lister.close()


async def peer_throughput(
    spec: PeerSpec, log_dir: Path, poll_ms: float, concurrency: int, turns: int, seconds: float
) -> ThroughputRow:
    """`concurrency` conversations at once in the peer's child; CPU of the child (client and
    worker: the service and its load at once) and of its database's backends."""
    side = spec.side(log_dir, poll_ms)
    await side.open()
    try:
        await side.request("warm", concurrency=concurrency)
        meter = CpuMeter([side.pid], asyncpg_url(spec.url))
        await meter.start()
        started = time.perf_counter()
        reply = await side.request("throughput", concurrency=concurrency, turns=turns, seconds=seconds)
        child, _, postgres, load = await meter.stop()
        elapsed = time.perf_counter() - started
    finally:
        await side.close()
    return ThroughputRow.measured(
        f"{spec.name} {concurrency} clients",
        concurrency,
        reply["latencies"],
        float(reply["elapsed"]) or elapsed,
        (child, postgres, None),
        load,
    )


def print_pg_peers(
    summary: dict[str, Any],
    samples: dict[str, Any],
    turn_ratios: dict[str, list[float]],
    cpu_ratios: dict[str, list[float]],
) -> None:
    """Sursis against each PostgreSQL-native peer: wall, client CPU and backends' CPU per turn,
    beside what each claims for a tool that crashed after its effect."""
    ours = samples["sursis"]
    for peer, ratios in turn_ratios.items():
        theirs = samples[peer]
        summary[f"{peer}_turn1_ratio"] = round(statistics.median(ratios), 3)
        summary[f"{peer}_cpu_ratio"] = round(statistics.median(cpu_ratios[peer]), 3)
        ours_pg, theirs_pg = mean(ours.postgres), mean(theirs.postgres)
        pg_ratio = round(ours_pg / theirs_pg, 3) if ours_pg is not None and theirs_pg else None
        summary[f"{peer}_postgres_cpu_ratio"] = pg_ratio
        print(
            f" turn 1: sursis / pydantic-ai on {peer} = {summary[f'{peer}_turn1_ratio']} "
            f"(rounds {min(ratios):.2f}-{max(ratios):.2f}); client CPU {summary[f'{peer}_cpu_ratio']}; "
            f"PostgreSQL backends' CPU {pg_ratio} ({ours_pg} / {theirs_pg} ms per turn)"
        )
    if turn_ratios:
        print(" a tool with an effect, the process killed after the effect:")
        for name in ("sursis", *turn_ratios):
            print(f"   {name:<8} {TOOL_AFTER_CRASH[name]}")
