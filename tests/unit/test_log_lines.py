"""The service's own log lines, written by `configure_logging`'s `LineLogger`: to the stream given,
at the levels `logging` sets, and through `logging` once its handler is no longer the root's."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from sursis.app.logging import configure_logging


@pytest.fixture
def restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level, config = root.handlers[:], root.level, structlog.get_config()
    quiet = logging.getLogger("sursis.test.quiet")
    try:
        yield
    finally:
        root.handlers, root.level = handlers, level
        quiet.setLevel(logging.NOTSET)
        structlog.configure(**config)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_is_masked_and_written_whole_with_its_bound_ids(restored: None) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json_logs=True, stream=stream)
    log = structlog.get_logger("sursis.test.lines")
    with structlog.contextvars.bound_contextvars(run_id="r-1"):
        log.info("turn.done", password="hunter2", contact="ana@example.com", status="completed")
        log.debug("below.level")
    [line] = lines(stream)
    assert {k: line[k] for k in ("event", "level", "logger", "run_id", "password", "contact", "status")} == {
        "event": "turn.done",
        "level": "info",
        "logger": "sursis.test.lines",
        "run_id": "r-1",
        "password": "***",
        "contact": "[email]",
        "status": "completed",
    }
    assert "timestamp" in line and "trace_id" in line


def test_a_level_set_with_logging_applies_to_the_services_lines(restored: None) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json_logs=True, stream=stream)
    logging.getLogger("sursis.test.quiet").setLevel(logging.WARNING)
    log = structlog.get_logger("sursis.test.quiet")
    log.info("dropped")
    log.warning("kept")
    assert [(line["event"], line["level"]) for line in lines(stream)] == [("kept", "warning")]


def test_once_the_handler_is_replaced_lines_go_through_logging(restored: None) -> None:
    first = io.StringIO()
    configure_logging("INFO", json_logs=True, stream=first)
    log = structlog.get_logger("sursis.test.moved")
    log.info("before")
    second = io.StringIO()
    logging.getLogger().handlers = [logging.StreamHandler(second)]  # as a host program may do
    log.error("after", password="hunter2")
    assert [line["event"] for line in lines(first)] == ["before"]
    [moved] = second.getvalue().splitlines()
    assert json.loads(moved)["event"] == "after"
    assert "hunter2" not in moved


def test_a_stream_that_fails_never_fails_the_caller(restored: None) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json_logs=True, stream=stream)
    stream.close()
    structlog.get_logger("sursis.test.closed").info("nowhere to go")  # must not raise
