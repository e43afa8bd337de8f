"""Who may call what: every /v1 route x every role x own/other workspace, by status code.

The objects live in workspace `default`. A caller of the *own* workspace has a key for
`default`; a caller of the *other* workspace has a key for `elsewhere` (for an admin, that only
changes its home workspace: admins see every workspace). Another workspace's objects answer 404,
an object the caller can see but whose action its role does not allow answers 403. A user key
answers only the calls of the conversations it created: another key's answer 403.

`test_the_table_covers_every_v1_route` fails when a route is added without a row here.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from tests.api.conftest import LiveFactory
from tests.api.http_calls import create_conversation, post_message
from tests.conftest import KeyMaker, bearer, call, make_settings, script

ROLES = ("user", "operator", "admin")
PLACES = ("own", "other")
HOME = {"own": "default", "other": "elsewhere"}


def tomorrow() -> str:
    return (datetime.now(UTC) + timedelta(days=1)).isoformat()


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    expected: dict[str, dict[str, int]]
    """The status by role, then by place (`own` or `other` workspace)."""

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


def routes(table: str) -> list[Route]:
    """One route a line: its method and path, then the status a user, an operator and an admin get,
    each in its own workspace and in another; `#` starts a note."""
    parsed = []
    for line in table.splitlines():
        words = line.partition("#")[0].split()
        if not words:
            continue
        method, path, *codes = words
        assert len(codes) == len(ROLES) * len(PLACES), line
        statuses = iter(int(code) for code in codes)
        expected = {role: {place: next(statuses) for place in PLACES} for role in ROLES}
        parsed.append(Route(method, path, expected))
    return parsed


@dataclass
class Objects:
    """What the routes act on, all in workspace `default`, made by an admin (except the caller's
    own elicitation, see `ask_as`)."""

    ids: dict[str, str] = field(default_factory=dict)


# Objects live in `default`: a caller of another workspace gets 404 for them (admins see all), and
# 403 where it sees the object but its role does not allow the action.
ROUTES = routes(
    """
    #                                                                  user      operator  admin
    #                                                                  own oth   own oth   own oth
    GET    /v1/me                                                      200 200   200 200   200 200
    GET    /v1/agents                                                  200 200   200 200   200 200
    # An AG-UI run: a thread of the caller's own workspace, whatever that workspace is.
    POST   /v1/agents/{agent_name}/ag-ui                               200 200   200 200   200 200
    POST   /v1/conversations                                           201 404   201 404   201 201
    GET    /v1/conversations                                           200 200   200 200   200 200
    GET    /v1/conversations/{conversation_id}                         200 404   200 404   200 200
    POST   /v1/conversations/{idle_conversation_id}/messages           202 404   202 404   202 202
    # Forking another key's conversation, then the caller's own.
    POST   /v1/conversations/{conversation_id}/fork                    403 404   201 404   201 201
    POST   /v1/conversations/{own_conversation_id}/fork                201 201   201 201   201 201
    GET    /v1/runs/{run_id}                                           200 404   200 404   200 200
    GET    /v1/runs/{run_id}/tool-calls                                200 404   200 404   200 200
    POST   /v1/runs/{cancel_run_id}/cancel                             200 404   200 404   200 200
    GET    /v1/pending                                                 200 200   200 200   200 200
    GET    /v1/pending/{approval_id}                                   200 404   200 404   200 200
    POST   /v1/pending/{approval_id}/resolve                           403 404   200 404   200 200
    # An elicitation of another key's conversation, then one of the caller's own (`ask_as`).
    POST   /v1/pending/{elicitation_id}/resolve                        403 404   200 404   200 200
    POST   /v1/pending/{own_elicitation_id}/resolve                    200 200   200 200   200 200
    GET    /v1/audit                                                   403 403   200 200   200 200
    GET    /v1/authorizations                                          403 403   200 200   200 200
    # The role is asked before the body (and its workspace) is read: a user gets 403 anywhere.
    POST   /v1/authorizations                                          403 403   201 404   201 201
    DELETE /v1/authorizations/{authorization_id}                       403 404   200 404   200 200
    GET    /v1/webhooks                                                403 403   200 200   200 200
    POST   /v1/webhooks                                                403 403   201 201   201 201
    DELETE /v1/webhooks/{webhook_id}                                   403 404   204 404   204 204
    GET    /v1/keys                                                    403 403   403 403   200 200
    POST   /v1/keys                                                    403 403   403 403   201 201
    DELETE /v1/keys/{key_id}                                           403 403   403 403   200 200
    PUT    /v1/keys/{key_id}/person                                    403 403   403 403   200 200
    GET    /v1/oidc/provisioning                                       403 403   403 403   200 200
    PUT    /v1/oidc/provisioning/{provider_group}                      403 403   403 403   200 200
    DELETE /v1/oidc/provisioning/{provider_group}                      403 403   403 403   204 204
    # Admins only; an operator of the workspace is told so, anyone else does not see it.
    POST   /v1/worlds                                                  403 404   403 404   201 201
    GET    /v1/worlds                                                  200 200   200 200   200 200
    GET    /v1/worlds/{world_id}                                       200 404   200 404   200 200
    POST   /v1/worlds/{world_id}/decisions                             403 404   201 404   201 201
    POST   /v1/worlds/{world_id}/decisions/{decision_id}/flags         201 404   201 404   201 201
    GET    /v1/worlds/{world_id}/rules                                 200 404   200 404   200 200
    # The rule is a candidate: a customer (user key) sees only versions in force.
    GET    /v1/worlds/{world_id}/rules/{rule_id}                       404 404   200 404   200 200
    POST   /v1/worlds/{world_id}/conversations                         201 404   201 404   201 201
    GET    /v1/channels/slack/users                                    403 403   403 403   200 200
    PUT    /v1/channels/slack/users/{team_id}/{user_id}                403 403   403 403   200 200
    DELETE /v1/channels/slack/users/{team_id}/{mapped_user_id}         403 403   403 403   204 204
    GET    /v1/channels/bindings                                       403 403   200 200   200 200
    # The role is asked first; an operator of another workspace does not see the conversation
    # its body names: a wrong body (422 on `conversation_id`), as for a missing one.
    POST   /v1/channels/bindings                                       403 403   201 422   201 201
    DELETE /v1/channels/bindings/{binding_id}                          403 404   204 404   204 204
    GET    /v1/retention/policies/{workspace}                          403 403   403 403   200 200
    PUT    /v1/retention/policies/{workspace}                          403 403   403 403   200 200
    GET    /v1/retention/plan                                          403 403   403 403   200 200
    POST   /v1/retention/run                                           403 403   403 403   200 200
    GET    /v1/retention/holds                                         403 403   403 403   200 200
    POST   /v1/retention/holds                                         403 403   403 403   201 201
    DELETE /v1/retention/holds/{hold_id}                               403 403   403 403   204 204
    GET    /v1/audit/verify                                            403 403   403 403   200 200
    GET    /v1/policies                                                403 403   403 403   200 200
    PUT    /v1/policies                                                403 403   403 403   200 200
    POST   /v1/policies/simulate                                       403 403   403 403   200 200
    # After the PUT above: the caller's workspace has version 1.
    GET    /v1/policies/versions/{policy_version}                      403 403   403 403   200 200
    GET    /v1/policies/schema                                         403 403   403 403   200 200
    GET    /v1/policies/tools                                          403 403   403 403   200 200
    GET    /v1/mcp/pins                                                403 403   403 403   200 200
    # No agent of the matrix has an MCP server: nothing is pinned, the admin gets 404.
    POST   /v1/mcp/pins/{agent}/{tool}/accept                          403 403   403 403   404 404
    GET    /v1/ladder                                                  200 200   200 200   200 200
    PUT    /v1/ladder                                                  200 200   200 200   200 200
    POST   /v1/groups                                                  403 403   403 403   201 201
    GET    /v1/groups                                                  403 403   403 403   200 200
    GET    /v1/groups/{workspace}/{group_name}                         403 403   403 403   200 200
    POST   /v1/groups/{workspace}/{group_name}/members                 403 403   403 403   200 200
    DELETE /v1/groups/{workspace}/{group_name}/members/{member_key_id} 403 403   403 403   200 200
    DELETE /v1/groups/{workspace}/{group_name}                         403 403   403 403   204 204
    # Approvers delegate to a key of their own workspace: another workspace's key is a wrong body.
    POST   /v1/delegations                                             403 403   201 422   201 422
    GET    /v1/delegations                                             403 403   200 200   200 200
    # Its delegator or an admin; to another operator it does not exist.
    DELETE /v1/delegations/{delegation_id}                             403 403   404 404   200 200
    # Admins only; this call is decided by any operator (no approver groups): a wrong target.
    POST   /v1/pending/{approval_id}/reassign                          403 403   403 403   422 422
    POST   /v1/events                                                  403 403   403 403   202 202
    # An agent outside files into its own workspace (the body names `default`).
    POST   /v1/approvals                                               201 404   201 404   201 201
    GET    /v1/approvals/abandoned                                     200 200   200 200   200 200
    GET    /v1/approvals/{filed_id}                                    200 404   200 404   200 200
    # Only the key that filed a request consumes it and reports its outcome (an admin filed this one).
    POST   /v1/approvals/{filed_id}/consume                            403 404   403 404   403 403
    POST   /v1/approvals/{filed_id}/outcome                            403 404   403 404   403 403
