"""The statements every approval turn sends on PostgreSQL, executed on the asyncpg connection under
the unit of work's own, past SQLAlchemy's execution of a statement.

A one-row read through SQLAlchemy's execution cost about 140 Python calls when the units of work
were ORM sessions, half of them in SQLAlchemy (the session's and the connection's execution, a
switch into its sync core and back, the cursor, the result); the same statement prepared on the
driver connection, about 60, most of them asyncpg's and asyncio's own
(docs/performance-history.md, eighth pass). The statements of a turn
(the claims, the reads and the decision of a resolve, the conversation taken, the statement that
writes what a transaction held) are compiled once from their SQLAlchemy construct, with the
engine's dialect (postgresql+asyncpg: `$n` parameters, the casts SQLAlchemy renders), and sent on
the driver connection of the unit of work's connection, keeping everything SQLAlchemy's execution guarantees:

- the same transaction: the unit of work's connection, its `BEGIN` sent first if nothing sent it
  yet (none on a connection in autocommit), committed or rolled back by the unit of work;
- the same prepared statements: the adapter's per-connection cache, so a session of its own names
  its statements and prepares each once, and a connection behind a pooler prepares them unnamed and
  caches none (`sessions.py`);
- the same values: each parameter through its type's bind processor, each column through its
  result processor;
- the same listeners: `before_cursor_execute` is told of the statement (the statement counters);
- the same errors: a driver's error is handled by the connection (translated as SQLAlchemy raises
  it, a lost connection invalidated, `handle_error` listeners run, `engine.drop_standby_connections`).

It reaches into SQLAlchemy's asyncpg adapter (its transaction start, its prepared-statement cache,
its error translation). `AVAILABLE` says whether the installed SQLAlchemy has those parts; where it
does not, every statement goes through SQLAlchemy's execution, as on SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from sursis.infra.db.unit_connection import UnitConnection

Processor = Callable[[Any], Any]


def _available() -> bool:
    try:
        from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection as adapter
    except ImportError:  # pragma: no cover - asyncpg is a dependency
        return False
    needed = ("_start_transaction", "_prepare", "_handle_exception")
    return all(callable(getattr(adapter, n, None)) for n in needed) and callable(
        getattr(Connection, "_handle_dbapi_exception", None)
    )


AVAILABLE = _available()
"""Whether the installed SQLAlchemy's asyncpg adapter has what the driver path uses."""


class DriverRow(tuple[Any, ...]):
    """A row as SQLAlchemy's answers it to the repositories: by position, and by column through
    `_mapping`."""

    _mapping: Mapping[str, Any]


@dataclass(slots=True)
class CompiledStatement:
    """A statement's SQL for asyncpg and what its execution needs, made once per statement."""

    sql: str
    names: tuple[str, ...]
    """The parameters' names, in the order of `$1`, `$2`, ..."""
    defaults: dict[str, Any]
    """Values bound in the statement itself (literals SQLAlchemy binds, constant parameters)."""
    binds: tuple[tuple[int, Processor], ...]
    """(position, processor) of each parameter whose type processes it."""
    keys: tuple[str, ...]
    """The result's column names (empty: the driver's, for a text statement)."""
    types: tuple[Any, ...]
    results: tuple[tuple[int, Processor], ...] | None = field(default=None)
    """(position, processor) of each column whose type processes it: found at the first execution
    (a processor may depend on the type the server answers)."""
    row_keys: tuple[str, ...] = ()
    """The names the rows are read by: `keys`, or the driver's column names, found at the first
    execution with `results` (the driver's description of a statement is the same every time)."""


_COMPILED: dict[int, tuple[Any, CompiledStatement]] = {}
"""Each statement's compiled form, by the statement's identity; the statement is kept with it, so
its identity is never another's. Only statements built once (module constants, cached builders)
are executed here."""


