"""Verified API keys kept for a few seconds, so a burst of requests with one key costs one lookup.

An entry is found by the key's SHA-256 hash (never the secret) and holds the key's principal until
`ttl` seconds after it was read, or until the key's own expiry if that comes first. It is dropped
at once when the key changes in this process (`forget`), when another process's change is
notified (PostgreSQL `NOTIFY`), and the whole cache is dropped when the notifications may have
been missed: while the listening connection is down the cache serves nothing (`suspend`), and it
starts empty when the connection is back (`resume`). A revoked key therefore works at most until
the notification arrives, and never longer than `ttl`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from dataclasses import dataclass
from datetime import datetime

from sursis.domain.records import Principal


@dataclass(frozen=True, slots=True)
class _Entry:
    principal: Principal
    until: float
    expires_at: datetime | None
    """The key's own expiry: a cached key stops working at it too."""


class CredentialCache:
    """Principals of recently verified keys, by key hash, until `ttl` seconds after their lookup.

    `live` says whether changes made by other processes reach this one (no other process can
    change a key of a SQLite database the API serves: live from the start; on PostgreSQL, once
    the listening connection is up). A lookup takes a `ticket` before reading the database and
    stores its answer with it: a change that was applied meanwhile voids the ticket, so an answer
    read before a revocation can never be stored after the revocation was applied.
    """

    def __init__(
        self,
        ttl_seconds: float,
        *,
        live: bool,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 10_000,
    ) -> None:
        self._ttl = ttl_seconds
        self._live = live
        self._clock = clock
        self._max_entries = max_entries
        self._entries: dict[str, _Entry] = {}
        self._generation = 0

    @property
    def live(self) -> bool:
        return self._live

    def get(self, key_hash: str, now: datetime) -> Principal | None:
        """The principal of a key verified less than `ttl` ago and not expired at `now`; None if
        not cached or not live."""
        if not self._live:
            return None
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        if entry.until <= self._clock() or (entry.expires_at is not None and entry.expires_at <= now):
            del self._entries[key_hash]
            return None
        return entry.principal

    def ticket(self) -> int:
        """Taken before a lookup reads the database, handed back to `put` with its answer."""
        return self._generation

    def put(
        self, key_hash: str, principal: Principal, ticket: int, *, expires_at: datetime | None = None
    ) -> None:
        """Keep a verified key's principal (and its expiry), unless a change was applied since
        `ticket` was taken."""
        if not self._live or ticket != self._generation:
            return
        self._entries.pop(key_hash, None)
        while len(self._entries) >= self._max_entries:
            del self._entries[next(iter(self._entries))]
        self._entries[key_hash] = _Entry(principal, self._clock() + self._ttl, expires_at)

    def forget(self, key_ids: Set[str]) -> None:
        """Drop the entries of these keys (revoked or otherwise changed)."""
        self._generation += 1
        for key_hash in [h for h, e in self._entries.items() if e.principal.id in key_ids]:
            del self._entries[key_hash]

    def suspend(self) -> None:
        """Changes may be missed from now on (the listening connection is down): serve nothing."""
        self._live = False
        self._clear()

    def resume(self) -> None:
        """Changes are heard again: start over from an empty cache (some may have been missed)."""
        self._clear()
        self._live = True

    def _clear(self) -> None:
        self._generation += 1
        self._entries.clear()
