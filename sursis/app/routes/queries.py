"""Query parameters the v1 routes share: long-poll waits, page cursors, timestamps, refused characters."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated

from litestar.params import QueryParameter

from sursis.app.schemas import CURSOR_PATTERN, MAX_CURSOR_CHARS, as_utc
from sursis.domain.errors import ValidationFailed

Wait = Annotated[float, QueryParameter(ge=0, le=3600, description="Long-poll up to this many seconds")]
Cursor = Annotated[
    str | None,
    QueryParameter(
        pattern=CURSOR_PATTERN,
        max_length=MAX_CURSOR_CHARS,
        description="`next_cursor` of the previous page",
    ),
]


def query_error(name: str, message: str, msg: str) -> ValidationFailed:
    return ValidationFailed(message, extra={"errors": [{"loc": ["query", name], "msg": msg}]})


# RFC 3339 `date-time`: a date, a time and a time zone; not a bare date, a number or an epoch.
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})$"


def parse_timestamp(name: str, value: str) -> datetime:
    """A query timestamp already shaped by `TIMESTAMP_PATTERN`, as an aware UTC time (422 if the
    date or time does not exist, like February 30th)."""
    try:
        return as_utc(datetime.fromisoformat(value))
    except ValueError as exc:
        raise query_error(name, f"{name} is not a valid time", "not a valid RFC 3339 date-time") from exc


def refuse_nul(name: str, values: Sequence[str | None]) -> None:
    """A NUL character in a query string is refused like one in a body (PostgreSQL cannot compare it)."""
    if any("\x00" in value for value in values if value is not None):
        raise query_error(name, f"{name} must not contain a NUL character", "contains a NUL character")
