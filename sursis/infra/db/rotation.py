"""Re-encryption under the active key, in bounded batches, while the service runs; and the count
of values each key still protects (`sursis encryption rotate` / `status`).

Each batch is one short transaction over one table: on PostgreSQL its rows are taken with
`FOR UPDATE SKIP LOCKED` (a row a turn is writing is left for the next pass, never waited for);
on SQLite the writer lock serializes it with the service's writes. A value is rewritten only if
it is not under the active key already, so a stopped rotation resumes where it was, and values
written before encryption was turned on are encrypted on the way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sursis.domain.encryption import Cipher
from sursis.infra.db.sealing import SEALED_TABLES, SealedTable
from sursis.infra.encryption.aesgcm import SEALED

PLAINTEXT_KEY = "(plaintext)"
UNKNOWN_KEY = "(not in keyring)"


@dataclass(frozen=True)
class ColumnKeys:
    """How many values of one column each key protects (and how many are plaintext)."""

    table: str
    column: str
    by_key: dict[str, int]


def _stored_text(sealed: SealedTable, column: str) -> Any:
    c = sealed.table.c[column]
    return c if sealed.columns[column] == "text" else sa.cast(c, sa.Text)


def _prefix(sealed: SealedTable, column: str, key_id: str | None) -> str:
    quote = "" if sealed.columns[column] == "text" else '"'
    return f"{quote}{SEALED}{key_id}:%" if key_id else f"{quote}{SEALED}%"


def _not_under(sealed: SealedTable, column: str, key_id: str) -> Any:
    c = sealed.table.c[column]
    return sa.and_(c.is_not(None), _stored_text(sealed, column).not_like(_prefix(sealed, column, key_id)))


def _stale(sealed: SealedTable, key_id: str) -> Any:
    return sa.or_(*(_not_under(sealed, column, key_id) for column in sealed.columns))


async def key_counts(engine: AsyncEngine, cipher: Cipher) -> list[ColumnKeys]:
    """Per encrypted column: values under each key of the keyring, under other keys, in plaintext."""
    found: list[ColumnKeys] = []
    async with engine.connect() as conn:
        for sealed in SEALED_TABLES:
            for column in sealed.columns:
                text = _stored_text(sealed, column)
                counts = [
                    sa.func.count(sealed.table.c[column]),
                    sa.func.count(sa.case((text.like(_prefix(sealed, column, None)), 1))),
                ]
                counts += [
                    sa.func.count(sa.case((text.like(_prefix(sealed, column, k)), 1))) for k in cipher.key_ids
                ]
                total, encrypted, *per_key = (await conn.execute(sa.select(*counts))).one()
                by_key = dict(zip(cipher.key_ids, map(int, per_key), strict=True))
                by_key[UNKNOWN_KEY] = int(encrypted) - sum(by_key.values())
                by_key[PLAINTEXT_KEY] = int(total) - int(encrypted)
                found.append(ColumnKeys(sealed.table.name, column, by_key))
    return found


async def rows_to_rotate(engine: AsyncEngine, key_id: str) -> int:
    """Rows that hold a value not under `key_id` (what `rotate` still has to rewrite)."""
    total = 0
    async with engine.connect() as conn:
        for sealed in SEALED_TABLES:
            total += int(await conn.scalar(sa.select(sa.func.count()).where(_stale(sealed, key_id))) or 0)
    return total


async def _rotate_batch(
    engine: AsyncEngine, cipher: Cipher, sealed: SealedTable, after: tuple[Any, ...] | None, batch_size: int
) -> tuple[int, tuple[Any, ...] | None]:
    """Rewrite one batch of `sealed`'s stale rows past `after`; returns the rows rewritten and the
    last key seen (`None`: the table is done)."""
    key_id = cipher.active_key_id
    assert key_id is not None
    key = sealed.key
    query = sa.select(sealed.table).where(_stale(sealed, key_id))
    if after is not None:
        query = query.where(sa.tuple_(*key) > sa.tuple_(*after))
    query = query.order_by(*key).limit(batch_size)
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        rows = (await conn.execute(query)).all()
        if not rows:
            return 0, None
        updates = []
        for row in rows:
            values = row._mapping
            opened = sealed.open(cipher, row)
            params = {f"k_{c.name}": values[c.name] for c in key}
            for column in sealed.columns:
                params[f"v_{column}"] = sealed.seal_value(cipher, column, opened[column], opened)
            updates.append(params)
        statement = (
            sealed.table.update()
            .where(*(c == sa.bindparam(f"k_{c.name}") for c in key))
            .values({column: sa.bindparam(f"v_{column}") for column in sealed.columns})
        )
        await conn.execute(statement, updates)
    last = rows[-1]._mapping
    return len(rows), tuple(last[c.name] for c in key)


async def rotate(
    engine: AsyncEngine,
    cipher: Cipher,
    *,
    batch_size: int = 500,
    on_batch: Callable[[int], None] = lambda _: None,
    max_passes: int = 10,
    pause_seconds: float = 0.0,
) -> int:
    """Re-encrypt every value not under the active key; `on_batch` is told each batch's row count.

    Passes repeat while rows remain (rows skipped because a turn held them, rows written by a
    process that still had the old key), up to `max_passes`; `pause_seconds` between batches
    leaves the database to the service's turns. Returns the rows rewritten."""
    key_id = cipher.active_key_id
    if key_id is None:
        raise ValueError("encryption is off: set SURSIS_ENCRYPTION_KEYS (the new key first) to rotate")
    rewritten = 0
    for _ in range(max_passes):
        for sealed in SEALED_TABLES:
            after: tuple[Any, ...] | None = None
            while True:
                count, after = await _rotate_batch(engine, cipher, sealed, after, batch_size)
                if after is None:
                    break
                rewritten += count
                on_batch(count)
                if pause_seconds:
                    await asyncio.sleep(pause_seconds)
        if await rows_to_rotate(engine, key_id) == 0:
            break
    return rewritten


async def compact(engine: AsyncEngine) -> list[str]:
    """Rewrite the files of every table with encrypted columns, so the bytes of values a rotation
    replaced are gone from them: `VACUUM FULL` per table on PostgreSQL (an exclusive lock on the
    table while it is rewritten: run it in a quiet hour), `VACUUM` of the whole file on SQLite.
    The write-ahead log and backups are not touched (see docs/runbooks/encryption.md)."""
    if engine.dialect.name != "postgresql":
        # The service's SQLite engine begins a transaction on connect; VACUUM runs outside one.
        plain = create_async_engine(engine.url, isolation_level="AUTOCOMMIT")
        try:
            async with plain.connect() as conn:
                await conn.exec_driver_sql("VACUUM")
        finally:
            await plain.dispose()
        return ["(the whole SQLite file)"]
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        names = []
        for sealed in SEALED_TABLES:
            await conn.exec_driver_sql(f'VACUUM FULL "{sealed.table.name}"')
            names.append(sealed.table.name)
        return names
