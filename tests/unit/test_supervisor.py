"""The worker's loops under one supervisor (`sursis/infra/supervisor.py`): a loop that crashes or
ends early is started again and reported, `stop` gives each loop its grace and cancels the one
that does not return, and the worker's own loops are reported by name."""

from __future__ import annotations

import asyncio

import sniffio

from sursis.infra.supervisor import Supervisor
from tests.conftest import eventually


class Flaky:
    """Crashes on its first run, then runs until stopped."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, stopping: asyncio.Event) -> None:
        self.runs += 1
        if self.runs == 1:
            raise RuntimeError("lost its socket")
        await stopping.wait()


class Quitter:
    """Returns at once each time, as a loop with a bug in its condition would."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, stopping: asyncio.Event) -> None:
        self.runs += 1


class Stuck:
    """Ignores `stopping`."""

    async def run(self, stopping: asyncio.Event) -> None:
        await asyncio.sleep(3600)


async def test_a_crashed_loop_is_started_again_and_reported() -> None:
    supervisor = Supervisor(restart_pause=0.01)
    flaky = Flaky()
    supervisor.start([("flaky", flaky)])

    async def restarted() -> bool:
        return flaky.runs == 2

    await eventually(restarted, limit=2)
    [report] = supervisor.report()
    assert (report.name, report.running, report.restarts) == ("flaky", True, 1)
    assert report.last_error == "RuntimeError: lost its socket"
    assert await supervisor.stop(grace=1) == 0
    assert supervisor.report() == [] and not supervisor.started


async def test_a_loop_that_ends_before_the_stop_is_started_again_after_a_pause() -> None:
    supervisor = Supervisor(restart_pause=0.05)
    quitter = Quitter()
    supervisor.start([("quitter", quitter)])
    await asyncio.sleep(0.3)
    assert 2 <= quitter.runs <= 8  # paused between runs, not spinning
    [report] = supervisor.report()
    assert report.restarts >= 1 and report.last_error is None
    await supervisor.stop(grace=1)


async def test_stop_cancels_a_loop_that_does_not_return_within_its_grace() -> None:
    supervisor = Supervisor()
    flaky, stuck = Flaky(), Stuck()
    flaky.runs = 1  # no crash: returns when stopped
    supervisor.start([("flaky", flaky), ("stuck", stuck)])
    await asyncio.sleep(0.01)
    assert [r.running for r in supervisor.report()] == [True, True]
    assert await supervisor.stop(grace=0.1) == 1


async def test_the_worker_reports_its_loops_by_name(database_url: str) -> None:
    from sursis.app.container import build_container
    from tests.conftest import make_settings

    container = build_container(make_settings(database_url, worker_concurrency=2))
    try:
        worker = container.worker
        assert worker is not None
        worker.start()
        names = [report.name for report in worker.loops()]
        assert names[:4] == ["claims-0", "claims-1", "dispatcher", "sweeper"]
        assert any(name.startswith("RetentionLoop") for name in names)
        assert all(report.running for report in worker.loops())
        await worker.stop(grace=5)
        assert worker.loops() == []
    finally:
        await container.close()


class Asker:
    """Records what sniffio's task-local declaration says inside the loop and in a task it starts."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    async def run(self, stopping: asyncio.Event) -> None:
        self.seen.append(sniffio.current_async_library_cvar.get())
        child = asyncio.create_task(self._child())
        await child
        await stopping.wait()

    async def _child(self) -> None:
        self.seen.append(sniffio.current_async_library_cvar.get())
        self.seen.append(sniffio.current_async_library())


async def test_each_loop_declares_asyncio_in_its_own_task_context_and_not_in_the_hosts() -> None:
    supervisor = Supervisor(restart_pause=0.01)
    asker = Asker()
    supervisor.start([("asker", asker)])

    async def asked() -> bool:
        return len(asker.seen) == 3

    await eventually(asked, limit=2)
    assert asker.seen == ["asyncio", "asyncio", "asyncio"]
    # The host's task (this test's) declared nothing: sniffio still finds asyncio by asking it.
    assert sniffio.current_async_library_cvar.get() is None
    assert sniffio.thread_local.name is None
    assert await supervisor.stop(grace=1) == 0
