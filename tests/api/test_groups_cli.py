"""`sursis groups`, `sursis delegations`, `sursis pending reassign` and the votes `sursis pending`
shows, against the real app over a socket."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sursis.domain.clock import utcnow
from tests.api.conftest import LiveFactory
from tests.api.test_pending_cli import sursis
from tests.conftest import KeyMaker, bearer, call, script

AGENTS = ["tests.routing.kit:CLI_AGENT"]


async def ask(http: Any, requester: str, order_id: str) -> str:
    headers = bearer(requester)
    conversation = (await http.post("/v1/conversations", json={"agent": "payments"}, headers=headers)).json()
    run = await http.post(
        f"/v1/conversations/{conversation['id']}/messages?wait=10",
        json={"content": script(call("refund", order_id=order_id, amount=900))},
        headers=headers,
    )
    [pending] = run.json()["pending"]
    return str(pending["correlation_id"])


async def test_groups_votes_delegation_and_reassignment_from_the_command_line(
    live: LiveFactory, keys: KeyMaker
) -> None:
    admin = await keys.make("admin", "default", name="root")
    people = {n: await keys.issue("operator", "default", name=n) for n in ("ann", "bob", "dee", "kim", "rex")}
    ids = {n: str(k.key.id) for n, k in people.items()}
    secret = {n: k.secret for n, k in people.items()}
    async with live(agents=AGENTS) as app:
        url = app.base_url
        code, out, err = await sursis(
            "groups", "create", "finance", "--member", ids["ann"], "--member", ids["bob"], url=url, key=admin
        )
        assert code == 0, err
        assert "default/finance" in out and ids["ann"] in out
        code, out, err = await sursis("groups", "add", "finance", ids["kim"], url=url, key=admin)
        assert code == 0 and ids["kim"] in out, err
        code, out, err = await sursis("groups", "remove", "finance", ids["kim"], url=url, key=admin)
        assert code == 0 and ids["kim"] not in out, err
        code, out, err = await sursis("groups", "list", "--json", url=url, key=admin)
        assert [g["name"] for g in json.loads(out)] == ["finance"]
        code, out, err = await sursis("groups", "create", "ops", url=url, key=secret["ann"])
        assert code == 2 and "forbidden" in err

        cid = await ask(app.http, secret["rex"], "L1")
        code, out, err = await sursis("pending", "approve", cid, url=url, key=secret["rex"])
        assert code == 2 and "self_approval" in err
        code, out, err = await sursis("pending", "approve", cid, url=url, key=secret["kim"])
        assert code == 2 and "not_an_approver" in err

        until = (utcnow() + timedelta(hours=1)).isoformat()
        code, out, err = await sursis(
            "delegations", "create", ids["dee"], "--until", until, url=url, key=secret["ann"]
        )
        assert code == 0 and f"{ids['dee']} votes for {ids['ann']}" in out, err
        code, out, err = await sursis("pending", "approve", cid, "--json", url=url, key=secret["dee"])
        assert code == 0, err
        voted = json.loads(out)
        assert (voted["status"], voted["still_needed"]) == ("awaiting", 1)

        code, out, err = await sursis("pending", "list", url=url, key=secret["bob"])
        assert code == 0 and "1/2 you" in out, err
        code, out, err = await sursis("pending", "show", cid, url=url, key=secret["bob"])
        assert code == 0 and "approve by dee for ann" in out, err

        code, out, err = await sursis("pending", "approve", cid, "--json", url=url, key=secret["bob"])
        assert json.loads(out)["status"] == "approved", err

        other = await ask(app.http, secret["rex"], "L2")
        code, out, err = await sursis(
            "pending", "reassign", other, "--to", f"key:{ids['kim']}", "--json", url=url, key=admin
        )
        assert code == 0 and json.loads(out)["approvers"] == [f"key:{ids['kim']}"], err
        code, out, err = await sursis("pending", "approve", other, "--json", url=url, key=secret["kim"])
        assert json.loads(out)["status"] == "approved", err

        code, out, err = await sursis("groups", "delete", "finance", url=url, key=admin)
        assert code == 0 and "done" in out, err
