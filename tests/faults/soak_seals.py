"""The soak's sealed decisions: its processes share a keyring, so every decision is sealed, and one
invariant reads each tool call that ran back through the service's own seal checks.

"No tool ran without a valid decision seal": every `tool_calls` row (a call that dispatched and
recorded an outcome) of a gated tool (`GATED`: `replay_dlq_event`, `transfer`) either

- belongs to an approval pending call (same conversation and tool call id) that is `approved` and
  whose seals check, exactly as the worker checks them before a tool runs: the pending call is read
  with the soak's keyring through `SqlPendingCallRepository`, which works out
  `PendingCall.seal_problem` (ask seal, decision seal, sealed votes meeting the sealed route); or
- was allowed without asking by a pre-approval: its `pending.auto_approved` row carries a lift seal
  that checks (`domain/decision_seal.lift_facts`), as `redispatch.cleared_before` checks it.

A gated call with neither (no pending call, one that is not approved, or a seal that does not
check) is reported. Tools that are not gated (`list_dlq_events`, a `read` tool) run without a
decision and are not checked. The soak puts no policy in place, so nothing is allowed by a
policy rule; a gated tool an `allow` rule let run would be reported here, which is the point: the
list of gated tools names only tools the soak always asks about.

The other invariants read plaintext JSON (arguments, resolutions, results, audit details) with SQL.
After this one, `open_in_place` replaces those sealed columns of the soak's own (throw-away)
database by their opened values, so they read as before.
"""

from __future__ import annotations

import base64
import os
import uuid
from typing import Any

import sqlalchemy as sa

from sursis.domain.approvals.decision_seal import SEAL, lift_facts
from sursis.domain.records import AuditQuery
from sursis.domain.states import PendingStatus
from sursis.infra.agents.call_marks import AUTO_APPROVED
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from sursis.infra.db.sealing import AUDIT_LOG, PENDING_CALLS, TOOL_CALLS, SealedTable
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.encryption import AesGcmCipher, load_keyring
from sursis.infra.encryption.decision_seal import sealer_of

GATED = ("replay_dlq_event", "transfer")
"""The soak's gated tools: each call of one is asked (or would be lifted by a pre-approval)."""
NAME = "no tool ran without a valid decision seal (each gated call that ran: approved and sealed)"

_tc, _pc, _conv = t.tool_calls.c, t.pending_calls.c, t.conversations.c
_RAN = (
    sa.select(_tc.conversation_id, _tc.tool_call_id, _tc.tool_name, _conv.workspace)
    .join(t.conversations, _conv.id == _tc.conversation_id)
    .where(_tc.tool_name.in_(GATED))
    .order_by(_tc.id)
)


def _asked(conversation: uuid.UUID, tool_call_id: str) -> sa.Select[tuple[uuid.UUID]]:
    return sa.select(_pc.correlation_id).where(
        _pc.conversation_id == conversation, _pc.tool_call_id == tool_call_id, _pc.kind == "approval"
    )


def soak_keyring() -> str:
    """A fresh keyring for one soak: its processes seal every decision under it."""
    return f"k1:{base64.b64encode(os.urandom(32)).decode()}"


def cipher_of(keyring: str) -> AesGcmCipher:
    """The cipher the soak's processes use, refusing plaintext as on an encrypted database."""
    return AesGcmCipher(load_keyring(keyring, None), refuses_plaintext=True)


async def unsealed_runs(database_url: str, keyring: str) -> list[str]:
    """Each gated tool call that ran without a valid decision seal, and why (empty: none)."""
    found, _ = await _checked(database_url, keyring)
    return found


async def _checked(database_url: str, keyring: str) -> tuple[list[str], int]:
    """The gated calls that ran without a valid decision seal, and how many were checked."""
    engine = create_engine(database_url)
    uow = SqlUnitOfWorkFactory(engine, cipher=cipher_of(keyring))
    found: list[str] = []
    try:
        async with engine.connect() as conn:
            ran = (await conn.execute(_RAN)).all()
        for conversation, tool_call_id, tool_name, workspace in ran:
            problem = await _decision_problem(uow, conversation, tool_call_id, tool_name, workspace)
            if problem is not None:
                found.append(f"{tool_name} {tool_call_id} (conversation {conversation}): {problem}")
    finally:
        await engine.dispose()
    return found, len(ran)


async def check_sealed(database_url: str, keyring: str) -> list[str]:
    """The invariant, by name (an `AssertionError` naming the calls if it fails)."""
    found, checked = await _checked(database_url, keyring)
    assert not found, f"{NAME}: {found[:5]}"
    return [f"{NAME}: {checked} checked"]


async def _decision_problem(
    uow: SqlUnitOfWorkFactory, conversation: uuid.UUID, tool_call_id: str, tool_name: str, workspace: str
) -> str | None:
    async with uow.reader() as work:
        async with uow.engine.connect() as conn:
            asked = (await conn.execute(_asked(conversation, tool_call_id))).all()
        if asked:
            problems = []
            for (correlation_id,) in asked:
                call = await work.pending.get(correlation_id)
                if call is None:
                    continue
                if call.status is not PendingStatus.APPROVED:
                    problems.append(f"its pending call {correlation_id} is {call.status.value}, not approved")
                elif call.seal_problem is not None:
                    problems.append(f"pending call {correlation_id}: {call.seal_problem}")
                else:
                    return None
            return "; ".join(problems) or "its pending call is gone"
        query = AuditQuery(conversation_id=conversation, actions=(AUTO_APPROVED,), limit=1000)
        for mark in await work.audit.search(workspace, query):
            if mark.details.get("tool_call_id") != tool_call_id:
                continue
            details = mark.details
            facts = lift_facts(
                workspace,
                str(conversation),
                tool_call_id,
                tool_name,
                str(details.get("args_hash")),
                str(details.get("authorization_id")),
            )
            sealer = sealer_of(cipher_of_uow(uow))
            return sealer.problem(facts, details.get(SEAL), "pre-approval's lift")
    return "no pending call approved it and no pre-approval lifted it"


def cipher_of_uow(uow: SqlUnitOfWorkFactory) -> AesGcmCipher:
    cipher = uow.cipher
    assert isinstance(cipher, AesGcmCipher)
    return cipher


_OPENED: tuple[tuple[SealedTable, tuple[str, ...]], ...] = (
    (PENDING_CALLS, ("args", "resolution")),
    (TOOL_CALLS, ("result",)),
    (AUDIT_LOG, ("details",)),
)
"""The sealed columns the soak's SQL invariants read."""


async def open_in_place(database_url: str, keyring: str) -> None:
    """Replace the sealed columns the SQL invariants read by their opened values (the soak's own
    database only: it is thrown away after the check). The audit log's append-only trigger is
    suspended for the copy."""
    cipher = cipher_of(keyring)
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER USER"))
            for table, columns in _OPENED:
                rows = (await conn.execute(sa.select(table.table))).all()
                for row in rows:
                    opened = table.open(cipher, row)
                    values: dict[str, Any] = {c: opened[c] for c in columns}
                    key = [col == row._mapping[col.name] for col in table.key]
                    await conn.execute(table.table.update().where(*key).values(**values))
            await conn.execute(sa.text("ALTER TABLE audit_log ENABLE TRIGGER USER"))
    finally:
        await engine.dispose()
