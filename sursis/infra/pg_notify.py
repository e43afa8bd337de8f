"""PostgreSQL LISTEN/NOTIFY: wakes workers and long-polls in every process; polling stays the fallback."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.domain.notified_cache import Invalidations
from sursis.infra.db.access_repositories import AUTHORIZATION_CHANNEL
from sursis.infra.db.event_repositories import RUN_CHANNEL, WORK_CHANNEL
from sursis.infra.db.listen_connection import ListenConnection, Subscription
from sursis.infra.db.sessions import pinned_sessions
from sursis.infra.faults import crash_point
from sursis.infra.notifier import LocalRunNotifier

log = structlog.get_logger("sursis.notify")


class PostgresRunNotifier(LocalRunNotifier):
    """Local wake-ups plus `pg_notify`, heard on the process's LISTEN connection.

    Notifications are an optimisation: a lost one only delays a worker until its next poll. A run
    whose change was notified in the transaction that made it (see `runs_notified`) is not
    notified again. The same connection hears `sursis_authorizations` for the pre-approval cache
    (`authorizations`), which serves only while the connection is up. `listen` is the process's
    shared `ListenConnection`, or a LISTEN URL (`listen_target.listen_url`) for a connection of its
    own; None: no listening, polling only.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        listen: ListenConnection | str | None,
        *,
        authorizations: Invalidations | None = None,
    ) -> None:
        super().__init__()
        self._engine = engine
        self._connection = ListenConnection(listen) if isinstance(listen, str) else listen
        self._authorizations = authorizations
        channels = {WORK_CHANNEL: self._on_work, RUN_CHANNEL: self._on_run}
        if authorizations is not None:
            channels[AUTHORIZATION_CHANNEL] = self._on_authorizations
        self._subscription = Subscription(channels, up=self._heard, down=self._lost)
        self.listening = self._subscription.listening

    async def run_queued(self, run_id: uuid.UUID) -> None:
        crash_point("notify_queued")
        self._work.set()
        self._wake_run_waiters(run_id)
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
        if self._connection is not None:
            self._connection.attach(self._subscription)

    async def stop(self) -> None:
        if self._connection is not None:
            await self._connection.detach(self._subscription)

    def _heard(self) -> None:
        """The channels are listened to (again): the cache starts empty, and a reconnect may have
        missed notifications, so everyone re-checks."""
        if self._authorizations is not None:
            self._authorizations.resume()
        self.note_changes_unknown()
        self._work.set()
        self.stir()

    def _lost(self) -> None:
        """The connection is gone (or going): authorization changes may be missed from now on."""
        if self._authorizations is not None:
            self._authorizations.suspend()

    def _on_work(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._work.set()
        self.stir()
        self._wake_run(payload)

    def _on_authorizations(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._authorizations is not None and payload:
            self._authorizations.forget({payload})

    def _on_run(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._wake_run(payload)

    def _wake_run(self, payload: str) -> None:
        with contextlib.suppress(ValueError):
            run_id = uuid.UUID(payload)
            self.note_change(run_id)
            self._wake_run_waiters(run_id)
