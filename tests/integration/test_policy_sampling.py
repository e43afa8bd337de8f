"""A `sampled` rung through the service, on SQLite and PostgreSQL: of the calls it would allow, the
ones the keyed draw picks wait for people (audited `policy.sampled`), the others run; the draw
follows the keyring (another process with the same keyring draws the same calls), and a simulation
counts the calls it would have sampled."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from sursis import Service
from sursis.domain.policy.policies import InvalidPolicy, LadderLevel
from sursis.domain.policy.policy_sampling import SAMPLED, SampleDraw
from sursis.domain.policy_decisions import PolicyEffect
from sursis.domain.records import AuditQuery, Principal
from sursis.infra.encryption.call_sampler import KeyedCallSampler
from sursis.infra.encryption.keyring import load_keyring
from sursis.testing import ScriptedModel, resolve_and_settle, settle
from tests.integration.policy_kit import RAN, shop_agent

KEYRING = f"k1:{base64.b64encode(bytes(range(32))).decode()}"
CALLS = 24
"""Enough that the draw (its conversation id is new each run) picks none or all of them once in
about 17,000 runs: the rate itself is `tests/unit/test_policy_sampling.py`'s."""


async def test_a_sampled_rung_sends_the_drawn_calls_to_people(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().calls(*[("refund", {"order_id": f"O{i}", "amount": i}) for i in range(CALLS)])
    model.text("done")
    async with Service.open(
        database_url, agents=[shop_agent()], model=model.model, encryption_keys=KEYRING
    ) as svc:
        policies = svc.container.policies
        user = Principal(id="customer", role="user", workspace="default")
        await policies.move(svc.principal, None, "refund", level=None, ceiling=LadderLevel.AUTO)
        with pytest.raises(InvalidPolicy) as missing:
            await policies.move(user, None, "refund", level=LadderLevel.SAMPLED)
        assert missing.value.code == "invalid_policy"
        with pytest.raises(InvalidPolicy):
            await policies.move(user, None, "refund", level=LadderLevel.SAMPLED, one_in=1)
        with pytest.raises(InvalidPolicy):
            await policies.move(user, None, "refund", level=LadderLevel.AUTO, one_in=3)
        moved = await policies.move(user, None, "refund", level=LadderLevel.SAMPLED, one_in=3)
        assert (moved.level, moved.one_in) == (LadderLevel.SAMPLED, 3)

        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "refunds")
        await settle(svc, run.id)
        pending = await svc.pending(tool_name="refund")
        ran = await svc.container.runs.list_tool_calls(svc.principal, run.id)
        every = {c.tool_call_id for c in pending} | {r.tool_call_id for r in ran}
        assert len(every) == CALLS and len(ran) == len(RAN)
        # Drawn independently of the service, from the same keyring: what another process holding
        # it would draw.
        sampler = KeyedCallSampler(load_keyring(KEYRING, None))
        expected = sorted(
            i for i in every if sampler.picks(SampleDraw("default", "refund", conversation.id, i), 3)
        )
        assert 0 < len(expected) < CALLS  # the fixed key draws some calls and spares others
        assert sorted(c.tool_call_id for c in pending) == expected
        for call in pending:
            assert call.policy is not None
            assert (call.policy.effect, call.policy.rule, call.policy.flags, call.policy.sample_one_in) == (
                PolicyEffect.ASK,
                "ladder:refund",
                (SAMPLED,),
                3,
            )
        # The others ran as the rung allows, under a decision that names the rate.
        for record in ran:
            assert record.policy is not None
            assert (record.policy.effect, record.policy.sample_one_in) == (PolicyEffect.ALLOW, 3)
        page = await svc.container.audit.list_audit(svc.principal, AuditQuery(limit=500))
        sampled_rows = [a for a in page.items if a.action == "policy.sampled"]
        assert sorted(a.details["tool_call_id"] for a in sampled_rows) == expected
        assert {a.details["one_in"] for a in sampled_rows} == {3}
        for call in pending:
            await resolve_and_settle(svc, call, "approve")
        assert len(RAN) == CALLS

        # The simulation draws as the point does: it counts the calls the rung would sample.
        report = await svc.container.policy_simulation.simulate(
            svc.principal,
            None,
            [],
            conversation.created_at - timedelta(minutes=1),
            conversation.created_at + timedelta(hours=1),
        )
        assert report.sampled == len(expected)
        assert report.to_json()["sampled"] == len(expected)
