"""Which database errors mean "the database is unavailable" (503) and which belong to the request."""

from __future__ import annotations

import errno

import pytest
from asyncpg.exceptions import (
    ConnectionDoesNotExistError,
    TargetServerAttributeNotMatched,
    UniqueViolationError,
)
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sursis.infra.db.errors import database_unreachable
from sursis.infra.runner import is_transient_database_error


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
    (dbapi("25006"), True),
    (ConnectionDoesNotExistError("connection was closed in the middle of operation"), True),
    (UniqueViolationError("duplicate key"), False),
    (TargetServerAttributeNotMatched("None of the hosts match the target attribute requirement"), True),
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


def caused_by(cause: BaseException) -> RuntimeError:
    error = RuntimeError("while writing the segment")
    error.__cause__ = cause
    return error


TRANSIENT_CASES: list[tuple[BaseException, bool]] = [
    *[(error, True) for error, unreachable in CASES if unreachable],
    (dbapi("40001"), True),
    (dbapi("40P01"), True),
    (dbapi("55P03"), True),
    (dbapi("57014"), True),
    (dbapi("53200"), True),
    (caused_by(dbapi("40001")), True),
    (ExceptionGroup("tools", [ValueError("x"), dbapi("08006")]), True),
    (IntegrityError("INSERT", {}, DriverError("23505")), False),
    (DataError("INSERT", {}, DriverError("22021")), False),
    (dbapi("42501"), False),
    (caused_by(ValueError("a fault of the run")), False),
    (ValueError("not a database error"), False),
]


@pytest.mark.parametrize(
    ("error", "transient"), TRANSIENT_CASES, ids=[repr(e)[:60] for e, _ in TRANSIENT_CASES]
)
def test_a_segment_is_abandoned_on_what_another_attempt_may_not_meet(
    error: BaseException, transient: bool
) -> None:
    assert is_transient_database_error(error) is transient


@pytest.mark.parametrize("sqlstate", ["40001", "57014", "53200"])
def test_a_transient_failure_that_is_not_an_outage_is_no_503(sqlstate: str) -> None:
    assert database_unreachable(dbapi(sqlstate)) is False