"""
)

BODIES: dict[str, Callable[[Objects], Any]] = {
    "POST /v1/conversations": lambda o: {"agent": "ops", "workspace": "default"},
    "POST /v1/conversations/{idle_conversation_id}/messages": lambda o: {"content": "hello"},
    "POST /v1/agents/{agent_name}/ag-ui": lambda o: {
        "threadId": f"matrix-{uuid.uuid4()}",
        "runId": "r",
        "messages": [{"id": "m", "role": "user", "content": "hello"}],
    },
    "POST /v1/conversations/{conversation_id}/fork": lambda o: {"at": 1},
    "POST /v1/conversations/{own_conversation_id}/fork": lambda o: {"at": 1, "message": "once more"},
    "POST /v1/pending/{approval_id}/resolve": lambda o: {"decision": "deny", "reason": "not now"},
    "POST /v1/pending/{elicitation_id}/resolve": lambda o: {
        "decision": "answer",
        "result": "hooks.example.com",
    },
    "POST /v1/pending/{own_elicitation_id}/resolve": lambda o: {
        "decision": "answer",
        "result": "hooks.example.com",
    },
    "POST /v1/authorizations": lambda o: {
        "tool_name": "triage_cluster",
        "reason": "noisy cluster",
        "workspace": "default",
    },
    "POST /v1/webhooks": lambda o: {"url": "https://hooks.example.com/sursis", "events": ["pending.created"]},
    "POST /v1/keys": lambda o: {"role": "user", "workspace": "default"},
    "PUT /v1/keys/{key_id}/person": lambda o: {"person": "oidc:matrix-person"},
    "PUT /v1/oidc/provisioning/{provider_group}": lambda o: {"role": "operator", "workspace": "default"},
    "POST /v1/worlds": lambda o: {
        "domain": f"d{uuid.uuid4().hex[:12]}",
        "title": "new world",
        "workspace": "default",
    },
    "POST /v1/worlds/{world_id}/decisions": lambda o: {
        "id": "dec-new",
        "rule_ids": ["r1"],
        "context": {},
        "outcome": "allow",
    },
    "POST /v1/worlds/{world_id}/decisions/{decision_id}/flags": lambda o: {
        "id": "flag-new",
        "kind": "review_request",
        "reason": "looks wrong",
    },
    "PUT /v1/channels/slack/users/{team_id}/{user_id}": lambda o: {"key_id": o.ids["slack_key_id"]},
    "POST /v1/channels/bindings": lambda o: {
        "kind": "email",
        "email": "ops@example.com",
        "conversation_id": o.ids["conversation_id"],
    },
    "PUT /v1/retention/policies/{workspace}": lambda o: {"conversation_days": 3650},
    "POST /v1/retention/holds": lambda o: {
        "workspace": "default",
        "conversation_id": o.ids["conversation_id"],
        "reason": "case",
    },
    "PUT /v1/policies": lambda o: {"rules": []},
    "POST /v1/policies/simulate": lambda o: {"rules": [], "since": "2026-01-01T00:00:00Z"},
    "POST /v1/mcp/pins/{agent}/{tool}/accept": lambda o: {"digest": "0" * 64},
    "PUT /v1/ladder": lambda o: {"tool": "replay_dlq_event", "level": "ask"},
    "POST /v1/groups": lambda o: {"workspace": "default", "name": "made-here"},
    "POST /v1/groups/{workspace}/{group_name}/members": lambda o: {"key_id": o.ids["slack_key_id"]},
    "POST /v1/delegations": lambda o: {"delegate": o.ids["slack_key_id"], "ends_at": tomorrow()},
    "POST /v1/pending/{approval_id}/reassign": lambda o: {"to": ["group:matrix"]},
    "POST /v1/approvals": lambda o: {
        "tool_name": "wire_money",
        "args": {"amount": 1},
        "agent": "matrix-bot",
        "workspace": "default",
    },
    "POST /v1/approvals/{filed_id}/consume": lambda o: {"digest": "0" * 64},
    "POST /v1/approvals/{filed_id}/outcome": lambda o: {"outcome": "ran"},
    "POST /v1/events": lambda o: {
        "id": str(uuid.uuid4()),
        "type": "anomaly.detected",
        "data": {"kind": "cost_spike", "metric": "judge_cost_usd", "baseline": 1.0, "observed": 2.0},
    },
}
"""The body each route is sent with (none for the others)."""

SETTLES = {"POST /v1/conversations/{idle_conversation_id}/messages"}
"""202 (queued) and 200 (already settled by the worker) are the same answer for these."""

TEMPLATE_OF = {
    "{conversation_id}": "{conversation_id}",
    "{idle_conversation_id}": "{conversation_id}",
    "{own_conversation_id}": "{conversation_id}",
    "{run_id}": "{run_id}",
    "{cancel_run_id}": "{run_id}",
    "{approval_id}": "{correlation_id}",
    "{elicitation_id}": "{correlation_id}",
    "{own_elicitation_id}": "{correlation_id}",
    "{authorization_id}": "{authorization_id}",
    "{key_id}": "{key_id}",
    "{world_id}": "{world_id}",
    "{decision_id}": "{decision_id}",
    "{rule_id}": "{rule_id}",
    "{team_id}": "{team_id}",
    "{user_id}": "{user_id}",
    "{mapped_user_id}": "{user_id}",
    "{binding_id}": "{binding_id}",
    "{hold_id}": "{hold_id}",
    "{policy_version}": "{version}",
    "{workspace}": "{workspace}",
    "{group_name}": "{name}",
    "{member_key_id}": "{key_id}",
    "{delegation_id}": "{delegation_id}",
    "{filed_id}": "{correlation_id}",
    "{agent_name}": "{name}",
    "{provider_group}": "{group}",
}


def app_template(path: str) -> str:
    for ours, theirs in TEMPLATE_OF.items():
        path = path.replace(ours, theirs)
    return path


@functools.cache
def v1_routes() -> frozenset[tuple[str, str]]:
    app = create_app(make_settings("sqlite+aiosqlite:///:memory:"))
    return frozenset(
        (method, route.path_format)
        for route in app.routes
        if route.path_format.startswith("/v1")
        for method in getattr(route, "methods", set())
        if method not in ("HEAD", "OPTIONS")
    )


SIGNED_ROUTES = routes(
    """
    POST   /v1/channels/slack/events                                   401 401   401 401   401 401
    POST   /v1/channels/slack/interactions                             401 401   401 401   401 401
