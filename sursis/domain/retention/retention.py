"""Retention: a policy per workspace, legal holds, and the purge the sweeper runs in batches.

Defaults keep everything: a workspace without a policy (or with no period set) loses nothing.
A conversation idle for `conversation_days` is purged with every row that belongs to it; audit
rows older than `audit_days` (at least as long) are purged by cutting the workspace's chain at
an anchor. A legal hold on a conversation or on its workspace stops both.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sursis.domain.access import Permission
from sursis.domain.audit.audit_chain import PURGE_ACTION
from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, Principal
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.domain.retention.retention_ports import RetentionUnitOfWork, RetentionUnitOfWorkFactory
from sursis.domain.retention.retention_records import (
    MAX_DAYS,
    AuditPeriodTooShort,
    ConversationPurged,
    LegalHold,
    RetentionPolicy,
    check_workspace,
)

__all__ = [
    "AUDIT_PURGED",
    "MAX_DAYS",
    "PURGED",
    "AuditPeriodTooShort",
    "ConversationPurged",
    "LegalHold",
    "RetentionPolicy",
    "RetentionReport",
    "RetentionService",
    "raise_if_purged",
]

PURGED = "retention.conversation_purged"
AUDIT_PURGED = PURGE_ACTION


@dataclass
class RetentionReport:
    """What a plan would purge, or what a run purged, in one workspace: rows per table."""

    workspace: str
    conversations: int = 0
    rows: Counter[str] = field(default_factory=Counter)
    audit_rows: int = 0
    held: bool = False


@dataclass
class RetentionService:
    """Policies and holds (admin only), and the purge: `plan` counts, `run` deletes in batches
    of `batch` conversations (`audit_batch` audit rows), one transaction each."""

    uow: RetentionUnitOfWorkFactory
    clock: Callable[[], datetime]
    batch: int = 50
    audit_batch: int = 1000
    chain: AuditChainService | None = None
    """Seals and signs the chain around a cut (one without a signer when not given)."""

    def __post_init__(self) -> None:
        if self.chain is None:
            self.chain = AuditChainService(self.uow, self.clock, self.audit_batch)

    async def get_policy(self, principal: Principal, workspace: str) -> RetentionPolicy:
        principal.require(Permission.MANAGE_RETENTION)
        check_workspace(workspace)
        async with self.uow.reader() as uow:
            return await uow.retention.policy(workspace) or RetentionPolicy(workspace)

    async def set_policy(self, principal: Principal, policy: RetentionPolicy) -> RetentionPolicy:
        principal.require(Permission.MANAGE_RETENTION)
        policy.check()
        now = self.clock()
        stored = RetentionPolicy(
            policy.workspace, policy.conversation_days, policy.audit_days, principal.id, now
        )
        async with self.uow() as uow:
            await uow.retention.set_policy(stored)
            details = {"conversation_days": policy.conversation_days, "audit_days": policy.audit_days}
            await uow.audit.append(
                AuditEntry("retention.policy_set", principal.id, policy.workspace, details=details), now
            )
            await uow.commit()
        return stored

    async def list_holds(self, principal: Principal, workspace: str | None) -> list[LegalHold]:
        principal.require(Permission.MANAGE_RETENTION)
        if workspace is not None:
            check_workspace(workspace)
        async with self.uow.reader() as uow:
            return await uow.retention.holds(workspace)

    async def add_hold(
        self, principal: Principal, workspace: str, conversation_id: uuid.UUID | None, reason: str
    ) -> LegalHold:
        principal.require(Permission.MANAGE_RETENTION)
        check_workspace(workspace)
        if not reason.strip():
            raise ValidationFailed("a legal hold needs a reason", extra={"field": "reason"})
        now = self.clock()
        hold = LegalHold(uuid.uuid4(), workspace, conversation_id, reason, principal.id, now)
        async with self.uow() as uow:
            if conversation_id is not None:
                conversation = await uow.conversations.get(conversation_id)
                if conversation is None or conversation.workspace != workspace:
                    # A wrong body, as for the other routes that name an object in their body.
                    raise ValidationFailed(
                        "conversation_id names no conversation of this workspace",
                        extra={"field": "conversation_id"},
                    )
            await uow.retention.add_hold(hold)
            details = {"hold_id": str(hold.id), "reason": reason}
            entry = AuditEntry(
                "retention.hold_placed", principal.id, workspace, conversation_id, details=details
            )
            await uow.audit.append(entry, now)
            await uow.commit()
        return hold

    async def release_hold(self, principal: Principal, hold_id: uuid.UUID) -> LegalHold:
        principal.require(Permission.MANAGE_RETENTION)
        now = self.clock()
        async with self.uow() as uow:
            hold = await uow.retention.release_hold(hold_id)
            if hold is None:
                raise NotFound("legal hold not found")
            details = {"hold_id": str(hold.id), "reason": hold.reason}
            entry = AuditEntry(
                "retention.hold_released", principal.id, hold.workspace, hold.conversation_id, details=details
            )
            await uow.audit.append(entry, now)
            await uow.commit()
        return hold

    async def plan(self, principal: Principal, workspace: str | None = None) -> list[RetentionReport]:
        """What `run` would purge now, per workspace with a policy; nothing is changed."""
        principal.require(Permission.MANAGE_RETENTION)
        if workspace is not None:
            check_workspace(workspace)
        reports: list[RetentionReport] = []
        now = self.clock()
        for policy in await self._policies(workspace):
            report = RetentionReport(policy.workspace)
            async with self.uow.reader() as uow:
                if policy.conversation_days is not None:
                    ids = await uow.retention.idle_conversations(
                        policy.workspace, now - timedelta(days=policy.conversation_days), limit=None
                    )
                    report.conversations = len(ids)
                    for start in range(0, len(ids), self.batch):
                        report.rows.update(await uow.retention.count(ids[start : start + self.batch]))
                report.held, report.audit_rows = await self._audit_cut(uow, policy, now, count_only=True)
            reports.append(report)
        return reports

    async def run(self, principal: Principal, workspace: str | None = None) -> list[RetentionReport]:
        """Purge everything the policies say is due, batch by batch, until nothing is left."""
        principal.require(Permission.MANAGE_RETENTION)
        if workspace is not None:
            check_workspace(workspace)
        reports = []
        for policy in await self._policies(workspace):
            report = RetentionReport(policy.workspace)
            while await self._purge_batch(policy, principal.id, report):
                pass
            reports.append(report)
        return reports

    async def sweep(self, actor: str = "system:retention") -> int:
        """One batch per workspace (the sweeper's tick): the number of conversations and audit
        rows purged."""
        total = 0
        for policy in await self._policies(None):
            report = RetentionReport(policy.workspace)
            await self._purge_batch(policy, actor, report)
            total += report.conversations + report.audit_rows
        return total

    async def _policies(self, workspace: str | None) -> list[RetentionPolicy]:
        async with self.uow.reader() as uow:
            if workspace is not None:
                found = await uow.retention.policy(workspace)
                return [found or RetentionPolicy(workspace)]
            return await uow.retention.policies()

    async def _purge_batch(self, policy: RetentionPolicy, actor: str, report: RetentionReport) -> bool:
        """One transaction: a batch of idle conversations, then (with none left) a batch of old
        audit rows. True while there may be more."""
        now = self.clock()
        async with self.uow() as uow:
            if policy.conversation_days is not None:
                before = now - timedelta(days=policy.conversation_days)
                ids = await uow.retention.idle_conversations(policy.workspace, before, limit=self.batch)
                if ids:
                    report.conversations += len(ids)
                    report.rows.update(await uow.retention.purge(policy.workspace, ids, now))
                    for conversation_id in ids:
                        details = {"conversation_days": policy.conversation_days}
                        entry = AuditEntry(PURGED, actor, policy.workspace, conversation_id, details=details)
                        await uow.audit.append(entry, now)
                    await uow.commit()
                    return True
            report.held, purged = await self._audit_cut(uow, policy, now, count_only=False, actor=actor)
            report.audit_rows += purged
            await uow.commit()
        if self.chain is not None:
            await self.chain.publish(policy.workspace)
        return purged > 0

    async def _audit_cut(
        self,
        uow: RetentionUnitOfWork,
        policy: RetentionPolicy,
        now: datetime,
        *,
        count_only: bool,
        actor: str = "",
    ) -> tuple[bool, int]:
        """(held, rows): the sealed audit rows older than the audit period, up to the first row
        of a held conversation, at most `audit_batch` (all of them when counting); `held` when a
        legal hold kept rows that were otherwise due (a workspace hold: all of them)."""
        if policy.audit_days is None:
            return False, 0
        holds = await uow.retention.holds(policy.workspace)
        if any(hold.conversation_id is None for hold in holds):
            return True, 0
        held = {hold.conversation_id for hold in holds}
        before = now - timedelta(days=policy.audit_days)
        chain = uow.audit_chain
        sealer = self.chain
        assert sealer is not None
        if not count_only:
            await sealer.seal_in(uow, policy.workspace, now)
        head = await chain.head(policy.workspace, lock=not count_only)
        after, total, last, stopped = head.anchor_seq, 0, None, False
        while True:
            links = await chain.links(policy.workspace, after, self.audit_batch)
            old = []
            for link in links:
                entry = link.entry
                if entry.at is None or entry.at >= before:
                    break
                if entry.conversation_id in held:
                    stopped = True  # the hold keeps this row, and the chain is cut as a prefix
                    break
                old.append(link)
            total += len(old)
            if old:
                last, after = old[-1], old[-1].seq
            if count_only is False or len(old) < len(links) or len(links) < self.audit_batch:
                break
        if count_only or last is None:
            return stopped, total
        purged = await chain.cut(policy.workspace, last, now)
        details = {
            "from_seq": head.anchor_seq,
            "from_hash": head.anchor_hash,
            "through_seq": last.seq,
            "anchor_hash": last.hash,
            "rows": purged,
            "audit_days": policy.audit_days,
        }
        # The purge row vouches for the new anchor: it is sealed (and the head signed) in the
        # cut's own transaction, so no reader sees a moved anchor without it.
        await uow.audit.append(AuditEntry(AUDIT_PURGED, actor, policy.workspace, details=details), now)
        await uow.audit.flush()
        await sealer.seal_in(uow, policy.workspace, now, cut_from=head)
        return stopped, purged


async def raise_if_purged(uow: UnitOfWork, principal: Principal, conversation_id: uuid.UUID) -> None:
    """`ConversationPurged` (a 404 with its own code) for a conversation retention purged, told
    only to a caller who could have seen it."""
    workspace = await uow.conversations.purged(conversation_id)
    if workspace is not None and principal.can_see(workspace):
        raise ConversationPurged("conversation purged by the workspace's retention policy")
