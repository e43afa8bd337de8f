"""What every SQL repository shares: its session, its cipher, the dialect's insert, the affected
row count; and, over tables whose writes may be held to the commit, the statements that write them first."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from sursis.domain.encryption import Cipher
from sursis.infra.db.driver_statements import AVAILABLE, count_rows, fetch_rows
from sursis.infra.db.held import flush_held
from sursis.infra.db.unit_connection import UnitConnection
from sursis.infra.encryption import PLAINTEXT


class SqlRepository:
    def __init__(self, session: UnitConnection) -> None:
        self._session = session
        self._cipher = session_cipher(session)

    @property
    def _postgres(self) -> bool:
        return self._session.get_bind().dialect.name == "postgresql"

    @property
    def _on_driver(self) -> bool:
        return AVAILABLE and self._postgres

    def _insert(self, table: sa.Table) -> Any:
        return dialect_insert(table, postgres=self._postgres)

    async def _fetch(self, statement: Any, params: dict[str, Any]) -> list[Any]:
        """The rows of a statement built once that every turn sends: on PostgreSQL executed on the
        driver (`driver_statements`), on SQLite by SQLAlchemy. (`_count`: the rows it changed.)"""
        if self._on_driver:
            return await fetch_rows(self._session, statement, params)
        return list((await self._session.execute(statement, params)).all())


class HeldSqlRepository(SqlRepository):
    """A repository over tables whose writes may be held to the commit (`held`): it writes what the
    transaction holds before each statement of its own."""

    async def _execute(self, statement: Any, params: Any = None) -> Any:
        await flush_held(self._session)
        return await self._session.execute(statement, params)

    async def _scalar(self, statement: Any, params: Any = None) -> Any:
        await flush_held(self._session)
        return await self._session.scalar(statement, params)

    async def _rows(self, statement: Any, params: dict[str, Any]) -> list[Any]:
        await flush_held(self._session)
        return await self._fetch(statement, params)

    async def _count(self, statement: Any, params: dict[str, Any]) -> int:
        await flush_held(self._session)
        if self._on_driver:
            return await count_rows(self._session, statement, params)
        return rowcount(await self._session.execute(statement, params))


def session_cipher(session: UnitConnection) -> Cipher:
    """The cipher a session's unit of work seals content with (`SqlUnitOfWorkFactory(cipher=)`)."""
    cipher: Cipher = session.info.get("cipher", PLAINTEXT)
    return cipher


def dialect_insert(table: sa.Table, *, postgres: bool) -> Any:
    """The dialect's `INSERT` (for `ON CONFLICT`), for statements built once per dialect."""
    return postgresql.insert(table) if postgres else sqlite.insert(table)


def rowcount(result: Any) -> int:
    return int(result.rowcount)
