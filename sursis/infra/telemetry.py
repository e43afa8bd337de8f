"""OpenTelemetry for the service: providers built from the configuration, the service's metrics,
and the trace context a run carries from one segment to the next.

Nothing here is global: the composition root builds one `Telemetry` and passes it to whatever
traces or measures. Tests pass their own tracer provider (with an in-memory exporter).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, ExemplarFilter
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings

from sursis.domain.records import PendingCall, Run, ToolCallMetadata
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.tools import PendingKind

INSTRUMENTATION_SCOPE = "sursis"
TOOL_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
DECISION_SECONDS_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 48 * 3600)
ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.SUSPENDED)
MAX_LABEL_SETS = 4096

_W3C = TraceContextTextMapPropagator()


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """What the process exports. With no endpoint and no console, spans are made but not recorded.

    The OTLP exporters read their other standard variables (`OTEL_EXPORTER_OTLP_HEADERS`,
    `..._TIMEOUT`, `..._COMPRESSION`, ...) themselves; the resource reads `OTEL_SERVICE_NAME`
    and `OTEL_RESOURCE_ATTRIBUTES`; the sampler reads `OTEL_TRACES_SAMPLER`.
    """

    service_name: str = "sursis"
    otlp_endpoint: str | None = None
    otlp_traces_endpoint: str | None = None
    otlp_metrics_endpoint: str | None = None
    console: bool = False
    include_content: bool = False

    def traces_endpoint(self) -> str | None:
        return self.otlp_traces_endpoint or _signal_url(self.otlp_endpoint, "traces")

    def metrics_endpoint(self) -> str | None:
        return self.otlp_metrics_endpoint or _signal_url(self.otlp_endpoint, "metrics")


def _signal_url(base: str | None, signal: str) -> str | None:
    return f"{base.rstrip('/')}/v1/{signal}" if base else None


class OtelMetrics:
    """The service's metrics as OpenTelemetry instruments (`ServiceMetrics` for the use cases).

    The two gauges read a snapshot that `set_backlog` refreshes from the database right before
    each scrape, so they are right however many processes share the database.
    """

    def __init__(self, meter: metrics.Meter) -> None:
        self._runs = meter.create_counter(
            "sursis.runs", unit="{run}", description="Runs entering a status (queued, running, ...)."
        )
        self._decision = meter.create_histogram(
            "sursis.pending.decision.duration",
            unit="s",
            description="Time from a call's suspension to its decision, expiry or cancellation.",
            explicit_bucket_boundaries_advisory=DECISION_SECONDS_BUCKETS,
        )
        self._tool = meter.create_histogram(
            "sursis.tool.duration",
            unit="s",
            description="Latency of executed tool calls, by tool and outcome (ok or the error class).",
            explicit_bucket_boundaries_advisory=TOOL_SECONDS_BUCKETS,
        )
        self._awaiting: dict[PendingKind, int] = {}
        self._active: dict[RunStatus, int] = {}
        # Label sets built once: by status, and by (tool, agent, outcome) as calls meet them.
        self._status_labels = {status: {"status": status.value} for status in RunStatus}
        self._tool_labels: dict[tuple[str, str, str], dict[str, str]] = {}
        meter.create_observable_gauge(
            "sursis.pending.awaiting",
            callbacks=[self._observe_awaiting],
            unit="{call}",
            description="Pending calls awaiting a decision, by kind.",
        )
        meter.create_observable_gauge(
            "sursis.runs.active",
            callbacks=[self._observe_active],
            unit="{run}",
            description="Runs queued, running or suspended.",
        )

    def run_status(self, status: RunStatus) -> None:
        self._runs.add(1, self._status_labels[status])

    def pending_resolved(self, call: PendingCall, status: PendingStatus, at: datetime) -> None:
        waited = max((at - call.created_at).total_seconds(), 0.0)
        self._decision.record(
            waited, {"kind": call.kind.value, "outcome": status.value, "tool": call.tool_name}
        )

    def tool_call(self, metadata: ToolCallMetadata) -> None:
        outcome = "ok" if metadata.ok else (metadata.error_class or "error")
        key = (metadata.tool_name, metadata.agent_name, outcome)
        labels = self._tool_labels.get(key)
        if labels is None:
            labels = {"tool": key[0], "agent": key[1], "outcome": outcome}
            if len(self._tool_labels) < MAX_LABEL_SETS:
                self._tool_labels[key] = labels
        self._tool.record(metadata.latency_ms / 1000, labels)

    def set_backlog(self, awaiting: Mapping[PendingKind, int], active: Mapping[RunStatus, int]) -> None:
        self._awaiting = {kind: awaiting.get(kind, 0) for kind in PendingKind}
        self._active = {status: active.get(status, 0) for status in ACTIVE_RUN_STATUSES}

    def _observe_awaiting(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(count, {"kind": kind.value}) for kind, count in self._awaiting.items()]

    def _observe_active(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(count, {"status": status.value}) for status, count in self._active.items()]


class Telemetry:
    """Tracer, meter and metrics of one process, and what pydantic-ai needs to trace agents."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider,
        meter_provider: metrics.MeterProvider,
        *,
        registry: CollectorRegistry | None = None,
        include_content: bool = False,
        instrument_agents: bool = True,
        closers: Sequence[Callable[[], object]] = (),
        records_spans: bool = True,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.records_spans = records_spans
        """False when no span is ever recorded (nothing exports them): callers skip the attributes."""
        self.meter_provider = meter_provider
        self.tracer = tracer_provider.get_tracer(INSTRUMENTATION_SCOPE)
        self.metrics = OtelMetrics(meter_provider.get_meter(INSTRUMENTATION_SCOPE))
        self.registry = registry
        self._include_content = include_content
        self._instrument_agents = instrument_agents
        self._settings: InstrumentationSettings | None = None
        self._closers = list(closers)

    @classmethod
    def disabled(cls) -> Telemetry:
        """No spans, no metrics, no exporters."""
        return cls(
            trace.NoOpTracerProvider(),
            metrics.NoOpMeterProvider(),
            instrument_agents=False,
            records_spans=False,
        )

    def agent_instrumentation(self) -> Instrumentation | None:
        """pydantic-ai's own spans (`invoke_agent`, `chat`, `execute_tool`) on this tracer provider,
        where spans are recorded; None where none is (`model_metrics` then keeps its metrics)."""
        if not self._instrument_agents or not self.records_spans:
            return None
        return Instrumentation(settings=self._instrumentation_settings())

    def model_metrics(self) -> InstrumentationSettings | None:
        """pydantic-ai's instruments for the metrics of each model request (token usage, cost), where
        no span is recorded and the agents therefore run without its instrumentation capability
        (`agent_instrumentation`): its run and tool spans would be dropped unread, and it builds
        each request's span and attributes before it knows that (`infra.agents.metered`)."""
        if not self._instrument_agents or self.records_spans:
            return None
        return self._instrumentation_settings()

    def _instrumentation_settings(self) -> InstrumentationSettings:
        if self._settings is None:  # its histograms are made on the meter once
            self._settings = InstrumentationSettings(
                tracer_provider=self.tracer_provider,
                meter_provider=self.meter_provider,
                include_content=self._include_content,
                include_binary_content=False,
            )
        return self._settings

    def prometheus_exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The current metrics and their content type: Prometheus text, or OpenMetrics if accepted."""
        encoder, content_type = choose_encoder(accept or "")
        if self.registry is None:
            return b"", content_type
        return encoder(self.registry), content_type

    def shutdown(self) -> None:
        """Flush and stop what this object built (never a provider it was handed)."""
        for close in self._closers:
            close()
        self._closers = []


def build_telemetry(
    config: TelemetryConfig,
    *,
    tracer_provider: SdkTracerProvider | None = None,
    metric_readers: Sequence[MetricReader] = (),
) -> Telemetry:
    """SDK providers for `config`; a given `tracer_provider` is used as is (and not shut down)."""
    resource = _resource(config.service_name)
    closers: list[Callable[[], object]] = []
    records_spans = True
    if tracer_provider is None:
        traces_endpoint = config.traces_endpoint()
        # Nothing would export a span: make them non-recording (they still carry trace ids, for the
        # logs and the runs' stored trace context), so nobody fills attributes no one reads;
        # pydantic-ai skips serialising the messages of a request whose span does not record.
        records_spans = bool(traces_endpoint or config.console)
        sampler = exporting_sampler() if records_spans else ALWAYS_OFF
        tracer_provider = SdkTracerProvider(resource=resource, sampler=sampler)
        if traces_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_endpoint)))
        if config.console:
            tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stdout)))
        closers.append(tracer_provider.shutdown)
    registry = CollectorRegistry(auto_describe=True)
    readers: list[MetricReader] = [
        PrometheusMetricReader(registry=registry, scope_info_enabled=False),
        *metric_readers,
    ]
    metrics_endpoint = config.metrics_endpoint()
    if metrics_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=metrics_endpoint)))
    meter_provider = SdkMeterProvider(
        resource=resource,
        metric_readers=readers,
        exemplar_filter=_exemplar_filter(exported=bool(metrics_endpoint or metric_readers)),
    )
    closers.append(meter_provider.shutdown)
    return Telemetry(
        tracer_provider,
        meter_provider,
        registry=registry,
        include_content=config.include_content,
        closers=closers,
        records_spans=records_spans,
    )


def _exemplar_filter(*, exported: bool) -> ExemplarFilter | None:
    """Exemplars (the trace of a sample measurement) reach only an OTLP exporter, never the Prometheus
    exposition: without one, no measurement looks for its span. None lets the SDK decide (and read
    `OTEL_METRICS_EXEMPLAR_FILTER`)."""
    if exported or os.environ.get("OTEL_METRICS_EXEMPLAR_FILTER"):
        return None
    return AlwaysOffExemplarFilter()


def _resource(service_name: str) -> Resource:
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    return resource


def exporting_sampler() -> Sampler | None:
    """The sampler of a process that exports spans: `OTEL_TRACES_SAMPLER` when it is set (None lets
    the SDK read it), else every trace, including one continued from a parent that was not sampled
    elsewhere. An API process that exports nothing samples nothing, and the runs it queues carry its
    unsampled trace context: a worker that exports must still record their segments."""
    if os.environ.get("OTEL_TRACES_SAMPLER"):
        return None
    return ParentBased(ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON)


def current_trace_context() -> dict[str, str] | None:
    """The current span's W3C trace context (`traceparent`, maybe `tracestate`), or None."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier or None


def context_from(carrier: Mapping[str, str] | None) -> Context | None:
    """An OpenTelemetry context whose parent is the stored span, or None when nothing was stored."""
    if not carrier:
        return None
    context = _W3C.extract(dict(carrier))
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def trace_id_of(carrier: Mapping[str, str] | None) -> str | None:
    """The trace id in a stored trace context."""
    context = context_from(carrier)
    if context is None:
        return None
    return format(trace.get_current_span(context).get_span_context().trace_id, "032x")


def segment_attributes(run: Run) -> dict[str, Any]:
    """The attributes of a `run.segment` span (built only where spans are recorded)."""
    return {
        "sursis.run_id": str(run.id),
        "sursis.conversation_id": str(run.conversation_id),
        "sursis.workspace": run.workspace,
        "sursis.agent": run.agent,
        "sursis.segment": run.segment,
    }


def span_event(name: str, attributes: Mapping[str, Any]) -> None:
    """Add an event to the current span (nothing happens outside a recording span)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, {k: _attribute(v) for k, v in attributes.items() if v is not None})


def _attribute(value: Any) -> str | bool | int | float:
    return value if isinstance(value, str | bool | int | float) else str(value)
