"""Round trips to PostgreSQL per handed-off approval turn: every socket write this process makes to
the server, counted where it leaves (the socket transport of asyncio's own event loop, which the bench
runs on), and named by the protocol messages it carries.

    .venv/bin/python bench/round_trips.py [--turns 5] [--warm 40]

A round trip is one write to PostgreSQL's socket: a simple query (`BEGIN`, `COMMIT`, a `SELECT`
sent as text), a prepared statement's bind and execute, a statement's parse and describe the first
time a connection sees it. Every write waits for its answer before the next one of that connection,
so writes are what a turn pays the network, the event loop and the server's wake-ups for.

The turn is `bench/turn_ours.py`'s, handed off (`sursis.Service` with its worker loops in this
process, as `sursis serve` runs it) with the peers' agent (`bench_agent.py`), stream off: the
message accepted and its run queued and handed to a free slot, the run to its suspension, the
decision recorded and the resume queued, the run to its answer. The bench's own reads (waiting for
the run to settle, finding the pending call) are left out. `--warm` turns first, uncounted: the pool
hands its connections out first in, first out, and each connection prepares a statement the first
time it sends it (a write of its own), so it takes some turns before every connection has prepared
every statement of a turn, as in a service that has been up for a while. The figure is the fewest
writes any of the `--turns` measured turns made: once warm every turn makes the same writes, but
a turn in which a cache's periodic refresh falls (the policy cache's expiry, on a slow or loaded
machine) makes a few more, while a statement added to the turn shows in every turn.

Prints each segment's writes (what each carried, in order) for that turn, the totals per segment,
then one JSON line: `{"round_trips": per turn, "turns": [...], "segments": {...}}`.
`tests/kit/test_round_trips.py` pins the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from asyncio import selector_events
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench_round_trips"
SEGMENTS = ("message", "to suspension", "decision", "to answer")
"""A turn's segments, as the issue names its state changes: the message accepted and its run
queued; the run's segment up to the suspended call; the decision recorded and the resume queued;
the resumed segment up to the answer. A handed-off run's segment starts in the worker's task as soon
as the message's (the decision's) commit hands it over: its writes may begin before `send`
(`resolve`) returns, and are told apart by the task that made them."""


def _messages(data: bytes) -> Iterator[tuple[str, bytes]]:
    """The frontend protocol messages of one write: (type, body)."""
    at = 0
    while at + 5 <= len(data):
        kind = chr(data[at])
        length = int.from_bytes(data[at + 1 : at + 5], "big")
        yield kind, data[at + 5 : at + 1 + length]
        at += 1 + length


def _cstrings(body: bytes, count: int) -> list[str]:
    return [part.decode(errors="replace") for part in body.split(b"\0", count)[:count]]


def _first_line(sql: str) -> str:
    words = " ".join(sql.split())
    return words if len(words) <= 110 else words[:107] + "..."


@dataclass
class Write:
    """One socket write: the transition counting when it was made, its task, what it carried."""

    segment: str
    task: str
    what: str


@dataclass
class RoundTripCounter:
    """Counts every write the process's socket transports make to `port`, while installed. A
    prepared statement is named by its SQL, learnt from the `Parse` message that prepared it."""

    port: int
    segment: str = "outside"
    counting: bool = False
    writes: list[Write] = field(default_factory=list)
    _sql: dict[str, str] = field(default_factory=dict)

    def label(self, data: bytes) -> str:
        parts: list[str] = []
        for kind, body in _messages(data):
            if kind == "Q":
                parts.append(_first_line(_cstrings(body, 1)[0]))
            elif kind == "P":
                name, sql = _cstrings(body, 2)
                self._sql[name] = sql
                parts.append("parse: " + _first_line(sql))
            elif kind == "B":
                _, name = _cstrings(body, 2)
                parts.append(_first_line(self._sql.get(name, f"statement {name}")))
            elif kind == "X":
                parts.append("terminate")
        return "; ".join(dict.fromkeys(parts)) or "(other)"

    def _write(self, transport: Any, data: Any) -> None:
        peer = transport.get_extra_info("peername")
        if peer is not None and len(peer) >= 2 and peer[1] == self.port:
            what = self.label(bytes(data))
            if self.counting:
                task = asyncio.current_task()
                self.writes.append(Write(self.segment, task.get_name() if task else "-", what))

    @contextmanager
    def installed(self) -> Iterator[RoundTripCounter]:
        transport = selector_events._SelectorSocketTransport
        write = transport.write
        own_writelines = "writelines" in transport.__dict__  # Python >= 3.12: not through `write`
        writelines = transport.writelines
        counter = self

        def counted_write(this: Any, data: Any) -> None:
            counter._write(this, data)
            write(this, data)

        def counted_writelines(this: Any, lines: Any) -> None:
            lines = list(lines)
            counter._write(this, b"".join(bytes(line) for line in lines))
            writelines(this, lines)

        transport.write = counted_write  # type: ignore[method-assign]
        if own_writelines:
            transport.writelines = counted_writelines  # type: ignore[method-assign]
        try:
            yield self
        finally:
            transport.write = write  # type: ignore[method-assign]
            if own_writelines:
                transport.writelines = writelines  # type: ignore[method-assign]

    @contextmanager
    def counting_as(self, segment: str) -> Iterator[None]:
        self.segment, self.counting = segment, True
        try:
            yield
        finally:
            self.counting = False


def segment_of(write: Write) -> str:
    """A write's segment: the driving task's writes are the transition's own; the worker's tasks'
    writes are the run's segment that the transition handed over."""
    if write.task == DRIVER:
        return write.segment
    return SEGMENTS[SEGMENTS.index(write.segment) + 1]


