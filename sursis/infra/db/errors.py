"""What a database error means, in one table: the HTTP layer and the runner both ask here.

`database_failure` classifies one exception: the database cannot be reached (`UNREACHABLE`: the
HTTP answer is 503, a segment is abandoned and claimed again), another attempt may succeed
(`TRANSIENT`: serialization failures, deadlocks, a lock wait or statement timed out), or the
statement was refused for its content (`CONFLICT`, `DATA`).
"""

from __future__ import annotations

import errno
import socket
from enum import StrEnum

from asyncpg.exceptions import PostgresError, TargetServerAttributeNotMatched
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout


class DatabaseFailure(StrEnum):
    UNREACHABLE = "unreachable"
    TRANSIENT = "transient"
    CONFLICT = "conflict"
    DATA = "data"


SQLSTATES: dict[str, DatabaseFailure] = {
    # Connection exceptions; admin or crash shutdown, "cannot connect now"; too many connections.
    "08": DatabaseFailure.UNREACHABLE,
    "57P01": DatabaseFailure.UNREACHABLE,
    "57P02": DatabaseFailure.UNREACHABLE,
    "57P03": DatabaseFailure.UNREACHABLE,
    "53300": DatabaseFailure.UNREACHABLE,
    # A read-only transaction: the connection reached a standby (a demoted primary, or a pooler
    # not yet pointed at the new one). The primary is what is out of reach; the pool drops it.
    "25006": DatabaseFailure.UNREACHABLE,
    # Serialization failures and deadlocks; insufficient resources; operator intervention
    # (statement timeout, query cancelled); system errors; a lock wait that timed out.
    "40": DatabaseFailure.TRANSIENT,
    "53": DatabaseFailure.TRANSIENT,
    "57": DatabaseFailure.TRANSIENT,
    "58": DatabaseFailure.TRANSIENT,
    "55P03": DatabaseFailure.TRANSIENT,
    # Integrity constraint violations; data exceptions (a value out of range or not representable).
    "23": DatabaseFailure.CONFLICT,
    "22": DatabaseFailure.DATA,
}
"""SQLSTATE codes and classes (their first two characters); the longest match wins."""

CONNECTION_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EHOSTUNREACH,
        errno.EHOSTDOWN,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.ETIMEDOUT,
        errno.EPIPE,
    }
)
"""OS errors that say the database host cannot be reached."""


def sqlstate(exc: DBAPIError) -> str:
    """The driver's SQLSTATE (asyncpg `sqlstate`, psycopg `pgcode`); empty when there is none."""
    return str(getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None) or "")


def database_failure(exc: BaseException) -> DatabaseFailure | None:
    """What one exception (not its causes) says about the database; None when it says nothing."""
    if isinstance(exc, OperationalError | InterfaceError | PoolTimeout | DisconnectionError):
        return DatabaseFailure.UNREACHABLE
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return DatabaseFailure.UNREACHABLE
        state = sqlstate(exc)
        failure = SQLSTATES.get(state) or SQLSTATES.get(state[:2])
        if failure is not None:
            return failure
        if isinstance(exc.orig, OSError) and database_failure(exc.orig) is not None:
            return DatabaseFailure.UNREACHABLE
        if isinstance(exc, IntegrityError):
            return DatabaseFailure.CONFLICT
        if isinstance(exc, DataError):
            return DatabaseFailure.DATA
        return None
    if isinstance(exc, PostgresError):
        # A driver error that reached us unwrapped (asyncpg's own: a LISTEN connection, a new
        # connection's first statement); "connection does not exist" is SQLSTATE 08003.
        state = str(getattr(exc, "sqlstate", None) or "")
        return SQLSTATES.get(state) or SQLSTATES.get(state[:2])
    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror | TargetServerAttributeNotMatched):
        # The last one: every host of a multi-host URL answered, none is a primary (a failover).
        return DatabaseFailure.UNREACHABLE
    if isinstance(exc, OSError) and (
        # asyncio reports a refused connection to several addresses (`localhost`) as a plain OSError.
        exc.errno in CONNECTION_ERRNOS or str(exc).startswith("Multiple exceptions")
    ):
        return DatabaseFailure.UNREACHABLE
    return None


def database_unreachable(exc: BaseException) -> bool:
    """True when `exc` means the database is not reachable, not that a statement was refused."""
    return database_failure(exc) is DatabaseFailure.UNREACHABLE
