"""Re-encryption under the active key, in bounded batches, while the service runs; and the count
of values each key still protects (`sursis encryption rotate` / `status`).

Each batch is one short transaction over one table: on PostgreSQL its rows are taken with
`FOR UPDATE SKIP LOCKED` (a row a turn is writing is left for the next pass, never waited for);
on SQLite the writer lock serializes it with the service's writes. A value is rewritten only if
it is not under the active key already, so a stopped rotation resumes where it was. Values in
plaintext are not touched by a rotation: `seal_existing` (`sursis encryption seal-existing`) seals
them, as an explicit and audited step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
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
class SealedValues:
    """What `seal_existing` sealed: the rows it rewrote and the values per `table.column`."""

    rows: int
    columns: dict[str, int]

    @property
    def values(self) -> int:
        return sum(self.columns.values())


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


def _under_another(sealed: SealedTable, column: str, key_id: str) -> Any:
    text = _stored_text(sealed, column)
    return sa.and_(text.like(_prefix(sealed, column, None)), text.not_like(_prefix(sealed, column, key_id)))


def _unsealed(sealed: SealedTable, column: str) -> Any:
    c = sealed.table.c[column]
    return sa.and_(c.is_not(None), _stored_text(sealed, column).not_like(_prefix(sealed, column, None)))


def _stale(sealed: SealedTable, key_id: str) -> Any:
    return sa.or_(*(_under_another(sealed, column, key_id) for column in sealed.columns))


def _plain(sealed: SealedTable) -> Any:
    return sa.or_(*(_unsealed(sealed, column) for column in sealed.columns))


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


async def keys_in_use(engine: AsyncEngine, key_ids: list[str]) -> list[str]:
    """The ids among `key_ids` some stored value is sealed under (each stops at its first value;
    a key no value is under costs a scan of the encrypted columns)."""
    used: list[str] = []
    async with engine.connect() as conn:
        for key_id in key_ids:
            for sealed in SEALED_TABLES:
                under = [_stored_text(sealed, c).like(_prefix(sealed, c, key_id)) for c in sealed.columns]
                if await conn.scalar(sa.select(sa.literal(1)).where(sa.or_(*under)).limit(1)):
                    used.append(key_id)
                    break
    return used


async def holds_sealed_values(engine: AsyncEngine) -> bool:
    """Whether any stored value is sealed, under any key."""
    async with engine.connect() as conn:
        for sealed in SEALED_TABLES:
            under = [_stored_text(sealed, c).like(_prefix(sealed, c, None)) for c in sealed.columns]
            if await conn.scalar(sa.select(sa.literal(1)).where(sa.or_(*under)).limit(1)):
                return True
    return False


async def rows_to_rotate(engine: AsyncEngine, key_id: str) -> int:
    """Rows that hold a value sealed under another key than `key_id` (what `rotate` still has to
    rewrite; values in plaintext are `seal-existing`'s, see `unsealed_rows`)."""
    return await _count(engine, lambda sealed: _stale(sealed, key_id))


async def unsealed_rows(engine: AsyncEngine) -> int:
    """Rows that hold a value in plaintext in an encrypted column."""
    return await _count(engine, _plain)


async def _count(engine: AsyncEngine, where: Callable[[SealedTable], Any]) -> int:
    total = 0
    async with engine.connect() as conn:
        for sealed in SEALED_TABLES:
            total += int(await conn.scalar(sa.select(sa.func.count()).where(where(sealed))) or 0)
    return total


Rewrite = Callable[[SealedTable, str, Any, Mapping[Any, Any]], Any]
"""A stored value's new stored form (the same object: left as it is)."""


async def _rewrite_batch(
    engine: AsyncEngine,
    sealed: SealedTable,
    where: Any,
    rewrite: Rewrite,
    after: tuple[Any, ...] | None,
    batch_size: int,
    written: dict[str, int],
) -> tuple[int, tuple[Any, ...] | None]:
    """Rewrite one batch of `sealed`'s rows matching `where` past `after`, each value through
    `rewrite`; counts the values changed per `table.column` in `written`. Returns the rows
    rewritten and the last key seen (`None`: the table is done)."""
    key = sealed.key
    query = sa.select(sealed.table).where(where)
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
            params = {f"k_{c.name}": values[c.name] for c in key}
            for column in sealed.columns:
                stored = values[column]
                params[f"v_{column}"] = new = rewrite(sealed, column, stored, values)
                if new is not stored:
                    name = f"{sealed.table.name}.{column}"
                    written[name] = written.get(name, 0) + 1
            updates.append(params)
        statement = (
            sealed.table.update()
            .where(*(c == sa.bindparam(f"k_{c.name}") for c in key))
            .values({column: sa.bindparam(f"v_{column}") for column in sealed.columns})
        )
        await conn.execute(statement, updates)
    last = rows[-1]._mapping
    return len(rows), tuple(last[c.name] for c in key)


async def _rewrite_all(
    engine: AsyncEngine,
    where: Callable[[SealedTable], Any],
    rewrite: Rewrite,
    *,
    batch_size: int,
    on_batch: Callable[[int], None],
    pause_seconds: float,
    written: dict[str, int],
) -> int:
    """One pass over every encrypted table; returns the rows rewritten."""
    rewritten = 0
    for sealed in SEALED_TABLES:
        after: tuple[Any, ...] | None = None
        while True:
            count, after = await _rewrite_batch(
                engine, sealed, where(sealed), rewrite, after, batch_size, written
            )
            if after is None:
                break
            rewritten += count
            on_batch(count)
            if pause_seconds:
                await asyncio.sleep(pause_seconds)
    return rewritten


async def rotate(
    engine: AsyncEngine,
    cipher: Cipher,
    *,
    batch_size: int = 500,
    on_batch: Callable[[int], None] = lambda _: None,
    max_passes: int = 10,
    pause_seconds: float = 0.0,
) -> int:
    """Re-encrypt every value sealed under another key than the active one; `on_batch` is told
    each batch's row count. A value in plaintext is left as it is: sealing it would make a value
    written around the service real (`seal_existing` is the deliberate way).

    Passes repeat while rows remain (rows skipped because a turn held them, rows written by a
    process that still had the old key), up to `max_passes`; `pause_seconds` between batches
    leaves the database to the service's turns. Returns the rows rewritten."""
    key_id = cipher.active_key_id
    if key_id is None:
        raise ValueError("encryption is off: set SURSIS_ENCRYPTION_KEYS (the new key first) to rotate")

    def reseal(sealed: SealedTable, column: str, stored: Any, values: Mapping[Any, Any]) -> Any:
        if not sealed.is_sealed(cipher, stored) or cipher.key_id_of(stored) == key_id:
            return stored
        return sealed.seal_value(cipher, column, sealed.open_value(cipher, column, stored, values), values)

    rewritten = 0
    for _ in range(max_passes):
        rewritten += await _rewrite_all(
            engine,
            lambda sealed: _stale(sealed, key_id),
            reseal,
            batch_size=batch_size,
            on_batch=on_batch,
            pause_seconds=pause_seconds,
            written={},
        )
        if await rows_to_rotate(engine, key_id) == 0:
            break
    return rewritten


async def seal_existing(
    engine: AsyncEngine,
    cipher: Cipher,
    *,
    batch_size: int = 500,
    on_batch: Callable[[int], None] = lambda _: None,
    pause_seconds: float = 0.0,
) -> SealedValues:
    """Seal, under the active key, every value of an encrypted column still in plaintext: the
    operator's deliberate step when a database that held plaintext is moved to encryption (each
    value is taken as it is stored now: run it before anyone without the key could write).
    Returns the rows rewritten and the values sealed per `table.column`."""
    if cipher.active_key_id is None:
        raise ValueError("encryption is off: set SURSIS_ENCRYPTION_KEYS to seal existing values")

    def seal(sealed: SealedTable, column: str, stored: Any, values: Mapping[Any, Any]) -> Any:
        if stored is None or sealed.is_sealed(cipher, stored):
            return stored
        plaintext = sealed.open_unchecked(cipher, column, stored, values)
        return sealed.seal_value(cipher, column, plaintext, values)

    written: dict[str, int] = {}
    rows = await _rewrite_all(
        engine,
        _plain,
        seal,
        batch_size=batch_size,
        on_batch=on_batch,
        pause_seconds=pause_seconds,
        written=written,
    )
    return SealedValues(rows, written)


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
