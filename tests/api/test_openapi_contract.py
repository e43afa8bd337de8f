"""The OpenAPI document lists every error each operation can answer, as problem+json with its codes."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from abeyance.app.openapi_contract import codes_for

PROBLEM = "application/problem+json"


async def test_every_operation_documents_its_problem_responses(client: AsyncTestClient[Any]) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    assert "Problem" in document["components"]["schemas"]
    missing: list[str] = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation["responses"]
            label = f"{method.upper()} {path}"
            if "400" in responses:
                missing.append(f"{label}: documents a 400 the service never sends")
            if not path.startswith("/v1/"):
                continue
            signed = operation.get("security") == [{"SlackSignature": []}]
            # Slack's routes are signed, not keyed: a bad signature (401), never 403 or 429.
            wanted = {"401", "413", "422", "503"} if signed else {"401", "403", "429", "503"}
            locations = {p["in"] for p in operation.get("parameters", [])}
            if "path" in locations:
                wanted.add("404")
            if "requestBody" in operation:
                wanted |= {"413", "415", "422"}
            if locations:
                wanted.add("422")
            for status in sorted(wanted):
                if status not in responses:
                    missing.append(f"{label}: no {status}")
                    continue
                media = responses[status]["content"].get(PROBLEM)
                if media is None:
                    missing.append(f"{label}: {status} is not problem+json")
                    continue
                [_, codes] = media["schema"]["allOf"]
                if codes["properties"]["code"]["enum"] != codes_for(int(status)):
                    missing.append(f"{label}: {status} codes differ")
    assert missing == []


def test_problem_codes_come_from_the_error_table() -> None:
    assert codes_for(409) == ["args_changed", "conflict", "invalid_transition", "run_active", "stale"]
    assert codes_for(422) == ["invalid_decision", "validation_failed"]
    assert codes_for(503) == ["database_unavailable", "unavailable"]
    assert codes_for(415) == ["unsupported_media_type"]


async def test_request_bodies_are_documented_as_they_are_validated(client: AsyncTestClient[Any]) -> None:
    schemas = (await client.get("/schema/openapi.json")).json()["components"]["schemas"]
    for name in (
        "CreateConversation",
        "PostMessage",
        "ResolveBody",
        "CreateAuthorization",
        "CreateKey",
        "CreateWebhook",
    ):
        assert schemas[name]["additionalProperties"] is False, name
    workspace = schemas["CreateConversation"]["properties"]["workspace"]["anyOf"][0]
    assert workspace == {"maxLength": 100, "minLength": 1, "pattern": "^[A-Za-z0-9_.-]+$", "type": "string"}
    extra = await client.post("/v1/conversations", json={"agent": "ops", "surprise": 1})
    assert extra.status_code == 422
