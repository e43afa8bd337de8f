"""Verified API keys kept for a few seconds, so a burst of requests with one key costs one lookup.

An entry is found by the key's SHA-256 hash (never the secret) and holds the key's principal until
`ttl` seconds after it was read, or until the key's own expiry if that comes first. Changes reach
it as `NotifiedCache` describes: a revoked key works at most until the notification arrives, and
never longer than `ttl`.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from datetime import datetime

from sursis.domain.notified_cache import NotifiedCache
from sursis.domain.records import Principal


@dataclass(frozen=True, slots=True)
class _Entry:
    principal: Principal
    expires_at: datetime | None
    """The key's own expiry: a cached key stops working at it too."""


class CredentialCache(NotifiedCache[str, _Entry]):
    """Principals of recently verified keys, by key hash, until `ttl` seconds after their lookup."""

    def get(self, key_hash: str, now: datetime) -> Principal | None:
        """The principal of a key verified less than `ttl` ago and not expired at `now`; None if
        not cached or not live."""
        entry = self._lookup(key_hash)
        if entry is None:
            return None
        if entry.expires_at is not None and entry.expires_at <= now:
            del self._entries[key_hash]
            return None
        return entry.principal

    def put(
        self, key_hash: str, principal: Principal, ticket: int, *, expires_at: datetime | None = None
    ) -> None:
        """Keep a verified key's principal (and its expiry), unless a change was applied since
        `ticket` was taken."""
        self._store(key_hash, _Entry(principal, expires_at), ticket)

    def forget(self, names: Set[str]) -> None:
        """Drop the entries of these keys, by key id (revoked or otherwise changed)."""
        self._drop(lambda _hash, entry: entry.principal.id in names)
