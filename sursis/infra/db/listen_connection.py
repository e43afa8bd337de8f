"""A process's one LISTEN connection, shared by everything in it that listens.

Worker wake-ups and run long-polls (`pg_notify.PostgresRunNotifier`), event and pending streams
and key revocations (`listener.PgEventListener`) and the caches' invalidations all hear their
channels on the same connection, so a process holds at most one LISTEN connection whatever it
serves. Each user attaches a `Subscription`: its channels with their callbacks, `up` (called once
its channels are listened to, on every connect) and `down` (called at once when the connection is
lost, and when it detaches). The caches that depend on notifications suspend in `down` (serve
nothing while changes may be missed) and resume in `up` (start empty). The connection is opened
with the first subscription and closed with the last; after a loss it connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from sursis.infra.db.listen_target import (
    ListenNeedsSession,
    PollingFallback,
    connect_for_listening,
    retry_after,
)

Callback = Callable[[Any, int, str, str], None]
"""An asyncpg notification callback: `(connection, pid, channel, payload)`."""

_FAILURES = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ListenNeedsSession)


def _nothing() -> None:
    return None


@dataclass(eq=False)
class Subscription:
    """The channels one user listens to, and what it does when they are heard or may be missed."""

    channels: Mapping[str, Callback]
    up: Callable[[], None] = _nothing
    down: Callable[[], None] = _nothing
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while its channels are listened to."""


class ListenConnection:
    """One asyncpg connection to `url` (the LISTEN URL: `listen_target.listen_url`) for every
    subscription of this process."""

    def __init__(self, url: str, *, retry_seconds: float = 1.0) -> None:
        self._url = url
        self._retry = retry_seconds
        self._fallback = PollingFallback("listen", url)
        self._subscriptions: list[Subscription] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return self._url

    def attach(self, subscription: Subscription) -> None:
        """Listen to `subscription`'s channels from now on (connecting when nothing listened yet)."""
        if subscription not in self._subscriptions:
            self._subscriptions.append(subscription)
            self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="pg-listen")

    async def detach(self, subscription: Subscription) -> None:
        """Stop listening to `subscription`'s channels; the last one closes the connection."""
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)
            self._changed.set()
        self._down(subscription)
        if not self._subscriptions and self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            wait = self._retry
            try:
                await self._serve()
            except Exception as exc:  # whatever it was, listening is only an optimisation: retry
                self._fallback.lost(exc)
                wait = retry_after(exc, self._retry)
            await asyncio.sleep(wait)

    async def _serve(self) -> None:
        connection = await connect_for_listening(self._url)
        lost = asyncio.Event()
        heard: list[Subscription] = []
        try:
            connection.add_termination_listener(lambda _connection: self._lost(lost, heard))
            while not lost.is_set():
                self._changed.clear()
                await self._follow(connection, heard, lost)
                if not lost.is_set():
                    self._fallback.listening()
                    await self._until(lost)
        finally:
            self._lost(lost, heard)
            with contextlib.suppress(*_FAILURES):
                await connection.close(timeout=2)

    async def _follow(self, connection: Any, heard: list[Subscription], lost: asyncio.Event) -> None:
        """Listen to the channels of the subscriptions attached since, drop the detached ones."""
        for gone in [s for s in heard if s not in self._subscriptions]:
            heard.remove(gone)
            for channel, callback in gone.channels.items():
                await connection.remove_listener(channel, callback)
        for new in [s for s in self._subscriptions if s not in heard]:
            heard.append(new)  # before its channels: detached meanwhile, the next pass drops them
            for channel, callback in new.channels.items():
                await connection.add_listener(channel, callback)
            if lost.is_set():
                return
            if new in self._subscriptions:
                new.listening.set()
                new.up()

    async def _until(self, lost: asyncio.Event) -> None:
        """Until the connection is lost or a subscription comes or goes."""
        waits = {asyncio.ensure_future(lost.wait()), asyncio.ensure_future(self._changed.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    def _lost(self, lost: asyncio.Event, heard: list[Subscription]) -> None:
        """The connection is gone (or going): every subscription may miss changes from now on."""
        lost.set()
        for subscription in self._subscriptions:
            self._down(subscription)
        heard.clear()

    @staticmethod
    def _down(subscription: Subscription) -> None:
        subscription.listening.clear()
        subscription.down()
