"""Failure classification: what another attempt may not meet, and what a failed run tells its caller."""

from __future__ import annotations

from pydantic_ai.exceptions import (
    AgentRunError,
    ModelAPIError,
    ModelHTTPError,
    UnexpectedModelBehavior,
)
from sqlalchemy import exc as sa_exc

from abeyance.domain.records import RunError
from abeyance.infra.telemetry import current_trace_id

# SQLSTATE classes (and codes) of PostgreSQL errors that another attempt may not meet: connection
# exceptions, serialization failures and deadlocks, insufficient resources, operator intervention
# (shutdown, statement timeout), system errors, and a lock wait that timed out.
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
_TRANSIENT_SQLSTATES = frozenset({"55P03"})


def is_transient_database_error(exc: BaseException) -> bool:
    """A database or connection failure rather than a fault of the run itself.

    A segment that meets one is abandoned, not failed: its lease runs out and the run is claimed
    again (bounded by the claim count). pydantic-ai's own errors never count, although
    `RunTimedOut` is a `TimeoutError`, hence an `OSError`.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup):
            return any(is_transient_database_error(inner) for inner in current.exceptions)
        if isinstance(current, AgentRunError):
            return False
        if isinstance(current, OSError | sa_exc.TimeoutError | sa_exc.DisconnectionError):
            return True
        if isinstance(current, sa_exc.DBAPIError):
            if current.connection_invalidated or isinstance(
                current, sa_exc.OperationalError | sa_exc.InterfaceError
            ):
                return True
            state = getattr(current.orig, "sqlstate", None)
            return isinstance(state, str) and (
                state[:2] in _TRANSIENT_SQLSTATE_CLASSES or state in _TRANSIENT_SQLSTATES
            )
        current = current.__cause__
    return False


def run_failure(exc: BaseException) -> RunError:
    """What a run that failed on `exc` tells its caller: a summary, never the exception's text
    (SQL, hosts, a provider's raw body); the details are in the logs, under the trace id."""
    trace_id = current_trace_id()
    details = f"details are in the service logs (trace {trace_id})" if trace_id else "details are in the logs"
    if isinstance(exc, ModelHTTPError):
        return RunError("model_error", f"the model provider answered HTTP {exc.status_code}; {details}")
    if isinstance(exc, ModelAPIError):
        return RunError("model_error", f"the model provider could not be used; {details}")
    if isinstance(exc, UnexpectedModelBehavior):
        return RunError("model_error", f"the model answered something the agent could not use; {details}")
    return RunError("internal_error", f"the run failed unexpectedly; {details}")
