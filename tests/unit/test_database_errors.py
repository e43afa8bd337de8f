"""Which database errors mean "the database is unavailable" (503) and which belong to the request."""

from __future__ import annotations

import errno

import pytest
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from abeyance.app.problems import database_unreachable


class DriverError(Exception):
    """A driver exception carrying a SQLSTATE, as asyncpg's do."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


def dbapi(sqlstate: str, *, invalidated: bool = False) -> DBAPIError:
    return DBAPIError("SELECT 1", {}, DriverError(sqlstate), connection_invalidated=invalidated)


CASES: list[tuple[BaseException, bool]] = [
    (OperationalError("SELECT 1", {}, Exception("database is locked")), True),
    (InterfaceError("SELECT 1", {}, Exception("connection is closed")), True),
    (PoolTimeout("QueuePool limit reached"), True),
    (dbapi("XX000", invalidated=True), True),
    (dbapi("08006"), True),
    (dbapi("57P03"), True),
    (dbapi("53300"), True),
    (DBAPIError("SELECT 1", {}, ConnectionResetError(errno.ECONNRESET, "reset")), True),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), True),
    (TimeoutError(), True),
    (OSError("Multiple exceptions: [Errno 111] Connect call failed, [Errno 99] Cannot assign"), True),
    (OSError(errno.EHOSTUNREACH, "No route to host"), True),
    (IntegrityError("INSERT", {}, DriverError("23505")), False),
    (DataError("INSERT", {}, DriverError("22021")), False),
    (dbapi("22021"), False),
    (dbapi("42501"), False),
    (FileNotFoundError(errno.ENOENT, "no such file"), False),
    (PermissionError(errno.EACCES, "denied"), False),
    (ValueError("not a database error"), False),
]


@pytest.mark.parametrize(("error", "unreachable"), CASES, ids=[repr(e)[:60] for e, _ in CASES])
def test_only_connectivity_errors_mean_the_database_is_unavailable(
    error: BaseException, unreachable: bool
) -> None:
    assert database_unreachable(error) is unreachable
