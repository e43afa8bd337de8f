"""PostgreSQL LISTEN/NOTIFY: wakes workers and long-polls in every process; polling stays the fallback."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.domain.notified_cache import Invalidations
from sursis.infra.db.access_repositories import AUTHORIZATION_CHANNEL
from sursis.infra.db.event_repositories import RUN_CHANNEL, WORK_CHANNEL
from sursis.infra.db.listen_target import PollingFallback, connect_for_listening, retry_after
from sursis.infra.db.sessions import pinned_sessions
from sursis.infra.faults import crash_point
from sursis.infra.notifier import LocalRunNotifier

log = structlog.get_logger("sursis.notify")


class PostgresRunNotifier(LocalRunNotifier):
    """Local wake-ups plus `pg_notify`, and one listening connection per process.

    Notifications are an optimisation: a lost one only delays a worker until its next poll. A run
    whose change was notified in the transaction that made it (see `runs_notified`) is not
    notified again. The same connection hears `sursis_authorizations` for the pre-approval cache
    (`authorizations`), which serves only while the connection is up. `listen_url` is where the
    listening connection goes (`listen_target.listen_url`); None: no listening, polling only.
    """

    def __init__(
        self, engine: AsyncEngine, listen_url: str | None, *, authorizations: Invalidations | None = None
    ) -> None:
        super().__init__()
        self._engine = engine
        self._url = listen_url
        self._listener: asyncio.Task[None] | None = None
        self._authorizations = authorizations
        self.listening = asyncio.Event()

    async def run_queued(self, run_id: uuid.UUID) -> None:
        crash_point("notify_queued")
        self._work.set()
        await LocalRunNotifier.run_changed(self, run_id)
        # One notification: listeners of the work channel also wake the run's waiters.
        if not self._already_notified(run_id):
            await self._notify(WORK_CHANNEL, run_id)

    async def run_changed(self, run_id: uuid.UUID) -> None:
        await super().run_changed(run_id)
        if not self._already_notified(run_id):
            await self._notify(RUN_CHANNEL, run_id)

    async def _notify(self, channel: str, run_id: uuid.UUID) -> None:
        try:
            notify = text("SELECT pg_notify(:c, :p)")
            if not pinned_sessions(self._engine):
                # Behind a transaction pooler a statement runs in a transaction (`sessions.py`).
                async with self._engine.begin() as conn:
                    await conn.execute(notify, {"c": channel, "p": str(run_id)})
                return
            # One statement, no transaction around it: a notification needs no BEGIN/COMMIT.
            async with self._engine.connect() as conn:
                autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await autocommit.execute(notify, {"c": channel, "p": str(run_id)})
        except Exception as exc:
            log.warning("notify.failed", channel=channel, error=str(exc)[:200])

    def start(self) -> None:
        if self._url is None:
            return
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name="pg-listen")

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None

    async def _listen(self) -> None:
        assert self._url is not None
        fallback = PollingFallback("runs", self._url)
        while True:
            wait = 1.0
            connection: Any = None
            try:
                closed = asyncio.Event()
                connection = await connect_for_listening(self._url)
                connection.add_termination_listener(lambda _c, done=closed: self._lost(done))
                await connection.add_listener(WORK_CHANNEL, self._on_work)
                await connection.add_listener(RUN_CHANNEL, self._on_run)
                if self._authorizations is not None:
                    await connection.add_listener(AUTHORIZATION_CHANNEL, self._on_authorizations)
                    self._authorizations.resume()
                # A reconnect may have missed notifications: wake everyone to re-check.
                self._work.set()
                self.listening.set()
                fallback.listening()
                await closed.wait()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                fallback.lost(exc)
                wait = retry_after(exc, wait)
            finally:
                self._lost(closed)
                if connection is not None and not connection.is_closed():
                    with contextlib.suppress(Exception):
                        await connection.close(timeout=2)
            await asyncio.sleep(wait)

    def _on_work(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._work.set()
        self._wake_run(payload)

    def _lost(self, closed: asyncio.Event) -> None:
        """The connection is gone (or going): authorization changes may be missed from now on."""
        closed.set()
        self.listening.clear()
        if self._authorizations is not None:
            self._authorizations.suspend()

    def _on_authorizations(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._authorizations is not None and payload:
            self._authorizations.forget({payload})

    def _on_run(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._wake_run(payload)

    def _wake_run(self, payload: str) -> None:
        with contextlib.suppress(ValueError):
            for event in self._runs.get(uuid.UUID(payload), ()):
                event.set()
