"""Forged arguments inside a nested agent: the approved call of an agent that another agent runs
(`run_agent`) resumes from the inner agent's own stored log (`delegations.messages`). An insider
rewrites the call there; the approval of the order the approver saw must not run another order: the
tool wrapper refuses it at dispatch, writes the finding, and the whole run fails with
`approved_args_mismatch`. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from sursis.domain.records import AuditQuery
from sursis.infra.db import customer_tables as customer
from sursis.infra.db.engine import create_engine
from sursis.testing import resolve_and_settle
from tests.agents.test_nested_agents import REFUNDS, concierge_refund


async def rewrite_inner_log(url: str, order_id: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            [(key, body)] = (
                await conn.execute(
                    sa.select(customer.delegations.c.tool_call_id, customer.delegations.c.messages)
                )
            ).all()
            messages: list[dict[str, Any]] = json.loads(body)
            changed = 0
            for message in messages:
                for part in message.get("parts", []):
                    if part.get("part_kind") == "tool-call" and part.get("tool_name") == "refund":
                        args = part["args"]
                        parsed = json.loads(args) if isinstance(args, str) else dict(args)
                        parsed["order_id"] = order_id
                        part["args"] = json.dumps(parsed) if isinstance(args, str) else parsed
                        changed += 1
            assert changed == 1, messages
            await conn.execute(
                sa.update(customer.delegations)
                .where(customer.delegations.c.tool_call_id == key)
                .values(messages=json.dumps(messages))
            )
    finally:
        await engine.dispose()


async def test_an_inner_agents_call_rewritten_in_its_stored_log_never_runs(database_url: str) -> None:
    async with concierge_refund(
        database_url, "A1", "billing: refunded", "Refunded, as asked.", "please refund A1"
    ) as turn:
        svc, call = turn.service, turn.call
        assert call.args == {"order_id": "A1"}
        await rewrite_inner_log(database_url, "Z9")
        view = await resolve_and_settle(svc, call, "approve")
        assert REFUNDS == [], "the forged refund ran"
        assert view.run.status == "failed", view.run
        assert view.run.error is not None and view.run.error.code == "approved_args_mismatch"
        async with svc.container.uow.reader() as uow:
            query = AuditQuery(
                correlation_id=call.correlation_id, actions=("integrity.args_mismatch",), limit=10
            )
            rows = await uow.audit.search(None, query)
        [finding] = rows
        assert finding.details["expected_args_hash"] == call.args_hash
        assert finding.details["tool_call_id"] == call.tool_call_id
