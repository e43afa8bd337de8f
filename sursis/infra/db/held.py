"""Writes a PostgreSQL transaction holds back to its last statement.

A state change writes several rows whose ids the caller already knows (a run, a pending call, the
messages of a segment) and updates whose outcome nobody reads (the conversation freed when its run
ends): nothing needs them before the commit, so on PostgreSQL their repositories hold them here, in
the session, and the unit of work writes them together with the audit rows and the events in one
statement (`event_repositories`), one round trip instead of one per table. A repository of a table
that may be held writes everything held (`flush_held`) before it reads or changes its table, so a
transaction still reads its own writes, and rows are written in the order they were first held
(a pending call after its run). SQLite writes at once: it has no round trips to save.

Rows travel as one JSON document per table, read back by `jsonb_to_recordset` with the table's
column types, inserted in the order held.

A conditional state change that is the transaction's first statement (a run's end or suspension,
conditional on its lease) may be held too, as the statement's guard (`hold_guard`): the one row it
updates is the condition of every other write of the statement, so a guard that matches nothing
writes nothing, and the commit raises `GuardFailed` for the caller to handle as it handled the
update's answer. A transaction whose only statement is that one is sent without `BEGIN` and
`COMMIT` (`uow.SqlUnitOfWork.commit`).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from sursis.domain.ports import HeldConditionFailed
from sursis.infra.db.unit_connection import BEGUN_KEY, UnitConnection

HELD_KEY = "sursis.held"
GUARD_KEY = "sursis.guard"
GUARD_FAILED_KEY = "sursis.guard_failed"
READ_AHEAD_KEY = "sursis.log_read_ahead"
_DIALECT = postgresql.dialect()  # type: ignore[no-untyped-call]


def holds(session: UnitConnection) -> bool:
    """Whether this session's inserts may be held (PostgreSQL)."""
    return session.get_bind().dialect.name == "postgresql"


@dataclass(frozen=True)
class HeldUpdate:
    """An update whose outcome nobody reads, held like an insert: `sql` is one `UPDATE` that reads
    its rows (and their `ord`) from `jsonb_to_recordset(CAST(:{param} AS JSONB))`."""

    name: str
    sql: str


Held = dict[sa.Table | HeldUpdate, list[dict[str, Any]]]


def hold(session: UnitConnection, target: sa.Table | HeldUpdate, rows: Sequence[dict[str, Any]]) -> None:
    """Hold `rows` for `target` (a table's inserts, or an update) until the commit."""
    held: Held = session.info.setdefault(HELD_KEY, {})
    held.setdefault(target, []).extend(rows)


def held(session: UnitConnection) -> bool:
    """Whether the transaction holds a write (or a guard) it has not sent yet."""
    return bool(session.info.get(HELD_KEY)) or GUARD_KEY in session.info


def take_held(session: UnitConnection) -> Held:
    held: Held = session.info.pop(HELD_KEY, {})
    return held


def begun(session: UnitConnection) -> bool:
    """Whether the unit of work's transaction has sent anything (taken a connection) yet."""
    return bool(session.info.get(BEGUN_KEY))


class GuardFailed(HeldConditionFailed):
    """The held state change matched no row (`hold_guard`): the transaction wrote nothing. Once
    raised, the transaction writes nothing more: what it held is dropped, and its commit raises
    again (`failed_guard`), so a caller that met it in a read cannot commit the rest unguarded."""

    code = "guard_failed"


@dataclass(frozen=True)
class Guard:
    """A conditional `UPDATE` held to the commit: `sql` is the update with `RETURNING` (its bound
    parameters in `params`); the statement that writes what is held runs it first, as its CTE
    `guard`, and writes the rest only if it updated a row."""

    sql: str
    params: dict[str, Any]
    types: tuple[tuple[str, Any], ...]


def may_guard(session: UnitConnection) -> bool:
    """Whether a conditional update may be held as this transaction's guard: on PostgreSQL, as its
    first statement (nothing sent, nothing held before it)."""
    return (
        holds(session)
        and not begun(session)
        and GUARD_KEY not in session.info
        and HELD_KEY not in session.info
    )


def hold_guard(session: UnitConnection, guard: Guard) -> None:
    session.info[GUARD_KEY] = guard


