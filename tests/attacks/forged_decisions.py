"""What the forged-decision attacks share: the shop served with a keyring (so decisions are sealed),
a finance group of two deciding a refund by a quorum of two, the insider's statements (sent with SQL
rights and no key), and the checks that nothing ran and that the refusal is on record."""

from __future__ import annotations

import asyncio
import base64
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from sursis.app.cli import run as run_cli
from sursis.domain.access import Role
from sursis.infra.db import approver_tables as ap
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.attacks.policy_attacks import Shop, open_shop, refunds
from tests.conftest import KeyMaker

FINANCE_2 = {
    "id": "finance-refunds",
    "effect": "ask",
    "tools": ["refund"],
    "route": {"groups": ["finance"], "quorum": 2},
}


def keyring() -> str:
    return f"k1:{base64.b64encode(os.urandom(32)).decode()}"


@asynccontextmanager
async def sealed_shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    """The shop with a keyring: rex asks, ann and bob are the finance group, quorum 2."""
    async with open_shop(seeded, keys, encryption_keys=keyring()) as shop:
        for name in ("rex", "ann", "bob"):
            await shop.key(name, Role.OPERATOR)
        await shop.group("finance", "ann", "bob")
        assert (await shop.put_policy(FINANCE_2)).status_code == 200
        yield shop


async def insider(url: str, *statements: Any) -> None:
    """What an insider with SQL rights sends, in one transaction of its own."""
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.execute(statement)
    finally:
        await engine.dispose()


async def insider_reads(url: str, statement: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(statement)).all())
    finally:
        await engine.dispose()


def requeue(run_id: str) -> Any:
    """The run made ready for a worker, as a decision would have made it."""
    return sa.update(t.runs).where(t.runs.c.id == uuid.UUID(run_id)).values(status="queued", awaiting_count=0)


def forged_vote(correlation_id: str, voter: str, seal: str | None = None) -> Any:
    """An approving vote row for `voter` (carrying `seal` when one was copied from elsewhere)."""
    values: dict[str, Any] = {
        "correlation_id": uuid.UUID(correlation_id),
        "voter": voter,
        "cast_by": voter,
        "decision": "approve",
        "reason": None,
        "at": datetime.now(UTC),
    }
    if seal is not None:
        values["seal"] = seal
    return sa.insert(ap.pending_votes).values(**values)


def one_more_approval(correlation_id: str) -> Any:
    c = ap.pending_routes.c
    return (
        sa.update(ap.pending_routes)
        .where(c.correlation_id == uuid.UUID(correlation_id))
        .values(approvals=c.approvals + 1)
    )


async def settled(shop: Shop, run_id: str) -> dict[str, Any]:
    for _ in range(10):
        run = await shop.run(run_id)
        if run["status"] in ("completed", "failed", "cancelled"):
            return dict(run)
    raise AssertionError(f"run {run_id} did not settle")


async def assert_refused(
    shop: Shop, run_id: str, correlation_id: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing ran; the run failed with `decision_seal_invalid`; the finding is in the audit log and
    the verification lists it (API and CLI)."""
    run = await settled(shop, run_id)
    assert refunds() == [], "the refund ran on a forged decision"
    assert run["status"] == "failed", run
    assert run["error"]["code"] == "decision_seal_invalid", run
    assert correlation_id in run["error"]["message"] and reason in run["error"]["message"], run
    audit = await shop.http.get(
        "/v1/audit", params={"correlation_id": correlation_id}, headers=shop.headers["admin"]
    )
    [finding] = [e for e in audit.json()["items"] if e["action"].startswith("integrity.")]
    assert finding["action"] == "integrity.decision_unsealed", finding
    assert reason in finding["details"]["reason"]
    reports = await shop.http.get(
        "/v1/audit/verify", params={"workspace": "default"}, headers=shop.headers["admin"]
    )
    [report] = reports.json()
    assert report["ok"] is False and report["finding"] is None, report
    [named] = report["findings"]
    assert (named["action"], named["correlation_id"]) == ("integrity.decision_unsealed", correlation_id)
    assert shop.settings is not None
    code = await asyncio.to_thread(run_cli, ["audit", "verify", "--workspace", "default"], shop.settings)
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "finding: integrity.decision_unsealed" in printed and correlation_id in printed, printed
