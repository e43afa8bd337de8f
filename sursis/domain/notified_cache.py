"""A few seconds of memory for rows that change rarely, dropped when a change is heard of.

An entry lives until `ttl` seconds after it was read. A change made in this process drops the
entries it touches at once (`forget`); on PostgreSQL a change made by another process arrives by
`NOTIFY` and does the same. While notifications may be missed (the listening connection is down)
the cache serves nothing (`suspend`), and it starts empty when the connection is back (`resume`).
A lookup takes a `ticket` before reading the database and stores its answer with it: a change
applied meanwhile voids the ticket, so an answer read before a change is never kept after it.
A changed row is therefore served at most until its notification arrives, never longer than `ttl`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from typing import Generic, Protocol, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Invalidations(Protocol):
    """What hears of changes made by any process: `forget` the named ones, `suspend` while
    changes may be missed, `resume` once they are heard again."""

    def forget(self, names: Set[str]) -> None: ...
    def suspend(self) -> None: ...
    def resume(self) -> None: ...


class NotifiedCache(Generic[K, V]):
    """Values by key until `ttl` seconds after their lookup, while `live`.

    `live` says whether changes made by other processes reach this one: from the start when no
    other process can make them (SQLite), on PostgreSQL once the listening connection is up.
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
        self._entries: dict[K, tuple[V, float]] = {}
        self._generation = 0

    @property
    def live(self) -> bool:
        return self._live

    def ticket(self) -> int:
        """Taken before a lookup reads the database, handed back with its answer."""
        return self._generation

    def _lookup(self, key: K) -> V | None:
        if not self._live:
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[key]
            return None
        return entry[0]

    def _store(self, key: K, value: V, ticket: int) -> None:
        if not self._live or ticket != self._generation:
            return
        self._entries.pop(key, None)
        while len(self._entries) >= self._max_entries:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (value, self._clock() + self._ttl)

    def _drop(self, changed: Callable[[K, V], bool]) -> None:
        """A change was applied: void the tickets out, drop the entries it touches."""
        self._generation += 1
        for key in [k for k, (v, _) in self._entries.items() if changed(k, v)]:
            del self._entries[key]

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
