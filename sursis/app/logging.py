"""structlog, configured once at the entry point."""

from __future__ import annotations

import logging
import sys
from functools import lru_cache
from typing import Any, TextIO

import structlog
from opentelemetry import trace
from structlog.typing import EventDict, ExcInfo, WrappedLogger

from sursis.domain.sanitize import MASK, is_secret_key, redact

# Fields whose values are the service's own identifiers and vocabulary: never masked. (`event`
# is masked: for library records it is the free-text message.)
PLAIN_FIELDS = frozenset(
    {
        "level",
        "logger",
        "timestamp",
        "trace_id",
        "span_id",
        "request_id",
        "run_id",
        "conversation_id",
        "correlation_id",
        "tool_call_id",
        "authorization_id",
        "principal_id",
        "segment",
        "worker",
        "path",
    }
)


def add_trace_id(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Every line carries `trace_id` (null outside a trace) and, inside one, `span_id`."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    else:
        event.setdefault("trace_id", None)
    return event


_PLAIN, _MASKED, _SECRET = range(3)


@lru_cache(maxsize=1024)
def _field_rule(key: str) -> int:
    """How a field is masked, decided once per field name (log lines reuse a few dozen)."""
    # `*_at` fields are timestamps by the service's naming: kept whole, never searched for numbers.
    if key in PLAIN_FIELDS or key.startswith("_") or key.endswith("_at"):
        return _PLAIN
    return _SECRET if is_secret_key(key) else _MASKED


def redact_secrets(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Mask secrets and personal data in every field (exception text included) before rendering."""
    for key, value in list(event.items()):
        rule = _field_rule(key) if isinstance(key, str) else _MASKED
        if rule == _MASKED:
            event[key] = redact(value)
        elif rule == _SECRET:
            event[key] = MASK
    return event


def console_traceback(sio: TextIO, exc_info: ExcInfo) -> None:
    """A traceback on the console, drawn by Rich when it is installed (imported here, at the first
    traceback, not with structlog: see `sursis.app`). Local variables of a traceback can hold
    request headers (API keys): they are never printed."""
    try:
        from rich.console import Console
        from rich.traceback import Traceback
    except ImportError:
        structlog.dev.plain_traceback(sio, exc_info)
        return
    sio.write("\n")
    Console(file=sio, color_system="truecolor").print(Traceback.from_exception(*exc_info, show_locals=False))


def configure_logging(
    level: str = "INFO", json_logs: bool | None = None, stream: TextIO | None = None
) -> None:
    """JSON lines when not on a TTY, a readable console on a TTY; library logs in the same format.

    The lines go to `stream` (standard error by default). `sursis serve` and `sursis worker`
    call this at start; a program that embeds `Service` may call it to log the same way.

    Ids bound with `structlog.contextvars` (request, conversation, run, correlation, tool call)
    are merged into every line, including those of uvicorn and SQLAlchemy.
    """
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_trace_id,
    ]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_logs
        else structlog.dev.ConsoleRenderer(exception_formatter=console_traceback)
    )
    handler = logging.StreamHandler(stream)
    # The service's own lines are rendered by structlog and written to the handler's stream at once
    # (`LineLogger`); the libraries' records go through the handler, formatted the same way.
    _LINES.handler = handler
    structlog.configure(
        processors=[
            # A line below the logger's level is dropped before anything is built for it.
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.format_exc_info,
            redact_secrets,
            renderer,
        ],
        logger_factory=LineLogger,
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    final: list[structlog.typing.Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if json_logs:
        # Tracebacks of library records become a string field rather than breaking the JSON line.
        final.append(structlog.processors.format_exc_info)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared, processors=[*final, redact_secrets, renderer]
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "sqlalchemy"):
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True


class _Lines:
    """The handler `configure_logging` last installed: the stream the service's lines go to."""

    handler: logging.StreamHandler[Any] | None = None


_LINES = _Lines()


class LineLogger:
    """What structlog hands a rendered line of the service's to: written to the stream of the
    handler `configure_logging` installed, under its lock, as that handler writes a record (one line,
    flushed), without building a `logging.LogRecord` for it. The logger of the same name decides
    the level (`filter_by_level` asks it), so levels set with `logging` still apply. Once that
    handler is no longer the root logger's (a host program or a test replaced it), or the stream
    fails, the line goes through `logging` instead, to whatever handles it there."""

    __slots__ = ("_logger", "name")

    def __init__(self, name: str | None = None, *_: Any) -> None:
        self._logger = logging.getLogger(name)
        self.name = self._logger.name

    @property
    def disabled(self) -> bool:
        return self._logger.disabled

    def getEffectiveLevel(self) -> int:
        return self._logger.getEffectiveLevel()

    def isEnabledFor(self, level: int) -> bool:
        return self._logger.isEnabledFor(level)

    def _write(self, level: int, line: str) -> None:
        handler = _LINES.handler
        if handler is not None and handler in logging.root.handlers:
            try:
                with handler.lock:  # type: ignore[union-attr]
                    handler.stream.write(line + handler.terminator)
                    handler.flush()
                return
            except Exception:  # as `logging` does: a failing stream never fails the caller
                pass
        self._logger.log(level, line)

    def debug(self, line: str) -> None:
        self._write(logging.DEBUG, line)

    def info(self, line: str) -> None:
        self._write(logging.INFO, line)

    def warning(self, line: str) -> None:
        self._write(logging.WARNING, line)

    warn = warning

    def error(self, line: str) -> None:
        self._write(logging.ERROR, line)

    exception = error

    def critical(self, line: str) -> None:
        self._write(logging.CRITICAL, line)

    fatal = critical


_ERROR_FIELDS = ("run_id", "agent", "error_class", "error")


class UnconfiguredErrors(logging.Handler):
    """On the `sursis` logger of an embedded service: while the host program has configured no
    logging at all (the root logger has no handler), the service's errors (a run that failed, an
    agent's deps factory that raised) still reach standard error, one line each; otherwise it
    does nothing and the host's handlers decide."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        message = record.getMessage()
        extra = " ".join(f"{k}={record.__dict__[k]}" for k in _ERROR_FIELDS if k in record.__dict__)
        sys.stderr.write(f"sursis {record.levelname.lower()}: {message} {extra}".rstrip() + "\n")


def quiet_unless_configured() -> None:
    """For an embedded service: if the host program has not configured structlog, send the
    service's lines to the standard `logging` module (masked) instead of structlog's default of
    printing them on stdout. They show where the host configures logging (e.g.
    `logging.basicConfig()`); until it does, only errors do, on standard error (`UnconfiguredErrors`)."""
    service_logger = logging.getLogger("sursis")
    if not any(isinstance(h, UnconfiguredErrors) for h in service_logger.handlers):
        service_logger.addHandler(UnconfiguredErrors())
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            # The traceback becomes a field first, so that it is masked with the others.
            structlog.processors.format_exc_info,
            redact_secrets,
            structlog.stdlib.render_to_log_kwargs,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
