"""Forged arguments: an insider with SQL rights rewrites the model's call in the message log while a
refund of 900 waits for a quorum of two approvers. The approvers approve the 900 they see (with its
`args_hash`); the call must not run with the log's 9,000,000 — the run fails with
`approved_args_mismatch`, an `integrity.args_mismatch` finding names the hashes, and the audit
verification names the finding. On SQLite and PostgreSQL, through the HTTP API.

The worker reads the log from the database (no log cache: another worker, or one restarted since
the call was asked, reads it so).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient
from pydantic_ai import Agent, ApprovalRequired, RunContext

from sursis.app.cli import run as run_cli
from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.app.settings import Settings
from sursis.domain.access import Role
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.sanitize import args_hash
from sursis.infra.agents.observed import POLICY
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.conftest import KeyMaker, bearer, call, make_settings, script
from tests.routing.kit import asked

ROUTES = {
    "F1": ApprovalRoute(groups=("finance",), quorum=2),
    "E1": ApprovalRoute(groups=("finance",)),
}
FORGED = 9_000_000


@dataclass
class Bank:
    """The refunds the tool really made."""

    refunds: list[tuple[str, int]] = field(default_factory=list)

    def agent(self) -> Agent[None, str]:
        agent: Agent[None, str] = Agent(name="payments")

        @agent.tool
        def refund(ctx: RunContext[Any], order_id: str, amount: int) -> str:
            """Refund an order."""
            if not ctx.tool_call_approved:
                metadata = {"kind": "approval", POLICY: asked(ROUTES[order_id]).to_json()}
                raise ApprovalRequired(metadata=metadata)
            self.refunds.append((order_id, amount))
            return f"refunded {amount} for {order_id}"

        return agent


@dataclass
class Office:
    http: AsyncTestClient[Any]
    bank: Bank
    url: str
    auth: dict[str, dict[str, str]]
    settings: Settings

    async def ask_refund(self, order_id: str, amount: int = 900) -> dict[str, Any]:
        conversation = (
            await self.http.post("/v1/conversations", json={"agent": "payments"}, headers=self.auth["rex"])
        ).json()
        run = await self.http.post(
            f"/v1/conversations/{conversation['id']}/messages?wait=10",
            json={"content": script(call("refund", order_id=order_id, amount=amount))},
            headers=self.auth["rex"],
        )
        assert run.json()["status"] == "suspended", run.text
        [pending] = run.json()["pending"]
        return dict(pending)

    async def approve(self, who: str, pending: dict[str, Any], **more: Any) -> Any:
        return await self.http.post(
            f"/v1/pending/{pending['correlation_id']}/resolve",
            json={"decision": "approve", "args_hash": pending["args_hash"], **more},
            headers=self.auth[who],
        )

    async def settled(self, run_id: str) -> dict[str, Any]:
        for _ in range(20):
            run = (await self.http.get(f"/v1/runs/{run_id}?wait=5", headers=self.auth["admin"])).json()
            if run["status"] in ("completed", "failed", "cancelled"):
                return dict(run)
        raise AssertionError(f"run {run_id} did not settle")

    async def audit(self, correlation_id: str) -> list[dict[str, Any]]:
        page = await self.http.get(
            "/v1/audit", params={"correlation_id": correlation_id}, headers=self.auth["admin"]
        )
        return list(page.json()["items"])

    async def verify(self) -> dict[str, Any]:
        reports = await self.http.get(
            "/v1/audit/verify", params={"workspace": "default"}, headers=self.auth["admin"]
        )
        assert reports.status_code == 200, reports.text
        [report] = reports.json()
        return dict(report)


@pytest.fixture
async def office(seeded: str, keys: KeyMaker) -> AsyncIterator[Office]:
    bank = Bank()
    settings = make_settings(seeded, agents=["assistant"], run_worker=True, history_cache_messages=0)
    service = Service.from_settings(settings, agents=[bank.agent()])
    people = {name: await keys.issue(Role.OPERATOR, name=name) for name in ("ann", "bob", "rex")}
    auth = {name: bearer(issued.secret) for name, issued in people.items()}
    auth["admin"] = bearer(await keys.make(Role.ADMIN))
    async with AsyncTestClient(app=create_app(settings, service=service)) as http:
        members = [str(people[n].key.id) for n in ("ann", "bob")]
        group = {"workspace": "default", "name": "finance", "members": members}
        created = await http.post("/v1/groups", json=group, headers=auth["admin"])
        assert created.status_code == 201, created.text
        yield Office(http, bank, seeded, auth, settings)


async def rewrite_log(url: str, conversation_id: str, amount: int) -> None:
    """What an insider with SQL rights does: the model's call in the stored log, amount changed."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.messages.c.seq, t.messages.c.body).where(
                        t.messages.c.conversation_id == uuid.UUID(conversation_id)
                    )
                )
            ).all()
            changed = 0
            for seq, body in rows:
                message = json.loads(body)
                for part in message.get("parts", []):
                    if part.get("part_kind") != "tool-call":
                        continue
                    args = part["args"]
                    parsed = json.loads(args) if isinstance(args, str) else dict(args)
                    parsed["amount"] = amount
                    part["args"] = json.dumps(parsed) if isinstance(args, str) else parsed
                    changed += 1
                if changed:
                    await conn.execute(
                        sa.update(t.messages)
                        .where(
                            t.messages.c.conversation_id == uuid.UUID(conversation_id),
                            t.messages.c.seq == seq,
                        )
                        .values(body=json.dumps(message))
                    )
                    break
            assert changed == 1, rows
    finally:
        await engine.dispose()


