"""Attack: an insider with SQL rights and no key approves a quorum-2 refund by flipping its status
(`UPDATE pending_calls SET status='approved'`, the run re-queued), either while it waits with no
vote or after the approvers denied it. The status is a plaintext column; the decision is not: the
worker finds no service seal over an approval, runs nothing, fails the run with
`decision_seal_invalid` and writes an `integrity.decision_unsealed` finding that `sursis audit
verify` lists. A decision the approvers really made still runs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from sursis.domain.records import AuditQuery
from sursis.infra.db import tables as t
from sursis.testing import settle
from tests.agents.test_nested_agents import REFUNDS, concierge_refund
from tests.attacks.forged_decisions import assert_refused, insider, keyring, requeue, sealed_shop, settled
from tests.attacks.policy_attacks import Shop, refunds
from tests.conftest import KeyMaker, call, script


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with sealed_shop(seeded, keys) as opened:
        yield opened


def flip(correlation_id: str, resolved_by: str) -> sa.Update:
    return (
        sa.update(t.pending_calls)
        .where(t.pending_calls.c.correlation_id == uuid.UUID(correlation_id))
        .values(status="approved", resolved_by=resolved_by, resolved_at=datetime.now(UTC))
    )


async def test_a_waiting_refund_flipped_to_approved_never_runs(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    run = await shop.ask("rex", order_id="A1", amount=900)
    [pending] = run["pending"]
    cid = pending["correlation_id"]
    await insider(shop.settings.database_url, flip(cid, shop.ids["ann"]), requeue(run["id"]))  # type: ignore[union-attr]
    await assert_refused(shop, run["id"], cid, "the decision carries no seal", capsys)


async def test_a_denied_refund_flipped_to_approved_never_runs(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    conversation = await shop.conversation("rex")
    posted = await shop.http.post(
        f"/v1/conversations/{conversation}/messages?wait=10",
        json={
            "content": script(
                [call("refund", order_id="A1", amount=900), call("refund", order_id="A2", amount=5)]
            )
        },
        headers=shop.headers["rex"],
    )
    run = posted.json()
    assert run["status"] == "suspended", run
    big, small = sorted(run["pending"], key=lambda p: -p["args"]["amount"])
    assert (await shop.resolve("ann", big["correlation_id"], "deny")).json()["status"] == "denied"
    # The denial is sealed as a denial: the insider keeps it and changes only the status.
    await insider(shop.settings.database_url, flip(big["correlation_id"], shop.ids["ann"]))  # type: ignore[union-attr]
    assert (await shop.resolve("ann", small["correlation_id"])).status_code == 200
    assert (await shop.resolve("bob", small["correlation_id"])).json()["status"] == "approved"
    await assert_refused(shop, run["id"], big["correlation_id"], "the decision seal does not match", capsys)


async def test_a_refund_the_quorum_approved_runs(shop: Shop) -> None:
    run = await shop.ask("rex", order_id="A1", amount=900)
    [pending] = run["pending"]
    assert (await shop.resolve("ann", pending["correlation_id"])).json()["status"] == "awaiting"
    assert (await shop.resolve("bob", pending["correlation_id"])).json()["status"] == "approved"
    done = await settled(shop, run["id"])
    assert done["status"] == "completed", done
    assert refunds() == [{"order_id": "A1", "amount": 900}]


async def test_a_nested_agents_waiting_call_flipped_to_approved_never_runs(seeded: str) -> None:
    """The concierge runs billing (`run_agent`); billing's refund waits. Flipped by SQL, the refund is
    refused where billing's run dispatches it: the whole run fails, nothing is refunded."""
    async with concierge_refund(
        seeded, "N1", "billing: done", "Done.", "refund N1", encryption_keys=keyring()
    ) as turn:
        svc, call = turn.service, turn.call
        url = svc.container.settings.database_url
        await insider(url, flip(str(call.correlation_id), "someone"), requeue(str(turn.run.id)))
        view = await settle(svc, turn.run.id)
        assert REFUNDS == []
        assert view.run.status == "failed", view.run
        assert view.run.error is not None and view.run.error.code == "decision_seal_invalid", view.run.error
        assert "the decision carries no seal" in view.run.error.message
        async with svc.container.uow.reader() as uow:
            findings = await uow.audit.search(
                "default", AuditQuery(actions=("integrity.decision_unsealed",), limit=10)
            )
        assert [f.correlation_id for f in findings] == [call.correlation_id]
