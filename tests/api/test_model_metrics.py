"""pydantic-ai's metrics of each model request (`gen_ai.client.token.usage`, `operation.cost`) on
`/metrics`, whether spans are recorded (pydantic-ai's instrumentation capability on every agent) or
not (the process's default: no capability, the model wrapped by `Telemetry.instrument_model`): the
same families, labels and values either way."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel

from sursis.app.container import build_container
from sursis.app.main import create_app
from sursis.infra.telemetry import TelemetryConfig, build_telemetry
from tests.api.http_calls import create_conversation, get_run, post_message, resolve
from tests.api.test_observability import REPLAY_AFTER_LIST, metric_families, priced_stream, priced_turn
from tests.conftest import admin_headers, make_settings

FAMILIES = ("gen_ai_client_token_usage", "operation_cost")

Measured = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def measured(database_url: str, model: Model | None, *, traced: bool) -> Measured:
    """The model metrics' samples after one turn: an approval turn on the `scripted` model (three
    requests), one answer from the priced model."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = build_telemetry(TelemetryConfig(), tracer_provider=provider if traced else None)
    assert telemetry.records_spans is traced
    settings = make_settings(database_url)
    container = build_container(settings, telemetry=telemetry, model=model)
    try:
        async with AsyncTestClient(app=create_app(settings, container=container)) as client:
            client.headers.update(await admin_headers(database_url))
            cid = await create_conversation(client)
            run = await post_message(client, cid, REPLAY_AFTER_LIST)
            for pending in run["pending"]:
                await resolve(client, pending["correlation_id"], decision="approve")
            assert (await get_run(client, run["id"]))["status"] == "completed"
            text = (await client.get("/metrics")).text
    finally:
        telemetry.shutdown()
        provider.shutdown()
    families = metric_families(text)
    found: Measured = {}
    for name in FAMILIES:
        for sample in families[name].samples if name in families else ():
            if sample.name.endswith(("_sum", "_count")):
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


@pytest.mark.parametrize(
    "model",
    [FunctionModel(priced_turn, stream_function=priced_stream, model_name="gpt-4o"), None],
    ids=["priced", "scripted"],
)
async def test_model_metrics_are_the_same_without_recorded_spans(seeded: str, model: Model | None) -> None:
    traced = await measured(seeded, model, traced=True)
    untraced = await measured(seeded, model, traced=False)
    assert untraced == traced
    counts = {labels: value for (name, labels), value in untraced.items() if name.endswith("_count")}
    token_types = {
        dict(labels)["gen_ai_token_type"] for labels in counts if "gen_ai_token_type" in dict(labels)
    }
    assert token_types == {"input", "output"}
    request_models: set[Any] = {dict(labels).get("gen_ai_request_model") for labels in counts}
    assert request_models == {"gpt-4o" if model is not None else "scripted"}
    costs = [v for (name, _), v in untraced.items() if name == "operation_cost_count"]
    assert costs == ([1.0] if model is not None else [])  # no price is known for `scripted`
