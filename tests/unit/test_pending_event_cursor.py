"""The cursor of the workspace-wide pending stream: late commits across conversations, without I/O."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from sursis.domain.events.events import PendingEventCursor
from sursis.domain.records.event_records import StoredEvent

AT = datetime(2026, 1, 1, tzinfo=UTC)


def events(*ids: int) -> list[StoredEvent]:
    """Visible events with these ids, as the repository returns them (in id order)."""
    return [
        StoredEvent(
            id=i,
            conversation_id=uuid.uuid4(),
            workspace="default",
            type="pending.created",
            data={},
            created_at=AT,
        )
        for i in sorted(ids)
    ]


def ids(delivered: Sequence[StoredEvent]) -> list[int]:
    return [e.id for e in delivered]


def test_an_event_that_commits_after_a_higher_id_is_still_delivered_once() -> None:
    cursor = PendingEventCursor(floor=0, settle=10)
    assert ids(cursor.take(events(2), now=0)) == [2]
    # Id 1 was taken first but its transaction committed later.
    assert ids(cursor.take(events(1, 2), now=1)) == [1]
    assert ids(cursor.take(events(1, 2), now=2)) == []
    assert ids(cursor.take(events(1, 2, 3), now=3)) == [3]


def test_the_floor_rises_to_what_was_visible_settle_seconds_earlier() -> None:
    cursor = PendingEventCursor(floor=0, settle=10)
    cursor.take(events(5), now=0)
    cursor.take(events(5, 7), now=5)
    assert cursor.floor == 0
    assert cursor.read_limit(100) == 102

    cursor.take(events(5, 7), now=10)
    assert cursor.floor == 5
    assert cursor.read_limit(100) == 101  # only 7 is remembered above the floor

    cursor.take(events(7), now=15)
    assert cursor.floor == 7
    assert cursor.read_limit(100) == 100


def test_ids_known_at_the_start_are_not_delivered() -> None:
    cursor = PendingEventCursor(floor=3, settle=10, seen=[2, 4, 5])
    assert cursor.read_limit(10) == 12
    assert ids(cursor.take(events(4, 5, 6), now=0)) == [6]


def test_with_no_settle_window_the_floor_follows_the_highest_id() -> None:
    cursor = PendingEventCursor(floor=0, settle=0)
    assert ids(cursor.take(events(1, 2), now=0)) == [1, 2]
    assert cursor.floor == 2
    assert cursor.read_limit(50) == 50


def test_a_commit_later_than_the_settle_window_is_the_documented_limit() -> None:
    cursor = PendingEventCursor(floor=0, settle=10)
    cursor.take(events(2), now=0)
    cursor.take(events(2), now=10)
    # The repository reads after the floor (2), so id 1 committing now is no longer read.
    assert cursor.floor == 2
    assert ids(cursor.take([e for e in events(1, 2) if e.id > cursor.floor], now=11)) == []
