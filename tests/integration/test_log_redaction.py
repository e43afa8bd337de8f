"""Logs as configured by the entry point mask secrets and personal data, library lines included."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import logging
    import structlog
    from sursis.app.logging import configure_logging

    configure_logging("INFO", json_logs=True)
    log = structlog.get_logger("sursis.example")
    log.info(
        "webhook.failed",
        run_id="run-4111111111111111",
        password="hunter2",
        target="https://ops:s3cr3t@hooks.example.com/in?token=abc123",
        contact="ana.lopez@example.com, +44 20 7946 0958",
    )
    logging.getLogger("uvicorn.error").warning("client sent Authorization: Bearer srs_%s", "x" * 43)
    try:
        raise ValueError("card 4111 1111 1111 1111 was refused")
    except ValueError:
        log.exception("payment.failed")
    """
)


def test_service_and_library_log_lines_are_redacted() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    output = done.stderr
    for secret in ("hunter2", "s3cr3t", "abc123", "ana.lopez", "7946", "srs_xxxx", "4111 1111"):
        assert secret not in output, secret
    first, library, failure = (json.loads(line) for line in output.splitlines())
    assert first["event"] == "webhook.failed"
    assert first["run_id"] == "run-4111111111111111"
    assert first["password"] == "***"
    assert first["target"] == "https://ops:***@hooks.example.com/in?token=***"
    assert first["contact"] == "[email], [phone]"
    assert library["event"] == "client sent Authorization: Bearer ***"
    assert failure["event"] == "payment.failed"
    assert "ValueError: card [card] was refused" in failure["exception"]
