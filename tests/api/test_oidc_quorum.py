"""One person is one approver: a quorum routed to the provider's group `idp:finance` is met by two
people signed in through a real OpenID provider, and not by one person through their sign-in and
a key an admin linked to them; a person may not approve what their own key caused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.domain.access import Role
from sursis.domain.policy_decisions import ApprovalRoute
from tests.api.oidc_provider import LocalProvider, sign_in, start_provider
from tests.conftest import KeyMaker, bearer, call, make_settings, script
from tests.routing.kit import payments_agent

PEOPLE = {
    "alice": {"email": "alice@example.com", "groups": ["finance"]},
    "bob": {"email": "bob@example.com", "groups": ["finance"]},
    "rex": {"email": "rex@example.com", "groups": ["finance"]},
}
RULES = {"finance": {"role": "operator", "workspace": "default"}}
ROUTES = {"H1": ApprovalRoute(groups=("idp:finance", "keyholders"), quorum=2)}


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE)


@pytest.fixture
async def http(seeded: str, provider: LocalProvider) -> AsyncIterator[AsyncTestClient[Any]]:
    settings = make_settings(seeded, agents=["assistant"], run_worker=True, **provider.settings(**RULES))
    service = Service.from_settings(settings, agents=[payments_agent(ROUTES)])
    async with AsyncTestClient(app=create_app(settings, service=service)) as client:
        yield client


async def linked_key(http: AsyncTestClient[Any], keys: KeyMaker, admin: dict[str, str], person: str) -> str:
    issued = await keys.issue(Role.OPERATOR, name=f"{person}'s key")
    linked = await http.put(
        f"/v1/keys/{issued.key.id}/person", json={"person": f"oidc:{person}"}, headers=admin
    )
    assert linked.status_code == 200, linked.text
    assert linked.json()["person"] == f"oidc:{person}"
    return issued.secret


async def refund_call(http: AsyncTestClient[Any], requester: dict[str, str]) -> str:
    conversation = (
        await http.post("/v1/conversations", json={"agent": "payments"}, headers=requester)
    ).json()
    run = await http.post(
        f"/v1/conversations/{conversation['id']}/messages?wait=10",
        json={"content": script(call("refund", order_id="H1", amount=900))},
        headers=requester,
    )
    [pending] = run.json()["pending"]
    return str(pending["correlation_id"])


async def test_one_person_is_one_approver(http: AsyncTestClient[Any], keys: KeyMaker) -> None:
    admin = bearer(await keys.make(Role.ADMIN))
    requester = bearer(await keys.make(Role.OPERATOR, name="requester"))
    alice_key = await linked_key(http, keys, admin, "alice")
    made = await http.post(
        "/v1/groups",
        json={
            "workspace": "default",
            "name": "keyholders",
            "members": [await key_id(http, admin, alice_key)],
        },
        headers=admin,
    )
    assert made.status_code == 201, made.text
    cid = await refund_call(http, requester)
    resolve = f"/v1/pending/{cid}/resolve"

    alice = await sign_in(http, "alice")
    first = await http.post(
        resolve, json={"decision": "approve"}, headers={"X-CSRF-Token": alice["csrf_token"]}
    )
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["status"], body["still_needed"]) == ("awaiting", 1)
    assert [(v["approver"], v["cast_by"]) for v in body["votes"]] == [("oidc:alice", "oidc:alice")]

    # The same person through the key linked to her: one approver, already counted.
    again = await http.post(resolve, json={"decision": "approve"}, headers=bearer(alice_key))
    assert (again.status_code, again.json()["code"]) == (409, "already_voted")
    shown = (await http.get(f"/v1/pending/{cid}", headers=bearer(alice_key))).json()
    assert (shown["status"], shown["still_needed"], shown["can_decide"]) == ("awaiting", 1, False)

    await sign_in(http, "bob")  # a second person, in the same browser: the session rotates
    bob = (await http.get("/auth/oidc/session")).json()
    second = await http.post(
        resolve, json={"decision": "approve"}, headers={"X-CSRF-Token": bob["csrf_token"]}
    )
    assert second.status_code == 200, second.text
    assert second.json()["status"] == "approved"


async def test_a_person_may_not_approve_what_their_key_caused(
    http: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    admin = bearer(await keys.make(Role.ADMIN))
    rex_key = await linked_key(http, keys, admin, "rex")
    cid = await refund_call(http, bearer(rex_key))
    rex = await sign_in(http, "rex")
    refused = await http.post(
        f"/v1/pending/{cid}/resolve",
        json={"decision": "approve"},
        headers={"X-CSRF-Token": rex["csrf_token"]},
    )
    assert (refused.status_code, refused.json()["code"]) == (403, "self_approval")
    shown = (await http.get(f"/v1/pending/{cid}", headers=admin)).json()
    assert (shown["status"], shown["votes"]) == ("awaiting", [])


async def test_linking_a_key_is_audited_and_checked(http: AsyncTestClient[Any], keys: KeyMaker) -> None:
    admin = bearer(await keys.make(Role.ADMIN))
    operator = await keys.issue(Role.OPERATOR, name="op")
    url = f"/v1/keys/{operator.key.id}/person"
    bad = await http.put(url, json={"person": "alice"}, headers=admin)
    assert (bad.status_code, bad.json()["code"]) == (422, "validation_failed")
    refused = await http.put(url, json={"person": "oidc:alice"}, headers=bearer(operator.secret))
    assert refused.status_code == 403
    assert (await http.put(url, json={"person": "oidc:alice"}, headers=admin)).status_code == 200
    audit = (await http.get("/v1/audit", params={"action": "key.linked"}, headers=admin)).json()
    [entry] = [e for e in audit["items"] if e["action"] == "key.linked"]
    assert entry["details"]["person"] == "oidc:alice"


async def key_id(http: AsyncTestClient[Any], admin: dict[str, str], secret: str) -> str:
    me = (await http.get("/v1/me", headers=bearer(secret))).json()
    return str(me["id"])
