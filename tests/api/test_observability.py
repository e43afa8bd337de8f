"""Traces, logs, tool-call metadata, metrics and cost, observed through the real app and databases.

Spans go to an in-memory exporter on the test's own tracer provider; log events are captured
with `structlog.testing.capture_logs()` (with the contextvars and trace-id processors, as in
production).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
import structlog
from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from structlog.typing import EventDict

from sursis.app.container import build_container
from sursis.app.logging import add_trace_id
from sursis.app.main import create_app
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.telemetry import TelemetryConfig, build_telemetry
from tests.api.http_calls import create_conversation, get_run, post_message, resolve, tool_calls
from tests.conftest import admin_headers, call, make_settings, script
from tests.probe_agent import OUTCOMES, SECRET_DETAIL, probe_agent

REPLAY_AFTER_LIST = script(
    [call("list_dlq_events")],
    [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
)


@dataclass
class Traced:
    client: AsyncTestClient[Any]
    exporter: InMemorySpanExporter

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]


@asynccontextmanager
async def traced_app(
    database_url: str, *, agents: Sequence[AgentDefinition] = (), model: Model | None = None
) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = build_telemetry(TelemetryConfig(), tracer_provider=provider)
    settings = make_settings(database_url)
    container = build_container(settings, telemetry=telemetry, extra_agents=agents, model=model)
    try:
        async with AsyncTestClient(app=create_app(settings, container=container)) as client:
            client.headers.update(await admin_headers(database_url))
            yield Traced(client, exporter)
    finally:
        telemetry.shutdown()
        provider.shutdown()


def captured_logs() -> Any:
    """`capture_logs` with the processors that put bound ids and the trace id on every line."""
    return structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars, add_trace_id])


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


def events(logs: list[EventDict], name: str) -> list[EventDict]:
    return [e for e in logs if e["event"] == name]


def metric_families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(families: dict[str, Any], family: str, suffix: str = "") -> list[Sample]:
    return [s for s in families[family].samples if s.name == family + suffix]


async def test_a_suspended_then_approved_run_is_one_trace(seeded: str) -> None:
    async with traced_app(seeded) as app:
        with captured_logs() as logs:
            cid = await create_conversation(app.client)
            run = await post_message(app.client, cid, REPLAY_AFTER_LIST)
            assert run["status"] == "suspended"
            decided = await resolve(app.client, run["pending"][0]["correlation_id"], decision="approve")
            assert decided.status_code == 200
            assert (await get_run(app.client, run["id"]))["status"] == "completed"
            recorded = await tool_calls(app.client, run["id"])

    first, second = sorted(app.spans("run.segment"), key=lambda s: s.start_time or 0)
    trace_id = hex_trace(first)
    assert hex_trace(second) == trace_id
    assert second.parent is not None
    assert first.context is not None
    assert second.parent.span_id == first.context.span_id, "the resumed segment continues the first"
    assert first.attributes is not None
    assert second.attributes is not None
    assert (first.attributes["sursis.segment"], second.attributes["sursis.segment"]) == (1, 2)
    assert first.attributes["sursis.run.status"] == "suspended"
    assert second.attributes["sursis.run.status"] == "completed"

    [posted] = app.spans("POST /v1/conversations/{conversation_id}/messages")
    assert hex_trace(posted) == trace_id, "the run's trace starts at the request that queued it"
    # The request's transaction also leased the run to this process's worker (the hand-off).
    assert [e.name for e in posted.events] == ["run.queued", "run.started"]
    assert [e.name for e in first.events] == ["pending.requested", "run.suspended"]
    assert [e.name for e in second.events] == ["run.completed"]
    [resolving] = app.spans("POST /v1/pending/{correlation_id}/resolve")
    approved, resumed = resolving.events
    assert (approved.name, resumed.name) == ("pending.approved", "run.resumed")
    assert approved.attributes is not None
    assert approved.attributes["sursis.correlation_id"] == run["pending"][0]["correlation_id"]

    agent_spans = [s for s in app.spans() if s.name.split(" ")[0] in ("invoke_agent", "chat", "execute_tool")]
    assert {s.name.split(" ")[0] for s in agent_spans} == {"invoke_agent", "chat", "execute_tool"}
    assert {hex_trace(s) for s in agent_spans} == {trace_id}

    assert [r["tool_name"] for r in recorded] == ["list_dlq_events", "replay_dlq_event"]
    assert {r["trace_id"] for r in recorded} == {trace_id}
    assert {e["trace_id"] for e in events(logs, "tool.call")} == {trace_id}
    segment_lines = [e for e in logs if e.get("segment") is not None]
    assert segment_lines
    assert {e["trace_id"] for e in segment_lines} == {trace_id}
    assert {e["run_id"] for e in segment_lines} == {run["id"]}
    assert {e["conversation_id"] for e in segment_lines} == {cid}


async def test_every_executed_tool_call_is_measured_with_its_outcome(seeded: str) -> None:
    content = script([call(name) for name in OUTCOMES] + [call("gated_write", target="ledger")], "done")
    async with traced_app(seeded, agents=[probe_agent()]) as app:
        with captured_logs() as logs:
            cid = await create_conversation(app.client, agent="probe")
            run = await post_message(app.client, cid, content)
            assert run["status"] == "suspended"
            [gated] = run["pending"]
            suspended_logs = list(logs)
            await resolve(app.client, gated["correlation_id"], decision="deny", reason="not today")
            assert (await get_run(app.client, run["id"]))["status"] == "completed"
        recorded = {r["tool_name"]: r for r in await tool_calls(app.client, run["id"])}
        families = metric_families((await app.client.get("/metrics")).text)

    measured = {e["tool_name"]: e for e in events(logs, "tool.call")}
    assert sorted(measured) == sorted(OUTCOMES), "one tool.call per executed call; none for the suspension"
    assert len(events(logs, "tool.call")) == len(OUTCOMES)
    assert "gated_write" not in recorded
    [segment] = [s for s in app.spans("run.segment") if s.attributes and s.attributes["sursis.segment"] == 1]
    tool_spans = {
        s.name.removeprefix("execute_tool "): s for s in app.spans() if s.name.startswith("execute_tool")
    }

    for name, (ok, error_class, error_code) in OUTCOMES.items():
        event = measured[name]
        assert (event["ok"], event["error_class"], event["error_code"]) == (ok, error_class, error_code), name
        assert event["trace_id"] == hex_trace(segment)
        assert event["agent_name"] == "probe"
        assert event["latency_ms"] >= 0
        assert event["tool_call_id"] == recorded[name]["tool_call_id"]
        assert event["run_id"] == run["id"]
        attributes = tool_spans[name].attributes
        assert attributes is not None
        assert attributes["sursis.tool.ok"] is ok, name
        assert attributes["sursis.tool.error_class"] == (error_class or "")
        assert attributes["sursis.tool.latency_ms"] == event["latency_ms"]
        row = recorded[name]
        assert (row["ok"], row["error_class"], row["error_code"]) == (ok, error_class, error_code), name
        assert row["agent_name"] == "probe"
        assert row["trace_id"] == event["trace_id"]
        assert row["started_at"] <= row["ended_at"]
        assert row["latency_ms"] >= 0

    gated_span = tool_spans["gated_write"].attributes
    assert gated_span is not None
    assert "sursis.tool.ok" not in gated_span, "an approval suspension is not an executed call"
    assert tool_spans["gated_write"].status.status_code is not StatusCode.ERROR
    assert not [
        e for e in suspended_logs if e.get("tool_name") == "gated_write" and e["event"] == "tool.call"
    ]

    [crash] = events(logs, "tool.unexpected_error")
    assert crash["tool_name"] == "unexpected_error"
    assert crash["exc_info"] is True
    assert SECRET_DETAIL not in json.dumps(recorded["unexpected_error"]["result"])

    outcomes = {
        (s.labels["tool"], s.labels["outcome"]): s.value
        for s in samples(families, "sursis_tool_duration_seconds", "_count")
    }
    assert outcomes == {(name, "ok" if ok else str(cls)): 1.0 for name, (ok, cls, _) in OUTCOMES.items()}


async def test_one_canonical_line_per_request_with_its_request_id(seeded: str) -> None:
    async with traced_app(seeded) as app:
        with captured_logs() as logs:
            created = await app.client.post("/v1/conversations", json={"agent": "ops"})
            cid = created.json()["id"]
            given = await app.client.get(
                f"/v1/conversations/{cid}", headers={"X-Request-ID": "req-from-proxy.1"}
            )
            missing = await app.client.get("/v1/nowhere")
            hostile = await app.client.get("/healthz", headers={"X-Request-ID": "a b\nc"})

    lines = events(logs, "http.request")
    assert [(e["method"], e["path"], e["status"]) for e in lines] == [
        ("POST", "/v1/conversations", 201),
        ("GET", f"/v1/conversations/{cid}", 200),
        ("GET", "/v1/nowhere", 404),
        ("GET", "/healthz", 200),
    ]
    responses = [created, given, missing, hostile]
    assert [e["request_id"] for e in lines] == [r.headers["x-request-id"] for r in responses]
    assert lines[1]["request_id"] == "req-from-proxy.1"
    assert lines[3]["request_id"] != "a b\nc"
    assert lines[1]["conversation_id"] == cid
    assert [e["route"] for e in lines] == [
        "/v1/conversations",
        "/v1/conversations/{conversation_id}",
        None,
        "/healthz",
    ]
    assert "GET /v1/conversations/{conversation_id}" in {s.name for s in app.spans()}
    assert all(isinstance(e["duration_ms"], float) for e in lines)
    servers = {hex_trace(s) for s in app.spans() if s.name.split(" ")[0] in ("GET", "POST")}
    assert {e["trace_id"] for e in lines} <= servers
    assert len({e["trace_id"] for e in lines}) == 4
    assert "request_id" not in structlog.contextvars.get_contextvars(), "request ids do not leak"


async def test_excluded_paths_are_logged_but_not_traced(seeded: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_PYTHON_EXCLUDED_URLS", "healthz,metrics")
    async with traced_app(seeded) as app:
        with captured_logs() as logs:
            assert (await app.client.get("/healthz")).status_code == 200
            assert (await app.client.get("/readyz")).status_code == 200

    assert [e["path"] for e in events(logs, "http.request")] == ["/healthz", "/readyz"]
    [traced] = app.spans()
    assert traced.name == "GET /readyz"


async def test_metrics_parse_as_prometheus_text(seeded: str) -> None:
    async with traced_app(seeded) as app:
        cid = await create_conversation(app.client)
        run = await post_message(app.client, cid, REPLAY_AFTER_LIST)
        while_waiting = await app.client.get("/metrics")
        await resolve(app.client, run["pending"][0]["correlation_id"], decision="approve")
        assert (await get_run(app.client, run["id"]))["status"] == "completed"
        after = await app.client.get("/metrics")
        openmetrics = await app.client.get("/metrics", headers={"Accept": "application/openmetrics-text"})

    assert while_waiting.status_code == 200
    assert while_waiting.headers["content-type"].startswith("text/plain; version=")
    waiting = metric_families(while_waiting.text)
    awaiting = {s.labels["kind"]: s.value for s in samples(waiting, "sursis_pending_awaiting")}
    assert awaiting == {"approval": 1.0, "elicitation": 0.0, "client_exec": 0.0}
    active = {s.labels["status"]: s.value for s in samples(waiting, "sursis_runs_active")}
    assert active["suspended"] == 1.0

    done = metric_families(after.text)
    assert {s.labels["kind"]: s.value for s in samples(done, "sursis_pending_awaiting")}["approval"] == 0.0
    assert done["sursis_runs"].type == "counter"
    runs = {s.labels["status"]: s.value for s in samples(done, "sursis_runs", "_total")}
    assert runs == {"queued": 2.0, "running": 2.0, "suspended": 1.0, "completed": 1.0}
    assert done["sursis_pending_decision_duration_seconds"].type == "histogram"
    [decided] = samples(done, "sursis_pending_decision_duration_seconds", "_count")
    assert decided.labels == {"kind": "approval", "outcome": "approved", "tool": "replay_dlq_event"}
    assert decided.value == 1.0
    tools = {s.labels["tool"] for s in samples(done, "sursis_tool_duration_seconds", "_count")}
    assert tools == {"list_dlq_events", "replay_dlq_event"}
    assert "gen_ai_client_token_usage" in done, "pydantic-ai's own metrics share the meter provider"
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")


def priced_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart("priced answer")],
        usage=RequestUsage(input_tokens=1000, output_tokens=500),
        model_name="gpt-4o",
        provider_name="openai",
    )


async def priced_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    """The runner streams every model response; this one's usage is counted by the function model."""
    yield "priced answer"


GPT_4O_USD_PER_TOKEN = (Decimal("2.5") / 1_000_000, Decimal("10") / 1_000_000)


@pytest.mark.parametrize(
    ("model", "expected_cost"),
    [(FunctionModel(priced_turn, stream_function=priced_stream, model_name="gpt-4o"), True), (None, None)],
    ids=["priced", "scripted"],
)
async def test_a_run_shows_its_usage_and_estimated_cost(
    seeded: str, model: Model | None, expected_cost: bool | None
) -> None:
    async with traced_app(seeded, model=model) as app:
        cid = await create_conversation(app.client)
        run = await post_message(app.client, cid, "what does it cost?")
        shown = await get_run(app.client, run["id"])

    assert shown["status"] == "completed"
    usage = shown["usage"]
    assert usage["requests"] == 1
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    if expected_cost is None:
        assert usage["estimated_cost_usd"] is None
    else:
        input_price, output_price = GPT_4O_USD_PER_TOKEN
        priced = usage["input_tokens"] * input_price + usage["output_tokens"] * output_price
        assert Decimal(str(usage["estimated_cost_usd"])) == priced