async def rewrite_shown_hash(url: str, correlation_id: str, forged: str) -> None:
    """The insider also makes the pending call's `args_hash` the forged call's."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.update(t.pending_calls)
                .where(t.pending_calls.c.correlation_id == uuid.UUID(correlation_id))
                .values(args_hash=forged)
            )
    finally:
        await engine.dispose()


@pytest.mark.parametrize("hash_too", [False, True], ids=["log", "log-and-args-hash"])
async def test_a_refund_rewritten_in_the_log_after_it_was_asked_never_runs(
    office: Office, hash_too: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    pending = await office.ask_refund("F1", 900)
    cid = pending["correlation_id"]
    forged_hash = args_hash("refund", {"order_id": "F1", "amount": FORGED})
    await rewrite_log(office.url, pending["conversation_id"], FORGED)
    if hash_too:
        await rewrite_shown_hash(office.url, cid, forged_hash)
        pending["args_hash"] = forged_hash  # what the approvers are now shown, and send back
    assert pending["args"] == {"order_id": "F1", "amount": 900}

    first = await office.approve("ann", pending)
    assert first.status_code == 200, first.text
    second = await office.approve("bob", pending)
    assert second.status_code == 200, second.text
    assert second.json()["status"] == "approved"

    run = await office.settled(pending["run_id"])
    assert office.bank.refunds == [], "the forged refund ran"
    assert run["status"] == "failed", run
    assert run["error"]["code"] == "approved_args_mismatch", run
    assert cid in run["error"]["message"]

    [finding] = [e for e in await office.audit(cid) if e["action"] == "integrity.args_mismatch"]
    assert finding["details"]["actual_args_hash"] == forged_hash
    assert finding["details"]["expected_args_hash"] == pending["args_hash"]
    assert finding["details"]["tool_call_id"] == pending["tool_call_id"]

    report = await office.verify()
    assert report["ok"] is False
    assert report["finding"] is None, "the chain itself is intact"
    [named] = report["findings"]
    assert named["action"] == "integrity.args_mismatch"
    assert named["correlation_id"] == cid
    assert forged_hash in named["detail"]

    code = await asyncio.to_thread(run_cli, ["audit", "verify", "--workspace", "default"], office.settings)
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "finding: integrity.args_mismatch" in printed and cid in printed and forged_hash in printed


async def forge_outcome(url: str, pending: dict[str, Any], amount: int) -> str:
    """The insider stores an outcome for the waiting call, as if it had run with `amount`."""
    forged = args_hash("refund", {"order_id": pending["args"]["order_id"], "amount": amount})
    now = datetime.now(UTC)
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.insert(t.tool_calls).values(
                    conversation_id=uuid.UUID(pending["conversation_id"]),
                    run_id=uuid.UUID(pending["run_id"]),
                    tool_call_id=pending["tool_call_id"],
                    tool_name="refund",
                    agent_name="payments",
                    ok=True,
                    latency_ms=1.0,
                    result={"ok": True, "result": f"refunded {amount}"},
                    started_at=now,
                    ended_at=now,
                    args_hash=forged,
                )
            )
    finally:
        await engine.dispose()
    return forged


async def test_an_outcome_stored_for_other_arguments_is_not_replayed(office: Office) -> None:
    pending = await office.ask_refund("F1", 900)
    forged_hash = await forge_outcome(office.url, pending, FORGED)
    assert (await office.approve("ann", pending)).status_code == 200
    assert (await office.approve("bob", pending)).status_code == 200
    run = await office.settled(pending["run_id"])
    assert (run["status"], run["error"]["code"]) == ("failed", "approved_args_mismatch"), run
    assert run["output"] is None
    [finding] = [
        e for e in await office.audit(pending["correlation_id"]) if e["action"].startswith("integrity.")
    ]
    assert finding["action"] == "integrity.outcome_mismatch"
    assert finding["details"]["actual_args_hash"] == forged_hash
    assert finding["details"]["expected_args_hash"] == pending["args_hash"]
    [named] = (await office.verify())["findings"]
    assert named["action"] == "integrity.outcome_mismatch"


async def test_a_later_turn_is_told_the_forged_call_did_not_run(office: Office) -> None:
    pending = await office.ask_refund("F1", 900)
    await rewrite_log(office.url, pending["conversation_id"], FORGED)
    assert (await office.approve("ann", pending)).status_code == 200
    assert (await office.approve("bob", pending)).status_code == 200
    assert (await office.settled(pending["run_id"]))["status"] == "failed"

    later = await office.http.post(
        f"/v1/conversations/{pending['conversation_id']}/messages?wait=10",
        json={"content": "what happened?"},
        headers=office.auth["rex"],
    )
    run = await office.settled(later.json()["id"])
    assert run["status"] == "completed", run
    assert "APPROVED_ARGS_MISMATCH" in run["output"]
    assert office.bank.refunds == []


async def test_arguments_an_approver_edited_run_as_edited(office: Office) -> None:
    pending = await office.ask_refund("E1", 900)
    edited = await office.approve("ann", pending, args={"order_id": "E1", "amount": 500})
    assert edited.status_code == 200, edited.text
    run = await office.settled(pending["run_id"])
    assert run["status"] == "completed", run
    assert office.bank.refunds == [("E1", 500)]
    assert [e["action"] for e in await office.audit(pending["correlation_id"])].count(
        "integrity.args_mismatch"
    ) == 0
    assert (await office.verify())["ok"] is True


async def test_an_unchanged_call_approved_by_the_quorum_runs(office: Office) -> None:
    pending = await office.ask_refund("F1", 900)
    assert (await office.approve("ann", pending)).status_code == 200
    assert (await office.approve("bob", pending)).status_code == 200
    run = await office.settled(pending["run_id"])
    assert run["status"] == "completed", run
    assert office.bank.refunds == [("F1", 900)]
