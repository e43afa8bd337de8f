"""`sursis.client.AsyncClient` against the real app served on a loopback port."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from sursis.client import (
    AsyncClient,
    AuthenticationError,
    Event,
    InvalidRequestError,
    NotFoundError,
    PendingCall,
    Review,
    Run,
    RunActiveError,
    StaleError,
)
from tests.api.conftest import Live, LiveFactory
from tests.api.test_pending_cli import refund_call, reviewed_call
from tests.channels.test_slack_reviewer import SETTINGS as REVIEWED
from tests.conftest import KeyMaker, call, script

REPLAY = script(
    [call("list_dlq_events")],
    [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
)


def client_of(app: Live, **kwargs: object) -> AsyncClient:
    key = app.http.headers["Authorization"].removeprefix("Bearer ")
    return AsyncClient(app.base_url, key, **kwargs)  # type: ignore[arg-type]


async def test_an_approval_round_trip_is_typed_end_to_end(live: LiveFactory) -> None:
    async with live() as app, client_of(app) as client:
        conversation = await client.create_conversation("ops", workspace="default")
        run = await client.send(conversation.id, REPLAY, wait=10)
        assert isinstance(run, Run) and run.status == "suspended" and run.settled
        [pending] = run.pending
        assert isinstance(pending, PendingCall)
        assert (pending.tool_name, pending.kind, pending.status) == (
            "replay_dlq_event",
            "approval",
            "awaiting",
        )
        listed = [c.correlation_id async for c in client.iter_pending(tool_name="replay_dlq_event")]
        assert listed == [pending.correlation_id]
        assert (
            await client.get_pending(pending.correlation_id)
        ).effect_description == pending.effect_description

        with pytest.raises(RunActiveError) as active:
            await client.send(conversation.id, "another message")
        assert (active.value.status, active.value.code) == (409, "run_active")

        decided = await client.resolve(pending.correlation_id, "approve")
        assert decided.status == "approved"
        with pytest.raises(StaleError) as stale:
            await client.resolve(pending.correlation_id, "deny", reason="too late")
        assert stale.value.status == 409 and stale.value.problem["resolved_by"] == decided.resolved_by

        done = await client.wait_for_run(run.id, within=15)
        assert (done.status, done.error) == ("completed", None)
        assert done.usage.requests >= 3
        detail = await client.get_conversation(conversation.id)
        assert detail.active_run is None and len(detail.messages) >= 4


async def test_error_answers_raise_the_exception_of_their_code(live: LiveFactory) -> None:
    async with live() as app, client_of(app) as client:
        with pytest.raises(NotFoundError) as missing:
            await client.get_run(uuid.uuid4())
        assert (missing.value.status, missing.value.code) == (404, "not_found")
        with pytest.raises(InvalidRequestError) as invalid:
            await client.create_conversation("no-such-agent")
        assert invalid.value.code == "validation_failed" and invalid.value.errors[0]["loc"] == ["agent"]
        with pytest.raises(InvalidRequestError):
            await client.resolve(uuid.uuid4(), "maybe")
        async with AsyncClient(app.base_url, "srs_not_a_key") as stranger:
            with pytest.raises(AuthenticationError) as refused:
                await stranger.list_pending()
        assert refused.value.status == 401


class DroppingTransport(httpx.AsyncBaseTransport):
    """Cuts the first event stream after `events` events, as a flaky network would."""

    def __init__(self, events: int) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._events = events
        self.stream_requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if request.url.path.endswith("/events"):
            self.stream_requests.append(request)
            if len(self.stream_requests) == 1:
                response.stream = _Cut(response.stream, self._events)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Cut(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, events: int) -> None:
        self._inner = inner
        self._events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending, sent = b"", 0
        async for chunk in self._inner:
            pending += chunk
            *messages, pending = re.split(rb"\r?\n\r?\n", pending)
            for message in messages:
                yield message + b"\r\n\r\n"
                sent += re.search(rb"(^|\n)event:", message) is not None
                if sent == self._events:
                    raise httpx.ReadError("connection reset")

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _until_completed(events: AsyncIterator[Event]) -> list[Event]:
    seen: list[Event] = []
    async for event in events:
        seen.append(event)
        if event.type == "run.completed":
            return seen
    return seen


async def test_events_reconnect_with_last_event_id_and_miss_nothing(live: LiveFactory) -> None:
    async with live() as app, client_of(app) as client:
        conversation = await client.create_conversation("ops")
        run = await client.send(conversation.id, REPLAY, wait=10)
        await client.resolve(run.pending[0].correlation_id, "approve")
        assert (await client.wait_for_run(run.id, within=15)).status == "completed"
        everything = await _until_completed(client.events(conversation.id))

        transport = DroppingTransport(events=3)
        key = app.http.headers["Authorization"]
        http = httpx.AsyncClient(base_url=app.base_url, headers={"Authorization": key}, transport=transport)
        async with AsyncClient(app.base_url, "", http=http) as flaky:
            resumed = await _until_completed(flaky.events(conversation.id, reconnect_delay=0.05))

    assert [e.id for e in resumed] == [e.id for e in everything]
    assert len(everything) > 3 and everything[0].conversation_id == conversation.id
    first, second = transport.stream_requests[:2]
    assert "Last-Event-ID" not in first.headers
    assert second.headers["Last-Event-ID"] == str(everything[2].id)


async def test_a_stream_of_an_unknown_conversation_raises_instead_of_retrying(live: LiveFactory) -> None:
    async with live() as app, client_of(app) as client:
        with pytest.raises(NotFoundError):
            async for _ in client.events(uuid.uuid4()):
                pass


async def test_a_message_sent_without_streaming_gets_its_text_as_one_delta(live: LiveFactory) -> None:
    async with live(events_delta_interval_seconds=0) as app, client_of(app) as client:
        conversation = await client.create_conversation("ops")
        whole = await client.send(conversation.id, "tell me three words", wait=10, stream=False)
        streamed = await client.send(conversation.id, "tell me three words", wait=10)
        events = await _until_completed(client.events(conversation.id))
        events += await _until_completed(client.events(conversation.id, after=events[-1].id))
    assert (whole.status, streamed.status) == ("completed", "completed")
    deltas: dict[object, list[str]] = {}
    for event in events:
        if event.type == "message.delta":
            deltas.setdefault(event.data["run_id"], []).append(event.data["text"])
    assert deltas[str(whole.id)] == [whole.output]
    assert len(deltas[str(streamed.id)]) == len(str(streamed.output).split()) > 1


async def test_a_pending_call_carries_its_reviewer_verdict(live: LiveFactory, keys: KeyMaker) -> None:
    rex = await keys.make("operator", "default", name="rex")
    async with (
        live(**{k: v for k, v in REVIEWED.items() if k != "slack_agent"}) as app,
        client_of(app) as client,
    ):
        correlation_id = await reviewed_call(app, rex)
        plain = await refund_call(app, rex, "R9")
        shown = await client.get_pending(correlation_id)
        assert isinstance(shown.review, Review)
        assert (shown.review.model, shown.review.verdict, shown.review.effect, shown.review.reason) == (
            "scripted",
            "yes",
            "left_to_people",
            "a large refund",
        )
        assert shown.review.policy_version == 1 and shown.review.decided_at is not None
        listed = {c.correlation_id: c.review async for c in client.iter_pending(status="all")}
        assert listed[uuid.UUID(correlation_id)] == shown.review
        assert listed[uuid.UUID(plain)] is None
        assert (await client.get_pending(plain)).review is None
