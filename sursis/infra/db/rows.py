"""A record's row: its fields are the columns of the same names, so neither is listed twice."""

from __future__ import annotations

import dataclasses
from enum import Enum
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def row_values(record: Any, table: sa.Table, *, omit: tuple[str, ...] = (), **stored: Any) -> dict[str, Any]:
    """Insert values for `record`: each dataclass field that has a column of its name (an enum
    as its value), leaving out `omit` (columns the database fills); `stored` gives the fields
    kept in another form (a JSON document, a nested record) and columns the record lacks."""
    values: dict[str, Any] = {}
    for name in _stored_fields(record.__class__, table, omit):
        value = getattr(record, name)
        values[name] = value.value if isinstance(value, Enum) else value
    values.update(stored)
    return values


def record_from_row(cls: type[T], row: Any, **stored: Any) -> T:
    """The record of class `cls` a row holds: each field from the column of its name; `stored`
    gives the fields kept in another form (a JSON document, an enum's value, a nested record)."""
    mapping = row._mapping
    values = {name: mapping[name] for name in _init_fields(cls) if name in mapping}
    values.update(stored)
    return cls(**values)


# A record class's fields, and which of them a table has columns for, do not change while the
# process runs: worked out once per class (and table), not on every row.


@lru_cache(maxsize=256)
def _stored_fields(cls: type[Any], table: sa.Table, omit: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.name in table.c and f.name not in omit)


@lru_cache(maxsize=256)
def _init_fields(cls: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)
