"""Failure classification: what another attempt may not meet, and what a failed run tells its caller."""

from __future__ import annotations

from pydantic_ai.exceptions import (
    AgentRunError,
    ModelAPIError,
    ModelHTTPError,
    UnexpectedModelBehavior,
)
from sqlalchemy import exc as sa_exc

from sursis.domain.encryption import EncryptedValueUnreadable, EncryptionKeyUnavailable
from sursis.domain.records import RunError
from sursis.infra.agents.approved_args import refusal
from sursis.infra.agents.models import responses_api_missing
from sursis.infra.db.errors import DatabaseFailure, database_failure
from sursis.infra.telemetry import current_trace_id


def is_transient_database_error(exc: BaseException, seen: set[int] | None = None) -> bool:
    """A database or connection failure rather than a fault of the run itself.

    A segment that meets one is abandoned, not failed: its lease runs out and the run is claimed
    again (bounded by the claim count). What counts is the database error table
    (`infra/db/errors.py`: unreachable or transient), found on the exception or one of its
    causes, and any OS error. pydantic-ai's own errors never count, although `RunTimedOut` is a
    `TimeoutError`, hence an `OSError`. Each exception is looked at once across the whole walk
    (`seen`), groups included: an error and a group that holds it may lead to each other.
    """
    seen = set() if seen is None else seen
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup):
            return any(is_transient_database_error(inner, seen) for inner in current.exceptions)
        if isinstance(current, AgentRunError):
            return False
        if isinstance(current, OSError):
            return True
        failure = database_failure(current)
        if failure is not None or isinstance(current, sa_exc.DBAPIError):
            return failure in (DatabaseFailure.UNREACHABLE, DatabaseFailure.TRANSIENT)
        current = current.__cause__
    return False


def run_failure(exc: BaseException) -> RunError:
    """What a run that failed on `exc` tells its caller: a summary, never the exception's text
    (SQL, hosts, a provider's raw body); the details are in the logs, under the trace id."""
    trace_id = current_trace_id()
    details = f"details are in the service logs (trace {trace_id})" if trace_id else "details are in the logs"
    if isinstance(exc, EncryptionKeyUnavailable | EncryptedValueUnreadable):
        return RunError(exc.code, exc.message)
    if (refused := refusal(exc)) is not None:
        return RunError(refused.code, refused.message)
    if (missing := responses_api_missing(exc)) is not None:
        return RunError("model_error", f"{missing}; {details}")
    if isinstance(exc, ModelHTTPError):
        return RunError("model_error", f"the model provider answered HTTP {exc.status_code}; {details}")
    if isinstance(exc, ModelAPIError):
        return RunError("model_error", f"the model provider could not be used; {details}")
    if isinstance(exc, UnexpectedModelBehavior):
        return RunError("model_error", f"the model answered something the agent could not use; {details}")
    return RunError("internal_error", f"the run failed unexpectedly; {details}")
