"""PostgreSQL `LISTEN/NOTIFY` wake-ups for event streams served by another process than the writer.

Every transaction that stores events for a conversation also sends `NOTIFY sursis_events,
'<conversation id>'` (delivered on commit). The process's LISTEN connection (`listen_connection`)
hears it and wakes the streams of that conversation at once. It is only a wake-up: streams still
poll the `events` table, so a lost notification (or the connection coming back) delays, never loses.

The same connection hears `sursis_keys` (a key was revoked) for the credential cache, which is
told when the connection is lost (it then serves nothing) and when it is back (it starts empty).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Set
from typing import Any

from sursis.domain.notified_cache import Invalidations
from sursis.infra.db.access_repositories import KEY_CHANNEL
from sursis.infra.db.held_write import NOTIFY_CHANNEL, PENDING_CHANNEL
from sursis.infra.db.listen_connection import Callback, ListenConnection, Subscription


class PgEventListener:
    """Listens on `sursis_events` and calls `on_events({conversation_id})` for each notification,
    on `sursis_pending` (sent when pending calls are created or resolved) `on_pending({workspace})`,
    and on `sursis_keys` `keys.forget({key_id})`. `listen` is the process's shared
    `ListenConnection`, or a LISTEN URL (`listen_target.listen_url`) for a connection of its own."""

    def __init__(
        self,
        listen: ListenConnection | str,
        on_events: Callable[[Set[uuid.UUID]], None],
        *,
        on_pending: Callable[[Set[str]], None] | None = None,
        keys: Invalidations | None = None,
    ) -> None:
        self._connection = ListenConnection(listen, retry_seconds=2.0) if isinstance(listen, str) else listen
        self._on_events = on_events
        self._on_pending = on_pending
        self._keys = keys
        channels: dict[str, Callback] = {NOTIFY_CHANNEL: self._notified}
        if on_pending is not None:
            channels[PENDING_CHANNEL] = self._pending_notified
        if keys is not None:
            channels[KEY_CHANNEL] = self._keys_notified
        self._subscription = Subscription(channels, up=self._heard, down=self._lost)
        self.listening = self._subscription.listening
        self._started = False

    def ensure_started(self) -> None:
        self._started = True
        self._connection.attach(self._subscription)

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await self._connection.detach(self._subscription)

    def _heard(self) -> None:
        """Key changes are heard (again): the cache starts empty."""
        if self._keys is not None:
            self._keys.resume()

    def _lost(self) -> None:
        """The connection is gone (or going): key changes may be missed from now on."""
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
