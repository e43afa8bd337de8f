"""A worker that exports spans records the segments of runs queued by an API process that exports
nothing: the API's unsampled trace context does not make the worker's traces unsampled."""

from __future__ import annotations

import io
import sys

import pytest

from sursis.infra.telemetry import TelemetryConfig, build_telemetry, context_from, current_trace_context


def _api_trace_context() -> dict[str, str]:
    """What an API process that exports nothing stores on the run it queues."""
    api = build_telemetry(TelemetryConfig())
    try:
        with api.tracer.start_as_current_span("POST /v1/conversations/{id}/messages") as span:
            assert not span.is_recording()
            carrier = current_trace_context()
    finally:
        api.shutdown()
    assert carrier is not None
    assert int(carrier["traceparent"].rsplit("-", 1)[1], 16) & 1 == 0  # a valid trace, not sampled
    return carrier


def test_a_worker_printing_spans_records_a_run_queued_by_an_api_that_exports_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    carrier = _api_trace_context()
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    worker = build_telemetry(TelemetryConfig(console=True))
    try:
        with worker.tracer.start_as_current_span("run.segment", context=context_from(carrier)) as span:
            assert span.is_recording()
            # The same trace: the API's request and the worker's segment stay one trace.
            assert format(span.get_span_context().trace_id, "032x") == carrier["traceparent"].split("-")[1]
            with worker.tracer.start_as_current_span("chat") as child:
                assert child.is_recording()
    finally:
        worker.shutdown()
    assert '"name": "run.segment"' in out.getvalue() and '"name": "chat"' in out.getvalue()


def test_a_worker_that_exports_nothing_still_records_nothing() -> None:
    carrier = _api_trace_context()
    worker = build_telemetry(TelemetryConfig())
    try:
        with worker.tracer.start_as_current_span("run.segment", context=context_from(carrier)) as span:
            assert not span.is_recording()
    finally:
        worker.shutdown()


def test_an_operators_sampler_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    carrier = _api_trace_context()
    worker = build_telemetry(TelemetryConfig(console=True))
    try:
        with worker.tracer.start_as_current_span("run.segment", context=context_from(carrier)) as span:
            assert not span.is_recording(), "parent-based sampling, as the operator asked"
    finally:
        worker.shutdown()
