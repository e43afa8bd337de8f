"""The soak's invariant "no tool ran without a valid decision seal" can fail: on a database where an
approved replay really ran it holds; a decision changed by SQL after the call ran, or a recorded
call that no decision covers, is reported by name."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from sursis.app.container import Container, build_container
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.records import Principal
from sursis.domain.states import Decision, RunStatus
from sursis.infra.db import tables as t
from tests.attacks.forged_decisions import insider, insider_reads
from tests.conftest import call, make_settings, script
from tests.faults.soak_seals import NAME, check_sealed, soak_keyring, unsealed_runs

USER = Principal(id="user:bob", role="user", workspace="default")
OPERATOR = Principal(id="operator:alice", role="operator", workspace="default")
REPLAY = script([call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")], "done")


@pytest.fixture
async def ran(seeded: str) -> AsyncIterator[tuple[Container, str, str]]:
    """An approved replay that ran, on a database whose decisions are sealed under `keyring`."""
    keyring = soak_keyring()
    container = build_container(make_settings(seeded, encryption_keys=keyring))
    try:
        conversation = await container.conversations.create_conversation(USER, "ops", None)
        run = await container.conversations.post_message(USER, conversation.id, REPLAY)
        assert await container.worker.run_once()
        [pending] = (await container.runs.get_run(OPERATOR, run.id)).pending
        await container.pending_calls.resolve_pending(
            OPERATOR, pending.correlation_id, Resolution(Decision.APPROVE)
        )
        assert await container.worker.run_once()
        assert (await container.runs.get_run(USER, run.id)).run.status is RunStatus.COMPLETED
        yield container, keyring, str(pending.correlation_id)
    finally:
        await container.close()


async def test_an_approved_call_that_ran_holds(ran: tuple[Container, str, str]) -> None:
    container, keyring, _ = ran
    assert await check_sealed(container.settings.database_url, keyring) == [f"{NAME}: 1 checked"]


async def test_a_decision_changed_after_the_call_ran_is_reported(ran: tuple[Container, str, str]) -> None:
    container, keyring, correlation_id = ran
    url = container.settings.database_url
    await insider(
        url,
        sa.update(t.pending_calls)
        .where(t.pending_calls.c.correlation_id == uuid.UUID(correlation_id))
        .values(resolved_by="operator:mallory"),
    )
    [found] = await unsealed_runs(url, keyring)
    assert correlation_id in found and "the decision seal does not match" in found
    with pytest.raises(AssertionError, match="no tool ran without a valid decision seal"):
        await check_sealed(url, keyring)


async def test_a_recorded_call_no_decision_covers_is_reported(ran: tuple[Container, str, str]) -> None:
    container, keyring, _ = ran
    url = container.settings.database_url
    [row] = await insider_reads(
        url, sa.select(t.tool_calls).where(t.tool_calls.c.tool_name == "replay_dlq_event")
    )
    copied = {k: v for k, v in row._mapping.items() if k != "id"} | {"tool_call_id": "forged_0"}
    await insider(url, sa.insert(t.tool_calls).values(**copied))
    [found] = await unsealed_runs(url, keyring)
    assert "forged_0" in found and "no pending call approved it" in found


async def test_a_denied_call_flipped_and_recorded_is_reported(ran: tuple[Container, str, str]) -> None:
    """The insider flips a waiting call to approved and records an outcome for it: the decision
    carries no seal."""
    container, keyring, _ = ran
    url = container.settings.database_url
    conversation = await container.conversations.create_conversation(USER, "ops", None)
    run = await container.conversations.post_message(USER, conversation.id, REPLAY)
    assert await container.worker.run_once()
    [pending] = (await container.runs.get_run(OPERATOR, run.id)).pending
    [row] = await insider_reads(
        url, sa.select(t.tool_calls).where(t.tool_calls.c.tool_name == "replay_dlq_event")
    )
    recorded = {k: v for k, v in row._mapping.items() if k != "id"} | {
        "conversation_id": conversation.id,
        "tool_call_id": pending.tool_call_id,
    }
    await insider(
        url,
        sa.update(t.pending_calls)
        .where(t.pending_calls.c.correlation_id == pending.correlation_id)
        .values(status="approved", resolved_by=OPERATOR.id),
        sa.insert(t.tool_calls).values(**recorded),
    )
    [found] = await unsealed_runs(url, keyring)
    assert str(pending.correlation_id) in found and "the decision carries no seal" in found
