"""The last link of the tool path: the one `ToolCallMetadata` of a call that ran, counted, put on
the call's span and logged (`tool.call`).

pydantic-ai's instrumentation is the outermost capability, so the current span here is the call's
`execute_tool` span: the metadata lands on it as attributes.
"""

from __future__ import annotations

from typing import Any

import structlog
from opentelemetry import trace

from sursis.domain.ports import NoMetrics, ServiceMetrics
from sursis.infra.agents.tool_chain import ToolCall, ToolLink

log = structlog.get_logger("sursis.tools")


class CallTelemetry(ToolLink):
    """The call's metadata told: metrics, span attributes, a log event. It wraps nothing."""

    __slots__ = ("_metrics",)

    def __init__(self, metrics: ServiceMetrics | None = None) -> None:
        self._metrics: ServiceMetrics = metrics or NoMetrics()

    async def __call__(self, call: ToolCall) -> Any:
        md, deps, error_code = call.emitted, call.deps, call.error_code
        assert md is not None, "told before it was recorded"
        self._metrics.tool_call(md)
        span = trace.get_current_span()
        if span.is_recording():  # a span nothing exports is given no attributes
            span.set_attributes(
                {
                    "sursis.tool.name": md.tool_name,
                    "sursis.tool.agent": md.agent_name,
                    "sursis.tool.ok": md.ok,
                    "sursis.tool.latency_ms": md.latency_ms,
                    "sursis.tool.error_class": md.error_class or "",
                    "sursis.tool.error_code": error_code or "",
                }
            )
        log.info(
            "tool.call",
            tool_name=md.tool_name,
            agent_name=md.agent_name,
            latency_ms=md.latency_ms,
            ok=md.ok,
            error_class=md.error_class,
            trace_id=md.trace_id,
            started_at=md.started_at.isoformat(),
            ended_at=md.ended_at.isoformat(),
            error_code=error_code,
            tool_call_id=call.call.tool_call_id,
            run_id=str(deps.run_id),
            conversation_id=str(deps.conversation_id),
        )
        return call.payload
