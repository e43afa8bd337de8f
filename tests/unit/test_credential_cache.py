"""The credential cache's rules, on a clock the test moves."""

from __future__ import annotations

from sursis.domain.access import Role
from sursis.domain.credential_cache import CredentialCache
from sursis.domain.records import Principal

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
    assert credentials.get("hash-a") is ALICE
    clock.now += 0.1
    assert credentials.get("hash-a") is None
    assert credentials.get("hash-a") is None  # and it is gone


def test_forgetting_a_key_drops_its_entries_and_no_other() -> None:
    credentials, _ = cache()
    credentials.put("hash-a", ALICE, credentials.ticket())
    credentials.put("hash-b", BOB, credentials.ticket())
    credentials.forget({ALICE.id})
    assert credentials.get("hash-a") is None
    assert credentials.get("hash-b") is BOB


def test_an_answer_read_before_a_change_was_applied_is_not_kept() -> None:
    credentials, _ = cache()
    ticket = credentials.ticket()  # a lookup starts...
    credentials.forget({ALICE.id})  # ...the key is revoked and the change heard...
    credentials.put("hash-a", ALICE, ticket)  # ...and the lookup's older answer arrives
    assert credentials.get("hash-a") is None


def test_while_suspended_nothing_is_served_or_kept_and_resuming_starts_empty() -> None:
    credentials, _ = cache()
    credentials.put("hash-a", ALICE, credentials.ticket())
    ticket = credentials.ticket()
    credentials.suspend()
    assert credentials.get("hash-a") is None
    credentials.put("hash-b", BOB, credentials.ticket())
    credentials.resume()
    assert credentials.get("hash-a") is None
    assert credentials.get("hash-b") is None
    credentials.put("hash-a", ALICE, ticket)  # read before the connection was lost
    assert credentials.get("hash-a") is None


def test_a_cache_that_is_not_live_yet_serves_nothing() -> None:
    credentials, _ = cache(live=False)
    credentials.put("hash-a", ALICE, credentials.ticket())
    assert credentials.get("hash-a") is None
    credentials.resume()
    credentials.put("hash-a", ALICE, credentials.ticket())
    assert credentials.get("hash-a") is ALICE


def test_the_oldest_entry_makes_room() -> None:
    credentials, _ = cache(max_entries=2)
    for key_hash, principal in [("hash-a", ALICE), ("hash-b", BOB), ("hash-c", ALICE)]:
        credentials.put(key_hash, principal, credentials.ticket())
    assert credentials.get("hash-a") is None
    assert credentials.get("hash-b") is BOB
    assert credentials.get("hash-c") is ALICE
