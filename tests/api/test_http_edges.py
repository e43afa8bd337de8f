"""HTTP at its edges: bytes that are not UTF-8, bodies that are not JSON, headers that are not
HTTP, parameters of the wrong shape, methods a path does not have, and permission before validation.
Every answer is a problem document with a `code`."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.http_protocols import ProblemH11Protocol, ProblemHttpToolsProtocol
from sursis.app.main import create_app
from tests.api.http_calls import create_conversation
from tests.api.live import serve
from tests.api.test_hostile_input import assert_problem, suspended_replay
from tests.conftest import KeyMaker, bearer, make_settings

NOT_UTF8 = b'{"agent":"\xff\xfe"}'


async def test_a_body_that_is_not_utf8_is_422(client: AsyncTestClient[Any]) -> None:
    pending = await suspended_replay(client)
    cid = await create_conversation(client)
    for path, body in (
        ("/v1/conversations", NOT_UTF8),
        (f"/v1/conversations/{cid}/messages", b'{"content":"\xc3\x28"}'),
        (f"/v1/pending/{pending['correlation_id']}/resolve", b'{"decision":"deny","reason":"\xed\xa0\x80"}'),
    ):
        response = await client.post(path, content=body, headers={"content-type": "application/json"})
        problem = assert_problem(response, 422, "validation_failed")
        assert ["body"] in [e["loc"] for e in problem["errors"]], (path, problem)
    assert (await client.get(f"/v1/pending/{pending['correlation_id']}")).json()["status"] == "awaiting"


async def test_a_body_that_is_not_json_by_its_media_type_is_415(client: AsyncTestClient[Any]) -> None:
    for media_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        response = await client.post(
            "/v1/conversations", content=b'{"agent": "ops"}', headers={"content-type": media_type}
        )
        problem = assert_problem(response, 415, "unsupported_media_type")
        assert "application/json" in problem["detail"]
    for media_type in ("application/json", "application/json; charset=utf-8", "application/merge+json"):
        response = await client.post(
            "/v1/conversations", content=b'{"agent": "ops"}', headers={"content-type": media_type}
        )
        assert response.status_code == 201, (media_type, response.text)


async def raw_exchange(url: str, request: bytes) -> tuple[list[str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()  # the socket is closed by the time this returns, never left to the collector
        await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.decode().lower().split("\r\n"), body


def assert_problem_400(lines: list[str], body: bytes) -> None:
    assert lines[0].startswith("http/1.1 400"), lines
    assert "content-type: application/problem+json" in lines
    assert f"content-length: {len(body)}" in lines
    assert json.loads(body)["code"] == "bad_request"


@pytest.mark.parametrize("protocol", [ProblemH11Protocol, ProblemHttpToolsProtocol])
async def test_a_request_that_is_not_valid_http_gets_a_problem_document(
    protocol: type[Any], seeded: str
) -> None:
    """httptools (the default) refuses a control character in a header value; h11 lets it through
    and the app replaces the unusable request id. Either way no plain-text answer."""
    async with serve(create_app(make_settings(seeded)), http=protocol) as url:
        lines, body = await raw_exchange(
            url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Request-ID: a\x01b\r\n\r\n"
        )
        if protocol is ProblemHttpToolsProtocol:
            assert_problem_400(lines, body)
        else:
            assert lines[0].startswith("http/1.1 200"), lines
            [request_id] = [line.split(": ", 1)[1] for line in lines if line.startswith("x-request-id:")]
            assert request_id.isalnum()
        lines, body = await raw_exchange(
            url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nno colon here\r\n\r\n"
        )
        assert_problem_400(lines, body)


async def test_audit_since_must_be_an_iso_timestamp(client: AsyncTestClient[Any]) -> None:
    for since in ("0.5", "1700000000", "yesterday", "2026-11-25", "2026-11-25T10:00:00"):
        problem = assert_problem(
            await client.get("/v1/audit", params={"since": since}), 422, "validation_failed"
        )
        assert problem["errors"][0]["loc"] == ["query", "since"], (since, problem)
    for since in ("2026-11-25T10:00:00Z", "2026-11-25T10:00:00.5+02:00"):
        assert (await client.get("/v1/audit", params={"since": since})).status_code == 200, since


async def test_405_says_what_is_allowed_and_options_lists_every_method(client: AsyncTestClient[Any]) -> None:
    expected = {
        "/v1/keys": {"GET", "POST", "OPTIONS"},
        "/v1/authorizations": {"GET", "POST", "OPTIONS"},
        "/v1/webhooks": {"GET", "POST", "OPTIONS"},
        "/v1/pending": {"GET", "OPTIONS"},
        "/v1/conversations": {"GET", "POST", "OPTIONS"},
        f"/v1/keys/{uuid.uuid4()}": {"DELETE", "OPTIONS"},
    }
    for path, methods in expected.items():
        options = await client.options(path)
        assert options.status_code == 204, (path, options.text)
        assert {m.strip() for m in options.headers["allow"].split(",")} == methods, path
        refused = await client.put(path, json={})
        assert_problem(refused, 405, "method_not_allowed")
        assert {m.strip() for m in refused.headers["allow"].split(",")} == methods, path


async def test_permission_is_checked_before_the_body_is_validated(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    operator, user = bearer(await keys.make("operator")), bearer(await keys.make("user"))
    for body in ({"role": "emperor"}, {"nonsense": True}, []):
        assert_problem(await client.post("/v1/keys", json=body, headers=operator), 403, "forbidden")
    for path in ("/v1/authorizations", "/v1/webhooks"):
        assert_problem(await client.post(path, json={"bad": 1}, headers=user), 403, "forbidden")
    assert_problem(await client.post("/v1/keys", json={"role": "emperor"}), 422, "validation_failed")
