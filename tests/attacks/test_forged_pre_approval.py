"""Attack: an insider with SQL rights and no key makes a pre-approval lift a call nobody pre-approved:
a pre-approval of `deploy` rewritten to `refund`, a narrow one widened (its argument match dropped,
its expiry pushed out), or the requester's own pre-approval re-attributed to a colleague (a
pre-approval never lifts its own creator's call). A pre-approval is a decision like an approval: the
service seals what it grants when it is created, and the worker lifts an ask only with one whose
seal checks. A changed one runs nothing, fails the run with `decision_seal_invalid`, writes an
`integrity.decision_unsealed` finding naming the pre-approval, and `sursis audit verify` lists it.
A row inserted by SQL does not even open (its sealed reason is bound to its id): the call waits
for a person. A pre-approval made over the API still lifts the calls it covers, and the lift it
records carries its own seal."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic_ai.messages import ToolCallPart

from sursis.app.cli import run as run_cli
from sursis.app.container import Container, build_container
from sursis.domain.access import Role
from sursis.domain.approvals.decision_seal import lift_facts
from sursis.domain.audit.integrity import DECISION_UNSEALED
from sursis.domain.clock import utcnow
from sursis.domain.records import AuditQuery
from sursis.domain.sanitize import args_hash
from sursis.domain.states import RunStatus
from sursis.infra.agents.approved_args import ApprovedArgsMismatch
from sursis.infra.agents.call_marks import AUTO_APPROVED
from sursis.infra.agents.redispatch import cleared_before
from sursis.infra.agents.run_deps import PreApprovalPolicy, RunDeps
from sursis.infra.db import tables as t
from sursis.infra.encryption.decision_seal import sealer_of
from tests.attacks.forged_decisions import insider, insider_reads, keyring, settled
from tests.attacks.policy_attacks import Shop, open_shop, refunds
from tests.conftest import KeyMaker, eventually, make_settings
from tests.integration.test_audit import OPERATOR, USER, Button

REFUNDS_ASK = {"id": "refunds", "effect": "ask", "tools": ["refund", "deploy"]}
"""Any operator decides; pre-approvals may lift the ask."""


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys, encryption_keys=keyring()) as opened:
        for name in ("rex", "ann"):
            await opened.key(name, Role.OPERATOR)
        assert (await opened.put_policy(REFUNDS_ASK)).status_code == 200
        yield opened


async def pre_approve(shop: Shop, by: str, tool: str, **body: Any) -> str:
    created = await shop.http.post(
        "/v1/authorizations",
        json={"tool_name": tool, "reason": "month-end", **body},
        headers=shop.headers[by],
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def change(authorization_id: str, **values: Any) -> sa.Update:
    return (
        sa.update(t.authorizations)
        .where(t.authorizations.c.id == uuid.UUID(authorization_id))
        .values(**values)
    )


async def assert_lift_refused(
    shop: Shop, run: dict[str, Any], authorization_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing ran; the run failed with `decision_seal_invalid` naming the pre-approval; the finding
    is in the audit log and the verification lists it (API and CLI)."""
    run = await settled(shop, run["id"]) if run["status"] not in ("failed", "completed") else run
    assert refunds() == [], "the refund ran on a forged pre-approval"
    assert run["status"] == "failed", run
    assert run["error"]["code"] == "decision_seal_invalid", run
    message = run["error"]["message"]
    assert f"pre-approval {authorization_id}" in message and "seal does not match" in message, message
    audit = await shop.http.get(
        "/v1/audit", params={"action": "integrity.decision_unsealed"}, headers=shop.headers["admin"]
    )
    [finding] = audit.json()["items"]
    assert finding["details"]["authorization_id"] == authorization_id, finding
    assert finding["details"]["tool_name"] == "refund"
    reports = await shop.http.get(
        "/v1/audit/verify", params={"workspace": "default"}, headers=shop.headers["admin"]
    )
    [report] = reports.json()
    assert report["ok"] is False and report["finding"] is None, report
    [named] = report["findings"]
    assert named["action"] == "integrity.decision_unsealed" and authorization_id in named["detail"], named
    assert shop.settings is not None
    code = await asyncio.to_thread(run_cli, ["audit", "verify", "--workspace", "default"], shop.settings)
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "finding: integrity.decision_unsealed" in printed and authorization_id in printed, printed


