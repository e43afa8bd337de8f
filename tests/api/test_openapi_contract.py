"""The OpenAPI document lists every error each operation can answer, as problem+json with its codes."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
from litestar._openapi.plugin import OpenAPIPlugin
from litestar.testing import AsyncTestClient

from sursis.app.openapi_contract import codes_for
from sursis.app.schemas import WORKSPACE_PATTERN
from sursis.domain.identity.people import GROUP

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
                component = media["schema"]["$ref"].removeprefix("#/components/schemas/")
                [_, codes] = document["components"]["schemas"][component]["allOf"]
                if codes["properties"]["code"]["enum"] != codes_for(int(status)):
                    missing.append(f"{label}: {status} codes differ")
    assert missing == []


async def test_the_document_is_built_at_its_first_request_whichever_page_asks(
    client: AsyncTestClient[Any],
) -> None:
    """Start-up does not build the document (a process that never serves it does not hold it); the
    Swagger page asked first builds it documented, and the JSON served after it is the same."""
    plugin = client.app.plugins.get(OpenAPIPlugin)
    assert plugin._openapi is None, "the document was built at start-up"
    page = await client.get("/schema/swagger")
    assert page.status_code == 200
    assert "Problem404" in page.text
    document = (await client.get("/schema/openapi.json")).json()
    assert "Problem404" in document["components"]["schemas"]
    assert document["paths"]["/v1/pending/{correlation_id}/resolve"]["post"]["responses"]["409"]


def test_problem_codes_come_from_the_error_table() -> None:
    assert codes_for(409) == [
        "already_consumed",
        "already_reported",
        "already_voted",
        "approval_expired",
        "args_changed",
        "conflict",
        "digest_mismatch",
        "fork_point_unsettled",
        "group_exists",
        "idempotency_conflict",
        "idempotency_key_reused",
        "invalid_transition",
        "not_approved",
        "not_consumed",
        "run_active",
        "stale",
        "unsealed_value",
        "world_exists",
    ]
    assert codes_for(422) == [
        "audit_period_too_short",
        "fork_point_not_a_turn",
        "fork_point_out_of_range",
        "invalid_decision",
        "invalid_digest",
        "invalid_member",
        "invalid_policy",
        "validation_failed",
    ]
    assert "above_ceiling" in codes_for(403)
    assert "not_requester" in codes_for(403)
    assert "conversation_purged" in codes_for(404)
    assert codes_for(503) == ["database_unavailable", "identity_provider_unreachable", "unavailable"]
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
        "ProvisioningRuleIn",
    ):
        assert schemas[name]["additionalProperties"] is False, name
    workspace = schemas["CreateConversation"]["properties"]["workspace"]["anyOf"][0]
    assert workspace == {"maxLength": 100, "minLength": 1, "pattern": "^[A-Za-z0-9_.-]+$", "type": "string"}
    extra = await client.post("/v1/conversations", json={"agent": "ops", "surprise": 1})
    assert extra.status_code == 422


async def test_a_body_its_handler_validates_is_documented_by_its_model(client: AsyncTestClient[Any]) -> None:
    """The AG-UI route reads a JSON object and validates it as `RunAgentInput` itself (AG-UI's types
    load at the first run); the document still gives the model's schema for the body."""
    document = (await client.get("/schema/openapi.json")).json()
    body = document["paths"]["/v1/agents/{name}/ag-ui"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/RunAgentInput"}
    run_input = document["components"]["schemas"]["RunAgentInput"]
    assert {"threadId", "runId", "messages"} <= set(run_input["required"])


def param(document: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    [found] = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == name]
    schema: dict[str, Any] = found["schema"]
    return schema


async def test_constraints_the_service_enforces_are_in_the_document(client: AsyncTestClient[Any]) -> None:
    """Each constraint in the document, and the server refusing (422) what it refuses and taking
    what it admits: the document and the check agree on the same samples."""
    document = (await client.get("/schema/openapi.json")).json()
    schemas = document["components"]["schemas"]

    agent = schemas["CreateConversation"]["properties"]["agent"]
    assert agent["enum"] == ["assistant", "customer", "ops", "world"]
    assert (await client.post("/v1/conversations", json={"agent": "nobody"})).status_code == 422
    assert (await client.post("/v1/conversations", json={"agent": "assistant"})).status_code == 201

    tool = schemas["CreateAuthorization"]["properties"]["tool_name"]
    assert "replay_dlq_event" in tool["enum"] and "list_dlq_events" not in tool["enum"]
    refused = await client.post("/v1/authorizations", json={"tool_name": "list_dlq_events", "reason": "r"})
    assert refused.status_code == 422

    url = schemas["CreateWebhook"]["properties"]["url"]
    assert url["format"] == "uri" and url["maxLength"] == 2000
    valid_url = jsonschema_rs.validator_for(url)
    for sample, admitted in (
        ("https://hooks.example.com/sursis?x=1", True),
        ("http://hooks.example.com:8080", True),
        ("ftp://hooks.example.com/x", False),
        ("/relative/path", False),
        ("hooks.example.com/x", False),
        ("https://user:secret@hooks.example.com/x", False),
        ("https://hooks.example.com/a b", False),
        ("https://hooks.example.com/\x01", False),
    ):
        assert valid_url.is_valid(sample) is admitted, sample
        answer = await client.post("/v1/webhooks", json={"url": sample, "events": ["run.completed"]})
        assert answer.status_code == (201 if admitted else 422), (sample, answer.text)
    events = schemas["CreateWebhook"]["properties"]["events"]["items"]["enum"]
    assert "run.completed" in events
    unknown = await client.post("/v1/webhooks", json={"url": "https://h.example.com", "events": ["run.x"]})
    assert unknown.status_code == 422

    action = param(document, "/v1/audit", "action")
    assert action["maxItems"] == 20 and action["items"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 100,
    }
    for value, status in (("pending.approved", 200), ("", 422), ("a" * 101, 422)):
        assert (await client.get("/v1/audit", params={"action": value})).status_code == status, value

    rule = "/v1/oidc/provisioning/{group}"
    [group] = [p["schema"] for p in document["paths"][rule]["put"]["parameters"] if p["name"] == "group"]
    assert (group["minLength"], group["maxLength"], group["pattern"]) == (1, 200, GROUP.pattern)
    for value, status in (("sre-oncall", 200), ("Finance Team", 200), ("g" * 201, 422)):
        answer = await client.put(f"/v1/oidc/provisioning/{value}", json={"role": "admin"})
        assert answer.status_code == status, (value, answer.text)

    for path in ("/v1/audit", "/v1/pending"):
        cursor = param(document, path, "cursor")
        valid_cursor = jsonschema_rs.validator_for(cursor)
        assert cursor["maxLength"] == 200
        for sample in ("not a cursor", "a/b", "=", "x" * 201):
            assert not valid_cursor.is_valid(sample), sample
            assert (await client.get(path, params={"cursor": sample})).status_code == 422, (path, sample)
        assert valid_cursor.is_valid("YXVkaXR8MQ==")

    workspace = param(document, "/v1/conversations", "workspace")
    assert workspace["pattern"] == WORKSPACE_PATTERN and workspace["minLength"] == 1
    assert (await client.get("/v1/conversations", params={"workspace": "a b"})).status_code == 422
    assert (await client.get("/v1/conversations", params={"workspace": "team-a"})).status_code == 200
    for model in ("CreateConversation", "CreateWebhook", "CreateWorld", "CreateKey", "EventIn"):
        [shape, _] = schemas[model]["properties"]["workspace"]["anyOf"]
        assert shape["pattern"] == WORKSPACE_PATTERN, model
    assert (
        await client.post("/v1/worlds", json={"domain": "d", "title": "t", "workspace": "a/b"})
    ).status_code == 422
