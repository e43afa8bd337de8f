"""The parts of stored pydantic-ai messages, read as plain JSON (no pydantic-ai in the domain)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from sursis.domain.records import StoredMessage


def logged_parts(
    messages: Sequence[StoredMessage], kinds: tuple[str, ...]
) -> Iterator[tuple[StoredMessage, dict[str, Any]]]:
    """Each part of one of `kinds` (`tool-call`, `user-prompt`, `text`, …) with its message, in log
    order; a body that is not a JSON message is passed over."""
    for message in messages:
        try:
            body = json.loads(message.body)
        except ValueError:
            continue
        for part in body.get("parts", ()) if isinstance(body, dict) else ():
            if isinstance(part, dict) and part.get("part_kind") in kinds:
                yield message, part