async def test_a_deploy_pre_approval_rewritten_to_refunds_lifts_nothing(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    deploys = await pre_approve(shop, "ann", "deploy", args_match={"env": "staging"})
    await insider(shop.settings.database_url, change(deploys, tool_name="refund", args_match=None))  # type: ignore[union-attr]
    run = await shop.ask("rex", order_id="A1", amount=900)
    await assert_lift_refused(shop, run, deploys, capsys)


async def test_a_narrow_pre_approval_widened_lifts_nothing(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    narrow = await pre_approve(
        shop,
        "ann",
        "refund",
        args_match={"order_id": "A7"},
        expires_at=(datetime.now(UTC) + timedelta(hours=1)).isoformat(),
    )
    later = datetime.now(UTC) + timedelta(days=365)
    await insider(shop.settings.database_url, change(narrow, args_match=None, expires_at=later))  # type: ignore[union-attr]
    run = await shop.ask("rex", order_id="A1", amount=900)
    await assert_lift_refused(shop, run, narrow, capsys)


async def test_the_requesters_own_pre_approval_re_attributed_lifts_nothing(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    own = await pre_approve(shop, "rex", "refund")
    await insider(shop.settings.database_url, change(own, created_by=shop.ids["ann"]))  # type: ignore[union-attr]
    run = await shop.ask("rex", order_id="A1", amount=900)
    await assert_lift_refused(shop, run, own, capsys)


async def test_a_pre_approval_inserted_by_sql_does_not_open_and_the_call_waits(shop: Shop) -> None:
    real = await pre_approve(shop, "ann", "deploy")
    [(reason, seal)] = await insider_reads(
        shop.settings.database_url,  # type: ignore[union-attr]
        sa.select(t.authorizations.c.reason, t.authorizations.c.seal),
    )
    forged = {
        "id": uuid.uuid4(),
        "workspace": "default",
        "tool_name": "refund",
        "args_match": None,
        "reason": reason,
        "created_by": shop.ids["ann"],
        "created_at": datetime.now(UTC),
        "seal": seal,
    }
    await insider(shop.settings.database_url, sa.insert(t.authorizations).values(**forged))  # type: ignore[union-attr]
    run = await shop.ask("rex", order_id="A1", amount=900)
    assert run["status"] == "suspended" and len(run["pending"]) == 1, run
    assert refunds() == []
    assert real


async def test_a_pre_approval_made_over_the_api_lifts_and_its_lift_is_sealed(shop: Shop) -> None:
    by_ann = await pre_approve(shop, "ann", "refund", args_match={"order_id": "A1"})
    [(seal,)] = await insider_reads(shop.settings.database_url, sa.select(t.authorizations.c.seal))  # type: ignore[union-attr]
    assert isinstance(seal, str) and seal.startswith("v1:k1:")
    run = await shop.ask("rex", order_id="A1", amount=900)
    assert run["status"] == "completed" and run["pending"] == [], run
    assert refunds() == [{"order_id": "A1", "amount": 900}]
    audit = await shop.http.get(
        "/v1/audit", params={"action": "pending.auto_approved"}, headers=shop.headers["admin"]
    )
    [lift] = audit.json()["items"]
    assert lift["details"]["authorization_id"] == by_ann
    assert lift["details"]["seal"].startswith("v1:k1:")


@pytest.fixture
async def sealed_container(seeded: str) -> AsyncIterator[Container]:
    container = build_container(make_settings(seeded, encryption_keys=keyring()))
    try:
        yield container
    finally:
        await container.close()


def segment(container: Container, conversation_id: uuid.UUID) -> RunDeps:
    return RunDeps(
        conversation_id, uuid.uuid4(), "default", "shop", container.uow, utcnow, PreApprovalPolicy()
    )


async def lift_mark(deps: RunDeps, tool_call_id: str, seal: str | None) -> None:
    details: dict[str, Any] = {"tool_name": "refund", "tool_call_id": tool_call_id, "authorization_id": "a1"}
    if seal is not None:
        details["seal"] = seal
    async with deps.uow() as uow:
        await uow.audit.append(deps.audit_entry(AUTO_APPROVED, "authorization:a1", details), utcnow())
        await uow.commit()


ARGS = {"order_id": "A1", "amount": 900}


@pytest.mark.parametrize("forged", ["moved from another conversation", "no seal", "other arguments"])
async def test_a_recorded_lift_that_is_not_this_calls_clears_nothing(
    sealed_container: Container, forged: str
) -> None:
    """A redispatched call is not gated again when a lift was recorded for it: only when that lift's
    seal names this conversation, this call and these arguments."""
    deps = segment(sealed_container, uuid.uuid4())
    part = ToolCallPart("refund", ARGS, tool_call_id="call_0")
    sealer = sealer_of(sealed_container.uow.cipher)  # type: ignore[arg-type]
    conversation = str(uuid.uuid4()) if forged.startswith("moved") else str(deps.conversation_id)
    amount = 1 if forged == "other arguments" else 900
    hashed = args_hash("refund", {"order_id": "A1", "amount": amount})
    facts = lift_facts("default", conversation, "call_0", "refund", hashed, "a1")
    await lift_mark(deps, "call_0", None if forged == "no seal" else sealer.seal(facts))
    with pytest.raises(ApprovedArgsMismatch) as refused:
        await cleared_before(deps, part, ARGS)
    assert refused.value.code == "decision_seal_invalid"
    assert "pre-approval a1" in refused.value.message
    async with sealed_container.uow.reader() as uow:
        [finding] = await uow.audit.search("default", AuditQuery(actions=(DECISION_UNSEALED,), limit=5))
    assert finding.details["authorization_id"] == "a1" and finding.conversation_id == deps.conversation_id


async def test_a_recorded_lift_of_this_call_clears_it(sealed_container: Container) -> None:
    deps = segment(sealed_container, uuid.uuid4())
    part = ToolCallPart("refund", ARGS, tool_call_id="call_0")
    sealer = sealer_of(sealed_container.uow.cipher)  # type: ignore[arg-type]
    facts = lift_facts(
        "default", str(deps.conversation_id), "call_0", "refund", args_hash("refund", ARGS), "a1"
    )
    await lift_mark(deps, "call_0", sealer.seal(facts))
    assert await cleared_before(deps, part, ARGS) is True


async def test_an_approval_request_is_not_cleared_by_a_changed_pre_approval(shop: Shop) -> None:
    """An agent outside files its calls (`POST /v1/approvals`): a sealed pre-approval clears one at
    once, a changed one clears nothing and people decide."""
    await pre_approve(shop, "ann", "refund", args_match={"order_id": "A2"})
    deploys = await pre_approve(shop, "ann", "deploy")
    await insider(shop.settings.database_url, change(deploys, tool_name="refund"))  # type: ignore[union-attr]
    agent = await shop.key("bot", Role.USER)

    async def filed(order_id: str) -> dict[str, Any]:
        body = {
            "tool_name": "refund",
            "args": {"order_id": order_id, "amount": 900},
            "agent": "billing-bot",
            "conversation": "t1",
        }
        response = await shop.http.post("/v1/approvals", json=body, headers=agent)
        assert response.status_code in (200, 201), response.text
        return dict(response.json())

    cleared = await filed("A2")
    assert cleared["state"] == "approved" and cleared["answered_by"][0].startswith("authorization:")
    asked = await filed("A1")
    assert asked["state"] == "awaiting", asked


async def test_a_sealed_lift_holds_when_its_call_is_dispatched_again_after_a_crash(seeded: str) -> None:
    """The worker dies while a pre-approved call runs; the pre-approval is revoked meanwhile. The
    call dispatched again is cleared by its recorded lift, whose seal checks: it runs once, with no
    finding."""
    button = Button(die_after_effect=False)
    settings = make_settings(seeded, lease_seconds=0.3, encryption_keys=keyring())
    container = build_container(settings, extra_agents=[button.agent()])
    try:
        authorization = await container.authorizations.create(
            OPERATOR, tool_name="press_button", reason="drill"
        )
        _, run = await button.press_and_die(container)
        await container.authorizations.revoke(OPERATOR, authorization.id)
        assert await eventually(container.worker.sweep)
        assert await container.worker.run_once()
        view = await container.runs.get_run(USER, run.id)
        async with container.uow.reader() as uow:
            findings = await uow.audit.search("default", AuditQuery(actions=(DECISION_UNSEALED,), limit=5))
            [lift] = await uow.audit.search("default", AuditQuery(actions=(AUTO_APPROVED,), limit=5))
    finally:
        await container.close()
    assert (view.run.status, button.pressed, findings) == (RunStatus.COMPLETED, ["red"], [])
    assert str(lift.details["seal"]).startswith("v1:k1:")
