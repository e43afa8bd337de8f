"""Each delegation is a span with the specialist's model and tool spans under it."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

from tests.api.http_calls import create_conversation, post_message
from tests.api.test_observability import traced_app
from tests.conftest import call, script
from tests.customer_scripts import delegation


def descendants(spans: list[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    assert root.context is not None
    children = [s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
    return children + [d for child in children for d in descendants(spans, child)]


async def test_each_delegation_is_a_span_with_the_specialists_spans_under_it(seeded: str) -> None:
    async with traced_app(seeded) as traced:
        cid = await create_conversation(traced.client, "customer")
        run = await post_message(
            traced.client,
            cid,
            script(
                [
                    delegation("scan-analyst", [call("get_scan_scores", scan_id="scan_102")]),
                    delegation("onboarding-guide", [call("get_trace_ingestion_guide")]),
                ]
            ),
        )
        assert run["status"] == "completed", run
    # Read after the app has stopped: the worker ends a segment's span after the run's status is
    # committed, so a reader inside the block could see the run completed before its span ends.
    spans = traced.spans()
    by_name = {s.name: s for s in spans}
    analyst = by_name["delegate customer/scan-analyst"]
    guide = by_name["delegate customer/onboarding-guide"]
    assert analyst.attributes is not None
    assert analyst.attributes["sursis.delegation.specialist"] == "scan-analyst"
    under_analyst = {s.name for s in descendants(spans, analyst)}
    under_guide = {s.name for s in descendants(spans, guide)}
    assert "invoke_agent scan-analyst" in under_analyst
    assert "execute_tool get_scan_scores" in under_analyst
    assert any(name.startswith("chat ") for name in under_analyst)
    assert "execute_tool get_trace_ingestion_guide" in under_guide
    assert "execute_tool get_scan_scores" not in under_guide
    # The delegation spans sit under the supervisor's `delegate` tool calls, in the run's one trace.
    trace_ids = {s.context.trace_id for s in (analyst, guide) if s.context is not None}
    segment = by_name["run.segment"]
    assert segment.context is not None
    assert trace_ids == {segment.context.trace_id}
    assert analyst.parent is not None
    parent = next(s for s in spans if s.context is not None and s.context.span_id == analyst.parent.span_id)
    assert parent.name == "execute_tool delegate"
