"""Sealed decisions with the seal key in a PKCS#11 token (SoftHSM2): every ask, vote and decision
seal is an HMAC made inside the token (`v1:pkcs11-<label>:…`), a quorum-2 refund approved by both
approvers runs, and the insider's status flip (no seal) still runs nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from sursis.domain.access import Role
from sursis.infra.db import approver_tables as ap
from sursis.infra.db import tables as t
from tests.attacks.forged_decisions import (
    FINANCE_2,
    assert_refused,
    insider,
    insider_reads,
    keyring,
    requeue,
    settled,
)
from tests.attacks.policy_attacks import Shop, open_shop, refunds
from tests.attacks.test_status_flipped_by_sql import flip
from tests.conftest import KeyMaker
from tests.integration.policy_kit import RAN
from tests.integration.softhsm import MODULE, PIN, TOKEN, softhsm_token

pytest.importorskip("pkcs11", reason="python-pkcs11 (the dev extra) is not installed")


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return softhsm_token(tmp_path_factory)


@pytest.fixture
async def shop(softhsm: Path, seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    from sursis.infra.encryption.pkcs11_seal import generate_pkcs11_seal_key

    label = f"seal-{uuid.uuid4().hex[:8]}"
    generate_pkcs11_seal_key(MODULE, TOKEN, label, PIN)
    token = {
        "audit_signing_pkcs11_module": MODULE,
        "audit_signing_pkcs11_token": TOKEN,
        "audit_signing_pkcs11_pin": PIN,
        "decision_seal_pkcs11_key": label,
    }
    async with open_shop(seeded, keys, encryption_keys=keyring(), **token) as opened:
        for name in ("rex", "ann", "bob"):
            await opened.key(name, Role.OPERATOR)
        await opened.group("finance", "ann", "bob")
        assert (await opened.put_policy(FINANCE_2)).status_code == 200
        yield opened


async def test_decisions_sealed_in_the_token_run_and_a_flipped_status_does_not(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shop.settings is not None
    url, label = shop.settings.database_url, shop.settings.decision_seal_pkcs11_key
    asked = await shop.ask("rex", order_id="A1", amount=5)
    [call] = asked["pending"]
    cid = call["correlation_id"]
    assert (await shop.resolve("ann", cid)).status_code == 200
    assert (await shop.resolve("bob", cid)).json()["status"] == "approved"
    assert (await settled(shop, asked["id"]))["status"] == "completed"
    assert refunds() == [{"order_id": "A1", "amount": 5}]
    [(ask_seal,)] = await insider_reads(
        url, sa.select(t.pending_calls.c.ask_seal).where(t.pending_calls.c.correlation_id == uuid.UUID(cid))
    )
    votes = await insider_reads(
        url, sa.select(ap.pending_votes.c.seal).where(ap.pending_votes.c.correlation_id == uuid.UUID(cid))
    )
    assert ask_seal.startswith(f"v1:pkcs11-{label}:"), ask_seal
    assert len(votes) == 2 and all(seal.startswith(f"v1:pkcs11-{label}:") for (seal,) in votes), votes

    RAN.clear()
    run = await shop.ask("rex", order_id="A2", amount=900)
    [pending] = run["pending"]
    forged = pending["correlation_id"]
    await insider(url, flip(forged, shop.ids["ann"]), requeue(run["id"]))
    await assert_refused(shop, run["id"], forged, "the decision carries no seal", capsys)
