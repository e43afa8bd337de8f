"""What `sursis audit export` reads from one workspace: its sealed chain rows, head and checkpoint,
its policy versions, and every decision seal with the service's verdict on it.

Seals are HMACs under the keyring (`infra/encryption/decision_seal.py`): only a process holding it
can tell a seal is the service's. The export checks each one here, with the same sealer the worker
uses, and the bundle carries the verdict under the audit signing key's signature.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sursis.domain.approvals.decision_seal import SEAL, ask_facts, decision_facts, vote_facts
from sursis.domain.approvers import Vote
from sursis.domain.audit.audit_chain import ChainHead, ChainLink
from sursis.domain.audit.audit_checkpoint import Checkpoint
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.records import PendingCall
from sursis.domain.states import PendingStatus
from sursis.domain.tools import Category, Executor, PendingKind
from sursis.infra.db import approver_tables as ap
from sursis.infra.db import policy_tables as p
from sursis.infra.db import tables as t
from sursis.infra.db.repositories.audit_chain import SqlAuditChainRepository
from sursis.infra.db.repositories.base import SqlRepository
from sursis.infra.db.sealing import PENDING_CALLS, VOTES
from sursis.infra.encryption.decision_seal import DecisionSealer, sealer_of

PAGE = 1000
VALID = "valid"


class SqlAuditExport(SqlRepository):
    """Reads for one export, in one read-only transaction (a consistent view of the workspace)."""

    async def head(self, workspace: str) -> ChainHead:
        return await SqlAuditChainRepository(self._session).head(workspace)

    async def checkpoint(self, workspace: str) -> Checkpoint | None:
        return await SqlAuditChainRepository(self._session).checkpoint(workspace)

    async def links(self, workspace: str, after_seq: int) -> AsyncIterator[ChainLink]:
        """Every sealed row after `after_seq`, in `seq` order, a page at a time."""
        chain = SqlAuditChainRepository(self._session)
        while True:
            page = await chain.links(workspace, after_seq, PAGE)
            for link in page:
                yield link
            if len(page) < PAGE:
                return
            after_seq = page[-1].seq

    async def policies(self, workspace: str) -> list[dict[str, Any]]:
        c = p.policies.c
        query = sa.select(p.policies).where(c.workspace == workspace).order_by(c.version)
        rows = await self._session.execute(query)
        return [
            {
                "workspace": row.workspace,
                "version": row.version,
                "rules": row.rules,
                "comment": row.comment,
                "created_by": row.created_by,
                "created_at": _iso(row.created_at),
            }
            for row in rows
        ]

    async def seals(self, workspace: str) -> list[dict[str, Any]]:
        """Each ask, vote and decision seal of the workspace's calls, with the facts it covers and
        the verdict of this process's sealer (`valid`, or why not). Nothing where the process holds
        no keyring (decisions are then not sealed)."""
        sealer = sealer_of(self._cipher)
        if not sealer.enabled:
            return []
        c = t.pending_calls.c
        rows = await self._session.execute(
            sa.select(t.pending_calls)
            .where(c.workspace == workspace)
            .order_by(c.created_at, c.correlation_id)
        )
        records: list[dict[str, Any]] = []
        calls: list[PendingCall] = []
        for row in rows:
            call, ask_seal = _call(row, self._cipher)
            calls.append(call)
            if ask_seal is not None:
                records.append(_record(sealer, "ask", ask_facts(call), ask_seal))
            resolution = call.resolution or {}
            if call.status.final and SEAL in resolution:
                facts = decision_facts(call, call.status, call.resolved_by, resolution)
                records.append(_record(sealer, "decision", facts, resolution[SEAL]))
        records.extend(await self._vote_seals(sealer, [call.correlation_id for call in calls]))
        return records

    async def _vote_seals(self, sealer: DecisionSealer, ids: list[Any]) -> list[dict[str, Any]]:
        records = []
        v = ap.pending_votes.c
        for start in range(0, len(ids), 500):
            rows = await self._session.execute(
                sa.select(ap.pending_votes)
                .where(v.correlation_id.in_(ids[start : start + 500]))
                .order_by(v.correlation_id, v.voter)
            )
            for row in rows:
                m = VOTES.open(self._cipher, row)
                seal = m.pop("seal", None)
                if seal is not None:
                    records.append(_record(sealer, "vote", vote_facts(Vote(**m)), seal))
        return records


def _record(sealer: DecisionSealer, kind: str, facts: dict[str, Any], seal: object) -> dict[str, Any]:
    problem = sealer.problem(facts, seal, kind)
    return {"kind": kind, "facts": facts, "seal": seal, "verdict": problem or VALID}


def _call(row: Any, cipher: Any) -> tuple[PendingCall, str | None]:
    """A stored call as the pending call repository opens it, and its ask seal."""
    m = PENDING_CALLS.open(cipher, row)
    ask_seal = m.pop("ask_seal", None)
    m["executor"] = Executor(m["executor"])
    m["kind"] = PendingKind(m["kind"])
    m["status"] = PendingStatus(m["status"])
    m["category"] = Category(m["category"]) if m["category"] else None
    m["policy"] = PolicyDecision.from_json(m["policy"]) if m["policy"] else None
    return PendingCall(**m), ask_seal


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