def compiled_statement(statement: Any, dialect: Dialect) -> CompiledStatement:
    known = _COMPILED.get(id(statement))
    if known is not None:
        return known[1]
    compiled = statement.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    if compiled.literal_execute_params or compiled.post_compile_params:
        raise ValueError("a statement with expanding parameters is executed by SQLAlchemy")
    names = tuple(compiled.positiontup or ())
    by_name = {compiled.bind_names[b]: b for b in compiled.bind_names}
    processors = compiled._bind_processors
    made = CompiledStatement(
        sql=compiled.string,
        names=names,
        defaults={n: by_name[n].effective_value for n in names if not by_name[n].required},
        binds=tuple((i, p) for i, n in enumerate(names) if callable(p := processors.get(n))),
        keys=tuple(column.keyname for column in compiled._result_columns),
        types=tuple(column.type for column in compiled._result_columns),
    )
    _COMPILED[id(statement)] = (statement, made)
    return made


async def fetch_rows(session: UnitConnection, statement: Any, params: Mapping[str, Any]) -> list[DriverRow]:
    """The rows `statement` answers, executed with `params` in the unit of work's transaction (PostgreSQL)."""
    compiled, dialect, prepared, records = await _execute(session, statement, params)
    results = compiled.results
    if results is None:
        # The driver builds its description anew on each call: read once per statement.
        attributes = prepared.get_attributes()
        compiled.row_keys = compiled.keys or tuple(attribute.name for attribute in attributes)
        compiled.results = results = _result_processors(compiled, dialect, attributes)
    keys = compiled.row_keys
    return [_row(record, keys, results) for record in records]


async def count_rows(session: UnitConnection, statement: Any, params: Mapping[str, Any]) -> int:
    """The rows `statement` (an `UPDATE`, a `DELETE`) changed, executed as `fetch_rows` executes."""
    _, _, prepared, _ = await _execute(session, statement, params)
    return int((prepared.get_statusmsg() or "0").rsplit(" ", 1)[-1])


async def _execute(
    session: UnitConnection, statement: Any, params: Mapping[str, Any]
) -> tuple[CompiledStatement, Dialect, Any, list[Any]]:
    connection = await session.connection()
    sync = connection.sync_connection
    assert sync is not None
    dialect = sync.dialect
    compiled = compiled_statement(statement, dialect)
    defaults = compiled.defaults
    args = [params[n] if n in params else defaults[n] for n in compiled.names]
    for i, process in compiled.binds:
        args[i] = process(args[i])
    if sync._has_events or sync.engine._has_events:
        sync.dispatch.before_cursor_execute(sync, None, compiled.sql, args, None, False)
    adapted: Any = sync.connection.dbapi_connection
    try:
        async with adapted._execute_mutex:
            if adapted._transaction is None:
                await adapted._start_transaction()
            prepared, _ = await adapted._prepare(compiled.sql, dialect._invalidate_schema_cache_asof)  # type: ignore[attr-defined]
            records = await prepared.fetch(*args)
    except BaseException as error:
        await _raise_handled(connection, adapted, error, compiled.sql, args)
        raise
    return compiled, dialect, prepared, records


def _row(record: Any, keys: tuple[str, ...], results: tuple[tuple[int, Processor], ...]) -> DriverRow:
    if results:
        values = list(record)
        for i, process in results:
            values[i] = process(values[i])
        record = values
    row = DriverRow(record)
    row._mapping = dict(zip(keys, row, strict=True))
    return row


def _result_processors(
    compiled: CompiledStatement, dialect: Dialect, attributes: Sequence[Any]
) -> tuple[tuple[int, Processor], ...]:
    found = []
    for i, type_ in enumerate(compiled.types):
        process = type_._cached_result_processor(dialect, attributes[i].type.oid)
        if process is not None:
            found.append((i, process))
    return tuple(found)


async def _raise_handled(
    connection: AsyncConnection, adapted: Any, error: BaseException, sql: str, args: list[Any]
) -> None:
    """Raise `error` as SQLAlchemy's execution raises it: the driver's error translated, then handled
    by the connection (in its sync core: invalidating a lost connection closes it)."""

    def handle(sync: Connection) -> None:
        try:
            if isinstance(error, Exception):
                adapted._handle_exception(error)
            raise error
        except BaseException as translated:
            sync._handle_dbapi_exception(translated, sql, args, None, None)

    await connection.run_sync(handle)
