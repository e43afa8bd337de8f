"""schemathesis over the whole OpenAPI surface, every check on, against the real app on a socket.

Every operation of `/schema/openapi.json` (new routes included, with nothing to list here) gets
schemathesis's coverage cases (boundaries, missing and wrong-typed parameters, methods the path
does not have) and generated valid and invalid requests, with random ids and with ids of real
objects (a suspended run, its approval, a pre-approval, a webhook, a world and its rule, a spare
key, a channel binding, a Slack user mapping), sent with an admin key (Slack's signed routes
refuse it: 401). Each answer goes through all of schemathesis's checks (`--checks
all`: no 5xx, status, content type, headers and body as documented, invalid data refused, valid
data accepted, auth not ignored, `Allow` on 405 ...). The event streams never end: they are read
until their first message (`: connected`), then checked like any other answer.

Any finding fails the test, with the case as a curl command. What the checks are told to expect
differently is in `SEMANTIC_422`, each with its reason (docs/api-contract.md).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import AsyncTestClient
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.generation.meta import TestPhase

from sursis.app.main import create_app
from sursis.domain.clock import utcnow
from tests.api.http_calls import create_conversation, post_message
from tests.api.live import serve
from tests.conftest import KeyMaker, bearer, call, make_settings, script

EXAMPLES = int(os.environ.get("SURSIS_FUZZ_EXAMPLES", "8"))
"""Generated cases per operation and strategy (coverage cases come on top, all of them)."""
MESSAGE_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
"""A blank line: the end of a server-sent message, with any of the three line endings."""
STREAM_TIMEOUT = (10, 20)
"""Connect and read timeouts of an event stream: it answers and sends `: connected` at once, so a
read that times out is a finding."""
PROBE_TIMEOUT = (10, 20)
"""Connect and read timeouts of the requests checks send again (`ignored_auth` without the key):
a refusal comes at once, a stream that wrongly answers 200 ends in a read timeout, a finding.
Both are generous: they only matter when something is wrong, and CI machines can be busy."""
STREAM = "text/event-stream"

# Where a check is told to expect other statuses than its defaults, and why (docs/api-contract.md):
# positive data is valid by the document, and these operations also check what no schema can
# say, with a 422 `validation_failed` or `invalid_decision`. Every other operation must accept
# whatever the document admits.
SEMANTIC_422 = {
    # `decision` must fit the call's kind (approve/deny/revise an approval, answer a question)
    # and `result` the tool's declared result type: both depend on the stored call.
    "POST /v1/pending/{correlation_id}/resolve": "the decision must fit the stored call",
    # `args_match` may only name parameters of the named tool; `expires_at` must be in the future.
    "POST /v1/authorizations": "args_match keys and expires_at are checked against the tool and now",
    # A key's `expires_at` must be in the future: a key born expired could never be used.
    "POST /v1/keys": "expires_at is checked against now",
    # A cursor is opaque: its shape is in the document, its content is checked when decoded.
    "GET /v1/pending": "a cursor of the right shape can still decode to nothing",
    "GET /v1/audit": "a cursor of the right shape can still decode to nothing",
    "GET /v1/conversations": "a cursor of the right shape can still decode to nothing",
    # `data` must fit the event `type` (docs/customer-agent.md lists each shape).
    "POST /v1/events": "data is checked against the schema of its type",
    # `key_id` must name an active key: which keys exist is not in the document.
    "PUT /v1/channels/slack/users/{team_id}/{user_id}": "key_id must name an active key",
    # `conversation_id` and `workspace` must name what the key can see.
    "POST /v1/channels/bindings": "conversation_id and workspace must be visible to the key",
    # `audit_days` must be at least `conversation_days` (the audit log outlives what it describes).
    "PUT /v1/retention/policies/{workspace}": "audit_days is checked against conversation_days",
    # `conversation_id` must name a conversation of `workspace`.
    "POST /v1/retention/holds": "conversation_id must name a conversation of the workspace",
    # `expect` is one workspace's recorded head: it needs `workspace` too.
    "GET /v1/audit/verify": "expect checks one workspace's chain and needs workspace",
    # Conditions are Cedar, checked against the published schema; a rule's tools must be declared.
    "PUT /v1/policies": "conditions are checked by Cedar against the schema, tools against the catalog",
    "POST /v1/policies/simulate": "the same rules; `until` must come after `since`",
    # The tool must be declared; an `ask_above` condition is Cedar, checked against the schema.
    "PUT /v1/ladder": "the tool must be declared; the condition is checked by Cedar",
    # Members, delegates and reassignment targets must name active operator or admin keys (and
    # groups) of the workspace; a delegation must end in the future (docs/approval-routing.md).
    "POST /v1/groups": "members must name active operator or admin keys of the workspace",
    "POST /v1/groups/{workspace}/{name}/members": "key_id must name an active operator or admin key",
    "POST /v1/delegations": "delegate must name an active key; ends_at is checked against now",
    "POST /v1/pending/{correlation_id}/reassign": "targets must name groups and keys of the call's workspace",
    # `at` must be the seq of a user message the conversation has logged (docs/forks.md); `message`
    # must not be blank nor longer than the service's message limit (a setting).
    "POST /v1/conversations/{conversation_id}/fork": "at must name a logged user message",
    # An AG-UI run needs a user message (its role is in a union of message shapes) or resume entries.
    "POST /v1/agents/{name}/ag-ui": "a run needs a user message or resume entries",
    # A filed request's `digest`, when given, must be the hash of its `tool_name` and `args`
    # (docs/integrations.md), and its expiry is bounded by a setting.
    "POST /v1/approvals": "the digest must hash tool_name and args; the expiry is bounded",
    # A rule's workspace is required unless its role is admin, and refused when it is.
    "PUT /v1/oidc/provisioning/{group}": "workspace is required for a role but admin, refused for admin",
}
CONFIG: dict[str, Any] = {
    "checks": {"enabled": True},
    # A NUL character in any string of a body is refused (PostgreSQL's text and jsonb cannot hold
    # it), in free-form objects too, where no schema can say so; tests/api/test_hostile_input.py
    # covers that refusal.
    "generation": {"allow-x00": False},
    "operations": [
        {
            "include-name": label,
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "429"]
                }
            },
        }
        for label in SEMANTIC_422
    ],
}


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
        hold = await client.post("/v1/retention/holds", json={"workspace": "default", "reason": "fuzz"})
        assert hold.status_code == 201
        policy = await client.put("/v1/policies", json={"rules": []})
        assert policy.status_code == 200
        group = await client.post("/v1/groups", json={"workspace": "default", "name": "fuzz"})
        assert group.status_code == 201, group.text
        rule = await client.put("/v1/oidc/provisioning/fuzz-group", json={"role": "admin"})
        assert rule.status_code == 200, rule.text
        delegate = await keys.issue("operator", "default", name="delegate")
        ends_at = (utcnow() + timedelta(days=1)).isoformat()
        delegation = await client.post(
            "/v1/delegations", json={"delegate": str(delegate.key.id), "ends_at": ends_at}
        )
        assert delegation.status_code == 201, delegation.text
    return {
        "name": "fuzz",
        "delegation_id": delegation.json()["id"],
        "conversation_id": conversation_id,
        "run_id": run["id"],
        "correlation_id": run["pending"][0]["correlation_id"],
        "authorization_id": authorization.json()["id"],
        "key_id": str(spare.key.id),
        "webhook_id": webhook.json()["id"],
        "world_id": world["id"],
        "decision_id": "d-fuzz",
        "hold_id": hold.json()["id"],
        "workspace": "default",
        "version": str(policy.json()["version"]),
        "rule_id": rules[0]["rule_id"],
        "binding_id": binding.json()["id"],
        "team_id": "T0FUZZ",
        "user_id": "U0FUZZ",
        "agent": "ops",
        "tool": "replay_dlq_event",
        "group": "fuzz-group",
    }


def is_stream(operation: Any) -> bool:
    ok = operation.definition.raw["responses"].get("200", {})
    return STREAM in ok.get("content", {})


def about_authorization(case: Any) -> bool:
    data = getattr(case.meta.phase, "data", None) if case.meta else None
    names = {getattr(data, "parameter", None)}
    names |= {getattr(m, "parameter", None) for m in getattr(data, "mutations", None) or ()}
    return "Authorization" in names


def read_stream(case: Any, base_url: str, headers: dict[str, str]) -> requests.Response:
    """The answer of an event stream: status and headers, and the body up to its first message;
    errors are read whole."""
    kwargs = case.as_transport_kwargs(base_url=base_url, headers=headers)
    kwargs.pop("timeout", None)
    with requests.Session() as session:
        response = session.request(**kwargs, stream=True, timeout=STREAM_TIMEOUT)
        body = b""
        for chunk in response.iter_content(chunk_size=None):
            body += chunk
            if response.status_code == 200 and MESSAGE_END.search(body):
                break
        response.close()
    response._content = body
    response._content_consumed = True
    return response


@dataclass
class Findings:
    base_url: str
    headers: dict[str, str]
    cases: int = 0
    found: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def send(self, case: Any) -> None:
        """One case through every check; a finding is kept by operation and kind (one example each).

        The admin key is sent (as `-H` would), unless the case is about that header (a coverage
        case without it, or with a wrong one)."""
        self.cases += 1
        headers = {} if about_authorization(case) else self.headers
        started = time.monotonic()
        try:
            if is_stream(case.operation):
                response = read_stream(case, self.base_url, headers)
                transport = {"base_url": self.base_url, "headers": headers, "timeout": PROBE_TIMEOUT}
                case.validate_response(response, headers=headers, transport_kwargs=transport)
            else:
                case.call_and_validate(base_url=self.base_url, headers=headers, timeout=30)
        except (Exception, BaseExceptionGroup) as exc:  # check failures, or a transport error
            for failure in getattr(exc, "exceptions", None) or [exc]:
                title = getattr(failure, "title", type(failure).__name__)
                key = f"{case.operation.label}: {title}"
                if key not in self.found:
                    self.found[key] = f"{str(failure)[:1500]}\n    {case.as_curl_command(headers)}"
        finally:
            label = case.operation.label
            self.seconds[label] = self.seconds.get(label, 0.0) + time.monotonic() - started


def coverage_cases(schema: Any, operation: Any) -> Iterator[Any]:
    yield from schema.iter_coverage_cases(
        operation,
        generation_modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        generation_config=schema.config.generation_for(operation=operation, phase=TestPhase.COVERAGE.value),
    )


def fuzz(document: dict[str, Any], base_url: str, admin: dict[str, str], known: dict[str, str]) -> Findings:
    """Every operation, every check (runs in a thread: the server answers on the test's loop)."""
    config = SchemathesisConfig.from_dict(CONFIG)
    schema = schemathesis.openapi.from_dict(document, config=config)
    findings = Findings(base_url, admin)
    for result in schema.get_all_operations():
        operation = result.ok()
        for case in coverage_cases(schema, operation):
            findings.send(case)
        modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        strategies = [operation.as_strategy(mode, headers=admin) for mode in modes]
        names = {p.name for p in operation.path_parameters}
        if names:
            fixed = {name: known[name] for name in names}
            strategies += [
                operation.as_strategy(mode, headers=admin, path_parameters=fixed) for mode in modes
            ]

        @settings(
            max_examples=EXAMPLES * len(strategies),
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=st.one_of(strategies))
        def check(case: Any) -> None:
            findings.send(case)

        check()
    return findings


# PostgreSQL only: the HTTP layer is the same over SQLite, which the other API tests cover.
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_schemathesis_finds_nothing_on_any_operation(seeded: str, keys: KeyMaker) -> None:
    known = await real_objects(seeded, keys)
    admin = bearer(await keys.make("admin", name="fuzzer"))
    app = create_app(
        make_settings(
            seeded,
            run_worker=False,
            max_wait_seconds=0,
            rate_limit_per_minute=0,
            events_heartbeat_seconds=30,
            events_poll_seconds=5,
        )
    )
    async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        document = (await http.get("/schema/openapi.json")).json()
        findings = await asyncio.to_thread(fuzz, document, base_url, admin, known)
    operations = sum(len(item) for item in document["paths"].values())
    assert operations >= 30
    assert findings.cases >= operations * EXAMPLES
    slowest = sorted(findings.seconds.items(), key=lambda item: -item[1])[:8]
    print(f"{findings.cases} cases; slowest operations: {slowest}")
    assert not findings.found, "\n\n".join(f"{k}\n{v}" for k, v in sorted(findings.found.items()))
