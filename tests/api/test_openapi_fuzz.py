"""Property test of the whole OpenAPI surface with schemathesis against the real app.

Every operation gets valid and invalid generated requests, with random ids and with ids of real
objects (a suspended run, its approval and elicitation, a pre-approval, a spare key, a channel
binding, a Slack user mapping), sent with an admin key (Slack's signed routes refuse it: 401). Whatever is generated, the answer is never a 5xx, its status is one the document
lists for the operation, and every error is a problem response. The number of examples is
bounded (`EXAMPLES` per operation).
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import AsyncTestClient
from schemathesis import GenerationMode
from schemathesis.python import asgi

from abeyance.app.main import create_app
from tests.api.http_calls import create_conversation, post_message
from tests.conftest import KeyMaker, bearer, call, make_settings, script

EXAMPLES = 20


async def real_objects(seeded: str, keys: KeyMaker) -> dict[str, str]:
    """Objects made through the API with a worker, so the fuzzed app (without one) finds them."""
    async with AsyncTestClient(app=create_app(make_settings(seeded))) as client:
        client.headers.update(bearer(await keys.make("admin")))
        conversation_id = await create_conversation(client)
        run = await post_message(
            client,
            conversation_id,
            script(
                [
                    call("replay_dlq_event", event_id="evt_1001", reason="retry"),
                    call("ask_operator", question="ok?"),
                ]
            ),
        )
        assert run["status"] == "suspended", run
        authorization = await client.post(
            "/v1/authorizations", json={"tool_name": "replay_dlq_event", "reason": "r"}
        )
        assert authorization.status_code == 201
        webhook = await client.post(
            "/v1/webhooks", json={"url": "https://hooks.example.com/fuzz", "events": ["run.completed"]}
        )
        assert webhook.status_code == 201
        world = (await client.post("/v1/worlds", json={"domain": "fuzz", "title": "fuzz"})).json()
        decision = {"id": "d-fuzz", "rule_ids": [], "context": {}, "outcome": "o"}
        assert (await client.post(f"/v1/worlds/{world['id']}/decisions", json=decision)).status_code == 201
        session = (await client.post(f"/v1/worlds/{world['id']}/conversations")).json()
        proposed = await post_message(
            client,
            session["conversation"]["id"],
            script([call("propose_rule_candidate", text="t", evidence={})]),
        )
        assert proposed["status"] == "completed", proposed
        rules = (await client.get(f"/v1/worlds/{world['id']}/rules")).json()["items"]
        binding = await client.post(
            "/v1/channels/bindings",
            json={"kind": "email", "email": "fuzz@example.com", "conversation_id": conversation_id},
        )
        assert binding.status_code == 201
        spare = await keys.issue("user", "default", name="spare")
        mapped = await client.put(
            "/v1/channels/slack/users/T0FUZZ/U0FUZZ", json={"key_id": str(spare.key.id)}
        )
        assert mapped.status_code == 200
    return {
        "conversation_id": conversation_id,
        "run_id": run["id"],
        "correlation_id": run["pending"][0]["correlation_id"],
        "authorization_id": authorization.json()["id"],
        "key_id": str(spare.key.id),
        "webhook_id": webhook.json()["id"],
        "world_id": world["id"],
        "decision_id": "d-fuzz",
        "rule_id": rules[0]["rule_id"],
        "binding_id": binding.json()["id"],
        "team_id": "T0FUZZ",
        "user_id": "U0FUZZ",
    }


async def test_no_generated_request_gets_a_server_error(seeded: str, keys: KeyMaker) -> None:
    known = await real_objects(seeded, keys)
    admin = bearer(await keys.make("admin", name="fuzzer"))
    app = create_app(make_settings(seeded, run_worker=False, max_wait_seconds=0, rate_limit_per_minute=0))
    schema = schemathesis.openapi.from_asgi("/schema/openapi.json", app)
    failures: list[str] = []
    operations = 0
    try:
        for result in schema.get_all_operations():
            operation = result.ok()
            operations += 1
            if operation.path == "/v1/pending/events":
                # Every valid request streams forever; its errors are tested in test_pending_stream.
                continue
            names = {p.name for p in operation.path_parameters}
            strategies = [
                operation.as_strategy(mode) for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            ]
            # The event stream of a real conversation never ends: it only gets ids that do not exist.
            if names and not operation.path.endswith("/events"):
                fixed = {name: known[name] for name in names}
                strategies.append(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=fixed))
                strategies.append(operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=fixed))

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=st.one_of(strategies))
            def check(case: Any) -> None:
                response = case.call(headers=admin)
                documented = case.operation.definition.raw["responses"]
                if str(response.status_code) not in documented:
                    failures.append(
                        f"{case.operation.label}: undocumented {response.status_code} for {case.as_curl_command()}"
                    )
                if response.status_code >= 500:
                    failures.append(
                        f"{case.operation.label}: {response.status_code} for {case.as_curl_command()}"
                    )
                elif response.status_code >= 400:
                    assert response.headers["content-type"][0].startswith("application/problem+json"), (
                        case.as_curl_command()
                    )

            check()
    finally:
        asgi.shutdown_lifespans()
    assert operations >= 17
    assert failures == []
