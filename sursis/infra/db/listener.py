"""PostgreSQL `LISTEN/NOTIFY` wake-ups for event streams served by another process than the writer.

Every transaction that stores events for a conversation also sends `NOTIFY sursis_events,
'<conversation id>'` (delivered on commit). One connection per API process listens and wakes
the streams of that conversation at once. It is only a wake-up: streams still poll the
`events` table, so a lost notification (or a listener reconnecting) delays, never loses.

The same connection hears `sursis_keys` (a key was revoked) for the credential cache, which is
told when the connection is lost (it then serves nothing) and when it is back (it starts empty).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Set
from typing import Any

import asyncpg

from sursis.domain.notified_cache import Invalidations
from sursis.infra.db.access_repositories import KEY_CHANNEL
from sursis.infra.db.event_repositories import NOTIFY_CHANNEL, PENDING_CHANNEL
from sursis.infra.db.listen_target import (
    ListenNeedsSession,
    PollingFallback,
    connect_for_listening,
    retry_after,
)


class PgEventListener:
    """Listens on `sursis_events` and calls `on_events({conversation_id})` for each notification,
    on `sursis_pending` (sent when pending calls are created or resolved) `on_pending({workspace})`,
    and on `sursis_keys` `keys.forget({key_id})`. `database_url` is the LISTEN URL
    (`listen_target.listen_url`)."""

    def __init__(
        self,
        database_url: str,
        on_events: Callable[[Set[uuid.UUID]], None],
        *,
        on_pending: Callable[[Set[str]], None] | None = None,
        keys: Invalidations | None = None,
        retry_seconds: float = 2.0,
    ) -> None:
        self._url = database_url
        self._fallback = PollingFallback("events", database_url)
        self._on_events = on_events
        self._on_pending = on_pending
        self._keys = keys
        self._retry = retry_seconds
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()

    def ensure_started(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="pg-event-listener")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            wait = self._retry
            try:
                await self._listen()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ListenNeedsSession) as exc:
                self._fallback.lost(exc)
                wait = retry_after(exc, self._retry)
            self.listening.clear()
            await asyncio.sleep(wait)

    async def _listen(self) -> None:
        connection = await connect_for_listening(self._url)
        lost = asyncio.Event()
        try:
            connection.add_termination_listener(lambda _connection: self._lost(lost))
            await connection.add_listener(NOTIFY_CHANNEL, self._notified)
            if self._on_pending is not None:
                await connection.add_listener(PENDING_CHANNEL, self._pending_notified)
            if self._keys is not None:
                await connection.add_listener(KEY_CHANNEL, self._keys_notified)
                self._keys.resume()
            self.listening.set()
            self._fallback.listening()
            await lost.wait()
        finally:
            self._lost(lost)
            with contextlib.suppress(OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await connection.close(timeout=2)

    def _lost(self, lost: asyncio.Event) -> None:
        """The connection is gone (or going): key changes may be missed from now on."""
        lost.set()
        if self._keys is not None:
            self._keys.suspend()

    def _notified(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            conversation_id = uuid.UUID(payload)
        except ValueError:
            return
        self._on_events({conversation_id})

    def _pending_notified(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._on_pending is not None and payload:
            self._on_pending({payload})

    def _keys_notified(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._keys is not None and payload:
            self._keys.forget({payload})