def take_guard(session: UnitConnection) -> Guard | None:
    guard: Guard | None = session.info.pop(GUARD_KEY, None)
    return guard


def failed_guard(session: UnitConnection) -> bool:
    """Whether the transaction's held guard matched no row (`flush_held`): it may write nothing."""
    return bool(session.info.get(GUARD_FAILED_KEY))


def guard_statement(guard: Guard, cte: bool) -> Any:
    """The guard as a statement of its own, or (`cte`) as the text of the CTE `guard`."""
    if cte:
        return f"guard AS ({guard.sql})"
    return sa.text(guard.sql).bindparams(*(sa.bindparam(n, type_=t) for n, t in guard.types))


async def flush_held(session: UnitConnection) -> None:
    """Write everything held now, in the order first held, before the transaction reads or changes
    a table that may be held. A held guard runs first, as a statement of its own; one that matches
    no row raises `GuardFailed` (the caller's transaction rolls back)."""
    if failed_guard(session):
        raise GuardFailed()
    guard = take_guard(session)
    if guard is not None and not (await session.execute(guard_statement(guard, False), guard.params)).first():
        session.info[GUARD_FAILED_KEY] = True
        take_held(session)
        raise GuardFailed()
    for target, rows in take_held(session).items():
        if isinstance(target, HeldUpdate):
            statement = sa.text(target.sql.format(param="rows")).bindparams(
                sa.bindparam("rows", type_=sa.Text())
            )
            await session.execute(
                statement, {"rows": encode_rows([dict(r, ord=i) for i, r in enumerate(rows)])}
            )
        else:
            await session.execute(target.insert(), rows)


def _encode_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not stored in a held row")


encode_rows = json.JSONEncoder(separators=(",", ":"), default=_encode_default).encode
"""Rows as the JSON document `jsonb_to_recordset` reads (datetimes in ISO 8601, UUIDs as text)."""


@functools.cache
def insert_cte(table: sa.Table, columns: tuple[str, ...], param: str) -> str:
    """`name AS (INSERT ...)`: the rows of the JSON array in `:param`, in their `ord` order."""
    types = ", ".join(f"{name} {_type_of(table.c[name])}" for name in columns)
    names = ", ".join(columns)
    picked = ", ".join(f"r.{name}" for name in columns)
    return (
        f"held_{table.name} AS (INSERT INTO {table.name} ({names}) SELECT {picked} "
        f"FROM jsonb_to_recordset(CAST(:{param} AS JSONB)) AS r(ord integer, {types}) ORDER BY r.ord)"
    )


def _type_of(column: sa.Column[Any]) -> str:
    impl = column.type.dialect_impl(_DIALECT)
    if isinstance(impl, sa.types.TypeDecorator):
        impl = impl.impl_instance
    return str(impl.compile(dialect=_DIALECT))


def held_params(
    target: sa.Table | HeldUpdate, rows: Sequence[dict[str, Any]], param: str
) -> tuple[str, dict[str, str]]:
    """The CTE writing `rows` (into a table, or by an update) and its parameter."""
    values = {param: encode_rows([dict(r, ord=i) for i, r in enumerate(rows)])}
    if isinstance(target, HeldUpdate):
        return f"{target.name} AS ({target.sql.format(param=param)})", values
    columns = tuple(column.name for column in target.c if column.name in rows[0])
    return insert_cte(target, columns, param), values


def read_ahead(
    session: UnitConnection, conversation_id: uuid.UUID, after_seq: int, rows: list[dict[str, Any]]
) -> None:
    """Keep a conversation's log rows after `after_seq`, read by another statement of the
    transaction (the claim's, on PostgreSQL), for the transaction's next read of that log."""
    session.info[READ_AHEAD_KEY] = (conversation_id, after_seq, rows)


def take_read_ahead(
    session: UnitConnection, conversation_id: uuid.UUID, after_seq: int
) -> list[dict[str, Any]] | None:
    """The log rows after `after_seq` already read in this transaction, or None (read them)."""
    kept = session.info.pop(READ_AHEAD_KEY, None)
    if kept is None or kept[0] != conversation_id or kept[1] > after_seq:
        return None
    return [row for row in kept[2] if row["seq"] > after_seq]
