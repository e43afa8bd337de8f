"""Telemetry configured from the environment: OTLP export when an endpoint is set, console spans
on request, nothing by default; and the log format of the service and its libraries."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sursis.app.container import telemetry_config
from sursis.app.settings import Settings
from sursis.domain.states import RunStatus
from sursis.infra.telemetry import build_telemetry

ROOT = Path(__file__).resolve().parents[2]


class Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    received: list[tuple[str, bytes]] = []
    handler = type("RecordingCollector", (Collector,), {"received": received})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_spans_and_metrics_go_to_the_otlp_endpoint_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, collector: tuple[str, list[tuple[str, bytes]]]
) -> None:
    url, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sursis-under-test")
    telemetry = build_telemetry(telemetry_config(Settings().telemetry))
    with telemetry.tracer.start_as_current_span("probe.span"):
        telemetry.metrics.run_status(RunStatus.QUEUED)
    telemetry.shutdown()

    paths = [path for path, _ in received]
    assert "/v1/traces" in paths
    assert "/v1/metrics" in paths
    request = ExportTraceServiceRequest()
    request.ParseFromString(next(body for path, body in received if path == "/v1/traces"))
    [resource_spans] = request.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    assert service == "sursis-under-test"
    assert [s.name for scope in resource_spans.scope_spans for s in scope.spans] == ["probe.span"]


def test_console_spans_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet = build_telemetry(telemetry_config(Settings().telemetry))
    with quiet.tracer.start_as_current_span("quiet.span"):
        pass
    quiet.shutdown()
    assert "quiet.span" not in capsys.readouterr().out

    monkeypatch.setenv("SURSIS_TRACE_CONSOLE", "1")
    loud = build_telemetry(telemetry_config(Settings().telemetry))
    with loud.tracer.start_as_current_span("loud.span"):
        pass
    loud.shutdown()
    printed = json.loads(capsys.readouterr().out)
    assert printed["name"] == "loud.span"


LOGGING_SCRIPT = textwrap.dedent(
    """
    import logging
    import structlog
    from opentelemetry.sdk.trace import TracerProvider
    from sursis.app.logging import configure_logging

    configure_logging("INFO", json_logs=True)
    log = structlog.get_logger("sursis.example")
    tracer = TracerProvider().get_tracer("example")
    structlog.contextvars.bind_contextvars(request_id="req-1")
    with tracer.start_as_current_span("handling"):
        log.info("service.line", run_id="run-1")
        logging.getLogger("sqlalchemy.engine.Engine").warning("a database line")
        logging.getLogger("uvicorn.error").info("a server line")
    log.info("outside.line")
    try:
        1 / 0
    except ZeroDivisionError:
        logging.getLogger("uvicorn.error").exception("a server failure")
    """
)


def test_service_and_library_logs_are_json_lines_with_ids() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOGGING_SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [line["event"] for line in lines] == [
        "service.line",
        "a database line",
        "a server line",
        "outside.line",
        "a server failure",
    ]
    for line in lines:
        assert {"timestamp", "level", "logger", "trace_id", "request_id"} <= set(line), line
        assert line["request_id"] == "req-1"
    inside = lines[:3]
    assert len({line["trace_id"] for line in inside}) == 1
    assert inside[0]["trace_id"] is not None
    assert len(inside[0]["trace_id"]) == 32
    assert [line["logger"] for line in inside] == [
        "sursis.example",
        "sqlalchemy.engine.Engine",
        "uvicorn.error",
    ]
    assert lines[3]["trace_id"] is None
    assert "ZeroDivisionError" in lines[4]["exception"]
