"""Attack: an insider with SQL rights and no key inserts an approving vote row for the second
approver of a quorum-2 refund (and moves the route's count along), so the first real vote reaches the
quorum. The service still decides (its count says two), but a vote row it did not seal never counts
toward a sealed decision: the decision's sealed votes hold one approver, the worker runs nothing,
fails the run with `decision_seal_invalid` and writes an `integrity.decision_unsealed` finding that
`sursis audit verify` lists."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.attacks.forged_decisions import (
    assert_refused,
    forged_vote,
    insider,
    one_more_approval,
    sealed_shop,
)
from tests.attacks.policy_attacks import Shop
from tests.conftest import KeyMaker


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with sealed_shop(seeded, keys) as opened:
        yield opened


async def test_an_inserted_vote_never_counts_toward_the_quorum(
    shop: Shop, capsys: pytest.CaptureFixture[str]
) -> None:
    run = await shop.ask("rex", order_id="A1", amount=900)
    [pending] = run["pending"]
    cid = pending["correlation_id"]
    assert shop.settings is not None
    await insider(shop.settings.database_url, forged_vote(cid, shop.ids["bob"]), one_more_approval(cid))
    decided = await shop.resolve("ann", cid)
    assert decided.json()["status"] == "approved", decided.text  # the forged count reached the quorum
    await assert_refused(shop, run["id"], cid, "the sealed votes hold 1", capsys)
