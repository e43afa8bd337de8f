"""Keyset pages: a listing reads `limit + 1` rows; the extra row only tells that more follow."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class Page(Generic[T, C]):
    """One page of a listing, and where the next one starts (None on the last page): the keyset
    of the page's last item, which the next read continues after."""

    items: list[T]
    next_cursor: C | None

    @classmethod
    def of(cls, rows: Sequence[T], limit: int, cursor: Callable[[T], C]) -> Page[T, C]:
        """The page of `rows`, read with `limit + 1`."""
        items = list(rows[:limit])
        more = len(rows) > limit and bool(items)
        return cls(items, cursor(items[-1]) if more else None)
