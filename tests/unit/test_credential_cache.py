"""The credential cache's rules, on a clock the test moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sursis.domain.access import Role
from sursis.domain.identity.credential_cache import CredentialCache
from sursis.domain.records import Principal

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
ALICE = Principal(id="key-alice", role=Role.OPERATOR, workspace="default")
BOB = Principal(id="key-bob", role=Role.USER, workspace="default")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def cache(*, live: bool = True, max_entries: int = 100) -> tuple[CredentialCache, Clock]:
    clock = Clock()
    return CredentialCache(5.0, live=live, clock=clock, max_entries=max_entries), clock


def test_an_entry_is_served_until_its_deadline_and_not_at_it() -> None:
    credentials, clock = cache()
    credentials.put("hash-a", ALICE, credentials.ticket())
    clock.now += 4.9
    assert credentials.get("hash-a", NOW) is ALICE
    clock.now += 0.1
    assert credentials.get("hash-a", NOW) is None
    assert credentials.get("hash-a", NOW) is None  # and it is gone


def test_forgetting_a_key_drops_its_entries_and_no_other() -> None:
    credentials, _ = cache()
    credentials.put("hash-a", ALICE, credentials.ticket())
    credentials.put("hash-b", BOB, credentials.ticket())
    credentials.forget({ALICE.id})
    assert credentials.get("hash-a", NOW) is None
    assert credentials.get("hash-b", NOW) is BOB


def test_an_answer_read_before_a_change_was_applied_is_not_kept() -> None:
    credentials, _ = cache()
    ticket = credentials.ticket()  # a lookup starts...
    credentials.forget({ALICE.id})  # ...the key is revoked and the change heard...
    credentials.put("hash-a", ALICE, ticket)  # ...and the lookup's older answer arrives
    assert credentials.get("hash-a", NOW) is None


def test_while_suspended_nothing_is_served_or_kept_and_resuming_starts_empty() -> None:
    credentials, _ = cache()
    credentials.put("hash-a", ALICE, credentials.ticket())
    ticket = credentials.ticket()
    credentials.suspend()
    assert credentials.get("hash-a", NOW) is None
    credentials.put("hash-b", BOB, credentials.ticket())
    credentials.resume()
    assert credentials.get("hash-a", NOW) is None
    assert credentials.get("hash-b", NOW) is None
    credentials.put("hash-a", ALICE, ticket)  # read before the connection was lost
    assert credentials.get("hash-a", NOW) is None


def test_a_cache_that_is_not_live_yet_serves_nothing() -> None:
    credentials, _ = cache(live=False)
    credentials.put("hash-a", ALICE, credentials.ticket())
    assert credentials.get("hash-a", NOW) is None
    credentials.resume()
    credentials.put("hash-a", ALICE, credentials.ticket())
    assert credentials.get("hash-a", NOW) is ALICE


def test_the_oldest_entry_makes_room() -> None:
    credentials, _ = cache(max_entries=2)
    for key_hash, principal in [("hash-a", ALICE), ("hash-b", BOB), ("hash-c", ALICE)]:
        credentials.put(key_hash, principal, credentials.ticket())
    assert credentials.get("hash-a", NOW) is None
    assert credentials.get("hash-b", NOW) is BOB
    assert credentials.get("hash-c", NOW) is ALICE


def test_a_cached_key_is_refused_at_its_own_expiry() -> None:
    credentials, _ = cache()
    expires_at = NOW + timedelta(seconds=1)
    credentials.put("hash-a", ALICE, credentials.ticket(), expires_at=expires_at)
    assert credentials.get("hash-a", expires_at - timedelta(microseconds=1)) is ALICE
    assert credentials.get("hash-a", expires_at) is None
