"""A traceback on the console (a terminal: Rich) and in JSON lines shows no local variables, so a
key or a password held in a variable of the failing frame is never printed."""

from __future__ import annotations

import io
import logging

import pytest
import structlog

from sursis.app.logging import configure_logging


@pytest.mark.parametrize("json_logs", [False, True])
def test_a_logged_traceback_shows_no_local_variables(json_logs: bool) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json_logs=json_logs, stream=stream)
    try:
        api_key = "srs_local-secret-" + "x" * 30
        database_url = "postgresql+asyncpg://u:pw-local-secret@db/x"
        raise RuntimeError(f"failed after {len(api_key) + len(database_url)} characters")
    except RuntimeError:
        structlog.get_logger("sursis.test").exception("step.failed")
    finally:
        logging.getLogger().handlers = []
        structlog.reset_defaults()
    printed = stream.getvalue()
    assert "RuntimeError" in printed and "step.failed" in printed
    assert "local-secret" not in printed
