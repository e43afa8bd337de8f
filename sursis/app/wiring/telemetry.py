"""Telemetry: the tracer and meter providers, given by the caller or built (and then owned) here."""

from __future__ import annotations

from dataclasses import dataclass

from sursis.app.context_settings import TelemetrySettings
from sursis.infra.telemetry import Telemetry, TelemetryConfig, build_telemetry


@dataclass(frozen=True, slots=True)
class TelemetryParts:
    telemetry: Telemetry
    owns_telemetry: bool
    """Whether whoever closes the container shuts the providers down (it built them)."""


def telemetry_config(settings: TelemetrySettings) -> TelemetryConfig:
    return TelemetryConfig(
        otlp_endpoint=settings.otlp_endpoint,
        otlp_traces_endpoint=settings.otlp_traces_endpoint,
        otlp_metrics_endpoint=settings.otlp_metrics_endpoint,
        console=settings.trace_console,
        include_content=settings.trace_content,
    )


def wire_telemetry(settings: TelemetrySettings, given: Telemetry | None = None) -> TelemetryParts:
    """`given` stays its owner's to shut down; otherwise the settings' telemetry, owned here."""
    if given is not None:
        return TelemetryParts(given, owns_telemetry=False)
    return TelemetryParts(build_telemetry(telemetry_config(settings)), owns_telemetry=True)
