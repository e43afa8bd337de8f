"""Attack: an insider with SQL rights and no key copies seals the service made for one call onto
another. Each seal covers its call's id, so a copy never checks:

- a vote row copied, seal and all, from a refund bob approved onto another refund (with the route's
  count moved along) does not count: the first real vote decides, the sealed votes hold one approver,
  and nothing runs;
- the ask seal of a refund routed to one approver copied onto a refund routed to two, with that
  refund's route lowered to the copied one, does not check: the one vote it then takes decides, and
  nothing runs.

Either way the run fails with `decision_seal_invalid` and an `integrity.decision_unsealed` finding
that `sursis audit verify` lists."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from sursis.infra.db import approver_tables as ap
from sursis.infra.db import tables as t
from tests.attacks.forged_decisions import (
    assert_refused,
    forged_vote,
    insider,
    insider_reads,
    one_more_approval,
    sealed_shop,
    settled,
)
from tests.attacks.policy_attacks import Shop, refunds
from tests.conftest import KeyMaker
from tests.integration.policy_kit import RAN


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with sealed_shop(seeded, keys) as opened:
        yield opened


async def test_a_vote_seal_copied_from_another_call_does_not_count(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shop.settings is not None
    url = shop.settings.database_url
    first = await shop.ask("rex", order_id="A1", amount=5)
    [small] = first["pending"]
    assert (await shop.resolve("ann", small["correlation_id"])).status_code == 200
    assert (await shop.resolve("bob", small["correlation_id"])).json()["status"] == "approved"
    assert (await settled(shop, first["id"]))["status"] == "completed"
    assert refunds() == [{"order_id": "A1", "amount": 5}]
    RAN.clear()

    second = await shop.ask("rex", order_id="A2", amount=900_000)
    [big] = second["pending"]
    v = ap.pending_votes.c
    [(seal,)] = await insider_reads(
        url,
        sa.select(v.seal).where(
            v.correlation_id == uuid.UUID(small["correlation_id"]), v.voter == shop.ids["bob"]
        ),
    )
    assert seal, "the service sealed bob's vote"
    cid = big["correlation_id"]
    await insider(url, forged_vote(cid, shop.ids["bob"], seal=seal), one_more_approval(cid))
    assert (await shop.resolve("ann", cid)).json()["status"] == "approved"
    await assert_refused(shop, second["id"], cid, "the sealed votes hold 1", capsys)


async def test_an_ask_seal_copied_with_a_lowered_route_does_not_check(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shop.settings is not None
    url = shop.settings.database_url
    first = await shop.ask("rex", order_id="A1", amount=5)
    second = await shop.ask("rex", order_id="A2", amount=900_000)
    [small], [big] = first["pending"], second["pending"]
    p = t.pending_calls.c
    [(ask_seal, policy)] = await insider_reads(
        url, sa.select(p.ask_seal, p.policy).where(p.correlation_id == uuid.UUID(small["correlation_id"]))
    )
    lowered = {**policy, "route": {**policy["route"], "quorum": 1}}
    cid = big["correlation_id"]
    await insider(
        url,
        sa.update(t.pending_calls)
        .where(p.correlation_id == uuid.UUID(cid))
        .values(ask_seal=ask_seal, policy=lowered),
    )
    decided = await shop.resolve("ann", cid)
    assert decided.json()["status"] == "approved", decided.text  # the lowered route took one vote
    await assert_refused(shop, second["id"], cid, "the ask seal does not match", capsys)