DRIVER = "round-trips-driver"
"""The name of the task that drives the turns (the client's task)."""


async def measure(url: str, turns: int, warm: int) -> list[list[Write]]:
    """The writes of each of `turns` turns, after `warm` turns uncounted."""
    import sqlalchemy as sa
    from turn_ours import OursSide

    asyncio.current_task().set_name(DRIVER)  # type: ignore[union-attr]
    port = sa.engine.make_url(url).port or 5432
    await OursSide.prepare(url)
    counter = RoundTripCounter(port)
    side = OursSide(url, verify=False, hand_off=True)
    measured: list[list[Write]] = []
    with counter.installed():
        await side.open()
        try:
            conversation = await side.new_conversation()
            for _ in range(warm):
                await counted_turn(side, conversation, None)
            for _ in range(turns):
                counter.writes.clear()
                await counted_turn(side, conversation, counter)
                measured.append(list(counter.writes))
        finally:
            await side.close()
    return measured


async def counted_turn(side: Any, conversation: Any, counter: RoundTripCounter | None) -> None:
    """One handed-off turn, each transition counted with the run's segment it hands over (until the
    worker is idle again); the bench's reads (the run settled, its pending call) not counted."""
    from common import GATED_TURN

    service = side.service
    assert service is not None

    @contextmanager
    def counted(name: str) -> Iterator[None]:
        if counter is None:
            yield
            return
        with counter.counting_as(name):
            yield

    with counted("message"):
        run = await service.send(conversation, GATED_TURN, stream=False)
        await service.wait_until_idle(within=30)
    view = await service.get_run(run.id)
    if view.run.status.value != "suspended":
        raise RuntimeError(f"run {run.id} is {view.run.status}, not suspended: {view.run.error}")
    [pending] = view.pending
    with counted("decision"):
        await service.resolve(pending.correlation_id, "approve")
        await service.wait_until_idle(within=30)
    view = await service.get_run(run.id)
    if view.run.status.value != "completed":
        raise RuntimeError(f"run {run.id} ended {view.run.status}: {view.run.error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--warm", type=int, default=40)
    args = parser.parse_args()
    from turn_ours import log_to_file

    log_to_file(Path(tempfile.mkdtemp(prefix="sursis-round-trips-")) / "service.log")
    url = os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    measured = asyncio.run(measure(url, args.turns, args.warm))
    counts = [len(writes) for writes in measured]
    fewest = measured[counts.index(min(counts))]
    print(f"round trips to PostgreSQL of one handed-off approval turn (the fewest of {args.turns})")
    for segment in SEGMENTS:
        writes = [w for w in fewest if segment_of(w) == segment]
        print(f"\n{segment}: {len(writes)}")
        for w in writes:
            print(f"  {w.what}")
    by_segment = Counter(segment_of(w) for w in fewest)
    print(f"\nper turn: {counts} (each of the {args.turns} turns measured)")
    segments = {segment: by_segment[segment] for segment in SEGMENTS}
    print(json.dumps({"round_trips": min(counts), "turns": counts, "segments": segments}))


if __name__ == "__main__":
    main()
