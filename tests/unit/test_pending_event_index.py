"""The workspace stream's partial indexes name exactly the event types the stream reads: a query
for more types than an index covers cannot use it."""

from __future__ import annotations

import re

from sursis.domain.events.events import PENDING_EVENT_TYPES
from sursis.infra.db.tables import PENDING_EVENTS


def test_the_partial_index_covers_the_stream_types() -> None:
    assert sorted(re.findall(r"'([^']+)'", PENDING_EVENTS.text)) == sorted(PENDING_EVENT_TYPES)