"""
)
"""Slack calls these with its request signature, never with a key: every key gets 401
`bad_signature` (`test_signed_routes_refuse_every_key`); the signature is tested in tests/channels."""

[EVENT_STREAM, PENDING_STREAM] = routes(
    """
    GET    /v1/conversations/{conversation_id}/events                  200 404   200 404   200 200
    GET    /v1/pending/events                                          200 200   200 200   200 200
"""
)
"""Both stream forever, so they are checked on a real socket in
`test_the_event_streams_answer_each_role_by_workspace`."""


def test_the_table_covers_every_v1_route() -> None:
    covered = [*ROUTES, *SIGNED_ROUTES, EVENT_STREAM, PENDING_STREAM]
    assert {(r.method, app_template(r.path)) for r in covered} == v1_routes()


async def make_objects(client: AsyncTestClient[Any], keys: KeyMaker) -> Objects:
    conversation_id = await create_conversation(client, workspace="default")
    suspended = await post_message(
        client,
        conversation_id,
        script(
            [
                call("replay_dlq_event", event_id="evt_1001", reason="retry"),
                call("ask_operator", question="ok?"),
            ]
        ),
    )
    assert suspended["status"] == "suspended", suspended
    by_kind = {p["kind"]: p["correlation_id"] for p in suspended["pending"]}
    other = await create_conversation(client, workspace="default")
    to_cancel = await post_message(
        client, other, script([call("replay_dlq_event", event_id="evt_1002", reason="x")])
    )
    assert to_cancel["status"] == "suspended", to_cancel
    authorization = await client.post(
        "/v1/authorizations", json={"tool_name": "triage_cluster", "reason": "setup", "workspace": "default"}
    )
    assert authorization.status_code == 201, authorization.text
    spare: IssuedKey = await keys.issue("user", "default", name="spare")
    webhook = await client.post(
        "/v1/webhooks",
        json={"url": "https://hooks.example.com/setup", "events": ["run.completed"], "workspace": "default"},
    )
    assert webhook.status_code == 201, webhook.text
    world_id, rule_id = await make_world(client)
    slack_key: IssuedKey = await keys.issue("operator", "default", name="slack")
    mapped = await client.put(
        "/v1/channels/slack/users/T0MATRIX/U0MAPPED", json={"key_id": str(slack_key.key.id)}
    )
    assert mapped.status_code == 200, mapped.text
    binding = await client.post(
        "/v1/channels/bindings",
        json={"kind": "email", "email": "setup@example.com", "conversation_id": conversation_id},
    )
    assert binding.status_code == 201, binding.text
    hold = await client.post("/v1/retention/holds", json={"workspace": "default", "reason": "setup"})
    rule = await client.put("/v1/oidc/provisioning/matrix-group", json={"role": "admin"})
    assert rule.status_code == 200, rule.text
    assert hold.status_code == 201, hold.text
    group_name = f"g{uuid.uuid4().hex[:12]}"
    group = await client.post("/v1/groups", json={"workspace": "default", "name": group_name})
    assert group.status_code == 201, group.text
    await client.delete("/v1/groups/default/made-here")
    delegation = await client.post(
        "/v1/delegations", json={"delegate": str(slack_key.key.id), "ends_at": tomorrow()}
    )
    assert delegation.status_code == 201, delegation.text
    filed = await client.post(
        "/v1/approvals",
        json={
            "tool_name": "wire_money",
            "args": {"amount": 2},
            "agent": "matrix-bot",
            "workspace": "default",
        },
    )
    assert filed.status_code == 201, filed.text
    return Objects(
        ids={
            "filed_id": filed.json()["correlation_id"],
            "agent_name": "ops",
            "provider_group": "matrix-group",
            "conversation_id": conversation_id,
            "idle_conversation_id": await create_conversation(client, workspace="default"),
            "own_conversation_id": conversation_id,  # the caller's own, once the caller is known
            "run_id": suspended["id"],
            "cancel_run_id": to_cancel["id"],
            "approval_id": by_kind["approval"],
            "elicitation_id": by_kind["elicitation"],
            "authorization_id": authorization.json()["id"],
            "key_id": str(spare.key.id),
            "webhook_id": webhook.json()["id"],
            "world_id": world_id,
            "decision_id": "dec-1",
            "rule_id": rule_id,
            "team_id": "T0MATRIX",
            "user_id": "U0MATRIX",
            "mapped_user_id": "U0MAPPED",
            "slack_key_id": str(slack_key.key.id),
            "binding_id": binding.json()["id"],
            "hold_id": hold.json()["id"],
            "policy_version": "1",
            "workspace": "default",
            "group_name": group_name,
            "member_key_id": str(slack_key.key.id),
            "delegation_id": delegation.json()["id"],
            "agent": "ops",
            "tool": "replay_dlq_event",
        }
    )


async def make_world(client: AsyncTestClient[Any]) -> tuple[str, str]:
    """A world of `default` with one recorded decision (`dec-1`) and one candidate rule."""
    world = await client.post(
        "/v1/worlds", json={"domain": f"d{uuid.uuid4().hex[:12]}", "title": "setup", "workspace": "default"}
    )
    assert world.status_code == 201, world.text
    world_id = world.json()["id"]
    decision = await client.post(
        f"/v1/worlds/{world_id}/decisions",
        json={"id": "dec-1", "rule_ids": ["r1"], "context": {}, "outcome": "allow"},
    )
    assert decision.status_code == 201, decision.text
    session = await client.post(f"/v1/worlds/{world_id}/conversations")
    assert session.status_code == 201, session.text
    proposed = await post_message(
        client,
        session.json()["conversation"]["id"],
        script([call("propose_rule_candidate", text="Refunds over 100 need a manager", evidence={})]),
    )
    assert proposed["status"] == "completed", proposed
    rules = (await client.get(f"/v1/worlds/{world_id}/rules")).json()["items"]
    return world_id, str(rules[0]["rule_id"])


async def ask_as(client: AsyncTestClient[Any], caller: dict[str, str]) -> str:
    """The correlation id of an elicitation in a conversation the caller created (in its home
    workspace)."""
    created = await client.post("/v1/conversations", json={"agent": "ops"}, headers=caller)
    assert created.status_code == 201, created.text
    posted = await client.post(
        f"/v1/conversations/{created.json()['id']}/messages",
        params={"wait": 10},
        json={"content": script([call("ask_operator", question="which host?")])},
        headers=caller,
    )
    assert posted.json()["status"] == "suspended", posted.text
    [elicitation] = posted.json()["pending"]
    return str(elicitation["correlation_id"])


@pytest.mark.parametrize(("role", "place"), [(role, place) for role in ROLES for place in PLACES])
async def test_every_route_answers_each_role_by_workspace(
    client: AsyncTestClient[Any], keys: KeyMaker, role: str, place: str
) -> None:
    objects = await make_objects(client, keys)
    caller = bearer(await keys.make(role, HOME[place], name=f"{role}@{place}"))
    objects.ids["own_elicitation_id"] = await ask_as(client, caller)
    own = await client.get(f"/v1/pending/{objects.ids['own_elicitation_id']}", headers=caller)
    objects.ids["own_conversation_id"] = own.json()["conversation_id"]
    got: dict[str, int] = {}
    for route in ROUTES:
        body = BODIES.get(route.label)
        response = await client.request(
            route.method,
            route.path.format(**objects.ids),
            json=body(objects) if body else None,
            headers=caller,
        )
        status = response.status_code
        got[route.label] = 202 if route.label in SETTLES and status == 200 else status
        if status >= 400:
            assert response.headers["content-type"].startswith("application/problem+json")
    expected = {r.label: r.expected[role][place] for r in ROUTES}
    assert {k: v for k, v in got.items() if v != expected[k]} == {}
    assert got == expected


async def test_listings_of_another_workspace_show_nothing_of_this_one(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    objects = await make_objects(client, keys)
    elsewhere = bearer(await keys.make("operator", "elsewhere"))
    pending = (await client.get("/v1/pending", headers=elsewhere)).json()
    assert pending["items"] == []
    audit = await client.get(
        "/v1/audit", params={"conversation_id": objects.ids["conversation_id"]}, headers=elsewhere
    )
    assert audit.json()["items"] == []
    assert (await client.get("/v1/authorizations", headers=elsewhere)).json() == []
    own = bearer(await keys.make("operator", "default"))
    # An approval and an elicitation of one run, an approval of the other, the filed request.
    assert len((await client.get("/v1/pending", headers=own)).json()["items"]) == 4
    assert (await client.get("/v1/approvals/abandoned", headers=elsewhere)).json() == []
    filed = await client.get(f"/v1/approvals/{objects.ids['filed_id']}", headers=elsewhere)
    assert filed.status_code == 404
    assert (await client.get("/v1/audit", headers=own)).json()["items"]


def placeholder_path(path_format: str) -> str:
    """Every path parameter (all are ids) filled with a random UUID."""
    return re.sub(r"\{[^}]+\}", lambda _: str(uuid.uuid4()), path_format)


WRONG_CREDENTIALS = [
    "",
    "Bearer",
    "Basic dXNlcjpwYXNz",
    "Bearer srs_not-a-key-anyone-made-0000000000000000000000",
    "Bearer " + "x" * 5000,
    "Token srs_x",
]


async def test_signed_routes_refuse_every_key(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    for role in ROLES:
        caller = bearer(await keys.make(role, "default"))
        for route in SIGNED_ROUTES:
            response = await client.request(route.method, route.path, json={}, headers=caller)
            assert response.status_code == 401, (role, route.path)
            assert response.json()["code"] == "bad_signature"


async def test_every_v1_route_refuses_a_missing_or_wrong_key(client: AsyncTestClient[Any]) -> None:
    signed = {(r.method, r.path) for r in SIGNED_ROUTES}
    for header in WRONG_CREDENTIALS:
        for method, path_format in sorted(v1_routes() - signed):
            response = await client.request(
                method,
                placeholder_path(path_format),
                json={} if method in ("POST", "PUT", "PATCH") else None,
                headers={"Authorization": header},
            )
            assert response.status_code == 401, (header[:20], method, path_format, response.text)
            assert response.json()["code"] == "unauthenticated"
            assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_revoked_key_is_refused_from_the_next_request(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    issued = await keys.issue("operator", "default")
    assert (await client.get("/v1/pending", headers=bearer(issued.secret))).status_code == 200
    revoked = await client.delete(f"/v1/keys/{issued.key.id}")
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    refused = await client.get("/v1/pending", headers=bearer(issued.secret))
    assert refused.status_code == 401
    assert refused.json()["code"] == "unauthenticated"


async def test_health_and_schema_need_no_key(client: AsyncTestClient[Any]) -> None:
    for path in ("/healthz", "/readyz", "/schema/openapi.json"):
        response = await client.get(path, headers={"Authorization": ""})
        assert response.status_code == 200, path
    schema = (await client.get("/schema/openapi.json")).json()
    assert schema["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key made by `sursis keys create`",
    }
    assert schema["paths"]["/v1/pending"]["get"]["security"] == [{"ApiKey": []}]
    assert "security" not in schema["paths"]["/healthz"]["get"]


async def test_the_event_streams_answer_each_role_by_workspace(
    client: AsyncTestClient[Any], keys: KeyMaker, live: LiveFactory
) -> None:
    conversation_id = await create_conversation(client, workspace="default")
    async with live() as app:
        for route in (EVENT_STREAM, PENDING_STREAM):
            path = route.path.format(conversation_id=conversation_id)
            for role in ROLES:
                for place in PLACES:
                    caller = bearer(await keys.make(role, HOME[place], name=f"stream {role}@{place}"))
                    async with app.http.stream("GET", path, headers=caller) as response:
                        assert response.status_code == route.expected[role][place], (path, role, place)
            async with app.http.stream("GET", path, headers={"Authorization": "Bearer nope"}) as response:
                assert response.status_code == 401
